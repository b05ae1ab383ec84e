#include "driver/Discovery.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include <unistd.h>

#include <cerrno>

namespace fs = std::filesystem;

namespace shardlint {
namespace {

bool skipDirectory(const fs::path& dir) {
  std::string name = dir.filename().string();
  static const std::set<std::string> skipped = {"node_modules", "__pycache__", "build",         "dist",
                                                "site-packages", "venv",       "env",           "__pypackages__",
                                                "_build",       "buck-out",    "htmlcov"};
  if (name.size() > 1 && name[0] == '.') return true;  // .git, .venv, .tox, .mypy_cache, ...
  if (skipped.count(name)) return true;
  if (name.size() > 9 && name.substr(name.size() - 9) == ".egg-info") return true;
  std::error_code ec;
  return fs::exists(dir / "pyvenv.cfg", ec);  // any virtual environment
}

// A folder this process cannot list (or enter): recursive_directory_iterator would skip it silently.
bool unlistable(const fs::path& dir) { return ::access(dir.c_str(), R_OK | X_OK) != 0 && errno == EACCES; }

std::string display(const fs::path& p) {
  std::string s = p.lexically_normal().generic_string();
  return s.empty() ? std::string(".") : s;
}

}  // namespace

DiscoveryResult discover(const std::vector<std::string>& paths, size_t maxEntries, bool markdown) {
  DiscoveryResult out;
  size_t visited = 0;
  std::set<std::string> files;
  for (const auto& given : paths) {
    std::error_code ec;
    fs::path p(given);
    fs::file_status status = fs::status(p, ec);
    if (ec || !fs::exists(status)) {
      out.errors.push_back(given);
      continue;
    }
    if (!fs::is_directory(status)) {
      files.insert(display(p));
      continue;
    }
    if (unlistable(p)) {
      out.unreadable.push_back(display(p));
      continue;
    }
    out.folders.emplace_back(p.string(), ProjectIndex::folderStamp(p.string()));
    fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      if (maxEntries && ++visited > maxEntries) {
        out.truncated = true;
        break;
      }
      const fs::directory_entry& e = *it;
      std::error_code ec2;
      if (e.is_directory(ec2)) {
        if (skipDirectory(e.path())) it.disable_recursion_pending();
        else if (!e.is_symlink(ec2) && unlistable(e.path())) {
          out.unreadable.push_back(display(e.path()));
          it.disable_recursion_pending();
        } else if (!e.is_symlink(ec2)) {
          out.folders.emplace_back(e.path().string(), ProjectIndex::folderStamp(e.path().string()));  // listed next
        }
        continue;
      }
      std::string ext = e.path().extension().string();
      std::string base = e.path().filename().string();
      bool launch = ext == ".sh" || base == "Makefile" || base == "makefile" || base == "GNUmakefile";
      if ((ext == ".py" || ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".yaml" || ext == ".yml" ||
           ext == ".json" || launch || (markdown && ext == ".md")) &&
          e.is_regular_file(ec2))
        files.insert(display(e.path()));
    }
  }
  out.files.assign(files.begin(), files.end());
  return out;
}

}  // namespace shardlint
