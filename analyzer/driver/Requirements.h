// The dependencies a Python project declares: what rules read when a framework's behaviour
// changed between versions (a default that flipped, a key a launcher stopped reading) and the
// project pins the older one.
//
// Read from the nearest folder at or above a file that holds a dependency file:
// `requirements*.txt` (and `requirements/*.txt`), `pyproject.toml` ([project] dependencies and
// optional-dependencies, [tool.poetry] dependencies), `setup.cfg` ([options] install_requires and
// extras_require) or `environment.yml`/`environment.yaml` (conda, with its `pip:` list). The walk stops at
// a folder with `.git`. Depends on the file's place only, never on the other files of a run.
//
// Shell scripts (`*.sh`) declare too: the requirement arguments of their `pip install` lines (`pip`,
// `pip3`, `python -m pip`, `uv pip`; options, `-r`/`-c` files, editable installs, paths and URLs
// are not read). The scripts of every folder the walk passes count, from the file's own folder up to
// and including the one where it stops, but a folder whose only declarations are in shell scripts
// does not stop the walk: an `install.sh` at a project's top (next to `.git`, where the walk stops
// anyway) is read, and a launch script in a sub-folder that installs one extra package does not hide
// the project's requirements files above it. Declarations are listed nearest folder first, and in a
// folder the dependency files before the scripts.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <cstdint>
#include <string>
#include <vector>

namespace shardlint {

// One declaration of a package: its version specifier as written ("==2.0.9", ">=1.9,<2.1", "^2.0",
// conda's "=2.0"; empty when unversioned), and where (a path and a 1-based line).
struct Requirement {
  std::string spec;
  std::string file;
  int line = 0;
};

// Package names normalised as PEP 503 says (lower case, runs of "-", "_", "." become "-") to every
// declaration of the package in the project's dependency files, in file order.
using Requirements = std::map<std::string, std::vector<Requirement>>;

std::string normalizePackageName(std::string_view name);

// The declarations in one file's text, by its kind (the file name decides: requirements*.txt,
// pyproject.toml, setup.cfg, environment.yml, *.sh). Malformed files give what could be read.
Requirements parseRequirementsFile(const std::filesystem::path& file, const std::string& text);

// The declarations that apply to files in `dir`, cached per folder; thread-safe.
class RequirementsIndex {
 public:
  const Requirements& forDirectory(const std::filesystem::path& dir);
  // For an index kept between runs (the language server keeps one from edit to edit): forgets every
  // answer when a folder it listed or a file it read is not as it was then (size, modification and
  // status-change times; a folder's change when an entry is added, removed or renamed). Not while an
  // answer is in use: a reference forDirectory returned is invalid after a call that forgot.
  void revalidate();

 private:
  // A path's size and times, or none when it does not exist.
  struct Stamp {
    bool exists = false;
    uint64_t size = 0;
    int64_t mtime = 0, ctime = 0;
    bool existence = false;  // only whether it exists counts
    bool operator==(const Stamp& o) const {
      return exists == o.exists && size == o.size && mtime == o.mtime && ctime == o.ctime;
    }
  };
  static Stamp stampOf(const std::string& path);
  std::mutex mu_;
  // Folder -> its answer; a folder that declares nothing shares the answer of the folder above.
  std::map<std::string, std::shared_ptr<const Requirements>> cache_;
  // What the answers were read from: the folders listed and the files read, as they were then.
  std::map<std::string, Stamp> read_;
};

}  // namespace shardlint
