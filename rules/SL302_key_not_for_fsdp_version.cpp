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
