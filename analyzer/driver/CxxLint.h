// The C++ side of a lint run: translation units through the C++ frontend (cxx/CxxFrontend.h) and
// the rules that check C++ (Rule::checksCxx).
#pragma once
#include <string>
#include <vector>

#include "core/Diagnostic.h"
#include "driver/Linter.h"

namespace shardlint {

// Whether `path` is a C++ translation unit shardlint analyses (.cpp, .cc, .cxx).
bool isCxxPath(const std::string& path);

// Lints the translation units `paths` (editor overlays in `options` win over the disk). Findings,
// suppressed per file (`// noqa`, `// shardlint: disable=`), go to `out`. Units no rule may apply to
// (the byte pre-scan of the unit and the project headers it includes) are not parsed. Without the
// frontend in this build, one SL002 finding says so.
void lintCxx(const RuleCatalog& catalog, const LintOptions& options, const std::vector<std::string>& paths,
             std::vector<Diagnostic>& out, LintStats& stats);

// The C++ model of one translation unit as readable text (`shardlint dump-model file.cpp`).
std::string dumpCxxModel(const std::string& path, std::string text, const RuleCatalog& catalog);

}  // namespace shardlint
