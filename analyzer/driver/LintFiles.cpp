// The project run (Linter::lintFiles): the byte pre-scan (which files matter to which rules, what
// they import, the importers of linted files), configuration files read first, one analysis task per
// relevant file on a thread pool over one module table (trees retired and trimmed under a budget,
// the persistent cache of findings), then the configuration checks with the project facts, C++ units,
// and the findings sorted and de-duplicated.
// lintFilesInto is one function of about 575 lines whose phases share its locals (the scanned files,
// the tasks and their retirement counts); it was moved here whole, not cut up.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/Parallel.h"
#include "config/Markdown.h"
#include "core/WordSet.h"
#include "driver/CxxLint.h"
#include "driver/Discovery.h"
#include "driver/Importers.h"
#include "driver/LinterImpl.h"
#include "driver/Project.h"
#include "driver/ResultCache.h"

namespace shardlint {

std::vector<Diagnostic> Linter::lintFiles(const std::vector<std::string>& paths, LintStats* statsOut,
                                          ModuleTable* persistent) const {
  std::vector<Diagnostic> all;
  try {
    lintFilesInto(paths, statsOut, persistent, all);
  } catch (const LintInterrupted&) {
    throw;
  } catch (const std::exception& e) {
    // Not one file's failure (those are SL002 findings): the run failed. What was found so far
    // goes with the error, for the caller to write before it reports it.
    try {
      finalizeDiagnostics(all);
    } catch (const std::exception&) {
      all.clear();
    }
    throw LintInternalError(e.what(), std::move(all));
  }
  return all;
}

std::vector<std::unique_ptr<Rule>> selectedRules(const RuleCatalog& catalog, const LintOptions& options) {
  std::vector<std::unique_ptr<Rule>> rules;
  for (auto& r : catalog.makeRules())
    if (options.selection.enabled(r->info())) rules.push_back(std::move(r));
  return rules;
}

PythonWords::PythonWords(const std::vector<std::unique_ptr<Rule>>& rules, const RuleCatalog& catalog,
                         const LintOptions& options) {
  for (const auto& r : rules) {
    auto groups = pythonPrescan(*r);
    if (!groups) continue;
    if (groups->empty()) alwaysRelevant = true;
    std::vector<uint64_t> masks;
    for (const auto& g : *groups) {
      uint64_t m = 0;
      for (auto w : g) {
        auto it = std::find(words.begin(), words.end(), w);
        size_t bit = static_cast<size_t>(it - words.begin());
        if (it == words.end()) words.push_back(w);
        if (bit < 64) m |= uint64_t{1} << bit;
      }
      masks.push_back(m);
    }
    ruleGroups.push_back(std::move(masks));
  }
  if (catalog.factWords) extraWords = catalog.factWords(options.settingsFacts);
  wordSet_.emplace(words);
  for (auto w : words) longest_ = std::max(longest_, w.size());
}

uint64_t PythonWords::maskAfterEdit(std::string_view before, uint64_t beforeMask, std::string_view after,
                                   const ChangedSpan* span) const {
  if (!extraWords.empty()) return mask(after);
  const ChangedSpan c = span ? *span : changedSpan(before, after);
  if (c.begin == before.size() && c.begin == after.size()) return beforeMask;
  // A word's occurrence that touches the changed bytes lies within `reach` bytes of them; every other one is
  // in the common prefix or suffix, on both sides.
  const size_t reach = longest_ > 0 ? longest_ - 1 : 0, from = c.begin > reach ? c.begin - reach : 0;
  std::string_view was = before.substr(from, std::min(before.size(), c.oldEnd + reach) - from);
  std::string_view is = after.substr(from, std::min(after.size(), c.newEnd + reach) - from);
  if (was.size() + is.size() > after.size() / 4) return mask(after);
  const uint64_t gone = wordSet_->scan(was), come = wordSet_->scan(is);
  uint64_t out = (beforeMask & ~gone) | come;
  for (uint64_t m = beforeMask & gone & ~come; m; m &= m - 1) {  // seen near the edit before only: elsewhere?
    size_t i = static_cast<size_t>(__builtin_ctzll(m));
    if (i < words.size() && after.find(words[i]) != std::string_view::npos) out |= uint64_t{1} << i;
  }
  return out;
}

uint64_t PythonWords::mask(std::string_view text) const {
  uint64_t m = wordSet_->scan(text);
  for (const auto& w : extraWords)
    if (text.find(w) != std::string_view::npos) m = ~uint64_t{0};
  return m;
}

std::function<uint64_t(std::string_view)> Linter::prescanMask() const {
  struct Words {
    std::vector<std::unique_ptr<Rule>> rules;  // PythonWords' words are theirs
    std::optional<PythonWords> words;
  };
  auto w = std::make_shared<Words>();
  w->rules = selectedRules(catalog_, options_);
  w->words.emplace(w->rules, catalog_, options_);
  return [w](std::string_view text) { return w->words->mask(text); };
}

void Linter::lintFilesInto(const std::vector<std::string>& paths, LintStats* statsOut, ModuleTable* persistent,
                           std::vector<Diagnostic>& all) const {
  using Clock = std::chrono::steady_clock;
  LintStats stats;
  stats.filesSeen = paths.size();
  auto t0 = Clock::now();
  // Files modified from two seconds before the run's start on are not trusted by their stamp in a
  // later run (ResultCache::save).
  const int64_t trustBefore = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count() -
                              int64_t{2000000000};
  const RuleInfo* sl002 = catalog_.find("SL002");
  bool reportSkips = sl002 && options_.selection.enabled(*sl002);

  // ---- pre-scan: bytes only. Which words each file mentions, and what it imports.
  std::vector<std::unique_ptr<Rule>> rules = selectedRules(catalog_, options_);
  const PythonWords prescan(rules, catalog_, options_);
  const std::vector<std::string_view>& words = prescan.words;
  const std::vector<std::string>& extraWords = prescan.extraWords;
  auto maskOf = [&](std::string_view text) { return prescan.mask(text); };

  // Configuration files take their own, simpler path; launch scripts are only read for links.
  std::vector<std::string> pyPaths, launchPaths, configPaths, cxxPaths, markdownPaths;
  for (const auto& p : paths) {
    if (isConfigPath(p)) configPaths.push_back(p);
    else if (isMarkdownPath(p)) markdownPaths.push_back(p);
    else if (isCxxPath(p)) cxxPaths.push_back(p);
    else if (isLaunchPath(p)) launchPaths.push_back(p);
    else pyPaths.push_back(p);
  }
  // The language server's lints share an index (its lookups made once) while its folder listings are
  // kept (ModuleTable::projectIndex); a run of its own makes one.
  std::shared_ptr<ProjectIndex> sharedIndex = persistent ? persistent->projectIndex(options_.roots, pyPaths) : nullptr;
  std::optional<ProjectIndex> ownIndex;
  if (!sharedIndex) ownIndex.emplace(options_.roots).addFiles(pyPaths);
  ProjectIndex& index = sharedIndex ? *sharedIndex : *ownIndex;
  const std::string cwd = index.cwd();  // the working folder, for absolutePathKey
  // The persistent cache: findings of files whose text and dependencies are unchanged, and the
  // stamps of the files the pre-scan read (a file whose stamp is unchanged is not read again).
  std::unique_ptr<ResultCache> cache;
  if (!options_.cacheDir.empty() && !persistent) {
    std::string key = options_.cacheKey + "\n" + options_.selection.describe() + "\nmax " +
                      std::to_string(options_.maxFileBytes) + (options_.reportUnusedNoqa ? " noqa" : "") + "\n";
    for (const auto& [k, v] : options_.settingsFacts) key += k + "=" + v + "\n";
    // Not the linted set: import roots come from each file and its project (one answer per file), and
    // a finding an importer makes in a file is never cached (the importer is analysed on every run).
    for (const auto& r : index.extraRoots()) key += "root " + r + "\n";
    cache = std::make_unique<ResultCache>(options_.cacheDir, key);
    cache->load();
  }
  // The pre-scan cache (the language server's, or the persistent cache's stamps), and what its masks
  // mean (the words, in bit order; for a configuration or Markdown file, bit 0: ConfigMentions).
  PrescanCache* prescans = persistent ? &persistent->prescans() : cache ? &cache->stamps() : nullptr;
  std::string prescanWords;
  for (auto w : words) prescanWords.append(w).push_back('\n');
  for (const auto& w : extraWords) prescanWords.append("+").append(w).push_back('\n');
  for (auto w : catalog_.configWords) prescanWords.append("config ").append(w).push_back('\n');
  ConfigMentions mentions(prescans, prescanWords, options_);
  // Configuration files are read and parsed first (their facts configure the scripts);
  // their checks run after the Python analysis, with the project facts.
  std::vector<ConfigDoc> configDocs;
  std::map<std::string, Facts> configFacts;  // absolute path -> facts
  // A configuration or Markdown file's text, or none: not ours to report (skipped, binary, too large), or
  // unchanged since a run that found it mentions no word the config rules need (then it is not read).
  auto readConfigText = [&](const std::string& p, bool markdown) -> std::optional<std::string> {
    ++stats.filesRead;
    std::optional<FileStamp> stamp = mentions.stampOf(p);
    if (mentions.knownQuiet(p, stamp)) {
      ++stats.filesKnown;
      ++stats.filesSkipped;
      return std::nullopt;
    }
    ReadResult r = readSource(p, options_);
    if (r.skipped || contentProblem(r.text, options_.maxFileBytes)) return std::nullopt;
    stats.bytesRead += r.text.size();
    bool mentioned = (!markdown || config::mayHaveFences(r.text)) && mentionsConfigWord(r.text);
    mentions.remember(p, stamp, r.text.size(), mentioned);
    return std::move(r.text);
  };
  for (const auto& p : configPaths) {
    std::optional<std::string> text = readConfigText(p, false);
    if (!text) continue;
    Facts f;
    try {  // a failure parsing one configuration file is SL002 for it
      if (auto doc = readConfig(p, std::move(*text), stats, &f)) configDocs.push_back(std::move(*doc));
    } catch (const std::exception& e) {
      if (reportSkips) all.push_back(skippedDiagnostic(*sl002, p, stoppedWhy(e)));
      continue;
    }
    if (!f.empty()) configFacts[absolutePathKey(p)] = std::move(f);
  }
  // Markdown files: the configs their fenced blocks document, checked like configuration files (they
  // configure no script).
  for (const auto& p : markdownPaths) {
    std::optional<std::string> text = readConfigText(p, true);
    if (!text) continue;
    try {
      for (auto& doc : readMarkdown(p, *text, stats, all)) configDocs.push_back(std::move(doc));
    } catch (const std::exception& e) {
      if (reportSkips) all.push_back(skippedDiagnostic(*sl002, p, stoppedWhy(e)));
    }
  }
  // The launch scripts and configuration files of each linted Python file's project (one answer per
  // file: a script's config must not depend on which other files are named).
  std::map<std::string, ProjectFiles> projects;
  {
    std::set<std::string> dirs;
    for (const auto& p : pyPaths)
      if (auto d = index.projectDirOf(p); !d.empty()) dirs.insert(d.string());
    // A project larger than this is not searched (its scripts get only the configs named or linked by
    // the named launch scripts).
    constexpr size_t kMaxProjectEntries = 20000;
    // The language server's table keeps each walk for a few seconds (ModuleTable::walk).
    for (const auto& d : dirs) {
      std::optional<ModuleTable::ProjectWalk> walk;
      if (persistent) walk = persistent->walk(d);
      if (!walk) {
        int64_t takenNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
        DiscoveryResult found = discover({d}, kMaxProjectEntries);
        walk.emplace();
        walk->truncated = found.truncated;
        walk->folders = std::move(found.folders);
        walk->takenNs = takenNs;
        if (!found.truncated)
          for (auto& f : found.files) {
            if (isLaunchPath(f)) walk->files.launch.push_back(std::move(f));
            else if (isConfigPath(f)) walk->files.configs.push_back(std::move(f));
            else if (!isCxxPath(f)) walk->files.python.push_back(std::move(f));
          }
        if (persistent) persistent->storeWalk(d, *walk);
      }
      if (!walk->truncated) projects[d] = std::move(walk->files);
    }
  }
  std::map<std::string, Facts> linked = linkConfigs(launchPaths, std::move(configFacts), &all, projects, &mentions);
  struct Scanned {
    std::string path;
    std::string text;
    bool linted = false;
    bool importer = false;  // not linted: analysed for the findings it makes in linted files
    bool ok = false;
    uint64_t mask = 0;
    // A linted file whose stamp the persistent cache knows: not read by the pre-scan (`text` is
    // empty); `hash` is its content hash, and its text is read only if its analysis must run.
    bool deferred = false;
    uint64_t hash = 0;
    std::vector<size_t> imports;
    // Its own ancestor packages it imports from (`from . import x`), when they are linted or
    // imported too: left out of the relevance closure (`imports`), but its analysis may run
    // their code, so they count when deciding how long a tree is kept.
    std::vector<size_t> ancestors;
    int depth = 0;  // import steps from the nearest linted file
  };
  std::vector<Scanned> scanned;
  std::unordered_map<std::string, size_t> byPath;  // path as scanned -> its index (looked up, never walked)
  for (const auto& p : pyPaths) {
    if (byPath.count(p)) continue;
    byPath[p] = scanned.size();
    scanned.push_back({p, "", true, false, false, 0, false, 0, {}, {}, 0});
  }
  // One answer per file: the project's files that import a linted file (and those that import them)
  // are analysed too, for the findings their flow makes in linted files (a class's file whose methods
  // a driver script calls in a telling order). Only files the run does not lint; bounded.
  unsigned jobs = options_.jobs ? options_.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::unique_ptr<ImportScanCache> ownScans;
  ImportScanCache& scans = persistent ? persistent->importScans() : *(ownScans = std::make_unique<ImportScanCache>());
  std::map<std::string, std::string> lintedSpelling;  // absolute key -> the path as linted
  for (const auto& p : pyPaths) lintedSpelling.emplace(absolutePathKey(p), p);
  if (options_.importers) {
    std::vector<std::string> candidates;
    for (const auto& [dir, pf] : projects) candidates.insert(candidates.end(), pf.python.begin(), pf.python.end());
    ImportersFound importers = findImporters(index, pyPaths, candidates, options_, scans, jobs);
    stats.importersTruncated = importers.truncated;
    for (const auto& found : importers.files) {
      std::string f = index.displayOf(found);
      if (byPath.count(f)) continue;
      byPath[f] = scanned.size();
      scanned.push_back({f, "", false, true, false, 0, false, 0, {}, {}, 0});
    }
  }
  constexpr size_t kMaxExtraFiles = 4000;
  // Breadth first, a wave per import level: each wave's files are read, masked and scanned for
  // imports on `jobs` threads, then their imports are resolved in order (the same order, and so
  // the same result, as one file at a time).
  struct Read {
    ReadResult r;
    std::optional<std::string> problem;
    std::vector<std::string> imports;  // as spelled
    size_t bytes = 0;                  // read from disk
    bool known = false;                // its pre-scan facts came from a stamp
    std::optional<FileStamp> stat;     // its stamp, when the pre-scan cache keeps its facts
    std::optional<std::vector<std::pair<std::string, bool>>> resolved;  // the last run's, by its stamp
  };
  // The import resolution the persistent cache keeps (per file, with its stamp) rests on the project
  // layout of that run: reused while no folder of it changed (one stat each, on `jobs` threads).
  bool layoutKept = false;
  if (cache && cache->layout() && cache->layout()->trustworthy && cache->layout()->cwd == index.cwd()) {
    std::vector<std::pair<const std::string*, const FileStamp*>> folders;
    for (const auto& [folder, st] : cache->layout()->folders) folders.emplace_back(&folder, &st);
    std::atomic<bool> same{true};
    parallelFor(folders.size(), jobs, [&](size_t k) {
      if (!same.load(std::memory_order_relaxed)) return;
      auto now = ProjectIndex::folderStamp(*folders[k].first);
      if (!now || *now != *folders[k].second) same = false;
    });
    layoutKept = same;
    stats.layoutFolders = folders.size();
    stats.layoutKept = layoutKept;
  }
  // Else every kept answer is forgotten: one left for a file this run does not resolve would be taken
  // by a later run whose layout (this run's) it does not rest on.
  if (cache && !layoutKept) prescans->dropResolved();
  if (persistent) prescans->keepOverlays(options_.overlays);  // a closed document's last text is let go
  // The open documents' last names: absolutePathKey keeps a path's last name when it is a plain one, so a
  // scanned path whose last name is plain and none of these is no document, without working out its key.
  std::unordered_set<std::string_view> overlayNames;
  for (const auto& entry : options_.overlays) overlayNames.insert(lastNameOf(entry.first));
  auto mayBeOverlay = [&](const std::string& path) {
    if (options_.overlays.empty()) return false;
    std::string_view name = lastNameOf(path);
    return name.empty() || name == "." || name == ".." || overlayNames.count(name) > 0;
  };
  for (size_t first = 0; first < scanned.size();) {
    size_t last = scanned.size();
    std::vector<Read> reads(last - first);
    parallelFor(reads.size(), jobs, [&](size_t k) {
      Scanned& sc = scanned[first + k];
      Read& rd = reads[k];
      try {
        bool wantText = sc.linted || sc.importer;
        // A file on disk seen unchanged (by the language server's table, or in the persistent cache's
        // stamps): its mask and imports are known; read only when its text is analysed.
        std::optional<FileStamp> stat;
        const std::string overlayKey = mayBeOverlay(sc.path) ? absolutePathKey(sc.path, cwd) : std::string();
        const bool overlaid = !overlayKey.empty() && options_.overlays.count(overlayKey) > 0;
        if (prescans && !overlaid) stat = PrescanCache::statOf(sc.path);
        std::optional<PrescanCache::Entry> known;
        if (stat) known = prescans->find(sc.path, *stat, prescanWords);
        if (known && sc.depth < 2 && !known->hasImports) known.reset();  // its imports are wanted now
        // With the persistent cache, a linted file's findings may come from it by its hash alone.
        if (known && cache && sc.linted && known->hash) {
          sc.deferred = true;
          sc.hash = known->hash;
          wantText = false;
        }
        if (!known || wantText) {
          rd.r = readSource(sc.path, options_);
          rd.problem = readProblem(rd.r, options_.maxFileBytes);
          if (rd.problem) return;
        }
        if (known) {
          rd.bytes = rd.r.text.size();
          rd.known = true;
          rd.stat = stat;
          sc.mask = known->mask;
          if (sc.depth < 2) {
            rd.imports = known->imports;
            if (layoutKept) rd.resolved = std::move(known->resolved);
          }
          return;
        }
        rd.bytes = rd.r.text.size();
        if (overlaid && persistent) {  // an open document: its mask and imports from its last ones, across the edit
          auto last = prescans->overlay(overlayKey, prescanWords);
          auto now = std::make_shared<PrescanCache::OverlayMask>();
          now->text = rd.r.text;
          if (last) {
            ChangedSpan span = changedSpan(last->text, now->text);
            now->mask = prescan.maskAfterEdit(last->text, last->mask, now->text, &span);
            if (last->hasImports && !importLinesDiffer(last->text, now->text, span)) {
              now->imports = last->imports;
              now->hasImports = true;
            }
          } else {
            now->mask = maskOf(now->text);
          }
          if (sc.depth < 2 && !now->hasImports) {
            now->imports = scanImports(now->text);
            now->hasImports = true;
          }
          sc.mask = now->mask;
          if (sc.depth < 2) rd.imports = now->imports;
          prescans->storeOverlay(overlayKey, std::move(now), prescanWords);
        } else {
          sc.mask = maskOf(rd.r.text);
          if (sc.depth < 2) rd.imports = scanImports(rd.r.text);
        }
        if (stat && stat->size == rd.bytes) {
          rd.stat = stat;
          prescans->store(sc.path,
                          PrescanCache::Entry{*stat, sc.mask, sc.depth < 2, rd.imports, textHash(rd.r.text)},
                          prescanWords);
        }
        if (!wantText) rd.r.text = std::string();  // only its mask and imports were wanted
      } catch (const std::exception& e) {  // (out of memory): this file is skipped, not the run
        rd = Read{};
        rd.problem = std::string("file skipped: ") + e.what();
      }
    });
    for (size_t i = first; i < last; ++i) {
      Read& rd = reads[i - first];
      ++stats.filesRead;
      if (rd.problem) {
        if (scanned[i].linted && reportSkips) all.push_back(skippedDiagnostic(*sl002, scanned[i].path, *rd.problem));
        continue;
      }
      stats.bytesRead += rd.bytes;
      stats.filesKnown += rd.known;
      scanned[i].ok = true;
      // Imports: for the relevance closure (two levels: only linted files' and their imports'
      // imports are needed), and to know which files others import.
      auto follow = [&](const std::string& file, bool ancestor) {
        std::string shown = index.shown(file);
        if (ancestor) {
          if (auto at = byPath.find(shown); at != byPath.end() && at->second != i) scanned[i].ancestors.push_back(at->second);
          return;
        }
        auto [it, fresh] = byPath.emplace(shown, scanned.size());
        if (fresh) {
          if (scanned.size() >= pyPaths.size() + kMaxExtraFiles) {
            byPath.erase(it);
            return;
          }
          scanned.push_back({shown, "", false, false, false, 0, false, 0, {}, {}, scanned[i].depth + 1});
        }
        if (it->second != i) scanned[i].imports.push_back(it->second);
      };
      if (rd.resolved) {
        ++stats.importsKept;
        for (const auto& [file, ancestor] : *rd.resolved) follow(file, ancestor);
      } else {
        std::vector<std::pair<std::string, bool>> resolved;
        std::string ownModule = rd.imports.empty() ? std::string() : index.moduleOf(scanned[i].path).name;
        for (const auto& spelled : rd.imports) {
          auto name = index.absoluteName(scanned[i].path, spelled);
          if (!name) continue;
          auto file = index.findModuleFile(*name, scanned[i].path);
          if (!file) continue;
          // A module's own ancestor packages (`import torch` inside torch/nn/...) say nothing about
          // which rules matter to this file; following them would make a whole library relevant.
          bool ancestor = ownModule.size() > name->size() && ownModule.compare(0, name->size(), *name) == 0 &&
                          ownModule[name->size()] == '.';
          resolved.emplace_back(*file, ancestor);
        }
        for (const auto& [file, ancestor] : resolved) follow(file, ancestor);
        if (cache && rd.stat && scanned[i].depth < 2) prescans->storeResolved(scanned[i].path, *rd.stat, std::move(resolved));
      }
      if (scanned[i].linted || scanned[i].importer) scanned[i].text = std::move(rd.r.text);
    }
    first = last;
  }
  // Words reachable through imports, two levels deep: a file's own helpers, and what a
  // package's __init__ or a helper re-exports. Deeper chains are library plumbing; following
  // them all makes a whole library relevant (every torch module imports its siblings).
  std::vector<uint64_t> closure(scanned.size());
  for (size_t i = 0; i < scanned.size(); ++i) closure[i] = scanned[i].mask;
  for (int level = 0; level < 2; ++level) {
    std::vector<uint64_t> next = closure;
    for (size_t i = 0; i < scanned.size(); ++i)
      for (size_t j : scanned[i].imports) next[i] |= closure[j];
    closure = std::move(next);
  }
  auto relevant = [&](uint64_t mask) {
    if (prescan.alwaysRelevant) return true;
    for (const auto& groups : prescan.ruleGroups) {
      bool all = true;
      for (uint64_t g : groups) all = all && (mask & g) != 0;
      if (all) return true;
    }
    return false;
  };
  // Reads the text of a file the pre-scan deferred (it may have changed since): its text and hash, or
  // why it cannot be analysed now.
  auto loadDeferred = [&](Scanned& sc) -> std::optional<std::string> {
    ReadResult r = readSource(sc.path, options_);
    if (auto problem = readProblem(r, options_.maxFileBytes)) return problem;
    sc.text = std::move(r.text);
    sc.hash = textHash(sc.text);
    sc.deferred = false;
    return std::nullopt;
  };
  std::vector<size_t> tasks;
  std::vector<const Facts*> taskFacts;
  std::vector<std::unique_ptr<Facts>> taskFactStore;
  for (size_t i = 0; i < scanned.size(); ++i) {
    if (!(scanned[i].linted || scanned[i].importer) || !scanned[i].ok) continue;
    if (scanned[i].linted && !options_.lintedFiles) continue;
    auto f = linked.find(absolutePathKey(scanned[i].path, cwd));
    if (f == linked.end()) f = linked.find("");
    if (f == linked.end()) {
      auto dir = index.projectDirOf(scanned[i].path);
      f = linked.find(dir.empty() ? std::string("named") : "project:" + dir.string());
    }
    const Facts* facts = f == linked.end() ? nullptr : &f->second;
    if (!options_.settingsFacts.empty()) {  // merged into a per-task copy
      Facts merged = facts ? *facts : Facts{};
      for (const auto& [k, v] : options_.settingsFacts) merged.emplace(k, v);
      taskFactStore.push_back(std::make_unique<Facts>(std::move(merged)));
      facts = taskFactStore.back().get();
    }
    facts = withRequirements(scanned[i].path, facts, taskFactStore);
    // A script the facts (a linked config, settings) apply to is relevant when it names their words.
    bool configured = false;
    if (!relevant(closure[i]) && facts && catalog_.factWords) {
      std::vector<std::string> factWords = catalog_.factWords(*facts);
      if (!factWords.empty() && scanned[i].deferred)
        if (auto problem = loadDeferred(scanned[i])) {
          if (reportSkips) all.push_back(skippedDiagnostic(*sl002, scanned[i].path, *problem));
          scanned[i].ok = false;
          continue;
        }
      for (const auto& w : factWords) configured = configured || scanned[i].text.find(w) != std::string::npos;
    }
    if (relevant(closure[i]) || configured) {
      tasks.push_back(i);
      taskFacts.push_back(facts);
    }
    else {
      if (scanned[i].linted) ++stats.filesSkipped;
      std::string().swap(scanned[i].text);  // not analysed: its text is not needed again
    }
  }
  auto t1 = Clock::now();
  if (options_.interrupted && options_.interrupted()) throw LintInterrupted();  // before the analysis

  // ---- analysis: one task per relevant linted file, in parallel, over one module table.
  std::unique_ptr<ModuleTable> ownTable;
  ModuleTable* table = persistent;
  if (table) table->refresh(options_);
  else {
    ModuleTable::Config config = tableConfig(true);
    if (configDocs.empty()) config.outlineWant = nullptr;  // no config rule needs project facts
    table = (ownTable = std::make_unique<ModuleTable>(std::move(config))).get();
  }
  size_t parsesBefore = table->parses();
  std::string rootsKey;
  for (const auto& r : index.extraRoots()) rootsKey += r + "\n";  // the rest comes from each file alone
  // Source bytes of module trees kept between tasks (a tree is about 21x its text). On the dense
  // corpus at -j2, since objects keep their rarely set fields apart: 1.375 MB, 990-992 parses of 990
  // files at 125-128 MiB peak; 1.5 MB, 990 in every run at 129-134 MiB; 1.75 MB, 136-139 MiB;
  // scripts/bench/README.md, "Where the memory goes".
  constexpr size_t kModuleTreeBudget = size_t{3} << 19;  // 1.5 MB
  std::mutex hashMu;
  std::map<std::string, uint64_t> hashes;
  auto hashOf = [&](const std::string& path) -> uint64_t {
    {
      std::lock_guard<std::mutex> lock(hashMu);
      if (auto it = hashes.find(path); it != hashes.end()) return it->second;
    }
    if (prescans && !(mayBeOverlay(path) && options_.overlays.count(absolutePathKey(path, cwd))))  // a known stamp
      if (auto stat = PrescanCache::statOf(path))
        if (uint64_t known = prescans->hashOf(path, *stat)) {
          std::lock_guard<std::mutex> lock(hashMu);
          return hashes[path] = known;
        }
    ReadResult r = readSource(path, options_);
    uint64_t h = r.skipped || contentProblem(r.text, options_.maxFileBytes) ? 0 : textHash(r.text);
    std::lock_guard<std::mutex> lock(hashMu);
    return hashes[path] = h;
  };
  struct ToStore {
    uint64_t hash = 0;
    std::string facts;
    std::vector<std::pair<std::string, uint64_t>> deps;
    bool ready = false;
  };
  std::vector<ToStore> toStore(tasks.size());
  std::atomic<size_t> cacheHits{0};
  // Trees of linted files: freed when the file's own task and every task of a file that
  // imports it (per the pre-scan) have ended, unless some task used it as a module (then
  // shared summaries may point into it, and it stays for the run). A file some rule could
  // load as a module also waits for the tasks of files that import a package importing it (a
  // package __init__ re-exporting it); meanwhile its tree may be freed under the budget.
  std::mutex retireMu;
  // What a file's analysis may run: its imports and the ancestor packages it imports from.
  std::vector<std::vector<size_t>> uses(scanned.size());
  for (size_t i = 0; i < scanned.size(); ++i) {
    uses[i] = scanned[i].imports;
    uses[i].insert(uses[i].end(), scanned[i].ancestors.begin(), scanned[i].ancestors.end());
  }
  std::vector<int> pendingImporters(scanned.size(), 0);
  std::vector<char> ownDone(scanned.size(), 0);
  for (size_t i : tasks)
    for (size_t j : uses[i]) ++pendingImporters[j];
  // For each module, the tasks (their positions, ascending) whose files import it, directly or
  // through other project modules: a summary inlined in such a task's analysis may need the
  // module's tree again, so trimming frees first the trees needed again latest. An estimate:
  // the walk from one task stops after kReachLimit modules, and all walks after kNeedLimit
  // entries (a module beyond them only loses priority).
  constexpr size_t kReachLimit = 4096, kNeedLimit = size_t{1} << 21;
  std::vector<std::vector<uint32_t>> neededBy(scanned.size());
  {
    std::vector<size_t> seen(scanned.size(), 0), stack;
    size_t entries = 0;
    for (size_t t = 0; t < tasks.size() && entries < kNeedLimit; ++t) {
      size_t visited = 0;
      stack.assign(1, tasks[t]);
      seen[tasks[t]] = t + 1;
      while (!stack.empty() && visited < kReachLimit) {
        size_t j = stack.back();
        stack.pop_back();
        ++visited;
        neededBy[j].push_back(static_cast<uint32_t>(t));
        for (size_t k : uses[j])
          if (seen[k] != t + 1) seen[k] = t + 1, stack.push_back(k);
      }
      entries += visited;
    }
  }
  // For each task, the modules the packages its file imports import (`from .impl import f` in a
  // package __init__): its calls reach them through the re-export.
  std::vector<std::vector<uint32_t>> reexported(tasks.size());
  std::vector<int> pendingReexports(scanned.size(), 0);
  {
    std::vector<size_t> seen(scanned.size(), 0);
    auto isPackage = [&](size_t m) { return std::filesystem::path(scanned[m].path).filename() == "__init__.py"; };
    for (size_t t = 0; t < tasks.size(); ++t)
      for (size_t m : uses[tasks[t]])
        if (isPackage(m))
          for (size_t j : uses[m])
            if (seen[j] != t + 1) {
              seen[j] = t + 1;
              reexported[t].push_back(static_cast<uint32_t>(j));
              ++pendingReexports[j];
            }
  }
  std::vector<size_t> taskOf(scanned.size(), SIZE_MAX);
  for (size_t t = 0; t < tasks.size(); ++t) taskOf[tasks[t]] = t;
  std::atomic<size_t> next{0};  // the next task to start
  auto maybeRetire = [&](size_t j) {  // retireMu held
    if (!ownDone[j] || pendingImporters[j] > 0) return;
    ModuleTable::Entry* e = table->current(scanned[j].path);
    if (!e) return;
    if (pendingReexports[j] > 0 && e->readable && e->worthLoading) table->linger(e);  // a later task may load it
    else table->finishRoot(e);
  };
  auto taskEnded = [&](size_t i) {
    {
      std::lock_guard<std::mutex> lock(retireMu);
      ownDone[i] = 1;
      maybeRetire(i);
      for (size_t j : uses[i])
        if (--pendingImporters[j] == 0) maybeRetire(j);
      for (uint32_t j : reexported[taskOf[i]])
        if (--pendingReexports[j] == 0) maybeRetire(j);
    }
    // Trees of modules no task holds now, beyond a budget, are freed (parsed again if needed).
    if (!persistent)
      table->trimTrees(kModuleTreeBudget, [&](const std::string& path) -> size_t {
        auto it = byPath.find(path);
        if (it == byPath.end()) return SIZE_MAX;
        // Tasks start in order, at most `jobs` at a time: those from `running` on may still need it.
        size_t started = next.load(), running = started > jobs ? started - jobs : 0;
        const auto& need = neededBy[it->second];
        auto at = std::lower_bound(need.begin(), need.end(), running);
        return at == need.end() ? SIZE_MAX : *at;
      });
  };
  std::vector<std::vector<Diagnostic>> results(tasks.size());
  std::vector<size_t> shared(tasks.size(), 0), carried(tasks.size(), 0), arms(tasks.size(), 0), direct(tasks.size(), 0);
  std::vector<double> taskSeconds(tasks.size(), 0.0);
  std::atomic<bool> failed{false};  // an error outside one file's analysis: the run stops
  std::atomic<bool> interrupted{false};  // options_.interrupted said stop
  std::string failure;
  std::mutex failureMu;
  auto stopRun = [&](size_t t, const char* what) {  // the shared tables themselves failed
    std::lock_guard<std::mutex> lock(failureMu);
    failed = true;
    try {
      failure = scanned[tasks[t]].path + ": " + what;
    } catch (...) {  // no memory left even for the message
    }
  };
  // A failure while analysing file t (out of memory, a limit, a bug the file's code reaches) stops
  // that file's analysis, not the run: SL002 for the file, which keeps none of its partial findings
  // (nor a cache entry), and the other tasks go on.
  auto containFailure = [&](size_t t, const std::exception* e) {
    try {
      results[t].clear();
      toStore[t] = ToStore{};
      if (reportSkips)
        results[t].push_back(skippedDiagnostic(*sl002, scanned[tasks[t]].path,
                                               e ? stoppedWhy(*e) : "analysis stopped: unknown exception"));
      taskEnded(tasks[t]);
    } catch (const std::exception& again) {
      stopRun(t, again.what());
    }
  };
  // An importer's findings: those located in linted files, under the path as linted (so that they
  // merge with the file's own).
  auto keepInLinted = [&](std::vector<Diagnostic>& found) {
    std::vector<Diagnostic> kept;
    for (auto& d : found) {
      auto it = lintedSpelling.find(absolutePathKey(d.location.path, cwd));
      if (it == lintedSpelling.end()) continue;
      d.location.path = it->second;
      kept.push_back(std::move(d));
    }
    found = std::move(kept);
  };
  auto worker = [&] {
    for (;;) {
      size_t t = next.fetch_add(1);
      if (t >= tasks.size() || failed || interrupted) return;
      if (options_.interrupted && options_.interrupted()) {
        interrupted = true;
        return;
      }
      bool ended = false;  // taskEnded ran: a failure after it is not this file's
      try {
        // Summaries are shared by the tasks with the same facts and import roots.
        std::string facts;
        if (taskFacts[t])
          for (const auto& [k, v] : *taskFacts[t]) facts += k + "=" + v + "\n";
        std::string context = rootsKey + facts;
        Scanned& s = scanned[tasks[t]];
        uint64_t hash = 0;
        bool cached = cache && s.linted;  // an importer's findings are kept only where they are in linted files
        if (cached) {
          hash = s.deferred ? s.hash : textHash(s.text);
          if (auto hit = cache->lookup(s.path, hash, facts, hashOf)) {
            results[t] = std::move(*hit);
            ++cacheHits;
            ended = true;
            taskEnded(tasks[t]);
            continue;
          }
        }
        bool masked = !s.deferred && extraWords.empty();  // the pre-scan's mask is of this text, words only
        if (s.deferred) {  // not read by the pre-scan: read now
          if (auto problem = loadDeferred(s)) {
            if (reportSkips) results[t].push_back(skippedDiagnostic(*sl002, s.path, *problem));
            ended = true;
            taskEnded(tasks[t]);
            continue;
          }
          hash = s.hash;
        }
        auto started = Clock::now();
        Task task(catalog_, options_, &index, *table, taskFacts[t], &table->summaries(context));
        bool awaited;
        {
          std::lock_guard<std::mutex> lock(retireMu);
          awaited = pendingImporters[tasks[t]] > 0;
        }
        if (!awaited) task.setNotImported();
        if (s.importer) task.setNoCarry();
        if (masked) task.setOwnWords(s.mask, &words);
        results[t] = task.run(s.path, std::move(s.text));
        if (s.importer) keepInLinted(results[t]);
        shared[t] = task.sharedHits();
        carried[t] = task.seededHits();
        arms[t] = task.armsCarried();
        direct[t] = task.directRuns();
        taskSeconds[t] = std::chrono::duration<double>(Clock::now() - started).count();
        if (cached) toStore[t] = ToStore{hash, facts, table->dependencyClosure(task.root()), true};
        ended = true;
        taskEnded(tasks[t]);
      } catch (const std::exception& e) {
        if (ended) stopRun(t, e.what());
        else containFailure(t, &e);
      } catch (...) {
        if (ended) stopRun(t, "unknown exception");
        else containFailure(t, nullptr);
      }
    }
  };
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(1, tasks.size())));
  if (jobs <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned j = 0; j < jobs; ++j) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }
  if (interrupted) throw LintInterrupted();
  if (cache && !failed) {
    for (size_t t = 0; t < tasks.size(); ++t)
      if (toStore[t].ready)
        cache->store(scanned[tasks[t]].path, toStore[t].hash, toStore[t].facts, std::move(toStore[t].deps), results[t]);
    stats.cacheHits = cacheHits;
  }
  {
    std::vector<size_t> order(tasks.size());
    for (size_t t = 0; t < order.size(); ++t) order[t] = t;
    size_t keep = std::min(order.size(), LintStats::kSlowestFiles);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](size_t a, size_t b) { return taskSeconds[a] > taskSeconds[b]; });
    for (size_t k = 0; k < keep && taskSeconds[order[k]] > 0; ++k)
      stats.slowestFiles.emplace_back(scanned[tasks[order[k]]].path, taskSeconds[order[k]]);
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    stats.modulesShared += shared[t];
    stats.summariesCarried += carried[t];
    stats.armsCarried += arms[t];
    stats.directRuns += direct[t];
    for (auto& d : results[t]) all.push_back(std::move(d));
  }
  if (failed) throw std::runtime_error(failure);  // with the other files' findings in `all`
  // ---- configuration checks, with the facts of the project's Python code (its classes,
  // the models it loads), from each file's one parse (outlines kept by the table).
  if (!configDocs.empty()) {
    Facts projectFacts;
    if (catalog_.projectFacts) {
      std::vector<ProjectFile> files;
      std::deque<syntax::Outline> fromCache;  // outlines the cache had (stable addresses)
      for (const auto& p : pyPaths) {
        uint64_t hash = 0;
        if (const syntax::Outline* o = table->outlineOf(p, &hash)) {  // parsed for the analysis
          if (cache) cache->storeOutline(p, hash, *o);
          files.push_back(ProjectFile{p, o});
          continue;
        }
        ModuleTable::Entry* e = table->readOnly(p, options_);
        if (!e->readable || e->parsed || !catalog_.projectFactsWant || !catalog_.projectFactsWant(e->file->text))
          continue;
        if (cache)
          if (auto o = cache->outline(p, e->hash)) {  // a warm run: no parse
            fromCache.push_back(std::move(*o));
            files.push_back(ProjectFile{p, &fromCache.back()});
            continue;
          }
        table->ensureParsed(e, &index, options_);
        table->finishRoot(e);  // only its outline was wanted
        const syntax::Outline* o = table->outlineOf(p);
        if (cache && o) cache->storeOutline(p, e->hash, *o);
        files.push_back(ProjectFile{p, o});
      }
      projectFacts = catalog_.projectFacts(files);
    }
    for (auto& doc : configDocs) {
      std::vector<Diagnostic> found;
      std::vector<std::unique_ptr<Facts>> configFactStore;  // this file's copy, freed after its checks
      try {  // a failure in one configuration file's checks is SL002 for it, as for a Python file
        // The project's code facts, with the dependencies declared for the file's folder.
        checkConfig(doc, found, withRequirements(doc.file->path, &projectFacts, configFactStore));
      } catch (const std::exception& e) {
        found.clear();
        if (reportSkips) found.push_back(skippedDiagnostic(*sl002, doc.file->path, stoppedWhy(e)));
      }
      for (auto& d : found) all.push_back(std::move(d));
    }
  }
  if (cache) {
    // The layout this run's resolution rests on (with the kept one's folders, when its answers were used).
    ProjectIndex::Layout layout = index.layout();
    if (layoutKept && layout.trustworthy)
      for (const auto& [folder, st] : cache->layout()->folders) layout.folders.emplace(folder, st);
    cache->setLayout(layout.trustworthy ? std::optional<ProjectIndex::Layout>(std::move(layout)) : std::nullopt);
    stats.cacheProblem = cache->save(trustBefore);
  }
  // C++ translation units (their own frontend; not cached).
  lintCxx(catalog_, options_, cxxPaths, all, stats);
  stats.filesParsed += table->parses() - parsesBefore;
  // Re-parses: a freed tree needed again (a race between a file's own task and another's use of it).
  stats.filesParsedOnce = stats.filesParsed - (persistent ? 0 : table->parses() - table->filesParsed());
  for (size_t i : tasks) (scanned[i].linted ? stats.filesAnalysed : stats.importersAnalysed) += 1;
  finalizeDiagnostics(all);
  auto t2 = Clock::now();
  stats.prescanSeconds = std::chrono::duration<double>(t1 - t0).count();
  stats.analysisSeconds = std::chrono::duration<double>(t2 - t1).count();
  if (statsOut) *statsOut = stats;
}

}  // namespace shardlint
