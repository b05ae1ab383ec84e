// The names an instance of accelerate's FullyShardedDataParallelPlugin has, per accelerate release:
// its dataclass fields (the constructor's keyword arguments) and its methods, properties and attributes.
// The table is generated from accelerate's sources (scripts/gen_plugin_fields.py,
// PluginFields.generated.inc); SL403 reads it.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardlint::rules::fsdp {

struct PluginName {
  std::string_view name;
  std::string_view kind;  // "field", "method", "property" or "attribute"
  std::string_view releasesText;  // as generated: "0.34.0-1.15.0"
  std::vector<bool> in;           // per pluginReleases() entry
};

// The accelerate releases the table was generated from, ascending.
const std::vector<std::string_view>& pluginReleases();
const std::vector<PluginName>& pluginNames();
const PluginName* findPluginName(std::string_view name);

// The releases a rule judges with: those the project's accelerate declarations allow (`pin` says which,
// "accelerate==0.25.0 (requirements.txt:3)"), or every release of the table when nothing is declared or
// the declarations allow none of them (`pin` then empty).
struct PluginReleases {
  std::vector<bool> judged;
  std::string pin;
  // "0.8.0-1.15.0" or the pin's releases ("0.25.0"), for messages.
  std::string describe() const;
};
PluginReleases judgedReleases(const std::map<std::string, std::string>& facts);

// Whether `name` is a field (fields only) or any name of the plugin in some judged release.
bool pluginHas(const PluginReleases& r, std::string_view name, bool fieldsOnly);

}  // namespace shardlint::rules::fsdp
