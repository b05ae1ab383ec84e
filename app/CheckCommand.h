// `shardlint check`: its command-line options and the run (app/CheckCommand.cpp); `shardlint probe`
// lints through it too. Internal to app/: runCli fills CheckArgs from the command line.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "driver/Rule.h"

namespace shardlint {

namespace probe {
class Session;
}  // namespace probe

struct CheckArgs {
  std::optional<std::string> config;
  bool jobsGiven = false;
  std::vector<std::string> paths, select, extendSelect, ignore, roots, accelerateConfigs;
  bool showSettings = false;
  std::optional<std::string> baseline;
  std::string format = "text";
  bool quiet = false, noColor = false, stats = false, noCache = false;
  std::optional<std::string> cacheDir;
  unsigned jobs = 0;
  std::vector<std::string> cxxFlags;  // after `--`: compile flags for C++ files
  unsigned cxxMemoryMib = 0;          // --cxx-memory: the Clang jobs' budget (0: the default)
  // Fixes (driver/Fixer.h): --fix writes them, --diff prints them, --fix-only writes them and
  // reports nothing else, --unsafe-fixes adds the unsafe ones, --show-fixes lists them.
  bool fix = false, diff = false, fixOnly = false, unsafeFixes = false, showFixes = false;
  std::optional<std::string> outputFile;     // write the report there (atomically) instead of stdout
  bool exitZero = false;                     // exit 0 even with findings
  bool statistics = false;                   // a count per rule instead of the findings
  std::optional<std::string> stdinFilename;  // with the path `-`: lint stdin as this file
  bool noSnippets = false;                   // text format: no source line under each finding
  bool watch = false;                        // lint again on every change, printing what changed
};

// `probe`: the runtime probe runs on the findings and its verdicts join the output (shardlint probe).
int runCheck(const RuleCatalog& catalog, CheckArgs a, probe::Session* probe = nullptr);

}  // namespace shardlint
