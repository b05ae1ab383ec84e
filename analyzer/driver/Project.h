// The project model: import roots, module names of files, module lookup, and the
// byte-level import scan used by the pre-scan.
#pragma once
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace shardlint {

class ProjectIndex {
 public:
  // Roots given in configuration or on the command line come first.
  explicit ProjectIndex(std::vector<std::string> extraRoots = {});

  // Registers linted files (as the user spelled them) and derives import roots:
  // each script's directory, package roots found by walking up `__init__.py`, and
  // `src/` next to a pyproject.toml / setup.py / setup.cfg above them.
  void addFiles(const std::vector<std::string>& paths);

  struct Module {
    std::string name;  // dotted ("pkg.sub.mod"; "pkg" for pkg/__init__.py)
    bool isPackage = false;
  };
  // The module a file defines: its package path up to the first directory without __init__.py.
  Module moduleOf(const std::string& path) const;
  // The file (as a display path) that defines a dotted module, searching the roots in order.
  std::optional<std::string> findModule(const std::string& dotted) const;
  // Resolves an import spelled in `fromFile` ("x.y", ".x", "..") to an absolute dotted name.
  std::optional<std::string> absoluteName(const std::string& fromFile, std::string_view spelled) const;
  std::vector<std::string> roots() const;

 private:
  std::string display(const std::filesystem::path& absolute) const;
  void addRoot(const std::filesystem::path& dir);

  std::filesystem::path cwd_;
  std::vector<std::filesystem::path> roots_;
  std::map<std::string, std::string> given_;  // absolute path -> the user's spelling
  mutable std::mutex mu_;
  mutable std::map<std::string, std::optional<std::string>> cache_;
  mutable std::map<std::string, bool> initCache_;                  // directory -> has __init__.py
  mutable std::map<std::string, std::set<std::string>> listings_;  // root -> its entries
  bool hasInit(const std::filesystem::path& dir) const;
  // Whether `root` has an entry `first` or `first.py` (from one listing of the root).
  bool mayHold(const std::filesystem::path& root, const std::string& first) const;
};

// Imported module names in a Python source, found without parsing:
// `import a.b as c` -> "a.b"; `from x.y import p, q` -> "x.y", "x.y.p", "x.y.q"
// (either may be a module); relative spellings keep their dots (".opt", "..").
std::vector<std::string> scanImports(std::string_view text);

}  // namespace shardlint
