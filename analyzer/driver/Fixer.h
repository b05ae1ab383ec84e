// Applying the fixes findings carry (core/Diagnostic.h): to a text, to a fixed point over rounds
// of re-linting, and to the files on disk (atomically, never over a file that changed meanwhile).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/Diagnostic.h"

namespace shardlint {

// Whether `fix` may be applied: safe ones always, unsafe ones with `unsafe`.
bool fixAllowed(const Fix& fix, bool unsafe);

// The file `fix` edits: all its edits are in one file (usually the finding's own; a linked config
// for some). "" when it has none or edits several.
std::string fixPath(const Fix& fix);

struct AppliedFixes {
  std::string text;
  size_t count = 0;  // fixes applied
};
// Applies to `text`, the contents of `path`, the allowed fixes of the findings in `diags` whose
// edits are all in `path`, in the order of their first edit. A fix that overlaps one already
// taken, or changes nothing, is left for a later round.
AppliedFixes applyFixes(const std::string& path, const std::string& text, const std::vector<Diagnostic>& diags,
                        bool unsafe);

struct FixRun {
  std::vector<Diagnostic> remaining;  // the findings after the last round
  // path -> (the text as read, the text fixed), for every file a fix changed
  std::map<std::string, std::pair<std::string, std::string>> changed;
  size_t fixed = 0;  // fixes applied
  int rounds = 0;    // rounds that applied a fix
  std::vector<std::string> unreadable;  // files with fixes that could not be read
};
// Applies the allowed fixes of `first` (the findings of a lint run), then lints again with the
// fixed texts (`relint`: overlays by path -> the findings), and so on until no fix applies or
// `maxRounds` rounds have run. A file's text comes from `texts` (an editor's buffer) when it is
// there, else from the disk.
FixRun fixToFixedPoint(std::vector<Diagnostic> first, bool unsafe,
                       const std::function<std::vector<Diagnostic>(const std::map<std::string, std::string>&)>& relint,
                       int maxRounds = 4, const std::map<std::string, std::string>& texts = {});

// Writes the fixed files of `run`: each atomically, and only when the file still holds the text
// that was read (else it is left alone). Returns (path, why) for each file not written.
std::vector<std::pair<std::string, std::string>> writeFixedFiles(const FixRun& run);

// A unified diff (3 lines of context) from `before` to `after`, with `path` in the headers; ""
// when they are equal.
std::string unifiedDiff(const std::string& path, const std::string& before, const std::string& after);

}  // namespace shardlint
