// SL304 checkpointing-without-wrap-policy: activation checkpointing with no wrap policy on accelerate FSDP2.
#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

class CheckpointingWithoutWrapPolicy final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    bool accelerate = s.role == Role::Accelerate || s.role == Role::LaunchFlags || s.role == Role::Plugin;
    if (!accelerate || !s.enabled || s.version != 2) return;
    const auto* ac = s.entry("activation_checkpointing");
    if (!ac || asBool(&ac->second) != true) return;
    const auto* policy = s.entry("auto_wrap_policy");
    std::string p = policy ? asString(&policy->second) : "";
    bool none = p == "NO_WRAP";
    if (p == "SIZE_BASED_WRAP") {
      const auto* min = s.entry("min_num_params");
      Resolved r = min ? shardlint::config::resolveYaml11(min->second) : Resolved{};
      none = min && r.type == Resolved::Type::Int && r.integer == 0;
    }
    if (!none) return;
    std::vector<Note> notes{cx.note(policy->second.range, "the wrap policy resolves to none here")};
    if (s.versionNode) notes.push_back(cx.note(s.versionNode->range, "FSDP2 is selected here"));
    cx.report(info(), ac->second.range,
              "activation checkpointing with `" + p +
                  "` on accelerate FSDP2: the wrap policy resolves to None and `fsdp2_apply_ac` calls it, raising "
                  "`TypeError: 'NoneType' object is not callable` at `prepare`; use TRANSFORMER_BASED_WRAP (or "
                  "SIZE_BASED_WRAP with a positive `fsdp_min_num_params`), or turn checkpointing off",
              std::move(notes));
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL304(const RuleInfo* info) { return std::make_unique<CheckpointingWithoutWrapPolicy>(info); }
}  // namespace shardlint::rules
