// SL306 ram-efficient-loading-without-sync: cpu_ram_efficient_loading true with sync_module_states false.
#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

class RamEfficientLoadingWithoutSync final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (s.role == Role::Plugin) return;  // in code FSDP1 only warns and forces sync on
    const auto* ram = s.entry("cpu_ram_efficient_loading");
    const auto* sync = s.entry("sync_module_states");
    if (!ram || !sync || asBool(&ram->second) != true || asBool(&sync->second) != false) return;
    std::string consumer =
        s.role == Role::TrainerJson
            ? "transformers raises `ValueError: sync_module_states must be \"True\" if cpu_ram_efficient_loading is \"True\"`"
            : "`accelerate launch` raises `ValueError: When using --fsdp_cpu_ram_efficient_loading set "
              "--fsdp_sync_module_states to True`";
    cx.report(info(), sync->second.range,
              "`" + sync->first.value + ": " + sync->second.value + "` with `" + ram->first.value +
                  ": true`: only rank 0 loads the weights, and without syncing the other ranks keep random ones; " +
                  consumer + "; set it to true",
              {cx.note(ram->second.range, "RAM-efficient loading is enabled here")});
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL306(const RuleInfo* info) { return std::make_unique<RamEfficientLoadingWithoutSync>(info); }
}  // namespace shardlint::rules
