// SL308 deepspeed-and-fsdp: DeepSpeed and FSDP configured together.
#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

class DeepspeedAndFsdp final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (!s.root) return;
    const std::pair<YNode, YNode>* ds = nullptr;
    for (const auto& e : s.root->entries)
      if (e.first.isScalar() && (e.first.value == "deepspeed_config" || e.first.value == "deepspeed")) ds = &e;
    if (!ds) return;
    const YNode& v = ds->second;
    bool empty = v.kind == YNode::Kind::Null || (v.isMap() && v.entries.empty()) || (v.isScalar() && v.value.empty());
    if (empty) return;
    if (s.role == Role::Accelerate) {
      if (!s.enabled) return;  // distributed_type DEEPSPEED: the fsdp_config is the unused one (not this rule)
      const YNode* distributed = s.root->get("distributed_type");
      cx.report(info(), ds->first.range,
                "`" + ds->first.value + "` next to `distributed_type: FSDP`: accelerate runs FSDP and silently "
                "ignores the DeepSpeed settings; remove the block, or switch distributed_type to DEEPSPEED and drop "
                "fsdp_config",
                {cx.note(distributed ? distributed->range : s.section->range,
                         "FSDP is selected here")});
    } else if (s.role == Role::Axolotl || (s.role == Role::TrainerJson && s.root != s.section)) {
      // axolotl, and training arguments with `fsdp: "full_shard ..."`: the Trainer takes both.
      cx.report(info(), ds->first.range,
                "`" + ds->first.value + "` together with `fsdp`: one run can use only one of them (transformers "
                "raises `ValueError: Using --fsdp xxx together with --deepspeed is not possible, deactivate one of "
                "those flags.`); keep one",
                {cx.note(s.section->range, "FSDP is configured here")});
    }
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL308(const RuleInfo* info) { return std::make_unique<DeepspeedAndFsdp>(info); }
}  // namespace shardlint::rules
