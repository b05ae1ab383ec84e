// SL303 layer-class-list-format: `fsdp_transformer_layer_cls_to_wrap` split on commas without strip.
#include "config/ConfigFixes.h"
#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

class LayerClassListFormat final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    const auto* e = s.entry("transformer_layer_cls_to_wrap");
    if (!e || !e->second.isScalar() || s.role == Role::TrainerJson || s.role == Role::Plugin) return;
    const std::string& v = e->second.value;
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
      size_t comma = v.find(',', start);
      parts.push_back(v.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    // The fix: the names stripped, empty entries dropped. accelerate crashes on the value as
    // written, so nothing that runs today changes: safe.
    std::string fixedValue;
    for (const auto& q : parts) {
      std::string t = q;
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t") + 1);
      if (!t.empty()) fixedValue += (fixedValue.empty() ? "" : ",") + t;
    }
    std::optional<Fix> fix;
    if (!fixedValue.empty())
      if (auto text = stringText(cx.file(), e->second, fixedValue))
        fix = Fix{"Write `" + fixedValue + "`", Applicability::Safe, {cx.edit(e->second.range, *text)}};
    for (const auto& p : parts) {
      if (p.empty()) {
        cx.report(info(), e->second.range,
                  "`" + e->first.value + "` has an empty entry (`" + v +
                      "`); accelerate splits it on commas and looks up an empty class name, which raises "
                      "`ValueError: Could not find the transformer layer class  in the model.`; remove the extra comma",
                  {}, fix);
        return;
      }
      if (p.front() == ' ' || p.back() == ' ' || p.front() == '\t') {
        cx.report(info(), e->second.range,
                  "`" + e->first.value + "` has whitespace around a class name (`" + p +
                      "`); accelerate splits on commas without stripping, so `" + p +
                      "` matches no module and it raises `ValueError: Could not find the transformer layer class " + p +
                      " in the model.`; write the names without spaces (`" + fixedValue + "`)",
                  {}, fix);
        return;
      }
    }
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL303(const RuleInfo* info) { return std::make_unique<LayerClassListFormat>(info); }
}  // namespace shardlint::rules
