// SL311 invalid-fsdp-value: an enumerated FSDP setting whose value the consumer rejects or misreads.
#include <algorithm>
#include <cctype>

#include "config/ConfigFixes.h"
#include "config/ConfigRule.h"
#include "config/FsdpKeys.h"
#include "fsdp/Versions.h"

namespace shardlint::rules {
namespace {
using namespace config;

// The enumerated settings, by bare name. `digits`: the largest number accelerate also takes for the
// setting (the torch enum's value; 0 = none). `fsdp1Only`: read for FSDP1 only (on FSDP2 the value is
// dropped before it is checked, SL302's business). `error`: what an unknown value does (accelerate 1.x).
struct EnumSetting {
  std::string_view bare;
  int digits;
  bool fsdp1Only;
  bool trainer;  // a key of the Trainer's fsdp_config
  std::string_view error;
};
constexpr EnumSetting kSettings[] = {
    {"auto_wrap_policy", 0, false, true,
     "accelerate raises `ValueError: Invalid auto wrap policy` (accelerate before 0.34.0 silently wraps nothing)"},
    {"sharding_strategy", 5, true, false, "accelerate raises `KeyError` (`ValueError` before 0.34.0)"},
    {"backward_prefetch", 2, true, true, "accelerate raises `KeyError` (`ValueError` before 0.34.0)"},
    {"state_dict_type", 3, false, true, "accelerate raises `KeyError` (`ValueError` before 0.34.0)"},
};
// accelerate 0.34.0 upper-cases these names; before it they must be written in capitals.
constexpr std::string_view kCaseInsensitiveSince = "0.34.0";
const std::vector<std::string> kAccelerate = {"accelerate"};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class InvalidFsdpValue final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (!s.section) return;
    bool trainer = s.role == Role::TrainerJson;
    for (const auto& setting : kSettings) {
      if (trainer && !setting.trainer) continue;  // SL301 reports `sharding_strategy` in a Trainer config
      if (setting.fsdp1Only && s.version == 2) continue;
      const auto* e = s.entry(setting.bare);
      if (!e || !e->second.isScalar()) continue;
      const YNode& v = e->second;
      // The accelerate key's values (the Trainer's agree: transformers upper-cases or passes them on).
      const FsdpKey* key = findKey(accelerateFsdpKeys(), "fsdp_" + std::string(setting.bare));
      if (!key) continue;
      std::vector<std::string_view> names;
      for (auto n : key->values)
        if (!std::isdigit(static_cast<unsigned char>(n[0]))) names.push_back(n);
      Resolved r = shardlint::config::resolveYaml11(v);
      if (!v.quoted && s.role != Role::Plugin &&
          (r.type == Resolved::Type::Null || r.type == Resolved::Type::Bool))
        continue;  // null is "not set"; a boolean is another rule's mistake
      std::string text = v.value;
      if (text.empty()) continue;
      bool number = !v.quoted && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
      if (number) {
        if (setting.digits > 0 && text.size() == 1 && text[0] >= '1' && text[0] <= '0' + setting.digits) continue;
      } else if (std::find(names.begin(), names.end(), upper(text)) != names.end()) {
        if (text == upper(text)) continue;
        // A name in the wrong case: read since 0.34.0, rejected (or, for the wrap policy, not
        // recognised) by the releases before, which the project may pin.
        if (s.role == Role::Accelerate || s.role == Role::LaunchFlags) reportCase(cx, s, e->first, v, setting);
        continue;
      }
      report(cx, s, e->first, v, setting, names, number);
    }
  }

  void report(ConfigContext& cx, const FsdpSettings& s, const YNode& k, const YNode& v, const EnumSetting& setting,
              const std::vector<std::string_view>& names, bool number) {
    std::string u = upper(v.value);
    size_t best = 99, atBest = 0;
    std::string to;
    if (!number)
      for (auto n : names) {
        size_t d = editDistance(u, n);
        if (d < best) best = d, atBest = 0, to = std::string(n);
        atBest += d == best;
      }
    bool close = atBest == 1 && best <= std::max<size_t>(2, u.size() / 4);
    if (!number && !close) {  // a name cut short (`SHARDED_STATE`): the one valid name it begins
      size_t starts = 0;
      for (auto n : names)
        if (u.size() >= 4 && n.substr(0, u.size()) == u) starts++, to = std::string(n);
      close = starts == 1;
    }
    std::string valid;
    for (auto n : names) valid += (valid.empty() ? "" : ", ") + std::string(n);
    if (setting.digits > 0) valid += ", or 1-" + std::to_string(setting.digits);
    std::string error(setting.error);
    if (number && setting.digits > 0) error = "accelerate raises `ValueError` (no such enum value)";
    std::string msg = "`" + v.value + "` is not a valid `" + k.value + "` (" + valid + "): " + error;
    if (s.role == Role::TrainerJson)
      msg = "`" + v.value + "` is not a valid `" + k.value + "` (" + valid +
            "): transformers, or the accelerate plugin it builds from it, rejects it at start-up";
    if (close) msg += "; did you mean `" + to + "`?";
    std::optional<Fix> fix;
    // Unsafe: the run changes from failing (or not wrapping) to the setting named, which should be the
    // one meant; review it.
    if (close)
      if (auto t = stringText(cx.file(), v, to))
        fix = Fix{"Replace `" + v.value + "` with `" + to + "`", Applicability::Unsafe, {cx.edit(v.range, *t)}};
    (void)s;
    cx.report(info(), v.range, msg, {}, fix);
  }

  void reportCase(ConfigContext& cx, const FsdpSettings& s, const YNode& k, const YNode& v, const EnumSetting& setting) {
    if (!cx.project()) return;
    auto pin = fsdp::pinnedBelow(*cx.project(), kAccelerate, kCaseInsensitiveSince);
    if (!pin) return;
    std::string to = upper(v.value);
    std::string what = setting.bare == "auto_wrap_policy"
                           ? "matches none of its policies, so nothing is wrapped"
                           : "raises `ValueError` (it looks the name up as written)";
    std::string msg = "`" + v.value + "` for `" + k.value + "`: the project pins " + *pin +
                      ", which reads this setting case-sensitively and " + what + "; write `" + to +
                      "` (accelerate " + std::string(kCaseInsensitiveSince) + " and later upper-case it)";
    std::optional<Fix> fix;
    // Unsafe like the misspellings: the pinned accelerate then applies the setting it ignored or rejected.
    if (auto t = stringText(cx.file(), v, to))
      fix = Fix{"Write `" + to + "`", Applicability::Unsafe, {cx.edit(v.range, *t)}};
    (void)s;
    cx.report(info(), v.range, msg, {}, fix);
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL311(const RuleInfo* info) { return std::make_unique<InvalidFsdpValue>(info); }
}  // namespace shardlint::rules
