// SL309 exclusive-wrap-options: min_num_params together with transformer_layer_cls_to_wrap in a Trainer fsdp_config.
#include <string>

#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

class ExclusiveWrapOptions final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (s.role != Role::TrainerJson) return;
    const auto* size = s.entry("min_num_params");
    const auto* cls = s.entry("transformer_layer_cls_to_wrap");
    if (!size || !cls) return;
    // transformers raises only for a positive threshold together with a class list.
    Resolved r = shardlint::config::resolveYaml11(size->second);
    bool positive = (r.type == Resolved::Type::Int && r.integer > 0) || (r.type == Resolved::Type::Float && r.real > 0);
    if (!positive && size->second.isScalar() && !size->second.quoted) {  // JSON numbers such as 1e8
      try {
        size_t used = 0;
        double d = std::stod(size->second.value, &used);
        positive = used == size->second.value.size() && d > 0;
      } catch (...) {
      }
    }
    if (!positive || cls->second.kind == YNode::Kind::Null) return;
    const auto* later = size->first.range.begin > cls->first.range.begin ? size : cls;
    const auto* earlier = later == size ? cls : size;
    cx.report(info(), later->first.range,
              "`" + later->first.value + "` together with `" + earlier->first.value +
                  "`: transformers raises `ValueError: `min_num_params` and `transformer_layer_cls_to_wrap` are "
                  "mutually exclusive.`; keep one wrap policy",
              {cx.note(earlier->first.range, "the other wrap option is set here")});
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL309(const RuleInfo* info) { return std::make_unique<ExclusiveWrapOptions>(info); }
}  // namespace shardlint::rules
