#include "driver/Importers.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include "core/Parallel.h"
#include "driver/Linter.h"
#include "driver/ModuleTable.h"

namespace shardlint {

namespace {

bool mentionsAny(const std::string& text, const std::set<std::string>& words) {
  for (const auto& w : words)
    if (text.find(w) != std::string::npos) return true;
  return false;
}

// The word an import of the module `path` defines must spell: its last dotted component
// ("trainer" for pkg/trainer.py, "pkg" for pkg/__init__.py).
std::string moduleWord(const ProjectIndex& index, const std::string& path) {
  std::string name = index.moduleOf(path).name;
  auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

std::optional<std::vector<std::string>> ImportScanCache::importsMentioning(const std::string& path,
                                                                          const std::set<std::string>& words,
                                                                          const LintOptions& options) {
  if (!options.overlays.empty() && options.overlays.count(absolutePathKey(path))) {  // an open buffer
    ReadResult r = readSource(path, options);
    if (!mentionsAny(r.text, words)) return std::nullopt;
    return scanImports(r.text);
  }
  auto stamp = PrescanCache::statOf(path);
  if (!stamp || stamp->size > options.maxFileBytes) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(path);
    if (it != entries_.end() && it->second.stamp == *stamp) {
      const Entry& e = it->second;
      if (e.imports) return e.imports;
      bool known = true;
      for (const auto& w : words) known = known && e.absent.count(w);
      if (known) return std::nullopt;
    }
  }
  ReadResult r = readSource(path, options);
  if (r.skipped || contentProblem(r.text, options.maxFileBytes)) return std::nullopt;
  std::optional<std::vector<std::string>> imports;
  if (mentionsAny(r.text, words)) imports = scanImports(r.text);
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[path];
  if (e.stamp != *stamp) e = Entry{*stamp, std::nullopt, {}};
  if (imports) e.imports = imports;
  else e.absent.insert(words.begin(), words.end());
  return imports;
}

std::optional<FileStamp> PrescanCache::statOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  auto ns = [](const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
  return FileStamp{static_cast<uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

std::optional<PrescanCache::Entry> PrescanCache::find(const std::string& path, const FileStamp& stamp,
                                                      const std::string& words) {
  std::lock_guard<std::mutex> lock(mu_);
  if (words != words_) return std::nullopt;
  auto it = entries_.find(path);
  if (it == entries_.end() || it->second.stamp != stamp) return std::nullopt;
  return it->second;
}

uint64_t PrescanCache::hashOf(const std::string& path, const FileStamp& stamp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(path);
  return it == entries_.end() || it->second.stamp != stamp ? 0 : it->second.hash;
}

void PrescanCache::storeResolved(const std::string& path, const FileStamp& stamp,
                                 std::vector<std::pair<std::string, bool>> resolved) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(path);
  if (it == entries_.end() || it->second.stamp != stamp) return;
  it->second.resolved = std::move(resolved);
  ++stores_;
}

std::optional<PrescanCache::ConfigFacts> PrescanCache::configFacts(const std::string& path, const FileStamp& stamp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = configFacts_.find(path);
  if (it == configFacts_.end() || it->second.first != stamp) return std::nullopt;
  return it->second.second;
}

void PrescanCache::storeConfigFacts(const std::string& path, const FileStamp& stamp, ConfigFacts facts) {
  std::lock_guard<std::mutex> lock(mu_);
  configFacts_[path] = {stamp, std::move(facts)};
}

std::optional<std::vector<PrescanCache::LaunchTarget>> PrescanCache::launchTargets(const std::string& path,
                                                                                  const FileStamp& stamp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = launchTargets_.find(path);
  if (it == launchTargets_.end() || it->second.first != stamp) return std::nullopt;
  return it->second.second;
}

void PrescanCache::storeLaunchTargets(const std::string& path, const FileStamp& stamp, std::vector<LaunchTarget> targets) {
  std::lock_guard<std::mutex> lock(mu_);
  launchTargets_[path] = {stamp, std::move(targets)};
}

void PrescanCache::dropResolved() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [path, e] : entries_)
    if (e.resolved) {
      e.resolved.reset();
      ++stores_;
    }
}

std::map<std::string, PrescanCache::Entry> PrescanCache::snapshot(std::string* words) {
  std::lock_guard<std::mutex> lock(mu_);
  *words = words_;
  return entries_;
}

void PrescanCache::restore(std::string words, std::map<std::string, Entry> entries) {
  std::lock_guard<std::mutex> lock(mu_);
  words_ = std::move(words);
  entries_ = std::move(entries);
  overlays_.clear();
  stores_ = 0;
}

void PrescanCache::useWordsLocked(const std::string& words) {
  if (words == words_) return;
  entries_.clear();
  overlays_.clear();
  words_ = words;
}

void PrescanCache::store(const std::string& path, Entry e, const std::string& words) {
  ++stores_;
  std::lock_guard<std::mutex> lock(mu_);
  useWordsLocked(words);
  entries_[path] = std::move(e);
}

std::shared_ptr<const PrescanCache::OverlayMask> PrescanCache::overlay(const std::string& key, const std::string& words) {
  std::lock_guard<std::mutex> lock(mu_);
  if (words != words_) return nullptr;
  auto it = overlays_.find(key);
  return it == overlays_.end() ? nullptr : it->second;
}

void PrescanCache::keepOverlays(const std::map<std::string, std::string>& open) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = overlays_.begin(); it != overlays_.end();)
    it = open.count(it->first) ? std::next(it) : overlays_.erase(it);
}

void PrescanCache::storeOverlay(const std::string& key, std::shared_ptr<const OverlayMask> m, const std::string& words) {
  std::lock_guard<std::mutex> lock(mu_);
  useWordsLocked(words);
  overlays_[key] = std::move(m);
}

ImportersFound findImporters(const ProjectIndex& index, const std::vector<std::string>& targets,
                             const std::vector<std::string>& candidates, const LintOptions& options,
                             ImportScanCache& cache, unsigned jobs, ImporterSearch bounds) {
  ImportersFound out;
  std::set<std::string> taken;  // absolute keys of targets and files found
  std::vector<std::string> frontier;
  for (const auto& t : targets)
    if (taken.insert(absolutePathKey(t)).second) frontier.push_back(t);
  std::vector<std::string> pool;  // candidates, sorted, not linted
  for (const auto& c : candidates)
    if (!taken.count(absolutePathKey(c))) pool.push_back(c);
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  for (int depth = 1; depth <= bounds.maxDepth && !frontier.empty() && !pool.empty(); ++depth) {
    std::set<std::string> words, frontierKeys;
    for (const auto& f : frontier) {
      std::string w = moduleWord(index, f);
      if (!w.empty()) words.insert(w);
      frontierKeys.insert(absolutePathKey(f));
    }
    if (words.empty()) break;
    std::vector<char> imports(pool.size(), 0);
    std::atomic<bool> stopped{false};
    parallelFor(pool.size(), jobs, [&](size_t k) {
      if (stopped) return;
      if (options.interrupted && k % 8 == 0 && options.interrupted()) {  // new input: the search gives way
        stopped = true;
        return;
      }
      try {
        auto spelled = cache.importsMentioning(pool[k], words, options);
        if (!spelled) return;
        for (const auto& s : *spelled) {
          auto name = index.absoluteName(pool[k], s);
          if (!name) continue;
          auto file = index.findModule(*name, pool[k]);
          if (file && frontierKeys.count(absolutePathKey(*file))) {
            imports[k] = 1;
            return;
          }
        }
      } catch (const std::exception&) {  // (out of memory): this candidate is not an importer
      }
    });
    if (stopped) throw LintInterrupted();
    std::vector<std::string> found, rest;
    for (size_t k = 0; k < pool.size(); ++k) (imports[k] ? found : rest).push_back(pool[k]);
    if (out.files.size() + found.size() > bounds.maxFiles) {
      found.resize(bounds.maxFiles - out.files.size());
      out.truncated = true;
    }
    out.files.insert(out.files.end(), found.begin(), found.end());
    if (out.truncated) break;
    frontier = std::move(found);
    pool = std::move(rest);
  }
  return out;
}

}  // namespace shardlint
