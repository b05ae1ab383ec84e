// The diagnostic model every emitter reads.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/SourceFile.h"

namespace shardlint {

enum class Severity { Error, Warning, Info, Hint };
std::string_view severityName(Severity s);

struct Location {
  std::string path;
  ByteRange range;
  LineCol start;
  LineCol end;
};
Location makeLocation(const SourceFile& file, ByteRange range);

struct Note {
  Location location;
  std::string message;
};

// A text edit: the bytes of `location` replaced by `text`.
struct Edit {
  Location location;
  std::string text;
};

// Whether applying a fix keeps the program's meaning apart from the repaired mistake (`safe`:
// applied by `--fix`), or changes behaviour the user must review (`unsafe`: `--unsafe-fixes`).
enum class Applicability { Safe, Unsafe };
std::string_view applicabilityName(Applicability a);

struct Fix {
  std::string title;  // what it does, imperative ("Rename `x` to `y`")
  Applicability applicability = Applicability::Safe;
  // Not overlapping, all in one file: the finding's own, or another one the finding depends on
  // (SL402's fix edits the accelerate config that the script is launched with).
  std::vector<Edit> edits;
};

struct Diagnostic {
  std::string code;  // "SL101"
  std::string name;  // "optimizer-before-wrap"
  Severity severity = Severity::Error;
  Location location;
  std::string message;
  std::vector<Note> notes;
  std::optional<Fix> fix;
  // Controls only (RuleContext::control): what the rule saw, for a runtime check of its silence
  // (e.g. {"shape": "optimizer-after-wrap", "wrap_api": "fully_shard"}); empty on findings.
  std::map<std::string, std::string> facts;
};

Diagnostic makeDiagnostic(const struct RuleInfo& info, Location location, std::string message,
                          std::vector<Note> notes = {});

// Sort by path, line, column, then code (the order of every output).
void sortDiagnostics(std::vector<Diagnostic>& diags);

struct RuleInfo {
  std::string_view code;
  std::string_view name;
  Severity severity;
  std::string_view summary;
  std::string_view doc;  // Markdown page, embedded at build time
};

}  // namespace shardlint
