#include "fsdp/PluginFields.h"

#include "fsdp/Versions.h"

namespace shardlint::rules::fsdp {
namespace {
struct GeneratedPluginName {
  std::string_view name;
  std::string_view kind;
  std::string_view releases;
};
#include "fsdp/PluginFields.generated.inc"

size_t releaseIndex(std::string_view v) {
  for (size_t i = 0; i < std::size(kPluginVersions); ++i)
    if (kPluginVersions[i] == v) return i;
  return std::size(kPluginVersions);  // not generated: the generator writes only versions it read
}
}  // namespace

const std::vector<std::string_view>& pluginReleases() {
  static const std::vector<std::string_view> r(std::begin(kPluginVersions), std::end(kPluginVersions));
  return r;
}

const std::vector<PluginName>& pluginNames() {
  static const std::vector<PluginName> names = [] {
    std::vector<PluginName> out;
    size_t n = std::size(kPluginVersions);
    for (const auto& g : kPluginNames) {
      PluginName p{g.name, g.kind, g.releases, std::vector<bool>(n, false)};
      std::string_view rest = g.releases;
      while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string_view run = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        size_t dash = run.find('-');
        size_t a = releaseIndex(run.substr(0, dash));
        size_t b = dash == std::string_view::npos ? a : releaseIndex(run.substr(dash + 1));
        for (size_t i = a; i <= b && i < n; ++i) p.in[i] = true;
      }
      out.push_back(std::move(p));
    }
    return out;
  }();
  return names;
}

const PluginName* findPluginName(std::string_view name) {
  for (const auto& p : pluginNames())
    if (p.name == name) return &p;
  return nullptr;
}

PluginReleases judgedReleases(const std::map<std::string, std::string>& facts) {
  PluginReleases r;
  std::string pin;
  auto allowed = allowedReleases(facts, {"accelerate"}, pluginReleases(), &pin);
  bool some = false;
  if (allowed)
    for (bool b : *allowed) some = some || b;
  if (some) {
    r.judged = *allowed;
    r.pin = pin;
  } else {
    r.judged.assign(pluginReleases().size(), true);
  }
  return r;
}

std::string PluginReleases::describe() const {
  const auto& rel = pluginReleases();
  std::string out;
  for (size_t i = 0; i < rel.size();) {
    if (!judged[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < rel.size() && judged[j + 1]) ++j;
    if (!out.empty()) out += ", ";
    out.append(rel[i]);
    if (j > i) {
      out += '-';
      out.append(rel[j]);
    }
    i = j + 1;
  }
  return out;
}

bool pluginHas(const PluginReleases& r, std::string_view name, bool fieldsOnly) {
  const PluginName* p = findPluginName(name);
  if (!p || (fieldsOnly && p->kind != "field")) return false;
  for (size_t i = 0; i < p->in.size() && i < r.judged.size(); ++i)
    if (p->in[i] && r.judged[i]) return true;
  return false;
}

}  // namespace shardlint::rules::fsdp
