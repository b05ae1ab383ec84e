// shardlint's configuration file: `[tool.shardlint]` in pyproject.toml, or a
// `.shardlint.toml` (top-level keys), found upward from the current directory.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardlint {

struct FileConfig {
  std::optional<std::filesystem::path> path;  // the file the settings came from
  std::vector<std::string> roots;             // import roots, made relative to the current directory
  std::vector<std::string> select;
  std::vector<std::string> ignore;
  std::optional<unsigned> jobs;
  std::vector<std::string> accelerateConfigs;  // `accelerate-config`, relative to the current directory
};

// `explicitPath` (from --config) wins; otherwise the nearest .shardlint.toml or
// pyproject.toml with a [tool.shardlint] table. Throws std::runtime_error with a
// message naming the file and key for malformed TOML, unknown keys or wrong types.
FileConfig loadConfig(const std::filesystem::path& start, const std::optional<std::string>& explicitPath);

}  // namespace shardlint
