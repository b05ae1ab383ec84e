#include "cxx/LibTorchFlags.h"

#include <cstdlib>
#include <filesystem>

namespace shardlint::rules::cxx {
namespace fs = std::filesystem;

std::vector<std::string> libtorchFlags() {
  std::vector<std::string> flags{"-std=c++17"};
  std::error_code ec;
  auto add = [&](const fs::path& dir) {
    if (fs::is_directory(dir, ec)) flags.push_back("-I" + dir.string());
  };
  std::vector<fs::path> archives;
  for (const char* var : {"LIBTORCH", "LIBTORCH_HOME"})
    if (const char* v = std::getenv(var); v && *v) archives.emplace_back(v);
  if (const char* v = std::getenv("Torch_DIR"); v && *v) archives.push_back(fs::path(v) / ".." / ".." / "..");
  archives.emplace_back("/opt/libtorch");
  archives.emplace_back("/usr/local/libtorch");
  if (const char* home = std::getenv("HOME"); home && *home) archives.push_back(fs::path(home) / "libtorch");
  for (const auto& root : archives) {
    fs::path api = root / "include" / "torch" / "csrc" / "api" / "include";
    if (!fs::is_directory(api, ec)) continue;
    add((root / "include").lexically_normal());
    add(api.lexically_normal());
    return flags;  // the first archive found
  }
  add("/usr/include/torch/csrc/api/include");  // Debian's libtorch-dev (the rest is under /usr/include)
  return flags;
}

}  // namespace shardlint::rules::cxx
