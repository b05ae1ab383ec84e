// The per-file pipeline: read, parse once, build the semantic model, one rule
// walk with per-node-kind dispatch, finish(), suppressions, sorting.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/Diagnostic.h"
#include "driver/Discovery.h"
#include "driver/ModuleTable.h"
#include "driver/Requirements.h"
#include "driver/Rule.h"
#include "driver/Suppressions.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

// --select / --ignore by code ("SL101"), name ("optimizer-before-wrap") or code prefix ("SL1").
class RuleSelection {
 public:
  // Throws std::invalid_argument for a selector that matches no rule.
  RuleSelection(const RuleCatalog& catalog, std::vector<std::string> select, std::vector<std::string> ignore);
  RuleSelection() = default;
  bool enabled(const RuleInfo& info) const;
  // The selectors, for cache keys.
  std::string describe() const;

 private:
  static int specificity(const std::string& selector, const RuleInfo& info);
  std::vector<std::string> select_{"ALL"};
  std::vector<std::string> ignore_;
};

// The key of `path` in LintOptions::overlays and ::parsedTrees: absolute, lexically normal.
std::string absolutePathKey(const std::string& path);
// The same, with the working folder given (`cwd`, as getcwd() says it): no getcwd() per path.
std::string absolutePathKey(const std::string& path, const std::string& cwd);
// The folder of a path written with '/' ("/" for a file at the top, "" for a bare name), by string:
// for absolutePathKey's results, without a path object.
std::string parentKey(const std::string& path);
// The last name of a path written with '/' (the whole path when it has no '/'), by string.
std::string_view lastNameOf(std::string_view path);

// Where controls go (RuleContext::control), from every analysed file; thread-safe.
struct ControlSink {
  void add(std::vector<Diagnostic> found) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& d : found) items.push_back(std::move(d));
  }
  std::vector<Diagnostic> take() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Diagnostic> out = std::move(items);
    items.clear();
    sortDiagnostics(out);
    return out;
  }
  std::mutex mutex;
  std::vector<Diagnostic> items;
};

// What analysis tasks are done with (a file's analysis store and rules), kept to be freed later, off the
// time to the findings: the language server frees them after it has published the diagnostics, when
// freeing a large file's store is milliseconds a keystroke need not wait for. Thread-safe.
class Disposal {
 public:
  void keep(std::shared_ptr<void> done) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(done));
  }
  // Frees what was kept (outside the lock).
  void release() {
    std::vector<std::shared_ptr<void>> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done.swap(items_);
    }
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return items_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> items_;
};

struct LintOptions {
  RuleSelection selection;
  uint64_t maxFileBytes = 2u * 1024u * 1024u;
  unsigned jobs = 1;               // worker threads (0: all cores)
  std::vector<std::string> roots;  // extra import roots (configuration / --root)
  // accelerate config files that apply to every script without a launch command
  // naming its own (--accelerate-config / the `accelerate-config` setting).
  std::vector<std::string> accelerateConfigs;
  // In-memory contents by absolute path (an editor's open buffers); read instead of the files.
  std::map<std::string, std::string> overlays;
  // Trees already parsed for overlays (the language server re-parses incrementally);
  // used instead of parsing again. They must match the overlay text exactly.
  std::map<std::string, const TSTree*> parsedTrees;
  // SL003 also for unused `# noqa` comments (off by default: other tools share the syntax).
  bool reportUnusedNoqa = false;
  // Also analyse the project files that import a linted file, for the findings their flow makes in
  // it (driver/Importers.h). The language server's fast pass after an edit leaves them out and runs
  // them when the input is idle.
  bool importers = true;
  // Analyse the linted files themselves; false with `importers`: only the files that import them, for
  // the findings they make in the linted files (the language server's importers pass after an edit,
  // whose own findings the fast pass has).
  bool lintedFiles = true;
  // Polled before each file's analysis: true stops the run, which then throws LintInterrupted (the
  // language server's background passes give way to new input). Unset: never interrupted.
  std::function<bool()> interrupted;
  // The persistent cache folder (driver/ResultCache.h); empty: no cache.
  std::string cacheDir;
  // The cache folder precompiled headers of C++ units go to (its `cxx-pch/`,
  // driver/CxxPrecompiled.h); empty: none. `shardlint check` uses `cacheDir`, the language
  // server the workspace's cache folder (it has no cache of findings).
  std::string pchCacheDir;
  // What identifies this shardlint build in cache keys (version, executable fingerprint).
  std::string cacheKey;
  // Settings the rules interpret, passed to every analysed file as facts
  // (`fsdp-version`, `optimizers`, `wraps`: setting name -> value, lists comma-joined).
  Facts settingsFacts;
  // Compile flags for C++ files given on the command line (`shardlint check ... -- FLAGS`).
  std::vector<std::string> cxxFlags;
  // How much of Clang's allocations the C++ units parsed at once may take (driver/ClangGate.h);
  // 0: ClangGate::kDefaultBudget.
  size_t cxxMemoryBudget = 0;
  // Collect the rules' controls here (`shardlint probe --controls`); null: none are made. Files whose
  // findings come from the cache run no rule, so a caller that wants controls turns the cache off.
  std::shared_ptr<ControlSink> controls;
  // Where each task leaves its analysis to be freed later (Disposal); null: freed when the task ends.
  std::shared_ptr<Disposal> disposal;
  // The projects' declared requirements, kept between runs (the language server's, checked against the
  // disk by RequirementsIndex::revalidate before each lint); null: each Linter reads its own.
  std::shared_ptr<RequirementsIndex> requirements;
};

struct LintStats {
  size_t filesSeen = 0;      // files handed to the linter
  size_t filesRead = 0;      // files read by the pre-scan (linted files and project modules they import)
  // Of those, files whose stamp (size, times) the cache or the language server knew unchanged: their
  // pre-scan facts came from there, and they were not read unless their analysis ran.
  size_t filesKnown = 0;
  // The persistent cache's import answers: the folders they rest on (checked by their stamps), whether
  // none changed, and the files whose imports' answers were taken from there.
  size_t layoutFolders = 0;
  bool layoutKept = false;
  size_t importsKept = 0;
  size_t filesSkipped = 0;   // linted files the pre-scan ruled out (not parsed)
  size_t filesAnalysed = 0;  // linted files analysed (parsed, semantic model, rules)
  // Files not linted that import a linted file, analysed for the findings they make in it
  // (driver/Importers.h), and whether the search's bound cut their list.
  size_t importersAnalysed = 0;
  bool importersTruncated = false;
  size_t filesParsed = 0;    // parses, including project modules loaded for their summaries
  size_t filesParsedOnce = 0;  // distinct Python files parsed (parses minus re-parses)
  size_t modulesShared = 0;  // summaries a task took from another task's work
  size_t summariesCarried = 0;  // language server: summaries used that an earlier lint of the file made
  size_t armsCarried = 0;       // language server: arms taken from an earlier analysis (FileAnalysis::seedArms)
  size_t directRuns = 0;        // language server: functions run by the module body without their summary
  size_t cacheHits = 0;      // linted files whose findings came from the persistent cache
  std::string cacheProblem;  // why the cache could not be written, if it could not
  uint64_t bytesRead = 0;     // bytes the pre-scan read from disk (or open buffers)
  size_t cxxUnits = 0;        // C++ translation units given
  size_t cxxParsed = 0;       // ... parsed with Clang (the others were ruled out by the pre-scan)
  double cxxParseSeconds = 0; // the sum over parsed units (they run in parallel)
  double cxxMaxSeconds = 0;   // the slowest unit
  size_t cxxPchBuilt = 0;     // precompiled headers built (driver/CxxPrecompiled.h)
  double cxxPchSeconds = 0;   // ... and the seconds spent on them
  size_t cxxPchUsed = 0;      // units parsed with a precompiled header
  // Each parsed C++ unit, in the order given: its time, what Clang's allocators held for it
  // (cxx::ParseResult::clangBytes), whether it loaded a precompiled header, its headers not found.
  struct CxxUnit {
    std::string path;
    double seconds = 0;
    size_t clangBytes = 0;
    bool pch = false;
    size_t missingHeaders = 0;
  };
  std::vector<CxxUnit> cxxUnitTimes;
  size_t cxxMostAtOnce = 0;    // the most Clang jobs that ran at once (driver/ClangGate.h)
  size_t cxxMemoryBudget = 0;  // ... under this budget (bytes)
  double prescanSeconds = 0;
  double analysisSeconds = 0;
  // The analysed Python files that took longest (their task: parse, the modules it loaded, the
  // interpretation, the rules), slowest first; at most kSlowestFiles.
  static constexpr size_t kSlowestFiles = 5;
  std::vector<std::pair<std::string, double>> slowestFiles;
};

// LintOptions::interrupted stopped the run: nothing it found is returned (its caller runs it again).
struct LintInterrupted : std::runtime_error {
  LintInterrupted() : std::runtime_error("interrupted") {}
};

// lintFiles failed outside the analysis of one file (a failure inside one file's analysis is an
// SL002 finding for it): `partial` holds what was found until then, sorted.
struct LintInternalError : std::runtime_error {
  LintInternalError(const std::string& what, std::vector<Diagnostic> found)
      : std::runtime_error(what), partial(std::move(found)) {}
  std::vector<Diagnostic> partial;
};

class ConfigMentions;  // driver/LinterImpl.h

class Linter {
 public:
  Linter(const RuleCatalog& catalog, LintOptions options);
  // Lints files as one project: imports between them (and modules they import
  // from the project's roots) are followed. Deterministic for any number of jobs. An exception
  // while analysing one file becomes an SL002 finding for it ("analysis stopped: ..."); any other
  // failure throws LintInternalError with the findings made until then.
  // `table`: a ModuleTable kept between runs (the language server); refreshed first. Without
  // one, the run has its own.
  std::vector<Diagnostic> lintFiles(const std::vector<std::string>& paths, LintStats* stats = nullptr,
                                    ModuleTable* table = nullptr) const;
  // The ModuleTable configuration for this linter's rules and settings.
  ModuleTable::Config tableConfig(bool retireRoots) const;
  // One file as a project of its own.
  std::vector<Diagnostic> lintPath(const std::string& path) const { return lintFiles({path}); }
  // Lints text already in memory as a single file, no project (tests, the language server).
  std::vector<Diagnostic> lintText(const std::string& path, std::string text) const;
  // Only the syntax findings `check` gives a Python file, with no pre-scan and no analysis: SL001 for
  // the first ERROR or MISSING node, SL002 when the text is not read as source (NUL bytes, invalid
  // UTF-8, over maxFileBytes) or the parser gives up; empty when it parses completely. The selection
  // and suppressions do not apply. Thread-safe. The engine of the hidden `shardlint parse-check`.
  std::vector<Diagnostic> syntaxFindings(const std::string& path, std::string text) const;

  // Which of the selected rules' pre-scan words a text mentions (the pre-scan's mask of a Python file), as
  // a function to keep and ask of many texts: a change of a file that leaves its mask as it was cannot
  // change which rules look at it. It holds its own rules; the Linter need not outlive it.
  std::function<uint64_t(std::string_view)> prescanMask() const;

  const RuleCatalog& catalog() const { return catalog_; }
  const LintOptions& options() const { return options_; }

 private:
  // A configuration file read and parsed, its checks pending (they need the project facts).
  struct ConfigDoc {
    std::unique_ptr<SourceFile> file;
    std::vector<config::YNode> docs;
    std::vector<Diagnostic> found;  // SL001
    // Suppression directives written outside the text's comments (a Markdown block's HTML comment),
    // as `#` comments at a byte offset.
    std::vector<std::pair<std::string, uint32_t>> directives;
  };
  // The configuration blocks of a Markdown file (config/Markdown.h): fenced code blocks, and shell
  // here-documents in them, that mention a word the config rules need and parse as YAML, each parsed on
  // a view of the file (its locations are the file's). Never SL001: a block that does not parse is
  // documentation, not a config. The settings of `accelerate launch` commands in the other blocks are
  // checked into `out`.
  std::vector<ConfigDoc> readMarkdown(const std::string& path, const std::string& text, LintStats& stats,
                                      std::vector<Diagnostic>& out) const;
  // Reads and parses a configuration file when it mentions a word the config rules need;
  // its facts (if it configures the scripts) go to `facts`.
  std::optional<ConfigDoc> readConfig(const std::string& path, std::string text, LintStats& stats,
                                      Facts* facts) const;
  // Runs the configuration rules on it and applies its suppression comments.
  void checkConfig(ConfigDoc& doc, std::vector<Diagnostic>& out, const Facts* project) const;
  // lintFiles' work: findings go to `all` as they are made (so that a failure keeps them).
  void lintFilesInto(const std::vector<std::string>& paths, LintStats* stats, ModuleTable* table,
                     std::vector<Diagnostic>& all) const;
  // Whether `text` mentions a word the config rules need (RuleCatalog::configWords), case-insensitively.
  bool mentionsConfigWord(std::string_view text) const;
  // Runs every selected configuration rule on `cx`.
  void runConfigRules(ConfigContext& cx) const;
  // Checks the settings written on a launch script's commands like a config's.
  void checkLaunchSettings(const SourceFile& file, const std::vector<LaunchLink>& links,
                           std::vector<Diagnostic>& out,
                           const std::vector<std::pair<std::string, uint32_t>>* directives = nullptr) const;
  // Which facts apply to which Python file (absolute path), from configs and launch scripts.
  // Findings about the launch commands' own settings go to `diagnostics`.
  // `projects`: per project folder of a linted Python file, the launch scripts and configuration files
  // found in it, so that a script's config does not depend on which other files are named. Keys of the
  // result: a script's absolute path (its own link), "" (--accelerate-config), "project:DIR" (the only
  // accelerate FSDP config of that project), "named" (the only one named, for files in no project).
  std::map<std::string, Facts> linkConfigs(const std::vector<std::string>& launchPaths,
                                           std::map<std::string, Facts> configFacts,
                                           std::vector<Diagnostic>* diagnostics,
                                           const std::map<std::string, ProjectFiles>& projects = {},
                                           ConfigMentions* mentions = nullptr) const;
  // `base` with the facts of the packages the rules read that `path`'s project declares
  // (RuleCatalog::requirementPackages); a new Facts kept in `store` when there are any, else `base`.
  const Facts* withRequirements(const std::string& path, const Facts* base,
                                std::vector<std::unique_ptr<Facts>>& store) const;
  const RuleCatalog& catalog_;
  LintOptions options_;
  std::shared_ptr<RequirementsIndex> requirements_;
};

// One round of a fix run (fixToFixedPoint's `relint`): lints `files` again with `texts` (path ->
// fixed text) laid over the disk as overlays, with `base`'s options otherwise. Throws
// LintInternalError as lintFiles does.
std::vector<Diagnostic> lintWithOverlays(const RuleCatalog& catalog, LintOptions base,
                                         const std::vector<std::string>& files,
                                         const std::map<std::string, std::string>& texts);

// The semantic model of `text` as readable text: every root's objects and events,
// and every function summary (debugging aid behind `shardlint dump-model`).
std::string dumpModel(const std::string& path, std::string text, const RuleCatalog& catalog);

// For the driver's files: the SL002 message for a file whose analysis threw `e` (out of memory
// said as such), and SL002 for a file that was not analysed, reported at its start.
std::string stoppedWhy(const std::exception& e);
Diagnostic skippedDiagnostic(const RuleInfo& info, const std::string& path, std::string message);

// Module name used for qualified names of definitions in a file ("train" for train.py).
std::string moduleNameFor(const std::string& path);

}  // namespace shardlint
