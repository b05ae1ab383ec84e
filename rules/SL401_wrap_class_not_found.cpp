// SL401 wrap-class-not-found: a wrap class named in a config exists neither among the project's module
// classes nor among the layer classes of the model families the project loads.
#include <algorithm>
#include <set>
#include <sstream>

#include "config/ConfigRule.h"
#include "config/ModelFamilies.h"

namespace shardlint::rules {
namespace {
using namespace config;

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

class WrapClassNotFound final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    const auto* e = s.entry("transformer_layer_cls_to_wrap");
    if (!e || !cx.project() || s.role == Role::Plugin) return;
    // What the project proves exists.
    auto factSet = [&](const char* key) {
      auto it = cx.project()->find(key);
      std::vector<std::string> items = splitList(it == cx.project()->end() ? "" : it->second);
      return std::set<std::string>(items.begin(), items.end());
    };
    std::set<std::string> known = factSet("module_classes");
    std::set<std::string> familyNames = factSet("families");
    if (s.root)
      for (const char* key : {"base_model", "model_name_or_path", "base_model_config"})
        if (const YNode* id = s.root->get(key); id && id->isScalar())
          for (const auto* fam : familiesOfId(id->value)) familyNames.insert(std::string(fam->family));
    std::vector<std::string> layers;
    for (const auto& f : modelFamilies())
      if (familyNames.count(std::string(f.family)))
        for (auto l : f.layerClasses) layers.emplace_back(l);
    // Nothing proves a name wrong unless the project loads a known family.
    if (layers.empty()) return;
    std::vector<std::pair<std::string, ByteRange>> names;
    if (e->second.isScalar()) {
      for (const auto& n : splitList(e->second.value)) names.emplace_back(n, e->second.range);
    } else {
      for (const auto& item : e->second.items)
        if (item.isScalar()) names.emplace_back(item.value, item.range);
    }
    for (const auto& [name, range] : names) {
      if (known.count(name) || std::find(layers.begin(), layers.end(), name) != layers.end()) continue;
      std::string best;
      size_t bestD = 99;
      for (const auto& l : layers)
        if (size_t d = editDistance(name, l); d < bestD) bestD = d, best = l;
      for (const auto& k : known)
        if (size_t d = editDistance(name, k); d < bestD) bestD = d, best = k;
      // Precision first: the table cannot list every variant class (vision towers, MoE
      // blocks), so only a near-miss (a typo) or another family's layer proves a mistake.
      bool otherFamily = false;
      for (const auto& f : modelFamilies())
        for (auto l : f.layerClasses)
          otherFamily = otherFamily || l == name;
      std::string lowerName = name, lowerBest = best;
      for (auto* str : {&lowerName, &lowerBest})
        std::transform(str->begin(), str->end(), str->begin(), [](unsigned char c) { return std::tolower(c); });
      if (!otherFamily && bestD > 1 && lowerName != lowerBest) continue;
      std::string fams;
      for (const auto& f : familyNames) fams += (fams.empty() ? "" : ", ") + f;
      cx.report(info(), range,
                "`" + name + "` is not a layer class of the model the project loads (" + fams +
                    ") nor a module class the project defines; accelerate raises `ValueError: Could not find the "
                    "transformer layer class " + name + " in the model.`" +
                    (bestD <= std::max<size_t>(3, name.size() / 3) ? "; did you mean `" + best + "`?" : ""));
    }
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL401(const RuleInfo* info) { return std::make_unique<WrapClassNotFound>(info); }
}  // namespace shardlint::rules
