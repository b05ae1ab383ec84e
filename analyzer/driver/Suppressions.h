// Suppression comments: `# noqa[: codes]`, `# shardlint: disable=codes` (on the line, or
// on its own line for the next line), `# shardlint: disable-file=codes` and
// `# shardlint: noqa[: codes]` on its own line (whole file). Codes and kebab names are
// both accepted. The same syntax works in YAML, shell scripts and Makefiles, and in C++ with `//`
// in place of `#` (`// noqa: SL501`).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/Diagnostic.h"

namespace shardlint {

struct RuleCatalog;
class RuleSelection;

// Where a `#` comment starts on a line of a YAML file, shell script or Makefile: at the
// line start or after whitespace, outside quotes; npos when there is none.
size_t hashCommentStart(std::string_view line);

class Suppressions {
 public:
  explicit Suppressions(const SourceFile* file = nullptr) : file_(file) {}
  // Whether a comment's text can be a directive: it says `noqa` or `shardlint`, in any case. A comment
  // that does not is none, whatever else it says (what both the linter's comment scan and the language
  // server's comment edits skip on).
  static bool mayBeDirective(std::string_view comment);
  void setFile(const SourceFile* file) { file_ = file; }
  // What starts a comment: `#` (the default) or `//` (C++).
  void setMarker(std::string_view marker) { marker_ = marker; }
  // A comment (its text starts at the marker) at byte `offset` of the file.
  void addComment(std::string_view comment, uint32_t offset);
  // Every `#` comment of a YAML file, shell script or Makefile (see hashCommentStart).
  void addHashComments(const SourceFile& file);
  // True when a directive covers the finding; that directive is then marked used.
  bool suppresses(const Diagnostic& d, const RuleCatalog& catalog);
  // SL003 findings: directives that name unknown rules or suppress nothing. Unused `noqa`
  // comments are reported only with `includeNoqa` (other tools share that syntax).
  std::vector<Diagnostic> problems(const RuleCatalog& catalog, const RuleSelection& selection, bool includeNoqa) const;
  bool empty() const { return directives_.empty(); }

 private:
  struct Directive {
    enum class Kind { Noqa, Disable, File } kind = Kind::Noqa;
    uint32_t line = 0;  // the line it covers (Noqa, Disable)
    bool all = false;
    std::vector<std::string> codes;
    mutable std::vector<bool> used;
    mutable bool usedAll = false;
    ByteRange range;    // the directive's text
    std::string text;   // as written, for messages
  };
  uint32_t nextCodeLine(uint32_t line) const;
  const SourceFile* file_;
  std::string_view marker_ = "#";
  std::vector<Directive> directives_;
};

}  // namespace shardlint
