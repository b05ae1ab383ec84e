// SL305 min-num-params-invalid: fsdp_min_num_params that is not an int after PyYAML resolution, or 0 with SIZE_BASED_WRAP.
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>

#include "config/ConfigFixes.h"
#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

// The digits of `text` read as a number (`1e8`, `1.5e8`, `100000000.0`) when it is a whole number
// that fits an int: what the value was meant to be. nullopt for anything else.
std::optional<std::string> integerDigits(const std::string& text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' &&
        c != '_')
      return std::nullopt;
  std::string plain;
  for (char c : text)
    if (c != '_') plain += c;
  double d = 0;
  size_t used = 0;
  try {
    d = std::stod(plain, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used != plain.size() || d < 0 || d > 9.0e15 || d != static_cast<double>(static_cast<long long>(d)))
    return std::nullopt;
  return std::to_string(static_cast<long long>(d));
}

// Replaces the value with the integer it stands for. The value as written makes the launch fail,
// so nothing that runs today changes: safe.
std::optional<Fix> integerFix(ConfigContext& cx, const YNode& v) {
  if (!v.isScalar()) return std::nullopt;
  auto digits = integerDigits(v.value);
  if (!digits) return std::nullopt;
  return Fix{"Write `" + *digits + "`", Applicability::Safe, {cx.edit(v.range, *digits)}};
}

class MinNumParamsInvalid final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    const auto* e = s.entry("min_num_params");
    if (!e) return;
    const YNode& v = e->second;
    if (s.role == Role::Plugin) return;  // a value in code is not parsed from text
    if (s.role == Role::LaunchFlags) {
      // The launcher exports the flag's text; the plugin then calls int() on it.
      std::string t = v.value;
      bool integer = !t.empty();
      for (size_t i = 0; i < t.size(); ++i)
        integer = integer && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '_' ||
                              (i == 0 && (t[i] == '-' || t[i] == '+')));
      if (!integer)
        cx.report(info(), v.range,
                  "`--" + e->first.value + " " + t + "` is not an integer: the launcher passes the text on and the "
                  "plugin's `int('" + t + "')` fails with `ValueError: invalid literal for int() with base 10`; "
                  "write the integer out",
                  {}, integerFix(cx, v));
      return;
    }
    Resolved r = shardlint::config::resolveYaml11(v);
    if (s.role == Role::TrainerJson) {
      if (v.isScalar() && !v.quoted && r.type == Resolved::Type::Int && r.integer >= 0) return;
      if (v.isScalar() && !v.quoted && r.type == Resolved::Type::Float) return;  // json numbers; int(...) applies
      if (v.isScalar() && v.quoted)
        cx.report(info(), v.range,
                  "`" + e->first.value + "` is the string \"" + v.value +
                      "\"; transformers passes it to the size-based wrap policy, which compares it with a number and "
                      "fails with `TypeError`; write a number without quotes",
                  {}, integerFix(cx, v));
      return;
    }
    if (r.type == Resolved::Type::Int) {
      if (r.integer != 0) return;
      const auto* policy = s.entry("auto_wrap_policy");
      if (!policy || asString(&policy->second) != "SIZE_BASED_WRAP") return;
      cx.report(info(), v.range,
                "`fsdp_min_num_params: 0` with `SIZE_BASED_WRAP`: accelerate silently ignores a zero threshold, so "
                "nothing is wrapped below the root (one giant FSDP unit: full all-gathers, no memory saving); set a "
                "positive threshold such as 100000000",
                {cx.note(policy->second.range, "the size-based policy is selected here")});
      return;
    }
    std::string shown = v.isScalar() ? v.value : std::string("this value");
    std::string why = r.type == Resolved::Type::String
                          ? "PyYAML (YAML 1.1, which accelerate uses) reads `" + shown + "` as the string '" + shown + "'"
                          : "PyYAML reads `" + shown + "` as a " + std::string(shardlint::config::typeName(r.type));
    char fixed[64] = "100000000";
    if (r.type == Resolved::Type::Float) std::snprintf(fixed, sizeof fixed, "%.0f", r.real);
    else if (v.isScalar()) {
      try {
        std::snprintf(fixed, sizeof fixed, "%.0f", std::stod(v.value));
      } catch (...) {
      }
    }
    cx.report(info(), v.range,
              "`" + e->first.value + ": " + shown + "` is not an integer: " + why +
                  ", and the launcher's `int(...)` fails with `ValueError: invalid literal for int() with base 10: '" +
                  shown + "'`; write the integer out (`" + fixed + "`)",
              {}, integerFix(cx, v));
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL305(const RuleInfo* info) { return std::make_unique<MinNumParamsInvalid>(info); }
}  // namespace shardlint::rules
