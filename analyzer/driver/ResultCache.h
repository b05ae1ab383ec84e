// The persistent cache (`.shardlint_cache/`, like Ruff's): the findings of each linted
// Python file, keyed by its content hash, the facts its task ran with, and the content
// hashes of every project module its analysis read (directly or through a shared
// summary). A second run on an unchanged tree takes every file's findings from here and
// parses nothing; after a one-file change only the files whose analysis read that file
// run again. One cache file per (shardlint build, settings, set of linted files): any
// change to those starts a fresh one. Never trusted blindly: an unreadable or malformed
// cache, or one whose checksum (its first 8 bytes: the content hash of the MessagePack that
// follows) does not match, is ignored; writes are atomic (a temporary file renamed over the old one).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/Diagnostic.h"
#include "driver/Importers.h"
#include "syntax/Outline.h"

namespace shardlint {

// Creates the cache folder `dir` with its `.gitignore` (everything) and `CACHEDIR.TAG`; "" when
// it is there, else why not.
std::string prepareCacheDir(const std::filesystem::path& dir);

class ResultCache {
 public:
  // `key`: everything that is not per file (shardlint build, settings, the linted file set).
  ResultCache(std::filesystem::path dir, const std::string& key);

  // Reads the cache file for the key; a missing or damaged one gives an empty cache.
  void load();
  // The findings of `path` when its text hash, facts and every dependency's current hash
  // (`hashOf`: 0 for a file that cannot be read) match what was stored.
  std::optional<std::vector<Diagnostic>> lookup(const std::string& path, uint64_t hash, const std::string& facts,
                                                const std::function<uint64_t(const std::string&)>& hashOf) const;
  void store(const std::string& path, uint64_t hash, const std::string& facts,
             std::vector<std::pair<std::string, uint64_t>> deps, const std::vector<Diagnostic>& findings);
  // A Python file's outline (the configuration rules' project facts) by its content hash,
  // so that a warm run need not parse the files it did not analyse.
  std::optional<syntax::Outline> outline(const std::string& path, uint64_t hash) const;
  void storeOutline(const std::string& path, uint64_t hash, const syntax::Outline& outline);
  // What the pre-scan learnt of each file on disk (its words, imports and content hash by its
  // stamp), so that a warm run reads no file whose stamp is unchanged.
  PrescanCache& stamps() { return stamps_; }
  // Writes the cache (creating the folder with a .gitignore and a CACHEDIR.TAG); returns
  // an explanation when it could not, empty on success. Stamps modified or changed at
  // `trustBefore` (ns since the epoch, the run's start less a margin) or later are left out: a file
  // written again within its clock's granularity could keep its stamp with another text (Git's
  // "racily clean" entries), so such a file is read again next time.
  std::string save(int64_t trustBefore);
  // The layout the stamps' `resolved` answers rest on (ProjectIndex::layout): what the last run kept,
  // and what this run leaves for the next.
  const std::optional<ProjectIndex::Layout>& layout() const { return layout_; }
  void setLayout(std::optional<ProjectIndex::Layout> layout) {
    auto same = [](const ProjectIndex::Layout& a, const ProjectIndex::Layout& b) {
      return a.cwd == b.cwd && a.trustworthy == b.trustworthy && a.folders == b.folders;
    };
    if (layout.has_value() == layout_.has_value() && (!layout || same(*layout, *layout_))) return;
    layout_ = std::move(layout);
    dirty_ = true;
  }
  const std::filesystem::path& file() const { return file_; }

 private:
  struct Item {
    uint64_t hash = 0;
    std::string facts;
    std::vector<std::pair<std::string, uint64_t>> deps;
    std::vector<Diagnostic> findings;
  };
  std::filesystem::path dir_, file_;
  std::map<std::string, Item> items_;
  std::map<std::string, std::pair<uint64_t, syntax::Outline>> outlines_;
  PrescanCache stamps_;
  std::optional<ProjectIndex::Layout> layout_;
  bool dirty_ = false;
};

// A fingerprint of the running executable (its size and modification time), so that a
// rebuilt shardlint never trusts findings cached by another build of the same version.
std::string executableFingerprint();

}  // namespace shardlint
