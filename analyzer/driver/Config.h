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
  std::vector<std::string> extendSelect;       // `extend-select`: added to the selection
  std::vector<std::pair<std::string, std::vector<std::string>>> perFileIgnores;  // glob -> rules
  std::vector<std::string> exclude;            // globs of paths discovery skips
  std::vector<std::pair<std::string, std::string>> severity;  // rule -> error|warning|info|hint
  std::optional<int> fsdpVersion;              // `fsdp-version`: assumed for accelerate scripts with no evidence
  std::vector<std::string> optimizers;         // extra qualified names that build optimizers (in-house helpers)
  std::vector<std::string> wraps;              // extra qualified names that wrap like `fully_shard`
  std::optional<bool> markdown;                // `markdown`: directory scans lint Markdown files' config blocks (default true)
};

// Glob matching for settings: `*` and `?` stay within a path component, `**` crosses
// them; a pattern without `/` matches the file name or any trailing part of the path.
bool globMatch(std::string_view pattern, std::string_view path);

// The resolved settings as TOML (`shardlint check --show-settings`).
std::string describeConfig(const FileConfig& cfg);

// `explicitPath` (from --config) wins; otherwise the nearest .shardlint.toml or
// pyproject.toml with a [tool.shardlint] table. Throws std::runtime_error with a
// message naming the file and key for malformed TOML, unknown keys or wrong types.
// The settings in TOML `text` as if read from `file` (a pyproject.toml: its [tool.shardlint] table,
// nullopt when it has none), without touching the disk (the fuzz targets). Throws like loadConfig.
std::optional<FileConfig> configFromText(std::string_view text, const std::filesystem::path& file, bool pyproject);

FileConfig loadConfig(const std::filesystem::path& start, const std::optional<std::string>& explicitPath);

}  // namespace shardlint
