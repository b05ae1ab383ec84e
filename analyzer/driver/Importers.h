// One answer per file, from the other side: the project's files that import a linted file.
//
// A finding may be located in a file whose own code never runs the order that shows it: a trainer
// class whose `__init__` builds the optimizer and whose `setup()` wraps the model, driven by a script
// that calls them in that order. Linting the whole project finds it (the script's analysis runs the
// class's methods); linting the class's file alone (pre-commit, the editor) must find it too. So the
// driver also analyses the project's files that import a linted file (and the files that import
// those), keeping only the findings located in linted files.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "driver/Project.h"

namespace shardlint {

struct LintOptions;

// What the importer search learnt of each file, kept between runs by the language server (so that
// an edit costs a stat per project file, not a read): its size and modification time, its imports
// once scanned, and the module words it was read for and found not to mention.
class ImportScanCache {
 public:
  struct Entry {
    FileStamp stamp;
    std::optional<std::vector<std::string>> imports;  // as spelled (scanImports)
    std::set<std::string> absent;                     // words the text does not contain
  };
  // The imports of `path` when its text mentions one of `words`, else none. Reads the file (or its
  // overlay, which is never cached) only when what is kept cannot answer. Thread-safe.
  std::optional<std::vector<std::string>> importsMentioning(const std::string& path, const std::set<std::string>& words,
                                                            const LintOptions& options);

 private:
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

struct ImporterSearch {
  // Bounds: import steps from a linted file, and files found in all. The nearest come first (then
  // by path), so the bound is deterministic.
  int maxDepth = 2;
  size_t maxFiles = 16;
};

// What the pre-scan learnt of a file on disk: which of its words it mentions, what it imports and
// its content hash. Kept by the language server's module table between lints, and by the persistent
// cache between command-line runs (ResultCache::stamps), and reused while the file's stamp is
// unchanged and the words are the same; open buffers are never kept.
class PrescanCache {
 public:
  struct Entry {
    FileStamp stamp;
    uint64_t mask = 0;
    bool hasImports = false;           // `imports` was scanned (files near a linted one only)
    std::vector<std::string> imports;  // as spelled (scanImports)
    uint64_t hash = 0;                 // textHash of the text; 0 when not computed
    // Where its imports led (after `imports` was scanned): per import that names a project module, the
    // module's file (absolute) and whether it is one of the file's own ancestor packages. An answer of
    // the ProjectIndex, so good only while its layout is unchanged (ResultCache::layout).
    std::optional<std::vector<std::pair<std::string, bool>>> resolved;
  };
  // The stamp of the regular file `path`, or none when it cannot be stat'ed.
  static std::optional<FileStamp> statOf(const std::string& path);
  std::optional<Entry> find(const std::string& path, const FileStamp& stamp, const std::string& words);
  // The content hash kept for `path` with this stamp, whatever the words; 0 when none.
  uint64_t hashOf(const std::string& path, const FileStamp& stamp);
  void store(const std::string& path, Entry e, const std::string& words);
  // Sets the `resolved` of `path`'s entry, when it has this stamp.
  void storeResolved(const std::string& path, const FileStamp& stamp, std::vector<std::pair<std::string, bool>> resolved);
  // Forgets every `resolved` (the layout they rest on changed, or is not known).
  void dropResolved();
  // For the persistent cache: every entry with the words its masks mean, and the reverse.
  std::map<std::string, Entry> snapshot(std::string* words);
  void restore(std::string words, std::map<std::string, Entry> entries);
  // store() calls since the last restore().
  size_t stores() const { return stores_.load(); }
  // The facts (Rule.h's Facts) of a configuration file that was read only for them (Linter::linkConfigs),
  // kept by its stamp for the rest of the cache's life (the language server's next edits); never saved
  // with the persistent cache.
  using ConfigFacts = std::map<std::string, std::string>;
  std::optional<ConfigFacts> configFacts(const std::string& path, const FileStamp& stamp);
  void storeConfigFacts(const std::string& path, const FileStamp& stamp, ConfigFacts facts);
  // The launch commands of a shell script or Makefile read only to link scripts to their configs
  // (Linter::linkConfigs, RuleCatalog::launchLinks): per command, the script and the config file as written
  // and the settings given on the command line. Kept by the file's stamp like configFacts, never saved.
  struct LaunchTarget {
    std::string script, configFile;
    ConfigFacts facts;
  };
  std::optional<std::vector<LaunchTarget>> launchTargets(const std::string& path, const FileStamp& stamp);
  void storeLaunchTargets(const std::string& path, const FileStamp& stamp, std::vector<LaunchTarget> targets);
  // The last text of an open document (the language server's overlay, which has no stamp) and its mask:
  // its next mask is worked out from the edit (PythonWords::maskAfterEdit), not by a scan of the whole text.
  struct OverlayMask {
    std::string text;
    uint64_t mask = 0;
    bool hasImports = false;           // `imports` was scanned
    std::vector<std::string> imports;  // as spelled (scanImports)
  };
  // By absolute path key.
  std::shared_ptr<const OverlayMask> overlay(const std::string& key, const std::string& words);
  void storeOverlay(const std::string& key, std::shared_ptr<const OverlayMask> m, const std::string& words);
  // Forgets the documents that are not among `open` (LintOptions::overlays).
  void keepOverlays(const std::map<std::string, std::string>& open);

 private:
  // Under mu_: entries and overlays of other words are dropped.
  void useWordsLocked(const std::string& words);

  std::atomic<size_t> stores_{0};
  std::mutex mu_;
  std::string words_;  // what the entries' masks mean; other words clear them
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::pair<FileStamp, ConfigFacts>> configFacts_;
  std::map<std::string, std::pair<FileStamp, std::vector<LaunchTarget>>> launchTargets_;
  std::map<std::string, std::shared_ptr<const OverlayMask>> overlays_;  // for words_ too
};

struct ImportersFound {
  std::vector<std::string> files;
  bool truncated = false;
};
// The files among `candidates` (the project's Python files that are not linted) that import one of
// `targets` (linted Python files), directly or through other importers, nearest first. `truncated`
// says the bound cut the list. Throws LintInterrupted when `options.interrupted` says so.
ImportersFound findImporters(const ProjectIndex& index, const std::vector<std::string>& targets,
                             const std::vector<std::string>& candidates, const LintOptions& options,
                             ImportScanCache& cache, unsigned jobs, ImporterSearch bounds = {});

}  // namespace shardlint
