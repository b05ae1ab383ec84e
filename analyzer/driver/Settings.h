// Settings from a configuration file plus command-line overrides, mapped to what the
// linter runs with; shared by `shardlint check` and `shardlint server`.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "driver/Config.h"
#include "driver/Linter.h"

namespace shardlint {

struct SettingsOverrides {
  std::vector<std::string> select;  // replaces the file's select when not empty
  std::vector<std::string> extendSelect, ignore, roots, accelerateConfigs;  // added to the file's
  std::optional<unsigned> jobs;
};

// Entries may hold comma-separated lists ("SL101,SL102").
std::vector<std::string> splitSelectors(const std::vector<std::string>& in);

// Throws std::invalid_argument for unknown rule selectors and std::runtime_error for a
// `severity` entry naming an unknown rule. `baseDir` resolves relative roots and configs.
LintOptions lintOptionsFrom(const RuleCatalog& catalog, const FileConfig& cfg, const SettingsOverrides& overrides);

// The effective `select` list (file or overrides, plus extend-select), for display.
std::vector<std::string> effectiveSelect(const FileConfig& cfg, const SettingsOverrides& overrides);

// `exclude` globs: does the path (or a folder above it) match?
bool isExcluded(const FileConfig& cfg, const std::string& path);

// `per-file-ignores`, then `severity` overrides. `globPath` gives the path the globs see.
void applyFindingSettings(const RuleCatalog& catalog, const FileConfig& cfg, std::vector<Diagnostic>& diags,
                          const std::function<std::string(const std::string&)>& globPath = {});

}  // namespace shardlint
