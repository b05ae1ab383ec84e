#include "driver/Settings.h"

#include <cctype>
#include <stdexcept>

namespace shardlint {

std::vector<std::string> splitSelectors(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& s : in) {
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!part.empty()) out.push_back(part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

std::vector<std::string> effectiveSelect(const FileConfig& cfg, const SettingsOverrides& o) {
  std::vector<std::string> select = o.select.empty() ? cfg.select : o.select;
  std::vector<std::string> extend = cfg.extendSelect;
  extend.insert(extend.end(), o.extendSelect.begin(), o.extendSelect.end());
  if (!extend.empty()) {
    if (select.empty()) select.push_back("ALL");
    select.insert(select.end(), extend.begin(), extend.end());
  }
  return select;
}

LintOptions lintOptionsFrom(const RuleCatalog& catalog, const FileConfig& cfg, const SettingsOverrides& o) {
  LintOptions options;
  std::vector<std::string> select = splitSelectors(effectiveSelect(cfg, o));
  std::vector<std::string> ignore = cfg.ignore;
  ignore.insert(ignore.end(), o.ignore.begin(), o.ignore.end());
  options.selection = RuleSelection(catalog, select, splitSelectors(ignore));
  // Unused `noqa` comments only when SL003 is asked for by name.
  for (const auto& sel : select)
    if (sel == "SL003" || sel == "unused-suppression") options.reportUnusedNoqa = true;
  options.jobs = o.jobs ? *o.jobs : cfg.jobs.value_or(0);
  options.roots = cfg.roots;
  options.roots.insert(options.roots.end(), o.roots.begin(), o.roots.end());
  options.accelerateConfigs = cfg.accelerateConfigs;
  options.accelerateConfigs.insert(options.accelerateConfigs.end(), o.accelerateConfigs.begin(),
                                   o.accelerateConfigs.end());
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
    return out;
  };
  // Settings the rules interpret travel as facts under their own names.
  if (cfg.fsdpVersion) options.settingsFacts["fsdp-version"] = std::to_string(*cfg.fsdpVersion);
  if (!cfg.optimizers.empty()) options.settingsFacts["optimizers"] = join(cfg.optimizers);
  if (!cfg.wraps.empty()) options.settingsFacts["wraps"] = join(cfg.wraps);
  for (const auto& [rule, level] : cfg.severity)
    if (!catalog.find(rule)) throw std::runtime_error("`severity` names an unknown rule `" + rule + "`");
  return options;
}

bool isExcluded(const FileConfig& cfg, const std::string& path) {
  for (const auto& g : cfg.exclude)
    for (size_t slash = path.size(); slash != std::string::npos; slash = path.rfind('/', slash - 1)) {
      if (globMatch(g, path.substr(0, slash))) return true;
      if (slash == 0) break;
    }
  return false;
}

void applyFindingSettings(const RuleCatalog& catalog, const FileConfig& cfg, std::vector<Diagnostic>& diags,
                          const std::function<std::string(const std::string&)>& globPath) {
  if (!cfg.perFileIgnores.empty()) {
    std::vector<Diagnostic> kept;
    for (auto& d : diags) {
      std::string path = globPath ? globPath(d.location.path) : d.location.path;
      bool drop = false;
      for (const auto& [glob, rules] : cfg.perFileIgnores) {
        if (!globMatch(glob, path)) continue;
        for (const auto& r : rules) {
          const RuleInfo* info = catalog.find(r);
          std::string prefix = r;
          for (char& c : prefix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          drop = drop || (info && info->code == d.code) || r == "ALL" || d.code.rfind(prefix, 0) == 0;
        }
      }
      if (!drop) kept.push_back(std::move(d));
    }
    diags = std::move(kept);
  }
  for (const auto& [rule, level] : cfg.severity) {
    const RuleInfo* info = catalog.find(rule);
    if (!info) continue;
    Severity sev = level == "warning" ? Severity::Warning
                   : level == "info"  ? Severity::Info
                   : level == "hint"  ? Severity::Hint
                                      : Severity::Error;
    for (auto& d : diags)
      if (d.code == info->code) d.severity = sev;
  }
}

}  // namespace shardlint
