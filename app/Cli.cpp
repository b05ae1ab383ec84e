#include "core/SourceFile.h"
#include "core/AtomicWrite.h"
#include "Cli.h"
#include "Watch.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <optional>
#include <cstdio>
#include <set>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "driver/Config.h"
#include "driver/Discovery.h"
#include "driver/Settings.h"
#include "driver/Linter.h"
#include "driver/ResultCache.h"
#include "driver/Fixer.h"
#include "output/Emitters.h"
#include "lsp/Server.h"
#include "orchestrator/Probe.h"

#ifndef SHARDLINT_VERSION
#define SHARDLINT_VERSION "0.0.0"
#endif

namespace shardlint {

namespace {

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

long peakRssKb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;  // kilobytes on Linux
}

}  // namespace
}  // namespace shardlint

// Defined when build/shardlint links tcmalloc_minimal (app/CMakeLists.txt), null otherwise.
extern "C" void* tc_malloc(size_t) __attribute__((weak));

namespace shardlint {
namespace {

const char* allocatorName() { return tc_malloc ? "tcmalloc_minimal" : "glibc malloc"; }

// `exclude` globs drop discovered files (and everything under excluded folders).
void dropExcluded(const FileConfig& cfg, std::vector<std::string>& files) {
  if (cfg.exclude.empty()) return;
  files.erase(std::remove_if(files.begin(), files.end(), [&](const std::string& f) { return isExcluded(cfg, f); }),
              files.end());
}

// The texts snippets are cut from: each file read once, when first asked for (null when it cannot
// be read); `set` gives a text that is not on disk (stdin's).
class SnippetSource {
 public:
  void set(const std::string& path, std::string text) { texts_[path] = std::move(text); }
  const std::string* get(const std::string& path) {
    auto it = texts_.find(path);
    if (it == texts_.end()) {
      std::string text;
      it = texts_.emplace(path, readFileBytes(path, text) ? std::optional<std::string>(std::move(text)) : std::nullopt)
               .first;
    }
    return it->second ? &*it->second : nullptr;
  }

 private:
  std::map<std::string, std::optional<std::string>> texts_;
};

// --statistics: the number of findings per rule, most first (then by code), and how many have a fix.
void writeStatistics(std::ostream& os, const std::vector<Diagnostic>& all, bool json) {
  struct Row {
    std::string code, name;
    size_t count = 0, fixable = 0;
  };
  std::map<std::string, Row> byCode;
  for (const auto& d : all) {
    Row& r = byCode[d.code];
    r.code = d.code;
    r.name = d.name;
    ++r.count;
    r.fixable += d.fix.has_value();
  }
  std::vector<Row> rows;
  for (auto& [code, r] : byCode) rows.push_back(std::move(r));
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.count > y.count; });
  if (json) {
    nlohmann::json doc = nlohmann::json::array();
    for (const auto& r : rows)
      doc.push_back({{"code", r.code}, {"name", r.name}, {"count", r.count}, {"fixable", r.fixable}});
    os << doc.dump(2) << "\n";
    return;
  }
  size_t width = 1;
  for (const auto& r : rows) width = std::max(width, std::to_string(r.count).size());
  for (const auto& r : rows) {
    std::string n = std::to_string(r.count);
    os << std::string(width - n.size(), ' ') << n << "  " << r.code << "  " << (r.fixable ? "[*] " : "    ")
       << r.name << "\n";
  }
}

// --fix / --fix-only / --diff: applies the fixes of `all` to a fixed point (each round lints the
// fixed texts again, as in-memory overlays, without the cache), then writes the files or prints
// the diff. `all` becomes the findings left. Returns the exit code when the run ends here.
std::optional<int> runFixes(const RuleCatalog& catalog, const FileConfig& cfg, const CheckArgs& a,
                            const LintOptions& options, const std::vector<std::string>& files,
                            std::vector<Diagnostic>& all, std::optional<std::string>& internalError,
                            const std::map<std::string, std::string>& texts) {
  std::vector<Diagnostic> notLinted;  // folder-level findings the linter does not make again
  for (const auto& d : all)
    if (std::find(files.begin(), files.end(), d.location.path) == files.end()) notLinted.push_back(d);
  LintOptions base = options;
  base.cacheDir.clear();
  auto relint = [&](const std::map<std::string, std::string>& texts) {
    std::vector<Diagnostic> found;
    try {
      found = lintWithOverlays(catalog, base, files, texts);
    } catch (const LintInternalError& e) {
      internalError = e.what();
      found = e.partial;
    }
    applyFindingSettings(catalog, cfg, found);
    return found;
  };
  std::vector<Diagnostic> first = all;
  FixRun run = fixToFixedPoint(all, a.unsafeFixes, relint, 4, texts);
  for (const auto& path : run.unreadable) std::cerr << "shardlint: " << path << ": not fixed: it cannot be read\n";
  all = std::move(run.remaining);
  all.insert(all.end(), notLinted.begin(), notLinted.end());
  sortDiagnostics(all);
  auto plural = [](size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  size_t fixable = 0, unsafeLeft = 0;
  for (const auto& d : all)
    if (d.fix) ++(d.fix->applicability == Applicability::Safe || a.unsafeFixes ? fixable : unsafeLeft);
  std::string left = plural(all.size(), "finding", "findings") + " left" +
                     (unsafeLeft ? " (" + plural(unsafeLeft, "more fix", "more fixes") + " with --unsafe-fixes)" : "");
  if (a.diff) {
    for (const auto& [path, texts] : run.changed) std::cout << unifiedDiff(path, texts.first, texts.second);
    std::cout.flush();
    if (!a.quiet)
      std::cerr << "shardlint: would fix " << plural(run.fixed, "finding", "findings") << " in "
                << plural(run.changed.size(), "file", "files") << "; " << left << "\n";
    if (internalError) return kExitInternal;
    return run.changed.empty() ? kExitClean : kExitFindings;
  }
  auto problems = writeFixedFiles(run);
  if (!problems.empty()) {
    // A file left alone keeps its first findings (the others are those of the fixed texts).
    std::set<std::string> unwritten;
    for (const auto& [path, why] : problems) {
      std::cerr << "shardlint: " << path << ": not fixed: " << why << "\n";
      unwritten.insert(path);
    }
    // A finding touches a file by its location or by the file its fix edits (a linked config).
    auto touches = [&](const Diagnostic& d) {
      return unwritten.count(d.location.path) > 0 || (d.fix && unwritten.count(fixPath(*d.fix)) > 0);
    };
    std::vector<Diagnostic> kept;
    for (auto& d : all)
      if (!touches(d)) kept.push_back(std::move(d));
    for (auto& d : first)
      if (touches(d)) kept.push_back(std::move(d));
    all = std::move(kept);
    sortDiagnostics(all);
  }
  if (!a.quiet)
    std::cerr << "shardlint: fixed " << plural(run.fixed, "finding", "findings") << " in "
              << plural(run.changed.size() - problems.size(), "file", "files") << "; " << left << "\n";
  if (internalError) return std::nullopt;  // the findings are written, then 101
  if (a.fixOnly) return problems.empty() ? kExitClean : kExitFindings;
  return std::nullopt;
}

// --watch: after the first report, lints again whenever a file under the paths changes (inotify) and
// prints only what changed: the new findings in full, the ones gone as one line each. Runs until
// it is interrupted.
int watchForChanges(const RuleCatalog& catalog, const FileConfig& cfg, const CheckArgs& a, const LintOptions& options,
                    const std::vector<std::string>& paths, std::vector<Diagnostic> previous) {
  namespace fs = std::filesystem;
  DirectoryWatcher watcher;
  if (!watcher.ok()) {
    std::cerr << "shardlint: error: --watch: cannot watch for changes (inotify)\n";
    return kExitUsage;
  }
  auto key = [](const std::vector<Diagnostic>& ds) {
    std::vector<std::string> prints = output::fingerprints(ds);
    std::vector<std::string> keys;
    for (size_t i = 0; i < ds.size(); ++i) keys.push_back(ds[i].code + "|" + ds[i].location.path + "|" + prints[i]);
    return keys;
  };
  auto watchFolders = [&](const std::vector<std::string>& files) {
    std::set<std::string> dirs;
    for (const auto& p : paths) {
      std::error_code ec;
      if (fs::is_directory(p, ec)) {
        dirs.insert(p);
        for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
          std::string name = it->path().filename().string();
          if (it->is_directory(ec) && (name.empty() || name[0] == '.' || name == "build" || name == "node_modules" ||
                                       name == "__pycache__")) {
            it.disable_recursion_pending();
            continue;
          }
          if (it->is_directory(ec)) dirs.insert(it->path().string());
        }
      } else {
        dirs.insert(fs::path(p).parent_path().empty() ? "." : fs::path(p).parent_path().string());
      }
    }
    for (const auto& f : files) dirs.insert(fs::path(f).parent_path().empty() ? "." : fs::path(f).parent_path().string());
    for (const auto& d : dirs) watcher.add(d);
  };
  watchFolders({});
  std::cerr << "shardlint: watching for changes (Ctrl-C to stop)\n";
  bool color = !a.noColor && std::getenv("NO_COLOR") == nullptr && isatty(STDOUT_FILENO);
  // The files discovery would lint, and the settings files.
  auto relevant = [](const std::string& name) {
    std::string ext = fs::path(name).extension().string();
    return ext == ".py" || ext == ".yaml" || ext == ".yml" || ext == ".json" || ext == ".sh" || ext == ".toml" || ext == ".md" ||
           ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".h" || ext == ".hpp" || ext == ".mk" ||
           name == "Makefile" || name == "makefile" || name == "GNUmakefile";
  };
  while (watcher.waitForChange(relevant)) {
    DiscoveryResult found = discover(paths, 0, cfg.markdown.value_or(true));
    dropExcluded(cfg, found.files);
    watchFolders(found.files);  // folders created since
    std::vector<Diagnostic> now;
    try {
      now = Linter(catalog, options).lintFiles(found.files);
    } catch (const LintInternalError& e) {
      std::cerr << "shardlint: internal error: " << e.what() << "\n";
      now = e.partial;
    }
    applyFindingSettings(catalog, cfg, now);
    std::vector<std::string> before = key(previous), after = key(now);
    std::multiset<std::string> had(before.begin(), before.end()), has(after.begin(), after.end());
    std::vector<Diagnostic> added;
    for (size_t i = 0; i < now.size(); ++i)
      if (auto it = had.find(after[i]); it != had.end()) had.erase(it);
      else added.push_back(now[i]);
    std::vector<const Diagnostic*> gone;
    for (size_t i = 0; i < previous.size(); ++i)
      if (auto it = has.find(before[i]); it != has.end()) has.erase(it);
      else gone.push_back(&previous[i]);
    if (added.empty() && gone.empty()) {  // only what changed is printed
      previous = std::move(now);
      continue;
    }
    char stamp[16] = "";
    std::time_t t = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&t));
    std::cout << "[" << stamp << "] " << now.size() << (now.size() == 1 ? " finding" : " findings") << " ("
              << added.size() << " new, " << gone.size() << " gone)\n";
    output::RunSummary none;
    output::TextStyle style;
    style.summary = false;
    style.color = color;
    if (a.format == "concise") {
      output::writeConcise(std::cout, added, none, style);
    } else {
      style.snippets = !a.noSnippets;
      SnippetSource texts;
      style.source = [&](const std::string& path) { return texts.get(path); };
      output::writeText(std::cout, added, none, style);
    }
    for (const Diagnostic* d : gone)
      std::cout << "gone: " << d->location.path << ":" << d->location.start.line + 1 << ":"
                << d->location.start.codepointColumn + 1 << ": " << d->code << " " << d->name << "\n";
    std::cout.flush();
    previous = std::move(now);
  }
  std::cerr << "shardlint: error: --watch: the watch on the files failed\n";
  return kExitUsage;
}

// `probe`: the runtime probe runs on the findings and its verdicts join the output (shardlint probe).
int runCheck(const RuleCatalog& catalog, CheckArgs a, probe::Session* probe = nullptr) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  std::vector<std::string>& paths = a.paths;
  const std::string& format = a.format;
  bool quiet = a.quiet, noColor = a.noColor;
  if (a.watch && (a.fix || a.fixOnly || a.diff || a.outputFile || a.baseline || a.statistics || a.stdinFilename ||
                  probe || (format != "text" && format != "concise"))) {
    std::cerr << "shardlint: error: --watch prints findings as text or concise; it does not combine with --fix, "
                 "--fix-only, --diff, --output-file, --baseline, --statistics or stdin\n";
    return kExitUsage;
  }
  FileConfig cfg;
  try {
    cfg = loadConfig(std::filesystem::current_path(), a.config);
  } catch (const std::exception& e) {
    std::cerr << "shardlint: error: " << e.what() << "\n";
    return kExitUsage;
  }
  // Command-line selections replace the file's `select`; extend-select, ignore and roots add up.
  SettingsOverrides overrides{a.select, a.extendSelect, a.ignore, a.roots, a.accelerateConfigs,
                              a.jobsGiven ? std::optional<unsigned>(a.jobs) : std::nullopt};
  if (a.showSettings) {
    FileConfig shown = cfg;
    shown.select = a.select.empty() ? cfg.select : a.select;
    shown.extendSelect.insert(shown.extendSelect.end(), a.extendSelect.begin(), a.extendSelect.end());
    shown.ignore.insert(shown.ignore.end(), a.ignore.begin(), a.ignore.end());
    shown.roots.insert(shown.roots.end(), a.roots.begin(), a.roots.end());
    shown.accelerateConfigs.insert(shown.accelerateConfigs.end(), a.accelerateConfigs.begin(), a.accelerateConfigs.end());
    if (a.jobsGiven) shown.jobs = a.jobs;
    std::cout << describeConfig(shown);
    return kExitClean;
  }
  LintOptions options;
  try {
    options = lintOptionsFrom(catalog, cfg, overrides);
  } catch (const std::exception& e) {
    std::cerr << "shardlint: error: " << e.what() << "\n";
    return kExitUsage;
  }
  if (paths.empty()) paths.push_back(".");
  // `-`: the text comes from stdin and is linted as --stdin-filename (its settings, its project).
  bool fromStdin = std::find(paths.begin(), paths.end(), "-") != paths.end();
  std::string stdinText;
  if (fromStdin) {
    if (paths.size() != 1 || !a.stdinFilename) {
      std::cerr << "shardlint: error: `-` (stdin) needs --stdin-filename NAME and no other path\n";
      return kExitUsage;
    }
    if (a.fix || a.fixOnly) {
      std::cerr << "shardlint: error: --fix and --fix-only do not write stdin back; use --diff with stdin\n";
      return kExitUsage;
    }
    stdinText.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    options.overlays[absolutePathKey(*a.stdinFilename)] = stdinText;
  } else if (a.stdinFilename) {
    std::cerr << "shardlint: error: --stdin-filename needs the path `-`\n";
    return kExitUsage;
  }
  DiscoveryResult found;
  if (fromStdin) found.files = {*a.stdinFilename};
  else found = discover(paths, 0, cfg.markdown.value_or(true));
  auto discovered = Clock::now();
  for (const auto& missing : found.errors) {
    std::error_code ec;
    bool link = std::filesystem::is_symlink(missing, ec);  // a symlink loop, or one to nothing
    std::cerr << "shardlint: error: " << missing
              << (link ? ": a symlink that cannot be resolved (a loop, or its target is missing)\n"
                       : ": no such file or directory\n");
  }
  if (!found.errors.empty()) return kExitUsage;
  dropExcluded(cfg, found.files);

  // The persistent cache of findings (analyzer/driver/ResultCache.h), like Ruff's.
  if (!a.noCache && !fromStdin) {  // stdin's text is not a file the cache could key
    namespace fs = std::filesystem;
    if (a.cacheDir) options.cacheDir = *a.cacheDir;
    else if (const char* env = std::getenv("SHARDLINT_CACHE_DIR"); env && *env) options.cacheDir = env;
    else options.cacheDir = ((cfg.path ? cfg.path->parent_path() : fs::current_path()) / ".shardlint_cache").string();
    options.cacheKey = std::string("shardlint ") + SHARDLINT_VERSION + " " + executableFingerprint();
    options.pchCacheDir = options.cacheDir;
  }
  // `probe --controls`: the rules' controls are collected, so every file is analysed (a file whose
  // findings come from the cache runs no rule); the probe's own cache (the self-test) stays.
  const std::string probeCacheDir = options.cacheDir;
  if (probe && probe->options().controls && probe->options().mode == "replay") {
    options.controls = std::make_shared<ControlSink>();
    options.cacheDir.clear();
  }
  options.cxxFlags = a.cxxFlags;
  options.cxxMemoryBudget = size_t{a.cxxMemoryMib} << 20;
  Linter linter(catalog, std::move(options));
  LintStats stats;
  std::vector<Diagnostic> all;
  // A failure outside one file's analysis (one file's is an SL002 finding): what was found is
  // still written, then the run exits 101.
  std::optional<std::string> internalError;
  try {
    all = linter.lintFiles(found.files, &stats);
  } catch (const LintInternalError& e) {
    internalError = e.what();
    all = e.partial;
  }
  // A folder that could not be listed is skipped like an unreadable file: SL002 on its path.
  if (const RuleInfo* sl002 = catalog.find("SL002"); sl002 && linter.options().selection.enabled(*sl002))
    for (const auto& dir : found.unreadable)
      all.push_back(makeDiagnostic(*sl002, makeLocation(SourceFile(dir, ""), {0, 0}),
                                   "folder skipped: it cannot be read (permission denied); its files were not linted"));
  applyFindingSettings(catalog, cfg, all);  // per-file-ignores, then severity overrides
  if ((a.fix || a.fixOnly || a.diff) && !internalError) {
    std::map<std::string, std::string> texts;
    if (fromStdin) texts[*a.stdinFilename] = stdinText;
    if (std::optional<int> rc = runFixes(catalog, cfg, a, linter.options(), found.files, all, internalError, texts))
      return *rc;
  }
  if (a.baseline && !internalError) {
    // The first run writes the baseline; later runs report only findings not in it.
    namespace fs = std::filesystem;
    std::vector<std::string> prints = output::fingerprints(all);
    std::error_code ec;
    if (!fs::exists(*a.baseline, ec)) {
      nlohmann::json doc = {{"shardlint_baseline", 1}, {"findings", nlohmann::json::array()}};
      for (size_t i = 0; i < all.size(); ++i)
        doc["findings"].push_back({{"code", all[i].code}, {"path", all[i].location.path}, {"fingerprint", prints[i]}});
      // Atomic (a temporary file renamed into place): an interrupted run leaves no half baseline.
      if (std::string err = atomicWriteFile(*a.baseline, doc.dump(2) + "\n"); !err.empty()) {
        std::cerr << "shardlint: error: cannot write the baseline " << *a.baseline << ": " << err << "\n";
        return kExitUsage;
      }
      std::cerr << "shardlint: wrote the baseline " << *a.baseline << " with " << all.size()
                << (all.size() == 1 ? " finding" : " findings") << "; later runs report only new ones\n";
      all.clear();
    } else {
      nlohmann::json doc;
      try {
        std::ifstream in(*a.baseline);
        doc = nlohmann::json::parse(in);
        if (!doc.contains("findings") || !doc["findings"].is_array()) throw std::runtime_error("no findings list");
      } catch (const std::exception& e) {
        std::cerr << "shardlint: error: " << *a.baseline << " is not a shardlint baseline (" << e.what() << ")\n";
        return kExitUsage;
      }
      std::multiset<std::string> known;
      for (const auto& f : doc["findings"])
        known.insert(f.value("code", "") + "|" + f.value("path", "") + "|" + f.value("fingerprint", ""));
      std::vector<Diagnostic> fresh;
      for (size_t i = 0; i < all.size(); ++i) {
        auto it = known.find(all[i].code + "|" + all[i].location.path + "|" + prints[i]);
        if (it != known.end()) known.erase(it);
        else fresh.push_back(std::move(all[i]));
      }
      all = std::move(fresh);
    }
  }

  if (probe && !internalError) {
    probe->setCacheDir(probeCacheDir);  // the CPU self-test's answer is kept there
    if (linter.options().controls) {
      std::vector<Diagnostic> controls = linter.options().controls->take();
      // Only controls in files given on the command line (not in modules they import).
      std::set<std::string> given(found.files.begin(), found.files.end());
      controls.erase(std::remove_if(controls.begin(), controls.end(),
                                    [&](const Diagnostic& c) { return !given.count(c.location.path); }),
                     controls.end());
      probe->setControls(std::move(controls));
    }
    if (int rc = probe->run(all); rc != kExitClean) return rc;
  }

  output::RunSummary summary;
  summary.filesChecked = found.files.size();
  std::set<std::string> withFindings;
  for (const auto& d : all) withFindings.insert(d.location.path);
  summary.filesWithFindings = withFindings.size();
  auto analysed = Clock::now();
  // The report goes to stdout, or (--output-file) to a file written atomically.
  std::ostringstream report;
  std::ostream& out = a.outputFile ? static_cast<std::ostream&>(report) : std::cout;
  bool terminal = !a.outputFile && isatty(STDOUT_FILENO);
  if (a.statistics) {
    writeStatistics(out, all, format == "json");
  } else if (format == "json" && probe) {
    std::ostringstream plain;
    output::writeJson(plain, all, summary, SHARDLINT_VERSION);
    out << probe::addProbeToJson(plain.str(), all, probe->results(), probe->controls(), probe->controlResults());
  } else if (format == "json") {
    output::writeJson(out, all, summary, SHARDLINT_VERSION);
  } else if (format == "sarif") {
    output::writeSarif(out, all, catalog.infos, SHARDLINT_VERSION);
  } else if (format == "github") {
    output::writeGithub(out, all);
  } else if (format == "lsp") {
    output::writeLspJson(out, all, catalog.infos);
  } else if (format == "concise") {
    output::TextStyle style;
    style.summary = !quiet;
    output::writeConcise(out, all, summary, style);
  } else {
    output::TextStyle style;
    style.summary = !quiet;
    style.color = !noColor && std::getenv("NO_COLOR") == nullptr && terminal;
    style.showFixes = a.showFixes;
    // Snippets from the files as they are now (fixed, when --fix wrote them), or stdin's text.
    SnippetSource texts;
    if (fromStdin) texts.set(*a.stdinFilename, stdinText);
    style.snippets = !a.noSnippets;
    style.source = [&](const std::string& path) { return texts.get(path); };
    output::writeText(out, all, summary, style);
  }
  if (probe && !probe->controls().empty() && (format == "text" || format == "concise") && !a.statistics)
    probe::writeControls(out, probe->controls(), probe->controlResults());
  if (a.outputFile) {
    if (std::string err = atomicWriteFile(*a.outputFile, report.str()); !err.empty()) {
      std::cerr << "shardlint: error: cannot write " << *a.outputFile << ": " << err << "\n";
      return kExitUsage;
    }
  }
  std::cout.flush();
  if (a.stats) {
    auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
    std::fprintf(stderr,
                 "shardlint stats:\n"
                 "  files seen      %zu\n  files read      %zu (pre-scan, including imported project modules)\n"
                 "  files skipped   %zu (the pre-scan ruled them out; not parsed)\n"
                 "  files analysed  %zu\n  parses          %zu (of %zu files: analysed files, project modules they pull in, "
                 "config files%s)\n"
                 "  summaries       %zu taken from another file's analysis\n"
                 "  cache           %s\n"
                 "  bytes read      %llu\n"
                 "  time            discovery %.3fs, pre-scan %.3fs, analysis %.3fs, output %.3fs, total %.3fs\n"
                 "  jobs            %u\n  peak RSS        %.1f MiB (allocator: %s)\n",
                 stats.filesSeen, stats.filesRead, stats.filesSkipped, stats.filesAnalysed, stats.filesParsed,
                 stats.filesParsedOnce,
                 stats.filesParsed > stats.filesParsedOnce
                     ? ("; " + std::to_string(stats.filesParsed - stats.filesParsedOnce) +
                        " parsed again: module trees freed under the memory budget, needed later")
                           .c_str()
                     : "",
                 stats.modulesShared,
                 (linter.options().cacheDir.empty() ? std::string("off (--no-cache)")
                  : std::to_string(stats.cacheHits) + " of " + std::to_string(stats.filesAnalysed) +
                        " analysed files' findings from " + linter.options().cacheDir +
                        (stats.cacheProblem.empty() ? "" : "; not written: " + stats.cacheProblem))
                     .c_str(),
                 static_cast<unsigned long long>(stats.bytesRead), secs(discovered - start), stats.prescanSeconds,
                 stats.analysisSeconds, secs(Clock::now() - analysed), secs(Clock::now() - start),
                 linter.options().jobs ? linter.options().jobs : std::max(1u, std::thread::hardware_concurrency()),
                 static_cast<double>(peakRssKb()) / 1024.0, allocatorName());
    if (stats.importersAnalysed || stats.importersTruncated)
      std::fprintf(stderr, "  importers       %zu analysed: project files that import a linted file, for their findings in it%s\n",
                   stats.importersAnalysed, stats.importersTruncated ? " (the search's bound cut the list)" : "");
    if (stats.cxxUnits)
      std::fprintf(stderr, "  C++ units       %zu parsed with Clang (of %zu; %.2fs in all, slowest %.2fs)\n",
                   stats.cxxParsed, stats.cxxUnits, stats.cxxParseSeconds, stats.cxxMaxSeconds);
    if (stats.cxxMostAtOnce)
      std::fprintf(stderr, "  C++ memory      at most %zu Clang job(s) at once (budget %.0f MiB of Clang's allocations)\n",
                   stats.cxxMostAtOnce, static_cast<double>(stats.cxxMemoryBudget) / 1048576.0);
    for (const auto& unit : stats.cxxUnitTimes)
      std::fprintf(stderr, "    %7.2fs %6.1f MiB  %s%s%s\n", unit.seconds, static_cast<double>(unit.clangBytes) / 1048576.0,
                   unit.path.c_str(), unit.pch ? " (precompiled header)" : "",
                   unit.missingHeaders ? (" (" + std::to_string(unit.missingHeaders) + " header(s) not found)").c_str()
                                       : "");
    if (stats.cxxPchBuilt || stats.cxxPchUsed)
      std::fprintf(stderr, "  C++ headers     %zu unit(s) with a precompiled header; %zu built (%.2fs)\n",
                   stats.cxxPchUsed, stats.cxxPchBuilt, stats.cxxPchSeconds);
  }
  if (internalError) {
    std::cerr << "shardlint: internal error: " << *internalError
              << " (the findings above are those made before it; the run is incomplete)\n";
    return kExitInternal;
  }
  if (probe) return probe->exitCode(all);
  if (a.watch) return watchForChanges(catalog, cfg, a, linter.options(), paths, all);
  return all.empty() || a.exitZero ? kExitClean : kExitFindings;
}

// `parse-check` (hidden, for scripts/parse_diff.py): only "does each file parse without error
// nodes", the SL001/SL002 findings `check` would give it, with no pre-scan, no analysis and no size
// limit. One JSON object per file and line, in the order given (the paths, then those read with
// --files-from):
//   {"path": P, "status": "ok"}
//   {"path": P, "status": "SL001", "line": L, "column": C, "message": M}   (1-based, code points)
//   {"path": P, "status": "SL002" | "unreadable", "message": M}
// Exit 0 when every file parsed completely, 1 otherwise, 2 on a usage error.
int runParseCheck(const RuleCatalog& catalog, std::vector<std::string> paths, const std::string& filesFrom,
                  unsigned jobs) {
  if (!filesFrom.empty()) {
    std::ifstream file;
    if (filesFrom != "-") {
      file.open(filesFrom);
      if (!file) {
        std::cerr << "shardlint: error: cannot read " << filesFrom << "\n";
        return kExitUsage;
      }
    }
    std::istream& in = filesFrom == "-" ? std::cin : file;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) paths.push_back(line);
  }
  LintOptions options;
  options.maxFileBytes = UINT64_MAX;  // the grammar is what is being checked, not the size limit
  Linter linter(catalog, std::move(options));
  std::vector<std::string> lines(paths.size());
  std::vector<char> clean(paths.size(), 0);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
      nlohmann::json j = {{"path", paths[i]}};
      std::string text;
      if (!readFileBytes(paths[i], text)) {
        j["status"] = "unreadable";
        j["message"] = "cannot read the file";
      } else {
        std::vector<Diagnostic> found = linter.syntaxFindings(paths[i], std::move(text));
        if (found.empty()) {
          j["status"] = "ok";
          clean[i] = 1;
        } else {
          const Diagnostic& d = found.front();
          j["status"] = d.code;
          if (d.code == "SL001") {
            j["line"] = d.location.start.line + 1;
            j["column"] = d.location.start.codepointColumn + 1;
          }
          j["message"] = d.message;
        }
      }
      lines[i] = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  };
  if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(1, paths.size())));
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < jobs; ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const auto& l : lines) std::cout << l << "\n";
  std::cout.flush();
  return std::all_of(clean.begin(), clean.end(), [](char c) { return c != 0; }) ? kExitClean : kExitFindings;
}

}  // namespace

int runCli(int argc, char** argv, const RuleCatalog& catalog) {
  CLI::App app{"shardlint: static analysis for PyTorch FSDP training scripts", "shardlint"};
  app.set_version_flag("--version", std::string("shardlint ") + SHARDLINT_VERSION);
  app.require_subcommand(1);

  CheckArgs ca;
  auto& paths = ca.paths;
  auto& select = ca.select;
  auto& ignore = ca.ignore;
  auto& format = ca.format;
  auto& quiet = ca.quiet;
  auto& noColor = ca.noColor;
  CLI::App* check = app.add_subcommand("check", "Lint files and directories (default: the current directory)");
  check->add_option("paths", paths, "Files or directories to lint");
  check->add_option("-j,--jobs", ca.jobs, "Worker threads (default: all cores)")
      ->check(CLI::Range(0u, 1024u))
      ->each([&](const std::string&) { ca.jobsGiven = true; });
  check->add_option("--cxx-memory", ca.cxxMemoryMib,
                    "C++ units: MiB of Clang's allocations the units parsed at once may take (default 256: "
                    "LibTorch units one at a time)")
      ->check(CLI::Range(1u, 1u << 20));
  check->add_option("--config", ca.config, "Configuration file (default: nearest .shardlint.toml or pyproject.toml)");
  check->add_option("--root", ca.roots, "Extra import root for project modules (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_option("--accelerate-config", ca.accelerateConfigs,
                    "accelerate config applying to scripts no launch command links (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_flag("--no-cache", ca.noCache, "Neither read nor write the cache of findings (.shardlint_cache)");
  check->add_option("--cache-dir", ca.cacheDir,
                    "Cache folder (default: SHARDLINT_CACHE_DIR, else .shardlint_cache next to the configuration "
                    "file, else in the current directory)");
  check->add_flag("--fix", ca.fix, "Apply the safe fixes, then report what is left");
  check->add_flag("--unsafe-fixes", ca.unsafeFixes, "With --fix, --fix-only or --diff: apply the unsafe fixes too");
  check->add_flag("--fix-only", ca.fixOnly, "Apply the fixes and report nothing else (exit 0 unless a file was not written)");
  check->add_flag("--diff", ca.diff, "Print a unified diff of the fixes instead of writing them (exit 1 when there is one)");
  check->add_flag("--show-fixes", ca.showFixes, "Text format: print the fix of each finding that has one");
  check->add_option("-o,--output-file", ca.outputFile, "Write the report to FILE (atomically) instead of stdout");
  check->add_flag("-w,--watch", ca.watch, "Lint again on every file change, printing only what changed (Ctrl-C to stop)");
  check->add_flag("--no-snippets", ca.noSnippets, "Text format: no source line and caret under each finding");
  check->add_flag("--exit-zero", ca.exitZero, "Exit 0 even when there are findings (errors still exit 2 or 101)");
  check->add_flag("--statistics", ca.statistics,
                  "Print the number of findings per rule instead of the findings ([*]: some have a fix)");
  check->add_option("--stdin-filename", ca.stdinFilename,
                    "With the path `-`: lint stdin as this file (its settings, project and suppressions apply)");
  check->add_flag("--stats", ca.stats, "Print files seen/parsed, bytes, time per phase and peak RSS to stderr");
  // One value per occurrence (repeatable), so paths can follow: `--select SL101 train.py`.
  check->add_option("--select", select, "Rules to enable: codes, names or code prefixes (comma-separated)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_option("--extend-select", ca.extendSelect, "Rules to enable in addition to the selection")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_flag("--show-settings", ca.showSettings, "Print the resolved configuration and exit");
  check->add_option("--baseline", ca.baseline,
                    "Baseline file: written on the first run (exit 0), then only findings not in it are reported");
  check->add_option("--ignore", ignore, "Rules to disable: codes, names or code prefixes (comma-separated)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_option("--format", format, "Output format: text, concise, json, sarif, github, lsp")
      ->check(CLI::IsMember({"text", "concise", "json", "sarif", "github", "lsp"}));
  check->add_flag("-q,--quiet", quiet, "Print findings only, no summary line");
  check->add_flag("--no-color", noColor, "Disable colored output (NO_COLOR is respected too)");

  CLI::App* rules = app.add_subcommand("rules", "List all rules");
  std::string ruleName;
  CLI::App* rule = app.add_subcommand("rule", "Print the documentation of one rule");
  rule->add_option("rule", ruleName, "Rule code or name (SL101 or optimizer-before-wrap)")->required();

  CLI::App* server = app.add_subcommand("server", "Run the language server (LSP over stdin/stdout)");
  bool stdio = false;  // accepted for clients that pass it; stdio is the only transport
  server->add_flag("--stdio", stdio, "Use stdin/stdout (the default and only transport)");

  // `shardlint probe [options] PATH... [-- SCRIPT ARGS]`: what follows `--` belongs to the script.
  std::vector<std::string> scriptArgs;
  std::vector<char*> args(argv, argv + argc);
  if (argc > 1 && std::string(argv[1]) == "probe") {
    auto dd = std::find_if(args.begin() + 2, args.end(), [](const char* s) { return std::string(s) == "--"; });
    if (dd != args.end()) scriptArgs.assign(dd + 1, args.end()), args.erase(dd, args.end());
  }
  // `shardlint check [options] PATH... [-- FLAGS]`: compile flags for C++ files without a compilation
  // database (like clang-tidy's `--`).
  if (argc > 1 && std::string(argv[1]) == "check") {
    auto dd = std::find_if(args.begin() + 2, args.end(), [](const char* s) { return std::string(s) == "--"; });
    if (dd != args.end()) ca.cxxFlags.assign(dd + 1, args.end()), args.erase(dd, args.end());
  }
  CheckArgs pa;
  probe::ProbeOptions po;
  bool preflight = false;
  int masterPort = 0;
  CLI::App* probeCmd = app.add_subcommand(
      "probe", "Lint, then check every " + probe::probedCodesText("and") +
                   " finding at runtime (torch.distributed.run), or SL501 findings on a LibTorch program (--mode cxx)");
  probeCmd->add_option("paths", pa.paths, "Files or directories to lint (--mode script runs the first)");
  probeCmd->add_option("--mode", po.mode,
                       "replay (a generated program per finding, default), script, or cxx (SL501 findings, on your "
                       "LibTorch program: --build, --run)")
      ->check(CLI::IsMember({"replay", "script", "cxx"}));
  probeCmd->add_option("--build", po.buildCommand, "--mode cxx: the shell command that builds the program");
  probeCmd->add_option("--run", po.runCommand, "--mode cxx: the shell command that runs the program");
  probeCmd->add_option("--nproc", po.nproc, "Ranks per node (default 2)")->check(CLI::Range(1, 1024));
  probeCmd->add_option("--backend", po.backend, "auto (default), nccl or gloo")
      ->check(CLI::IsMember({"auto", "nccl", "gloo"}));
  probeCmd->add_option("--python", po.python,
                       "Python interpreter with torch, and accelerate, Lightning, transformers (SL202) and peft "
                       "(SL105) where a replay uses them (default: $SHARDLINT_PROBE_PYTHON, else the probe-venv "
                       "scripts/setup-probe.sh makes beside this executable, else python3)");
  probeCmd->add_option("--timeout", po.timeoutSeconds, "Seconds per launched run (default 300)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              size_t used = 0;
              double d = std::stod(v, &used);
              if (used == v.size() && d > 0 && d <= 86400) return "";
            } catch (const std::exception&) {
            }
            return "must be a number of seconds above 0 and at most 86400, got '" + v + "'";
          },
          "SECONDS", "seconds"));
  probeCmd->add_flag("--no-cache", pa.noCache,
                     "Neither read nor write the cache (findings, and the CPU self-test's answer for this interpreter)");
  probeCmd->add_option("--format", pa.format, "Output format: text, concise, json, sarif, github, lsp")
      ->check(CLI::IsMember({"text", "concise", "json", "sarif", "github", "lsp"}));
  probeCmd->add_flag("--preflight", preflight, "Run the native CUDA/NCCL preflight and exit with its code");
  probeCmd->add_flag("--keep", po.keep, "Keep the replay programs, logs and rank reports");
  probeCmd->add_flag("--controls", po.controls,
                     "Also replay the patterns the rules examined and found correct (controls): each should be "
                     "not-reproduced; a confirmed control is a bug the rules missed (exit 1). Replay mode only");
  probeCmd->add_option("--master-port", masterPort, "torchrun's master port (default: a free one)")
      ->check(CLI::Range(1, 65535));
  probeCmd->add_option("--nnodes", po.nnodes, "Passed to torch.distributed.run (multi-node)");
  probeCmd->add_option("--rdzv-endpoint", po.rdzvEndpoint, "Passed to torch.distributed.run (multi-node)");
  probeCmd->add_option("--srun", po.srun, "A Slurm line put in front of the launcher (\"srun -N2 ...\")");

  std::string dumpFile;
  CLI::App* dump = app.add_subcommand("dump-model", "Print the semantic model of a file (for debugging)");
  dump->add_option("file", dumpFile, "Python file")->required();
  dump->group("");  // hidden

  std::vector<std::string> parseCheckPaths;
  std::string parseCheckFrom;
  unsigned parseCheckJobs = 0;
  CLI::App* parseCheck =
      app.add_subcommand("parse-check", "Report only whether each Python file parses without error nodes (JSON lines)");
  parseCheck->add_option("paths", parseCheckPaths, "Python files");
  parseCheck->add_option("--files-from", parseCheckFrom, "Read more paths from this file, one a line (- for stdin)");
  parseCheck->add_option("-j,--jobs", parseCheckJobs, "Worker threads (default: all cores)")->check(CLI::Range(0u, 1024u));
  parseCheck->group("");  // hidden: a developer tool (scripts/parse_diff.py)

  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  if (*server) return lsp::runStdioServer(catalog);
  if (*probeCmd) {
    if (preflight) return probe::runPreflight(std::cerr, scriptArgs);
    if (po.controls && po.mode != "replay") {
      std::cerr << "shardlint: error: --controls replays the rules' controls: it needs --mode replay\n";
      return kExitUsage;
    }
    if (!scriptArgs.empty() && po.mode != "script") {
      std::cerr << "shardlint: error: arguments after `--` are for --mode script\n";
      return kExitUsage;
    }
    if (probeCmd->count("--master-port")) po.masterPort = masterPort;
    if (!probeCmd->count("--python")) po.python = probe::defaultPython();
    po.format = pa.format;
    po.scriptArgs = scriptArgs;
    if (!pa.paths.empty()) po.script = pa.paths.front();
    probe::Session session(po, std::cerr);
    return runCheck(catalog, pa, &session);
  }
  if (*dump) {
    std::string text;
    if (!readFileBytes(dumpFile, text)) {
      std::cerr << "shardlint: error: cannot read " << dumpFile << "\n";
      return kExitUsage;
    }
    std::cout << dumpModel(dumpFile, text, catalog);
    return kExitClean;
  }
  if (*parseCheck) return runParseCheck(catalog, std::move(parseCheckPaths), parseCheckFrom, parseCheckJobs);
  if (*check) return runCheck(catalog, ca);
  if (*rules) {
    for (const auto& i : catalog.infos)
      std::cout << i.code << "  " << i.name << std::string(i.name.size() < 26 ? 26 - i.name.size() : 1, ' ')
                << severityName(i.severity) << "  " << i.summary << "\n";
    return kExitClean;
  }
  if (*rule) {
    const RuleInfo* info = catalog.find(ruleName);
    if (!info) {
      std::cerr << "shardlint: error: unknown rule `" << ruleName << "` (see `shardlint rules`)\n";
      return kExitUsage;
    }
    std::cout << info->doc;
    if (!info->doc.empty() && info->doc.back() != '\n') std::cout << "\n";
    return kExitClean;
  }
  return kExitUsage;
}

}  // namespace shardlint
