// SL302 key-not-for-fsdp-version: an FSDP1-only key or value with fsdp_version 2, or the reverse.
#include <algorithm>

#include "config/ConfigFixes.h"
#include "config/ConfigRule.h"
#include "config/FsdpKeys.h"

namespace shardlint::rules {
namespace {
using namespace config;

std::string lower(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v;
}

// What accelerate's str_to_bool accepts (case-insensitive).
bool truthValue(const std::string& value) {
  std::string v = lower(value);
  for (const char* ok : {"y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0"})
    if (v == ok) return true;
  return false;
}

// The FSDP2 `reshard_after_forward` an FSDP1 sharding strategy stands for (accelerate reads names
// and their numbers): FULL_SHARD resharded after forward, SHARD_GRAD_OP not; the others have none.
const char* reshardFor(const std::string& strategy) {
  std::string v = lower(strategy);
  if (v == "full_shard" || v == "1") return "true";
  if (v == "shard_grad_op" || v == "2") return "false";
  return nullptr;
}

class KeyNotForFsdpVersion final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  // FullyShardedDataParallelPlugin(...) in code validates some arguments against the version.
  void checkPlugin(ConfigContext& cx, const FsdpSettings& s) {
    const YNode* fwd = s.section->get("forward_prefetch");
    if (s.version == 2 && fwd && fwd->kind != YNode::Kind::Null) {
      for (const auto& [k, v] : s.section->entries)
        if (k.value == "forward_prefetch")
          cx.report(info(), k.range,
                    "`forward_prefetch` with `fsdp_version=2`: the plugin raises `ValueError` for any value but None "
                    "(FSDP2 prefetches on its own); remove it");
    }
    const YNode* reshard = s.section->get("reshard_after_forward");
    if (s.version == 1 && reshard && asBool(reshard) == true) {
      for (const auto& [k, v] : s.section->entries)
        if (k.value == "reshard_after_forward")
          cx.report(info(), k.range,
                    "`reshard_after_forward=True` is an FSDP2 argument; with FSDP1 (`fsdp_version` absent or 1) the "
                    "plugin raises `ValueError`; use `sharding_strategy` for FSDP1 or set `fsdp_version=2`");
    }
  }

  // An FSDP1 key on FSDP2: `sharding_strategy` becomes the `reshard_after_forward` it stands for
  // (the setting then applies where it was ignored: unsafe); any other key is removed, which
  // changes nothing accelerate does (safe). YAML block mappings only.
  std::optional<Fix> fsdp1KeyFix(ConfigContext& cx, const FsdpSettings& s, const YNode& k, const YNode& v,
                                 const std::string& name) {
    if (syntaxOf(cx.file()) != Syntax::Yaml) return std::nullopt;
    if (name == "fsdp_sharding_strategy" && v.isScalar() && !s.entry("reshard_after_forward")) {
      if (const char* to = reshardFor(v.value)) {
        std::string key = k.value.rfind("fsdp_", 0) == 0 ? "fsdp_reshard_after_forward" : "reshard_after_forward";
        return Fix{"Replace with `" + key + ": " + to + "`", Applicability::Unsafe,
                   {cx.edit(k.range, key), cx.edit(v.range, to)}};
      }
    }
    if (auto lines = yamlEntryLines(cx.file(), k, v))
      return Fix{"Remove `" + k.value + "`", Applicability::Safe, {cx.edit(*lines, "")}};
    return std::nullopt;
  }

  // `reshard_after_forward: FULL_SHARD` on FSDP2 raises at launch; the bool it stands for is safe.
  std::optional<Fix> reshardValueFix(ConfigContext& cx, const YNode& v) {
    const char* to = reshardFor(v.value);
    if (!to) return std::nullopt;
    return Fix{std::string("Write `") + to + "`", Applicability::Safe, {cx.edit(v.range, to)}};
  }

  // FSDP1 under `accelerate launch`: the launcher always exports `fsdp_sharding_strategy` (FULL_SHARD when
  // the config has none), and the plugin uses `sharding_strategy or reshard_after_forward`, so
  // `fsdp_reshard_after_forward` is never applied. Reported when it asks for another strategy than the one
  // that applies (true stands for FULL_SHARD, false for SHARD_GRAD_OP, as in `accelerate to-fsdp2`).
  void reportFsdp1Reshard(ConfigContext& cx, const FsdpSettings& s, const YNode& k, const YNode& v,
                          std::vector<Note> notes) {
    if (!v.isScalar() || v.value.empty()) return;
    static const char* kNames[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
    auto strategyOf = [](const std::string& value) -> std::string {
      std::string u = value;
      for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (u.size() == 1 && u[0] >= '1' && u[0] <= '5') return kNames[u[0] - '1'];
      for (const char* n : kNames)
        if (u == n) return n;
      return "";
    };
    std::string asked;
    if (auto b = asBool(&v)) asked = *b ? "FULL_SHARD" : "SHARD_GRAD_OP";
    else asked = strategyOf(v.value);
    if (asked.empty()) return;  // SL311 / accelerate judge a value that is neither
    const auto* explicitStrategy = s.entry("sharding_strategy");
    std::string applied = "FULL_SHARD";
    if (explicitStrategy) {
      if (!explicitStrategy->second.isScalar()) return;
      applied = strategyOf(explicitStrategy->second.value);
      if (applied.empty()) return;
    }
    if (applied == asked) return;
    std::string msg = "`" + k.value + ": " + v.value + "` asks for " + asked +
                      " but is not applied with FSDP1 (`fsdp_version` absent or 1): `accelerate launch` always exports "
                      "the sharding strategy (" + applied +
                      (explicitStrategy ? ", set in this config" : ", its default") +
                      ") and FSDP1 takes it instead, so the run shards as " + applied + "; write `fsdp_sharding_strategy: " +
                      asked + "` for FSDP1, or set `fsdp_version: 2`";
    if (explicitStrategy)
      notes.push_back(cx.note(explicitStrategy->first.range, "the sharding strategy that applies"));
    std::optional<Fix> fix;
    // Unsafe: the run then shards as the config asked, which it did not before.
    if (!explicitStrategy && syntaxOf(cx.file()) == Syntax::Yaml && v.isScalar()) {
      std::string key = k.value.rfind("fsdp_", 0) == 0 ? "fsdp_sharding_strategy" : "sharding_strategy";
      fix = Fix{"Replace with `" + key + ": " + asked + "`", Applicability::Unsafe,
                {cx.edit(k.range, key), cx.edit(v.range, asked)}};
    }
    cx.report(info(), k.range, msg, std::move(notes), fix);
  }

  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (!s.section || s.role == Role::TrainerJson) return;
    if (s.role == Role::Plugin) {
      checkPlugin(cx, s);
      return;
    }
    for (const auto& [k, v] : s.section->entries) {
      if (!k.isScalar()) continue;
      std::string name = k.value.rfind("fsdp_", 0) == 0 ? k.value : "fsdp_" + k.value;
      const FsdpKey* key = findKey(accelerateFsdpKeys(), name);
      if (!key) continue;
      std::vector<Note> notes;
      if (s.versionNode) notes.push_back(cx.note(s.versionNode->range, "the FSDP version is chosen here"));
      if (s.version == 2 && key->fsdp1 && !key->fsdp2) {
        cx.report(info(), k.range,
                  "`" + k.value + "` is an FSDP1 setting but this config uses `fsdp_version: 2`, where accelerate "
                  "does not apply it (silently, or with a warning at most); remove it or use the FSDP2 equivalent",
                  std::move(notes), fsdp1KeyFix(cx, s, k, v, name));
      } else if (s.version == 1 && name == "fsdp_activation_checkpointing_offload") {
        if (asBool(&v) == true)
          cx.report(info(), k.range,
                    "`" + k.value + ": " + v.value + "` needs FSDP2 but this config uses FSDP1 (`fsdp_version` absent or "
                    "1): accelerate's plugin raises `ValueError: activation_checkpointing_offload=True requires "
                    "fsdp_version=2`; set `fsdp_version: 2` or remove it",
                    std::move(notes));
      } else if (s.version == 1 && name == "fsdp_reshard_after_forward" &&
                 (s.role == Role::Accelerate || s.role == Role::LaunchFlags)) {
        reportFsdp1Reshard(cx, s, k, v, std::move(notes));
      } else if (s.version == 1 && key->fsdp2 && !key->fsdp1) {
        cx.report(info(), k.range,
                  "`" + k.value + "` is an FSDP2 setting but this config uses FSDP1 (`fsdp_version` absent or 1), "
                  "where accelerate does not apply it; set `fsdp_version: 2` or remove it",
                  std::move(notes));
      } else if (s.version == 2 && name == "fsdp_reshard_after_forward" && v.isScalar() && !truthValue(v.value)) {
        cx.report(info(), v.range,
                  "`fsdp_reshard_after_forward: " + v.value + "` is an FSDP1 sharding strategy; with FSDP2 it must "
                  "be true or false, and accelerate's `str_to_bool` raises `ValueError: invalid truth value " +
                  lower(v.value) + "`; use true (FULL_SHARD) or false (SHARD_GRAD_OP)",
                  std::move(notes), reshardValueFix(cx, v));
      }
    }
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL302(const RuleInfo* info) { return std::make_unique<KeyNotForFsdpVersion>(info); }
}  // namespace shardlint::rules
