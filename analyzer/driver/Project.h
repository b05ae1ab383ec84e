// The project model: import roots, module names of files, module lookup, and the
// byte-level import scan used by the pre-scan.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/SourceFile.h"

namespace shardlint {

// What says a file (or a folder) on disk is unchanged without reading it: its size and its modification
// and status-change times (ns); a folder's change when an entry is added, removed or renamed in it. The status-change time cannot be set by a user, so a file rewritten
// with its old size and modification time (`rsync -t`, `touch -r`) still shows as changed.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime = 0;
  int64_t ctime = 0;
  bool operator==(const FileStamp& o) const { return size == o.size && mtime == o.mtime && ctime == o.ctime; }
  bool operator!=(const FileStamp& o) const { return !(*this == o); }
};

class ProjectIndex {
 public:
  // Roots given in configuration or on the command line come first.
  explicit ProjectIndex(std::vector<std::string> extraRoots = {});

  // Registers linted files, for their spelling only (display). Import roots never come from the
  // set of linted files: a file's analysis must not depend on which other files are named.
  void addFiles(const std::vector<std::string>& paths);

  // The import roots of `fromFile`, from the file and its project alone: the extra roots, the top
  // folder of its package (walking up `__init__.py`), its own folder when it is a script outside a
  // package (Python puts it on sys.path), `src/` beside the nearest pyproject.toml / setup.py /
  // setup.cfg, and that project folder itself (else the repository's, the nearest `.git`): where an
  // installed or `python -m` run finds the project's packages.
  std::vector<std::filesystem::path> rootsFor(const std::string& fromFile) const;

  // The project a file belongs to: the nearest folder above it with a pyproject.toml, setup.py or
  // setup.cfg, else the repository's (the nearest `.git`), else none (empty).
  std::filesystem::path projectDirOf(const std::string& file) const;

  struct Module {
    std::string name;  // dotted ("pkg.sub.mod"; "pkg" for pkg/__init__.py)
    bool isPackage = false;
  };
  // The module a file defines: its package path up to the first directory without __init__.py.
  Module moduleOf(const std::string& path) const;
  // The file (as a display path) that defines a dotted module imported by `fromFile`, searching
  // rootsFor(fromFile) in order.
  std::optional<std::string> findModule(const std::string& dotted, const std::string& fromFile) const;
  // Resolves an import spelled in `fromFile` ("x.y", ".x", "..") to an absolute dotted name.
  std::optional<std::string> absoluteName(const std::string& fromFile, std::string_view spelled) const;
  // How a path is shown: as the user spelled it when it was linted, else relative to the working
  // folder (absolute when it lies outside it).
  std::string displayOf(const std::string& path) const { return display(std::filesystem::absolute(path)); }
  // The roots given in configuration or on the command line (the same for every file).
  std::vector<std::string> extraRoots() const;

  // findModule's answer as an absolute path, and how such a path is shown (findModule gives that).
  std::optional<std::string> findModuleFile(const std::string& dotted, const std::string& fromFile) const;
  std::string shown(const std::string& absolute) const { return displayKept(absolute); }

  // The layout the index's answers rest on: every folder whose entries it listed or probed for a name
  // (a package's `__init__.py`, a project's markers), by the folder's stamp taken before the look, and
  // the working folder (relative paths are read against it). While no such folder's stamp changed and
  // the working folder is the same, the answers are the same. Not `trustworthy` when a look followed a
  // symbolic link (its target can change with no folder's stamp) or a folder could not be stat'ed.
  struct Layout {
    std::string cwd;
    std::map<std::string, FileStamp> folders;
    bool trustworthy = true;
  };
  Layout layout() const;
  std::string cwd() const { return cwd_.string(); }
  // A folder's stamp as the layout keeps it: `kMissing` as its size when there is no such folder (its
  // coming would change a recorded one); none for a symbolic link or a folder that cannot be stat'ed.
  static constexpr uint64_t kMissing = ~uint64_t{0};
  static std::optional<FileStamp> folderStamp(const std::string& folder);

  // Each folder's entries by name (a regular file, a link or unknown, or something else).
  enum class Entry : char { File, Link, Other };
  using Listing = std::unordered_map<std::string, Entry>;
  // Folder listings kept beyond one index, for the indexes of the next lints to reuse (the language
  // server's edits: ModuleTable::listings). Thread-safe.
  // What the shares of one language server's session have listed so far, folder by folder: a folder
  // listed again with other entries (a module created or deleted) counts one more change.
  struct ListingHistory {
    std::mutex mu;
    std::unordered_map<std::string, std::shared_ptr<const Listing>> last;
    std::atomic<uint64_t> changes{0};
  };
  struct ListingShare {
    std::mutex mu;
    std::unordered_map<std::string, std::shared_ptr<const Listing>> listings;
    // Each listed folder's stamp, taken before it was listed; not `trustworthy` when one could not be
    // taken (a link, or it could not be stat'ed).
    std::unordered_map<std::string, FileStamp> stamps;
    bool trustworthy = true;
    int64_t createdNs = 0;  // when the share was made (ns since the epoch): every stamp was taken after
    std::shared_ptr<ListingHistory> history;  // may be null
  };
  // Listings are taken from `share` and added to it. Not with a persistent cache: a listing taken from
  // the share is not recorded in layout().
  void shareListings(std::shared_ptr<ListingShare> share) { share_ = std::move(share); }

 private:
  std::string display(const std::filesystem::path& absolute) const;

  std::filesystem::path cwd_;
  std::vector<std::filesystem::path> extra_;
  std::map<std::string, std::string> given_;  // absolute path -> the user's spelling
  mutable std::mutex mu_;
  // Per folder of an importing file: the index of its roots in rootLists_.
  mutable std::map<std::string, size_t> rootsOfDir_;
  // A deque: a list's address stays valid while others are added (findModule reads it unlocked).
  mutable std::deque<std::vector<std::filesystem::path>> rootLists_;
  mutable std::map<std::vector<std::string>, size_t> listIds_;  // a list's roots -> its index
  // Per root list (its index): dotted name -> the module's file (display path), or none.
  mutable std::deque<std::unordered_map<std::string, std::optional<std::string>>> cache_;
  // Per importing file as spelled: the index of its folder's roots (no path arithmetic per lookup).
  mutable std::unordered_map<std::string, size_t> rootsOfFile_;
  size_t rootListOf(const std::filesystem::path& dir) const;  // with mu_ held
  struct Enclosing {
    std::filesystem::path project, repository;
  };
  Enclosing enclosing(const std::string& dir) const;
  // Folder -> its Enclosing (a run asks for every file's project: four stats per folder up to the
  // repository's top, once per folder). Its own lock: rootListOf calls enclosing() with mu_ held.
  mutable std::mutex enclosingMu_;
  mutable std::unordered_map<std::string, Enclosing> enclosingOfDir_;
  mutable std::map<std::string, bool> initCache_;                  // directory -> has __init__.py
  bool hasInit(const std::filesystem::path& dir) const;
  Module computeModuleOf(const std::string& path) const;
  mutable std::mutex modulesMu_;
  mutable std::unordered_map<std::string, Module> moduleOfPath_;  // path as asked -> its module
  // Each folder's entries, listed once per run (a module's candidates are many names in few folders),
  // or taken from share_.
  mutable std::mutex filesMu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Listing>> listings_;  // folder -> its entries
  std::shared_ptr<ListingShare> share_;
  const Listing& listingOf(const std::string& folder) const;  // filesMu_ held
  // Whether `p` is a regular file (or a link to one), from its folder's listing. findModule calls it
  // without mu_.
  bool isFileKept(const std::string& p) const;
  // display() of a module file found by findModule, once per file and run (under filesMu_).
  std::string displayKept(const std::string& absolute) const;
  mutable std::unordered_map<std::string, std::string> displayed_;
  // Whether `root` has an entry `first` or `first.py` (from its listing).
  bool mayHold(const std::filesystem::path& root, const std::string& first) const;
  // Records `folder` in the layout (its stamp, the first time) before the index looks into it.
  void noteFolder(const std::string& folder) const;
  // Whether `dir/name` is a regular file (a link to one: the layout is no longer trustworthy).
  bool probeFile(const std::filesystem::path& dir, const char* name) const;
  void distrust() const;  // the layout is not trustworthy
  mutable std::mutex layoutMu_;
  mutable Layout layout_;
};

// Imported module names in a Python source, found without parsing:
// `import a.b as c` -> "a.b"; `from x.y import p, q` -> "x.y", "x.y.p", "x.y.q"
// (either may be a module); relative spellings keep their dots (".opt", "..").
std::vector<std::string> scanImports(std::string_view text);
// Whether scanImports may answer differently for `after` than for `before`, which differ only in `span`:
// when a line the edit touches (on either side) mentions `import`. scanImports reads each line alone.
bool importLinesDiffer(std::string_view before, std::string_view after, const ChangedSpan& span);

}  // namespace shardlint
