// Precompiled headers for C++ translation units: the system and library headers a unit starts
// with (LibTorch's take seconds to parse) are precompiled once and kept in the cache folder
// (`cxx-pch/`), so that later units and later runs with the same headers and flags load them
// instead of parsing them again.
#pragma once
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cxx/CxxFrontend.h"
#include "driver/ClangGate.h"

namespace shardlint {

// The `#include <...>` lines a C++ file starts with (blank lines and comments before and between
// them allowed), one per line: what a precompiled header can stand for, since loading it is the
// same as including them first. "" when the file does not start with such an include.
std::string leadingSystemIncludes(std::string_view text);

class PchStore {
 public:
  // `cacheDir`: the cache folder (they go to its `cxx-pch/`); `buildKey`: what identifies this
  // shardlint build.
  PchStore(std::filesystem::path cacheDir, std::string buildKey);

  struct Unit {
    std::string includes;  // leadingSystemIncludes() of the unit
    cxx::CompileFlags flags;
    std::vector<std::string> projectDirs;
  };
  // The key of a unit's precompiled header ("" when it starts with no system include).
  std::string key(const Unit& unit) const;

  // Builds the precompiled headers of `units` that are neither there nor known to be refused
  // (one per key, `jobs` at a time), for headers that two of `units` share or that an earlier
  // run asked for; a key asked for the first time by one unit is only remembered. Returns how
  // many were built and the seconds spent. `gate`, when given, admits each build (memory).
  struct Built {
    size_t count = 0;
    double seconds = 0;
  };
  Built prepare(const std::vector<Unit>& units, unsigned jobs, ClangGate* gate = nullptr);

  // The precompiled header for `key`, or "" when there is none. Marks it as used.
  std::string path(const std::string& key);
  // Removes the precompiled header for `key` (Clang refused it: its headers changed).
  void discard(const std::string& key);
  // Keeps the `keep` most recently used precompiled headers and removes the others.
  void trim(size_t keep);

 private:
  std::filesystem::path cacheDir_;
  std::filesystem::path dir_;
  std::string buildKey_;
  std::mutex mutex_;
};

}  // namespace shardlint
