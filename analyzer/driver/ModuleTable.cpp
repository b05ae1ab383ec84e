#include "driver/ModuleTable.h"

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <tuple>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <system_error>

#include "driver/Linter.h"
#include "driver/Project.h"

namespace shardlint {

namespace fs = std::filesystem;

ReadResult readSource(const std::string& path, const LintOptions& options) {
  uint64_t maxBytes = options.maxFileBytes;
  ReadResult r;
  if (!options.overlays.empty()) {  // an editor's unsaved buffer wins over the file
    auto it = options.overlays.find(absolutePathKey(path));
    if (it != options.overlays.end()) {
      r.text = it->second;
      r.fromOverlay = true;
      return r;
    }
  }
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) {
    r.skipped = "file skipped: unreadable (" + ec.message() + ")";
    return r;
  }
  if (size > maxBytes) {
    r.skipped = "file skipped: larger than the size limit (" + std::to_string(size) + " bytes; the limit is " +
                std::to_string(maxBytes) + " bytes)";
    return r;
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    r.skipped = std::string("file skipped: unreadable (") + (errno ? std::strerror(errno) : "cannot open it") + ")";
    return r;
  }
  // One buffer of the size the file had, then whatever it grew by since (never a copy of the whole text).
  r.text.resize(static_cast<size_t>(size));
  in.read(r.text.data(), static_cast<std::streamsize>(r.text.size()));
  r.text.resize(static_cast<size_t>(in.gcount()));
  for (char more[16384]; in && !in.eof();) {
    in.read(more, sizeof more);
    r.text.append(more, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) {
    r.text.clear();
    r.skipped = "file skipped: unreadable (read error)";
    return r;
  }
  return r;
}

std::optional<std::string> readProblem(const ReadResult& r, uint64_t maxBytes) {
  return r.skipped ? r.skipped : contentProblem(r.text, maxBytes);
}

std::optional<std::string> contentProblem(const std::string& text, uint64_t maxBytes) {
  if (text.find('\0') != std::string::npos) return "file skipped: it contains NUL bytes (binary file)";
  if (!isValidUtf8(text)) return "file skipped: it is not valid UTF-8";
  if (text.size() > maxBytes)
    return "file skipped: larger than the size limit (" + std::to_string(text.size()) + " bytes; the limit is " +
           std::to_string(maxBytes) + " bytes)";
  return std::nullopt;
}

namespace {
std::optional<int64_t> mtimeOf(const std::string& path) {
  std::error_code ec;
  auto t = fs::last_write_time(path, ec);
  if (ec) return std::nullopt;
  return static_cast<int64_t>(t.time_since_epoch().count());
}
}  // namespace

ModuleTable::ModuleTable(Config config) : config_(std::move(config)) {
  // Id 0 is no file: Origins made without a place (Origin{}) carry it, and rules then
  // point at the linted file, as they always did.
  all_.push_back(std::make_unique<Entry>());
  all_.back()->retired = true;
}
ModuleTable::~ModuleTable() = default;

const std::string& ModuleTable::keyOfLocked(const std::string& path) {
  auto it = pathKeys_.find(path);
  if (it == pathKeys_.end()) it = pathKeys_.emplace(path, absolutePathKey(path)).first;
  return it->second;
}

ModuleTable::Entry* ModuleTable::entryFor(const std::string& path) {
  // table lock held
  const std::string& key = keyOfLocked(path);
  auto it = byKey_.find(key);
  if (it != byKey_.end()) return it->second;
  auto e = std::make_unique<Entry>();
  e->path = path;
  e->key = key;
  e->id = static_cast<uint32_t>(all_.size());
  Entry* raw = e.get();
  all_.push_back(std::move(e));
  byKey_[key] = raw;
  return raw;
}

void ModuleTable::readLocked(Entry* e, const LintOptions& options, std::optional<std::string> text) {
  if (e->read) return;
  e->read = true;
  ReadResult r;
  if (text) r.text = std::move(*text);
  else r = readSource(e->path, options);
  if (!text && !r.fromOverlay) e->mtime = mtimeOf(e->path);
  if (!text) e->fromOverlay = r.fromOverlay;
  else e->fromOverlay = options.overlays.count(e->key) > 0;
  // A table that lives on (a language server) notices a change on disk by the file's time. Text handed in
  // was read from disk moments ago: its time counts when the file, read after taking it, still holds that
  // text (else the entry counts as changed at the next refresh, as it did before it had a time).
  if (text && !e->fromOverlay && !config_.retireRoots) {
    std::optional<int64_t> t = mtimeOf(e->path);
    ReadResult again = readSource(e->path, options);
    if (t && !again.skipped && !again.fromOverlay && again.text == r.text) e->mtime = t;
  }
  std::optional<std::string> problem = readProblem(r, options.maxFileBytes);
  e->hash = r.skipped ? 0 : textHash(r.text);
  if (problem) {
    e->problem = *problem;
    return;
  }
  e->readable = true;
  // A package's __init__ that imports is worth loading whatever it names: it may re-export a module
  // that does (`from .trainer import Trainer`), and `from pkg import Trainer` resolves through it.
  e->worthLoading = !config_.worthLoading || config_.worthLoading(r.text) ||
                    (fs::path(e->path).filename() == "__init__.py" && r.text.find("import") != std::string::npos);
  e->file = std::make_unique<SourceFile>(e->path, std::move(r.text));
}

bool ModuleTable::parseLocked(Entry* e, const ProjectIndex* index, const LintOptions& options) {
  if (e->parsed) return true;
  if (!e->readable || !e->problem.empty()) return false;
  thread_local syntax::Parser parser;
  auto given = options.parsedTrees.empty() ? options.parsedTrees.end()
                                           : options.parsedTrees.find(e->key);
  if (given != options.parsedTrees.end() && given->second && e->fromOverlay) {
    e->tree = syntax::Tree(ts_tree_copy(given->second));
  } else {
    e->tree = parser.parse(e->file->text);
    ++parses_;
    std::lock_guard<std::mutex> lock(mu_);
    parsedKeys_.insert(e->key);
  }
  if (!e->tree) {
    e->problem = "file skipped: the parser gave up on it";
    return false;
  }
  ProjectIndex::Module m = index ? index->moduleOf(e->path) : ProjectIndex::Module{moduleNameFor(e->path), false};
  e->module = std::make_unique<semantic::Module>(*e->file, e->tree.root(), m.name, e->id, m.isPackage);
  if (config_.outlineWant && config_.outlineWant(e->file->text)) {
    if (e->fromOverlay && !config_.retireRoots) {
      e->outlineDeferred = true;  // outlineOf() makes it from the kept tree when a config check asks
    } else {
      auto outline =
          std::make_unique<syntax::Outline>(syntax::outlineTree(e->file->text, e->tree.root(), config_.outline));
      std::lock_guard<std::mutex> lock(mu_);
      outlines_[e->key] = {e->hash, std::move(outline)};
    }
  }
  e->parsed = true;
  return true;
}

ModuleTable::Entry* ModuleTable::loadRoot(const std::string& path, const ProjectIndex* index,
                                          const LintOptions& options, std::optional<std::string> text) {
  Entry* e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = entryFor(path);
  }
  std::lock_guard<std::mutex> lock(e->mu);
  readLocked(e, options, std::move(text));
  parseLocked(e, index, options);
  return e;
}

ModuleTable::Entry* ModuleTable::readOnly(const std::string& path, const LintOptions& options,
                                          std::optional<std::string> text) {
  Entry* e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = entryFor(path);
  }
  std::lock_guard<std::mutex> lock(e->mu);
  readLocked(e, options, std::move(text));
  return e;
}

bool ModuleTable::ensureParsed(Entry* e, const ProjectIndex* index, const LintOptions& options) {
  std::lock_guard<std::mutex> lock(e->mu);
  return parseLocked(e, index, options);
}

ModuleTable::Entry* ModuleTable::loadData(const std::string& path, const LintOptions& options, const Entry* from) {
  Entry* e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = entryFor(path);
    if (from) const_cast<Entry*>(from)->deps.insert(e);
  }
  std::lock_guard<std::mutex> lock(e->mu);
  readLocked(e, options, std::nullopt);
  return e->readable && e->file ? e : nullptr;
}

ModuleTable::Entry* ModuleTable::loadModule(const std::string& path, const ProjectIndex* index,
                                            const LintOptions& options, const Entry* from) {
  for (;;) {
    Entry* e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      e = entryFor(path);
      if (from) const_cast<Entry*>(from)->deps.insert(e);
    }
    {
      std::lock_guard<std::mutex> lock(e->mu);
      readLocked(e, options, std::nullopt);
      if (!e->readable || !e->worthLoading) return nullptr;  // decided by its bytes alone
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (e->retired) continue;  // its own task just freed it: load a fresh copy
      e->pinned = true;
    }
    std::lock_guard<std::mutex> lock(e->mu);
    return parseLocked(e, index, options) ? e : nullptr;
  }
}

void ModuleTable::lease(Entry* e) {
  std::lock_guard<std::mutex> lock(e->mu);
  ++e->leases;
  e->lastUse = ++clock_;
  if (e->tree || !e->module || !e->file) return;
  thread_local syntax::Parser parser;
  e->tree = parser.parse(e->file->text);
  ++parses_;  // counted: `--stats` shows parses above distinct files when this happens
  if (e->tree) e->module->rebind(e->tree.root());
}

void ModuleTable::unlease(Entry* e) {
  std::lock_guard<std::mutex> lock(e->mu);
  --e->leases;
}

void ModuleTable::trimTrees(size_t sourceBytes, const std::function<size_t(const std::string& path)>& nextNeed) {
  std::vector<Entry*> current;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, e] : byKey_)
      if (e->pinned || e->lingering) current.push_back(e);  // other linted files' trees: finishRoot
  }
  // Entries are never deleted while the table lives; each is read under its own lock only
  // (a thread parsing holds an entry's lock, then the table's: never the other way round).
  struct Candidate {
    size_t next;       // when it is needed again (larger: freed first)
    uint64_t lastUse;  // then least recently used first
    Entry* e;
  };
  std::vector<Candidate> candidates;
  size_t live = 0;
  for (Entry* e : current) {
    std::lock_guard<std::mutex> el(e->mu);
    if (!e->tree || !e->file) continue;
    live += e->file->text.size();
    if (e->leases == 0) candidates.push_back({0, e->lastUse, e});
  }
  if (live <= sourceBytes) return;
  if (nextNeed)
    for (auto& c : candidates) c.next = nextNeed(c.e->path);
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.next != b.next ? a.next > b.next : a.lastUse < b.lastUse;
  });
  for (const auto& c : candidates) {
    if (live <= sourceBytes) break;
    std::lock_guard<std::mutex> el(c.e->mu);
    if (c.e->leases > 0 || !c.e->tree) continue;
    live -= c.e->file->text.size();
    c.e->tree = syntax::Tree();  // the Module, its definitions and their summaries stay
  }
}

void ModuleTable::retire(Entry* e, std::vector<std::shared_ptr<const semantic::Summary>>* dropped) {
  e->retired = true;
  auto it = byKey_.find(e->key);
  if (it != byKey_.end() && it->second == e) byKey_.erase(it);
  forgetSummaries(e, dropped);
}

void ModuleTable::forgetSummaries(Entry* e, std::vector<std::shared_ptr<const semantic::Summary>>* dropped) {
  for (auto& [key, cache] : caches_) cache->forget(e->module.get(), dropped);
}

void ModuleTable::finishRoot(Entry* e) {
  if (!e || !config_.retireRoots) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (e->pinned || e->retired) return;
    retire(e);
  }
  // Nothing refers to it any more: its own task ended and no task used it as a module.
  std::lock_guard<std::mutex> lock(e->mu);
  e->module.reset();
  e->tree = syntax::Tree();
  e->file.reset();
}

void ModuleTable::linger(Entry* e) {
  if (!e || !config_.retireRoots) return;  // like finishRoot: a persistent table keeps everything
  std::lock_guard<std::mutex> lock(mu_);
  if (!e->retired) e->lingering = true;
}

ModuleTable::Entry* ModuleTable::byId(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < all_.size() ? all_[id].get() : nullptr;
}

ModuleTable::Entry* ModuleTable::current(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = byKey_.find(absolutePathKey(path));
  return it == byKey_.end() ? nullptr : it->second;
}

const syntax::Outline* ModuleTable::outlineOf(const std::string& path, uint64_t* hash) const {
  std::string key = absolutePathKey(path);
  Entry* deferred = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = outlines_.find(key); it != outlines_.end()) {
      if (hash) *hash = it->second.first;
      return it->second.second.get();
    }
    if (auto it = byKey_.find(key); it != byKey_.end() && it->second->outlineDeferred) deferred = it->second;
  }
  if (!deferred) return nullptr;
  // The entry's lock before the table's, as when parsing.
  std::lock_guard<std::mutex> el(deferred->mu);
  if (!deferred->tree || !deferred->file) return nullptr;
  auto outline =
      std::make_unique<syntax::Outline>(syntax::outlineTree(deferred->file->text, deferred->tree.root(), config_.outline));
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = outlines_[key];
  if (!slot.second) slot = {deferred->hash, std::move(outline)};
  deferred->outlineDeferred = false;
  if (hash) *hash = slot.first;
  return slot.second.get();
}

const SourceFile* ModuleTable::fileById(uint32_t id) const {
  Entry* e = byId(id);
  return e ? e->file.get() : nullptr;
}

const semantic::Module* ModuleTable::moduleById(uint32_t id) const {
  Entry* e = byId(id);
  return e ? e->module.get() : nullptr;
}

semantic::SummaryCache& ModuleTable::summaries(const std::string& context) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& c = caches_[context];
  if (!c) c = std::make_unique<semantic::SummaryCache>(config_.summaryItems);
  return *c;
}

size_t ModuleTable::refresh(const LintOptions& options) {
  std::unique_lock<std::mutex> lock(mu_);
  std::set<Entry*> stale;
  for (const auto& [key, e] : byKey_) {
    if (!e->read) continue;
    auto ov = options.overlays.find(key);
    bool changed;
    // An editor buffer: compared with the text read (a byte comparison costs far less than a hash of it).
    if (ov != options.overlays.end())
      changed = !e->fromOverlay || (e->file ? ov->second != e->file->text : textHash(ov->second) != e->hash);
    else changed = e->fromOverlay || mtimeOf(e->path) != e->mtime;
    if (changed) stale.insert(e);
  }
  const std::set<Entry*> changed = stale;
  // Everything that depends on a stale entry is stale too: its summaries go. One whose own text did not change
  // keeps its text, tree and module (a module is made from its own text alone: its definitions stay, and so do
  // pointers to them), its entry and its file id; what it learnt of other modules goes (its summaries, the
  // entries it depends on, a kept analysis), to be learnt again when a task needs it.
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [key, e] : byKey_) {
      if (stale.count(e)) continue;
      for (Entry* d : e->deps)
        if (stale.count(d)) {
          stale.insert(e);
          grew = true;
          break;
        }
    }
  }
  // The stale modules' summaries are freed with the modules (below), after the edit's diagnostics are out
  // when the run has a Disposal.
  auto droppedSummaries = std::make_shared<std::vector<std::shared_ptr<const semantic::Summary>>>();
  for (Entry* e : stale) {
    if (changed.count(e)) retire(e, options.disposal ? droppedSummaries.get() : nullptr);
    else forgetSummaries(e, options.disposal ? droppedSummaries.get() : nullptr);
  }
  if (!droppedSummaries->empty()) options.disposal->keep(std::move(droppedSummaries));
  std::vector<Entry*> carried = carryOnRefresh(stale, changed);
  lock.unlock();
  std::map<Entry*, Carry> left;  // what the carried entries leave for their next lint
  auto dead = std::make_shared<Carry::Dead>();
  // What a dropped entry held, freed later when the run has a Disposal (the language server frees it after
  // the edit's diagnostics are out: a module that imports the edited file and its tree take a millisecond).
  struct Dropped {
    std::unique_ptr<SourceFile> file;
    syntax::Tree tree;
    std::unique_ptr<semantic::Module> module;  // freed first: it refers to the file and the tree
  };
  for (Entry* e : changed) {
    std::lock_guard<std::mutex> el(e->mu);
    if (!carried.empty()) leaveForCarry(e, carried, left, *dead);
    if (options.disposal && (e->module || e->tree || e->file)) {
      auto d = std::make_shared<Dropped>();
      d->file = std::move(e->file);
      d->tree = std::move(e->tree);
      d->module = std::move(e->module);
      options.disposal->keep(std::move(d));
    }
    e->module.reset();
    e->tree = syntax::Tree();
    e->file.reset();
  }
  lock.lock();
  if (!carried.empty()) finishCarry(std::move(left), dead);
  for (Entry* e : stale) {
    e->deps.clear();
    if (changed.count(e)) outlines_.erase(e->key);
  }
  return stale.size();
}

std::vector<std::pair<std::string, uint64_t>> ModuleTable::dependencyClosure(const Entry* root) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, uint64_t>> out;
  std::set<const Entry*> seen{root};
  std::vector<const Entry*> work{root};
  while (!work.empty()) {
    const Entry* e = work.back();
    work.pop_back();
    out.emplace_back(e->path, e->hash);
    for (const Entry* d : e->deps)
      if (seen.insert(d).second) work.push_back(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A folder still has the stamp taken of it after `sinceNs`. A folder changed less than a second before
// then counts as changed: a later change in the same tick of the file system's clock could keep its time.
bool folderUnchanged(const std::string& folder, const FileStamp& stamp, int64_t sinceNs) {
  if (stamp.mtime >= sinceNs - 1000000000) return false;
  auto now = ProjectIndex::folderStamp(folder);
  return now && *now == stamp;
}

// Every folder of a walk taken after `sinceNs` is unchanged (none known: a link, or it could not be
// stat'ed, is a change).
bool foldersUnchanged(const std::vector<std::pair<std::string, std::optional<FileStamp>>>& folders, int64_t sinceNs) {
  for (const auto& [folder, stamp] : folders)
    if (!stamp || !folderUnchanged(folder, *stamp, sinceNs)) return false;
  return true;
}

}  // namespace

std::optional<ModuleTable::ProjectWalk> ModuleTable::walk(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = walks_.find(dir);
  if (it == walks_.end()) return std::nullopt;
  auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - it->second.first).count() > kWalkSeconds) {
    if (!foldersUnchanged(it->second.second.folders, it->second.second.takenNs)) return std::nullopt;
    it->second.first = now;
  }
  return it->second.second;
}

void ModuleTable::storeWalk(const std::string& dir, ProjectWalk walk) {
  std::lock_guard<std::mutex> lock(mu_);
  walks_[dir] = {std::chrono::steady_clock::now(), std::move(walk)};
}

std::shared_ptr<ProjectIndex::ListingShare> ModuleTable::listings() {
  std::lock_guard<std::mutex> lock(mu_);
  return listingsLocked();
}

bool ModuleTable::listingsUnchanged() const {
  {
    std::lock_guard<std::mutex> lock(listings_->mu);
    if (!listings_->trustworthy) return false;
    for (const auto& [folder, stamp] : listings_->stamps)
      if (!folderUnchanged(folder.empty() ? std::string(".") : folder, stamp, listings_->createdNs)) return false;
  }
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  for (const auto& [key, index] : indexes_) {
    ProjectIndex::Layout layout = index->layout();  // the folders its probes looked into
    if (!layout.trustworthy || layout.cwd != cwd) return false;
    for (const auto& [folder, stamp] : layout.folders)
      if (!folderUnchanged(folder, stamp, listings_->createdNs)) return false;
  }
  return true;
}

std::shared_ptr<ProjectIndex::ListingShare> ModuleTable::listingsLocked() {
  auto now = std::chrono::steady_clock::now();
  if (listings_ && std::chrono::duration<double>(now - listingsSince_).count() > kWalkSeconds && listingsUnchanged())
    listingsSince_ = now;
  if (!listings_ || std::chrono::duration<double>(now - listingsSince_).count() > kWalkSeconds) {
    listings_ = std::make_shared<ProjectIndex::ListingShare>();
    listings_->history = listingHistory_;
    listings_->createdNs = nowNs();
    listingsSince_ = now;
    indexes_.clear();  // they rest on the listings dropped
  }
  return listings_;
}

std::shared_ptr<ProjectIndex> ModuleTable::projectIndex(const std::vector<std::string>& roots,
                                                        const std::vector<std::string>& linted) {
  // Relative spellings are read against the working folder: it is part of the key.
  std::error_code ec;
  std::string key = std::filesystem::current_path(ec).string() + "\n";
  for (const auto& r : roots) key.append("root ").append(r).push_back('\n');
  for (const auto& p : linted) key.append(p).push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<ProjectIndex::ListingShare> share = listingsLocked();
  auto it = indexes_.find(key);
  if (it != indexes_.end()) return it->second;
  constexpr size_t kMaxIndexes = 16;  // the fast pass's, the background passes' and re-checks' sets
  if (indexes_.size() >= kMaxIndexes) indexes_.clear();
  auto index = std::make_shared<ProjectIndex>(roots);
  index->addFiles(linted);
  index->shareListings(std::move(share));
  indexes_.emplace(std::move(key), index);
  return index;
}

void ModuleTable::expireWalks() {
  std::lock_guard<std::mutex> lock(mu_);
  auto past = std::chrono::steady_clock::now() - std::chrono::milliseconds(static_cast<int>(kWalkSeconds * 1000) + 1);
  for (auto& [dir, walk] : walks_) walk.first = past;
  listingsSince_ = past;
}

void ModuleTable::forgetWalks() {
  std::lock_guard<std::mutex> lock(mu_);
  walks_.clear();
  listings_.reset();
  indexes_.clear();
  ++listingHistory_->changes;  // a file created or deleted: what imports resolve to may have changed
}

size_t ModuleTable::filesParsed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return parsedKeys_.size();
}

}  // namespace shardlint
