// The project's modules as one run (or a language server session) sees them: each
// file is read and parsed at most once, indexed once (semantic::Module), and its
// pure summaries are shared by every analysis task and thread (one SummaryCache per
// call-model context). Entries are created on demand (a linted file, or a module a
// call resolves into) and are immutable once loaded.
//
// Memory: in a one-shot run a linted file that no other task used as a module is freed
// when its own task and its importers' tasks end (or lingers while later tasks may load it,
// its tree under the budget); modules used by others stay for the run, their trees under
// the budget (trimTrees).
// A language server keeps everything and, before each run, drops the entries whose
// text changed, and the summaries of every entry that depends on them (refresh()).
#pragma once
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "driver/Discovery.h"
#include "driver/Importers.h"
#include "semantic/ModuleIndex.h"
#include "semantic/Summaries.h"
#include "syntax/Outline.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {
class FileAnalysis;
}

namespace shardlint {

class ProjectIndex;
struct LintOptions;

// Reads a file for linting (an editor overlay wins); `skipped` says why it was not read (SL002 text).
struct ReadResult {
  std::string text;
  std::optional<std::string> skipped;
  bool fromOverlay = false;
};
ReadResult readSource(const std::string& path, const LintOptions& options);
// Why text cannot be analysed (NUL bytes, not UTF-8, too large), if it cannot.
std::optional<std::string> contentProblem(const std::string& text, uint64_t maxBytes);
// Why a read cannot be analysed: it was skipped, or contentProblem of its text.
std::optional<std::string> readProblem(const ReadResult& r, uint64_t maxBytes);

class ModuleTable final : public semantic::ModuleLookup {
 public:
  struct Config {
    // Free a linted file's tree after its task when no other task used it (one-shot runs).
    bool retireRoots = true;
    // Objects and events the shared summaries of each call-model context may hold (SummaryCache).
    size_t summaryItems = semantic::SummaryCache::kMaxItems;
    // Whether a file is worth loading as a module (mentions a word some rule needs).
    std::function<bool(std::string_view)> worthLoading;
    // Outline every parsed file whose bytes `outlineWant` accepts (project facts for config rules).
    bool (*outlineWant)(std::string_view) = nullptr;
    syntax::OutlineRequest outline;
  };

  struct Entry {
    std::string path;  // as the linter spells it
    std::string key;   // absolutePathKey(path)
    uint32_t id = 0;   // the file id Origins use
    // Set by load, then immutable until retired.
    bool read = false, readable = false, parsed = false, retired = false;
    std::string problem;  // why it is not readable / not parsed (SL002 text)
    std::unique_ptr<SourceFile> file;
    // Written under `mu` when the file is read, which is again after its tree was freed under the budget;
    // read under the table's lock by dependencyClosure (the results cache's key): atomic, not a race.
    std::atomic<uint64_t> hash{0};
    bool fromOverlay = false;
    std::optional<int64_t> mtime;  // of the file on disk when read
    bool worthLoading = false;
    // Its outline (config.outlineWant) is made on the first outlineOf(): an editor buffer in a table that
    // keeps every tree (retireRoots false), parsed again on each edit, while no config check asks for it.
    bool outlineDeferred = false;
    syntax::Tree tree;
    std::unique_ptr<semantic::Module> module;
    // Guarded by the table: used as a module by some task (never retired in a run),
    // and the entries its code resolved into (what its facts depend on).
    bool pinned = false;
    // A linted file whose task ended, kept because later tasks may load it as a module: its
    // tree is freed under the budget like a module's (trimTrees), the rest waits for finishRoot.
    bool lingering = false;
    std::set<Entry*> deps;
    // Tasks whose interpretation may read the tree now (guarded by `mu`), and when it was last
    // leased (for freeing the least recently used trees first).
    int leases = 0;
    uint64_t lastUse = 0;
    std::mutex mu;  // serialises reading and parsing
  };

  explicit ModuleTable(Config config);
  ~ModuleTable() override;
  ModuleTable(const ModuleTable&) = delete;
  ModuleTable& operator=(const ModuleTable&) = delete;

  // The entry of `path`, read (and parsed) at most once. `text`: the bytes when the caller
  // already read them. A tree already parsed for exactly that text (the language
  // server's incremental parse, found in options.parsedTrees). Never null: `parsed` says
  // whether it could be read and parsed, `problem` why not.
  Entry* loadRoot(const std::string& path, const ProjectIndex* index, const LintOptions& options,
                  std::optional<std::string> text = std::nullopt);
  // The module at `path` for a call resolved into it from `from`, or null when it is not
  // worth loading (names no word a rule needs), unreadable or unparsable. Records the dependency.
  Entry* loadModule(const std::string& path, const ProjectIndex* index, const LintOptions& options,
                    const Entry* from);
  // A data file (a YAML config) the code of `from` reads: read (never parsed) at most once, the
  // dependency recorded even when it does not exist (its creation changes `from`'s results).
  // Null when `path` cannot be read.
  Entry* loadData(const std::string& path, const LintOptions& options, const Entry* from);
  // Reads `path` (no parse) for its text only: the pre-scan and project facts.
  Entry* readOnly(const std::string& path, const LintOptions& options, std::optional<std::string> text = std::nullopt);
  // Parses an entry already read (for its outline), counted like any parse.
  bool ensureParsed(Entry* e, const ProjectIndex* index, const LintOptions& options);
  // A task is about to read the entry's tree: parsed again if it was freed (the same text
  // gives the same tree; Module::rebind keeps every definition), and kept until unlease().
  void lease(Entry* e);
  void unlease(Entry* e);
  // Frees the trees of modules no task holds until the trees left stand for at most
  // `sourceBytes` bytes of source (a tree takes about 20x its text). The one needed again
  // latest goes first (`nextNeed`: an estimate of when, in task starts; SIZE_MAX for never),
  // as in Belady's cache policy; then the least recently used.
  void trimTrees(size_t sourceBytes, const std::function<size_t(const std::string& path)>& nextNeed = {});
  // A linted file's task ended: free its tree unless another task uses it as a module.
  void finishRoot(Entry* e);
  // A linted file's task ended, but a later task may still load it as a module: its tree
  // may be freed under the budget (trimTrees) until finishRoot.
  void linger(Entry* e);
  Entry* byId(uint32_t id) const;
  // The current entry of `path` (null when none was created or it was dropped).
  Entry* current(const std::string& path) const;
  // The outline of `path` made when it was parsed (config.outlineWant; an editor buffer's, now),
  // kept after its tree is freed; `hash` gets the content hash of the text it was made from.
  const syntax::Outline* outlineOf(const std::string& path, uint64_t* hash = nullptr) const;
  const SourceFile* fileById(uint32_t id) const override;
  const semantic::Module* moduleById(uint32_t id) const override;
  // The summaries shared by tasks whose call model and import roots are described by `context`.
  semantic::SummaryCache& summaries(const std::string& context);
  // Language server: drops entries whose text changed (overlay or file on disk), and the summaries of every
  // entry that depends on them; such an entry keeps its text, tree and module (its definitions) when its own
  // text did not change. Returns how many entries lost their summaries.
  size_t refresh(const LintOptions& options);
  // Language server (a table that keeps its roots): the pure summaries of its own functions that the task of
  // the linted file `root` used, for the next analysis of that file (driver/ModuleTableCarry.cpp). Kept
  // while `root` is current. When refresh() drops `root` because its own text changed (and nothing it
  // depends on did), they are kept for one more lint, with the old text, tree and module they belong to.
  // Also keeps the file's analysis (`analysis`, which recorded its arms: FileAnalysis::recordArms) for the
  // next analysis of the file to take the arms an edit left as they were. Returns the analysis this one
  // replaces, for the caller to free off the critical path.
  // `listingChanges`: listingChanges() before the analysis began (a change the analysis itself saw
  // makes the next one start afresh).
  std::shared_ptr<const semantic::FileAnalysis> keepSummaries(
      Entry* root, const semantic::SummaryCache* context, std::vector<std::shared_ptr<const semantic::Summary>> summaries,
      std::shared_ptr<const semantic::FileAnalysis> analysis, uint64_t listingChanges);
  // How many times the project's folders were seen to change (ProjectIndex::ListingHistory).
  uint64_t listingChanges() const { return listingHistory_->changes.load(); }
  // Whether keepSummaries keeps anything (a language server's table; not a one-shot run's).
  bool keepsAnalyses() const { return !config_.retireRoots; }
  // Seeds `session`, the task of `root` under `context`, with the kept summaries that still hold: all of
  // them when `root` is the entry they came from; after an edit, those of the functions it left unchanged
  // whose summaries depend on nothing it changed, moved onto the new text; `root` then also depends on what
  // they were made from. `analysis` (the new analysis of `root`, not yet run) is seeded with the kept
  // analysis when the edit left the module's own statements as they were (FileAnalysis::seedArms).
  void seedSummaries(Entry* root, const semantic::SummaryCache* context, semantic::Session& session,
                     const LintOptions& options, semantic::FileAnalysis* analysis = nullptr);
  // Paths (with content hashes) of `root` and everything its facts depend on, transitively.
  std::vector<std::pair<std::string, uint64_t>> dependencyClosure(const Entry* root) const;
  size_t parses() const { return parses_.load(); }
  // Distinct files parsed (equal to parses() unless a freed tree had to be parsed again).
  size_t filesParsed() const;
  // What the search for a linted file's importers learnt of each project file (driver/Importers.h),
  // kept as long as the table (a language server's session).
  ImportScanCache& importScans() { return importScans_; }
  // What the pre-scan learnt of each file on disk (driver/Importers.h), kept as long as the table.
  PrescanCache& prescans() { return prescans_; }
  // The project walks of the language server's lints (driver/LintFiles.cpp): a project folder's files
  // by kind, or `truncated` when the walk stopped at its bound. Kept for kWalkSeconds, or until
  // forgetWalks() (the server calls it when the client reports files changed on disk): a file created
  // or deleted meanwhile shows when the folder is walked again.
  struct ProjectWalk {
    bool truncated = false;
    ProjectFiles files;
    std::vector<std::pair<std::string, std::optional<FileStamp>>> folders;  // DiscoveryResult::folders
    int64_t takenNs = 0;  // when the walk began (ns since the epoch)
  };
  // After kWalkSeconds a walk, and the listings and project indexes, are checked against the stamps of the
  // folders they looked into (a stat each): kept for another while when none changed, else made again.
  static constexpr double kWalkSeconds = 2.0;
  std::optional<ProjectWalk> walk(const std::string& dir);
  void storeWalk(const std::string& dir, ProjectWalk walk);
  // Folder listings for the next lints' project indexes (import resolution), under the same rule as
  // the walks: a share lives kWalkSeconds from its first use, and forgetWalks() drops it.
  std::shared_ptr<ProjectIndex::ListingShare> listings();
  // A project index for a lint of `linted` with these extra roots, shared by the lints that name the same
  // files while the listings are kept (it lists through them): its lookups (a module's file, a file's
  // module and project, how a path is shown) are made once, not on every edit.
  std::shared_ptr<ProjectIndex> projectIndex(const std::vector<std::string>& roots,
                                             const std::vector<std::string>& linted);
  void forgetWalks();
  // Ages the kept walks and listings past kWalkSeconds: their next use checks the folders' stamps (tests).
  void expireWalks();

 private:
  std::shared_ptr<ProjectIndex::ListingShare> listingsLocked();  // listings(), table lock held
  // No folder the listings or the indexes looked into changed since (table lock held; listings_ set).
  bool listingsUnchanged() const;
  // The current entry of `path`, made when there is none (table lock held).
  Entry* entryFor(const std::string& path);
  // absolutePathKey(path), computed once per spelling (table lock held): module paths come spelled
  // relative to the working folder, and the same ones are looked up on every call that reaches them.
  const std::string& keyOfLocked(const std::string& path);
  void readLocked(Entry* e, const LintOptions& options, std::optional<std::string> text);
  bool parseLocked(Entry* e, const ProjectIndex* index, const LintOptions& options);
  // Table lock held by the caller. `dropped`: where the summaries of its module go, to be freed later
  // (null: freed here).
  void retire(Entry* e, std::vector<std::shared_ptr<const semantic::Summary>>* dropped = nullptr);
  // Drops the summaries of `e`'s module from every context (table lock held; `dropped` as for retire).
  void forgetSummaries(Entry* e, std::vector<std::shared_ptr<const semantic::Summary>>* dropped);
  // refresh(), what becomes of the kept summaries when `stale` entries are dropped, `changed` of them for
  // their own text: carryOnRefresh (table lock held) drops those that no longer hold and returns the entries
  // whose summaries go on; leaveForCarry (the entry's lock held) takes from each of those what its summaries
  // were made from, and notes what every changed module defined; finishCarry (table lock) keeps them.
  struct Carry {
    Entry* from = nullptr;
    const semantic::SummaryCache* context = nullptr;
    std::vector<std::shared_ptr<const semantic::Summary>> summaries;
    std::shared_ptr<const semantic::FileAnalysis> analysis;
    uint64_t listingChanges = 0;  // listingHistory_->changes when kept
    // Set when `from` was dropped for its own edit: what its summaries were made from, until the next refresh.
    bool moved = false;
    std::unique_ptr<SourceFile> file;
    syntax::Tree tree;
    std::unique_ptr<semantic::Module> module;
    std::set<Entry*> deps;  // `from`'s (none of them dropped)
    // The definitions and file ids of the modules dropped in that refresh for a change of their text (one that
    // only depends on a changed one keeps its definitions and file id).
    struct Dead {
      std::unordered_set<const void*> defs;
      std::set<uint32_t> files;
    };
    std::shared_ptr<const Dead> dead;
  };
  std::vector<Entry*> carryOnRefresh(const std::set<Entry*>& stale, const std::set<Entry*>& changed);
  static void leaveForCarry(Entry* e, const std::vector<Entry*>& carried, std::map<Entry*, Carry>& left,
                            Carry::Dead& dead);
  void finishCarry(std::map<Entry*, Carry> left, const std::shared_ptr<const Carry::Dead>& dead);

  Config config_;
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<Entry>> all_;  // by id
  std::map<std::string, Entry*> byKey_;     // absolute path -> current entry
  std::unordered_map<std::string, std::string> pathKeys_;  // keyOfLocked
  std::map<std::string, std::unique_ptr<semantic::SummaryCache>> caches_;
  std::map<std::string, Carry> carries_;  // by absolute path key (keepSummaries)
  // absolute path -> (content hash, outline)
  mutable std::map<std::string, std::pair<uint64_t, std::unique_ptr<syntax::Outline>>> outlines_;
  std::atomic<size_t> parses_{0};
  std::atomic<uint64_t> clock_{0};
  std::set<std::string> parsedKeys_;
  ImportScanCache importScans_;
  PrescanCache prescans_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, ProjectWalk>> walks_;  // under mu_
  std::shared_ptr<ProjectIndex::ListingShare> listings_;                                       // under mu_
  std::map<std::string, std::shared_ptr<ProjectIndex>> indexes_;  // projectIndex(), dropped with listings_
  // The folders the listings saw change (or the client reported files created or deleted): a kept
  // summary or analysis made before may rest on imports that resolve otherwise now.
  std::shared_ptr<ProjectIndex::ListingHistory> listingHistory_ = std::make_shared<ProjectIndex::ListingHistory>();
  std::chrono::steady_clock::time_point listingsSince_;
};

}  // namespace shardlint
