// `shardlint check` (and the lint that `shardlint probe` runs first): the configuration and the
// command line made into the linter's options, stdin, discovery, the lint, then fixes, the baseline
// and the probe, the report in the chosen format, --stats and --watch. runCheck is the run's steps
// in order; the command line itself is read in Cli.cpp.
#include "CheckCommand.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "Cli.h"
#include "Watch.h"
#include "core/AtomicWrite.h"
#include "core/SourceFile.h"
#include "driver/Config.h"
#include "driver/Discovery.h"
#include "driver/Fixer.h"
#include "driver/Linter.h"
#include "driver/ResultCache.h"
#include "driver/Settings.h"
#include "orchestrator/Probe.h"
#include "output/Emitters.h"

#ifndef SHARDLINT_VERSION
#define SHARDLINT_VERSION "0.0.0"
#endif

// Defined when build/shardlint links tcmalloc_minimal (app/CMakeLists.txt), null otherwise.
extern "C" void* tc_malloc(size_t) __attribute__((weak));

namespace shardlint {
namespace {

using Clock = std::chrono::steady_clock;

long peakRssKb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;  // kilobytes on Linux
}

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

// --watch prints findings as text or concise and nothing else: false (the error said) when the
// command line asks for more.
bool watchFitsOptions(const CheckArgs& a, const probe::Session* probe) {
  const std::string& format = a.format;
  if (a.watch && (a.fix || a.fixOnly || a.diff || a.outputFile || a.baseline || a.statistics || a.stdinFilename ||
                  probe || (format != "text" && format != "concise"))) {
    std::cerr << "shardlint: error: --watch prints findings as text or concise; it does not combine with --fix, "
                 "--fix-only, --diff, --output-file, --baseline, --statistics or stdin\n";
    return false;
  }
  return true;
}

// The configuration (--config, else the nearest file): nullopt (the error said) when it cannot be read.
std::optional<FileConfig> loadCheckConfig(const CheckArgs& a) {
  try {
    return loadConfig(std::filesystem::current_path(), a.config);
  } catch (const std::exception& e) {
    std::cerr << "shardlint: error: " << e.what() << "\n";
    return std::nullopt;
  }
}

// --show-settings: the configuration with the command line's selections in it.
void showSettings(const FileConfig& cfg, const CheckArgs& a) {
  FileConfig shown = cfg;
  shown.select = a.select.empty() ? cfg.select : a.select;
  shown.extendSelect.insert(shown.extendSelect.end(), a.extendSelect.begin(), a.extendSelect.end());
  shown.ignore.insert(shown.ignore.end(), a.ignore.begin(), a.ignore.end());
  shown.roots.insert(shown.roots.end(), a.roots.begin(), a.roots.end());
  shown.accelerateConfigs.insert(shown.accelerateConfigs.end(), a.accelerateConfigs.begin(), a.accelerateConfigs.end());
  if (a.jobsGiven) shown.jobs = a.jobs;
  std::cout << describeConfig(shown);
}

// The linter's options from the configuration and the command line: nullopt (the error said) when
// they are not valid (an unknown rule selector).
std::optional<LintOptions> checkLintOptions(const RuleCatalog& catalog, const FileConfig& cfg, const CheckArgs& a) {
  // Command-line selections replace the file's `select`; extend-select, ignore and roots add up.
  SettingsOverrides overrides{a.select, a.extendSelect, a.ignore, a.roots, a.accelerateConfigs,
                              a.jobsGiven ? std::optional<unsigned>(a.jobs) : std::nullopt};
  try {
    return lintOptionsFrom(catalog, cfg, overrides);
  } catch (const std::exception& e) {
    std::cerr << "shardlint: error: " << e.what() << "\n";
    return std::nullopt;
  }
}

// `-`: the text comes from stdin and is linted as --stdin-filename (its settings, its project), as an
// overlay in `options`. False (the error said) when the command line does not allow it.
bool readStdinInput(const CheckArgs& a, bool fromStdin, std::string& stdinText, LintOptions& options) {
  if (fromStdin) {
    if (a.paths.size() != 1 || !a.stdinFilename) {
      std::cerr << "shardlint: error: `-` (stdin) needs --stdin-filename NAME and no other path\n";
      return false;
    }
    if (a.fix || a.fixOnly) {
      std::cerr << "shardlint: error: --fix and --fix-only do not write stdin back; use --diff with stdin\n";
      return false;
    }
    stdinText.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    options.overlays[absolutePathKey(*a.stdinFilename)] = stdinText;
  } else if (a.stdinFilename) {
    std::cerr << "shardlint: error: --stdin-filename needs the path `-`\n";
    return false;
  }
  return true;
}

// The files to lint: stdin's name, or those discovered under the paths.
DiscoveryResult findFiles(const CheckArgs& a, const FileConfig& cfg, bool fromStdin) {
  DiscoveryResult found;
  if (fromStdin) found.files = {*a.stdinFilename};
  else found = discover(a.paths, 0, cfg.markdown.value_or(true));
  return found;
}

// Says each path discovery could not follow; false when there is one.
bool reportMissingPaths(const DiscoveryResult& found) {
  for (const auto& missing : found.errors) {
    std::error_code ec;
    bool link = std::filesystem::is_symlink(missing, ec);  // a symlink loop, or one to nothing
    std::cerr << "shardlint: error: " << missing
              << (link ? ": a symlink that cannot be resolved (a loop, or its target is missing)\n"
                       : ": no such file or directory\n");
  }
  return found.errors.empty();
}

// The persistent cache of findings (analyzer/driver/ResultCache.h), like Ruff's.
void configureCache(const CheckArgs& a, const FileConfig& cfg, bool fromStdin, LintOptions& options) {
  if (!a.noCache && !fromStdin) {  // stdin's text is not a file the cache could key
    namespace fs = std::filesystem;
    if (a.cacheDir) options.cacheDir = *a.cacheDir;
    else if (const char* env = std::getenv("SHARDLINT_CACHE_DIR"); env && *env) options.cacheDir = env;
    else options.cacheDir = ((cfg.path ? cfg.path->parent_path() : fs::current_path()) / ".shardlint_cache").string();
    options.cacheKey = std::string("shardlint ") + SHARDLINT_VERSION + " " + executableFingerprint();
    options.pchCacheDir = options.cacheDir;
  }
}

// What the lint found. `internalError`: a failure outside one file's analysis (one file's is an
// SL002 finding); what was found is still written, then the run exits 101.
struct CheckFindings {
  std::vector<Diagnostic> all;
  LintStats stats;
  std::optional<std::string> internalError;
};

// Lints the files found, with SL002 for the folders that could not be listed, and applies the
// settings that act on findings.
CheckFindings lintFound(const RuleCatalog& catalog, const Linter& linter, const FileConfig& cfg,
                        const DiscoveryResult& found) {
  CheckFindings f;
  try {
    f.all = linter.lintFiles(found.files, &f.stats);
  } catch (const LintInternalError& e) {
    f.internalError = e.what();
    f.all = e.partial;
  }
  // A folder that could not be listed is skipped like an unreadable file: SL002 on its path.
  if (const RuleInfo* sl002 = catalog.find("SL002"); sl002 && linter.options().selection.enabled(*sl002))
    for (const auto& dir : found.unreadable)
      f.all.push_back(makeDiagnostic(*sl002, makeLocation(SourceFile(dir, ""), {0, 0}),
                                     "folder skipped: it cannot be read (permission denied); its files were not linted"));
  applyFindingSettings(catalog, cfg, f.all);  // per-file-ignores, then severity overrides
  return f;
}

// --baseline: the first run writes the baseline; later runs report only findings not in it. The
// exit code when the run ends here (the baseline cannot be written or read).
std::optional<int> applyBaseline(const std::string& baseline, std::vector<Diagnostic>& all) {
  namespace fs = std::filesystem;
  std::vector<std::string> prints = output::fingerprints(all);
  std::error_code ec;
  if (!fs::exists(baseline, ec)) {
    nlohmann::json doc = {{"shardlint_baseline", 1}, {"findings", nlohmann::json::array()}};
    for (size_t i = 0; i < all.size(); ++i)
      doc["findings"].push_back({{"code", all[i].code}, {"path", all[i].location.path}, {"fingerprint", prints[i]}});
    // Atomic (a temporary file renamed into place): an interrupted run leaves no half baseline.
    if (std::string err = atomicWriteFile(baseline, doc.dump(2) + "\n"); !err.empty()) {
      std::cerr << "shardlint: error: cannot write the baseline " << baseline << ": " << err << "\n";
      return kExitUsage;
    }
    std::cerr << "shardlint: wrote the baseline " << baseline << " with " << all.size()
              << (all.size() == 1 ? " finding" : " findings") << "; later runs report only new ones\n";
    all.clear();
  } else {
    nlohmann::json doc;
    try {
      std::ifstream in(baseline);
      doc = nlohmann::json::parse(in);
      if (!doc.contains("findings") || !doc["findings"].is_array()) throw std::runtime_error("no findings list");
    } catch (const std::exception& e) {
      std::cerr << "shardlint: error: " << baseline << " is not a shardlint baseline (" << e.what() << ")\n";
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
  return std::nullopt;
}

// `probe --controls`: the rules' controls are collected, so every file is analysed (a file whose
// findings come from the cache runs no rule); the probe's own cache (the self-test) stays.
void collectControls(const probe::Session* probe, LintOptions& options) {
  if (probe && probe->options().controls && probe->options().mode == "replay") {
    options.controls = std::make_shared<ControlSink>();
    options.cacheDir.clear();
  }
}

// The runtime probe on the findings, with the controls in the files given on the command line; its
// exit code (kExitClean: the report follows).
int runProbe(probe::Session& probe, const std::string& probeCacheDir, const Linter& linter,
             const DiscoveryResult& found, std::vector<Diagnostic>& all) {
  probe.setCacheDir(probeCacheDir);  // the CPU self-test's answer is kept there
  if (linter.options().controls) {
    std::vector<Diagnostic> controls = linter.options().controls->take();
    // Only controls in files given on the command line (not in modules they import).
    std::set<std::string> given(found.files.begin(), found.files.end());
    controls.erase(std::remove_if(controls.begin(), controls.end(),
                                  [&](const Diagnostic& c) { return !given.count(c.location.path); }),
                   controls.end());
    probe.setControls(std::move(controls));
  }
  return probe.run(all);
}

// The summary line's counts: the files checked, and those with findings.
output::RunSummary runSummary(const DiscoveryResult& found, const std::vector<Diagnostic>& all) {
  output::RunSummary summary;
  summary.filesChecked = found.files.size();
  std::set<std::string> withFindings;
  for (const auto& d : all) withFindings.insert(d.location.path);
  summary.filesWithFindings = withFindings.size();
  return summary;
}

// The report in the chosen format, to stdout or (--output-file) to a file written atomically; false
// (the error said) when that file cannot be written.
bool writeReport(const RuleCatalog& catalog, const CheckArgs& a, const std::vector<Diagnostic>& all,
                 const output::RunSummary& summary, probe::Session* probe, bool fromStdin,
                 const std::string& stdinText) {
  const std::string& format = a.format;
  bool quiet = a.quiet, noColor = a.noColor;
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
      return false;
    }
  }
  return true;
}

// --stats: files seen, read and parsed, the cache, bytes, time per phase, jobs and peak RSS, to stderr.
void printStats(const LintStats& stats, const LintOptions& options, Clock::time_point start,
                Clock::time_point discovered, Clock::time_point analysed) {
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::fprintf(stderr,
               "shardlint stats:\n"
               "  files seen      %zu\n  files read      %zu (pre-scan, including imported project modules%s)\n"
               "  files skipped   %zu (the pre-scan ruled them out; not parsed)\n"
               "  files analysed  %zu\n  parses          %zu (of %zu files: analysed files, project modules they pull in, "
               "config files%s)\n"
               "  summaries       %zu taken from another file's analysis\n"
               "  cache           %s\n"
               "  bytes read      %llu\n"
               "  time            discovery %.3fs, pre-scan %.3fs, analysis %.3fs, output %.3fs, total %.3fs\n"
               "  jobs            %u\n  peak RSS        %.1f MiB (allocator: %s)\n",
               stats.filesSeen, stats.filesRead,
               stats.filesKnown ? ("; " + std::to_string(stats.filesKnown) +
                                   " of them known unchanged by their size and times, not read again")
                                      .c_str()
                                : "",
               stats.filesSkipped, stats.filesAnalysed, stats.filesParsed,
               stats.filesParsedOnce,
               stats.filesParsed > stats.filesParsedOnce
                   ? ("; " + std::to_string(stats.filesParsed - stats.filesParsedOnce) +
                      " parsed again: module trees freed under the memory budget, needed later")
                         .c_str()
                   : "",
               stats.modulesShared,
               (options.cacheDir.empty() ? std::string("off (--no-cache)")
                : std::to_string(stats.cacheHits) + " of " + std::to_string(stats.filesAnalysed) +
                      " analysed files' findings from " + options.cacheDir +
                      (stats.cacheProblem.empty() ? "" : "; not written: " + stats.cacheProblem))
                   .c_str(),
               static_cast<unsigned long long>(stats.bytesRead), secs(discovered - start), stats.prescanSeconds,
               stats.analysisSeconds, secs(Clock::now() - analysed), secs(Clock::now() - start),
               options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency()),
               static_cast<double>(peakRssKb()) / 1024.0, allocatorName());
  if (stats.layoutFolders) {
    if (stats.layoutKept)
      std::fprintf(stderr, "  imports         %zu files' imports followed as the cache says (none of the %zu folder(s) it rests on changed)\n",
                   stats.importsKept, stats.layoutFolders);
    else
      std::fprintf(stderr, "  imports         resolved again (a folder of the %zu the cache's answers rest on changed since)\n",
                   stats.layoutFolders);
  }
  if (stats.importersAnalysed || stats.importersTruncated)
    std::fprintf(stderr, "  importers       %zu analysed: project files that import a linted file, for their findings in it%s\n",
                 stats.importersAnalysed, stats.importersTruncated ? " (the search's bound cut the list)" : "");
  if (!stats.slowestFiles.empty()) {
    std::fprintf(stderr, "  slowest files   (parse, the modules each loaded, analysis, rules)\n");
    for (const auto& [path, seconds] : stats.slowestFiles) std::fprintf(stderr, "    %7.3fs  %s\n", seconds, path.c_str());
  }
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

}  // namespace

// The run's steps, in order (CheckCommand.h).
int runCheck(const RuleCatalog& catalog, CheckArgs a, probe::Session* probe) {
  auto start = Clock::now();
  if (!watchFitsOptions(a, probe)) return kExitUsage;
  std::optional<FileConfig> loaded = loadCheckConfig(a);
  if (!loaded) return kExitUsage;
  const FileConfig& cfg = *loaded;
  if (a.showSettings) {
    showSettings(cfg, a);
    return kExitClean;
  }
  std::optional<LintOptions> checked = checkLintOptions(catalog, cfg, a);
  if (!checked) return kExitUsage;
  LintOptions& options = *checked;
  if (a.paths.empty()) a.paths.push_back(".");
  bool fromStdin = std::find(a.paths.begin(), a.paths.end(), "-") != a.paths.end();
  std::string stdinText;
  if (!readStdinInput(a, fromStdin, stdinText, options)) return kExitUsage;
  DiscoveryResult found = findFiles(a, cfg, fromStdin);
  auto discovered = Clock::now();
  if (!reportMissingPaths(found)) return kExitUsage;
  dropExcluded(cfg, found.files);

  configureCache(a, cfg, fromStdin, options);
  const std::string probeCacheDir = options.cacheDir;
  collectControls(probe, options);
  options.cxxFlags = a.cxxFlags;
  options.cxxMemoryBudget = size_t{a.cxxMemoryMib} << 20;
  Linter linter(catalog, std::move(options));
  CheckFindings f = lintFound(catalog, linter, cfg, found);
  if ((a.fix || a.fixOnly || a.diff) && !f.internalError) {
    std::map<std::string, std::string> texts;
    if (fromStdin) texts[*a.stdinFilename] = stdinText;
    if (std::optional<int> rc = runFixes(catalog, cfg, a, linter.options(), found.files, f.all, f.internalError, texts))
      return *rc;
  }
  if (a.baseline && !f.internalError)
    if (std::optional<int> rc = applyBaseline(*a.baseline, f.all)) return *rc;

  if (probe && !f.internalError)
    if (int rc = runProbe(*probe, probeCacheDir, linter, found, f.all); rc != kExitClean) return rc;

  output::RunSummary summary = runSummary(found, f.all);
  auto analysed = Clock::now();
  if (!writeReport(catalog, a, f.all, summary, probe, fromStdin, stdinText)) return kExitUsage;
  std::cout.flush();
  if (a.stats) printStats(f.stats, linter.options(), start, discovered, analysed);
  if (f.internalError) {
    std::cerr << "shardlint: internal error: " << *f.internalError
              << " (the findings above are those made before it; the run is incomplete)\n";
    return kExitInternal;
  }
  if (probe) return probe->exitCode(f.all);
  if (a.watch) return watchForChanges(catalog, cfg, a, linter.options(), a.paths, f.all);
  return f.all.empty() || a.exitZero ? kExitClean : kExitFindings;
}

}  // namespace shardlint
