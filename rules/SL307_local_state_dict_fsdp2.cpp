// SL307 local-state-dict-fsdp2: LOCAL_STATE_DICT with FSDP2.
#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

class LocalStateDictFsdp2 final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (s.version != 2) return;
    const auto* e = s.entry("state_dict_type");
    if (!e || asString(&e->second) != "LOCAL_STATE_DICT") return;
    std::vector<Note> notes;
    if (s.versionNode) notes.push_back(cx.note(s.versionNode->range, "FSDP2 is selected here"));
    cx.report(info(), e->second.range,
              "`LOCAL_STATE_DICT` with FSDP2: accelerate raises `ValueError: FSDP2 does not support "
              "LOCAL_STATE_DICT. Please set fsdp_state_dict_type to SHARDED_STATE_DICT or FULL_STATE_DICT.`; use "
              "SHARDED_STATE_DICT (or FULL_STATE_DICT)",
              std::move(notes));
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL307(const RuleInfo* info) { return std::make_unique<LocalStateDictFsdp2>(info); }
}  // namespace shardlint::rules
