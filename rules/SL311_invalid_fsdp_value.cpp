// SL311 invalid-fsdp-value: an enumerated FSDP setting whose value the consumer rejects or misreads.
#include <algorithm>
#include <cctype>

#include "config/ConfigFixes.h"
#include "config/ConfigRule.h"
#include "config/FsdpKeys.h"
#include "config/PyLiteral.h"
#include "syntax/TreeSitter.h"
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
// accelerate 0.26.0 is the first release that takes the sharding strategy by name (0.25.0: a number only).
constexpr std::string_view kShardingNamesSince = "0.26.0";
const std::vector<std::string> kAccelerate = {"accelerate"};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// One problem with the Trainer's `fsdp` option string: the bytes it is about, the message, and the
// replacement text for those bytes (empty: no fix).
struct OptionProblem {
  ByteRange range;
  std::string message;
  std::string replacement;
};

// The words of a Trainer `fsdp` string (`"full_shard auto_wrap"`) that `TrainingArguments` rejects:
// each word is looked up as written in transformers' `FSDPOption` (a `ValueError` for any other), and
// `offload` alone or `full_shard` with `shard_grad_op` raise `ValueError` too. `v` is the scalar as
// written in `text`; a word's bytes are found in the written value (none when it is escaped).
// `needEvidence`: a command line or a YAML file whose `fsdp` may be some other program's option: only
// judged when one word is a Trainer option.
std::vector<OptionProblem> trainerOptionProblems(std::string_view text, const YNode& v, bool needEvidence) {
  std::vector<OptionProblem> out;
  const auto& options = trainerFsdpOptions();
  auto isOption = [&](std::string_view w) { return std::find(options.begin(), options.end(), w) != options.end(); };
  std::vector<std::pair<std::string, ByteRange>> words;
  std::string_view written = v.range.end <= text.size() && v.range.begin < v.range.end
                                 ? text.substr(v.range.begin, v.range.end - v.range.begin)
                                 : std::string_view{};
  size_t searchFrom = 0;
  const std::string& value = v.value;
  for (size_t i = 0; i < value.size();) {
    if (std::isspace(static_cast<unsigned char>(value[i]))) {
      ++i;
      continue;
    }
    size_t e = i;
    while (e < value.size() && !std::isspace(static_cast<unsigned char>(value[e]))) ++e;
    std::string word = value.substr(i, e - i);
    ByteRange r = v.range;  // the whole value when the word is not written as such
    size_t at = written.find(word, searchFrom);
    if (at != std::string_view::npos) {
      r = ByteRange{v.range.begin + static_cast<uint32_t>(at), v.range.begin + static_cast<uint32_t>(at + word.size())};
      searchFrom = at + word.size();
    }
    words.emplace_back(std::move(word), r);
    i = e;
  }
  if (words.empty()) return out;
  bool evidence = std::any_of(words.begin(), words.end(), [&](const auto& w) { return isOption(w.first); });
  if (needEvidence && !evidence) return out;
  std::string valid;
  for (auto o : options) valid += (valid.empty() ? "" : ", ") + std::string(o);
  for (const auto& [word, r] : words) {
    if (isOption(word)) continue;
    std::string lower = word;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string to;
    if (isOption(lower)) {
      to = lower;
    } else {
      size_t best = 99, atBest = 0;
      for (auto o : options) {
        size_t d = editDistance(lower, o);
        if (d < best) best = d, atBest = 0, to = std::string(o);
        atBest += d == best;
      }
      if (atBest != 1 || best > std::max<size_t>(2, lower.size() / 4)) to.clear();
    }
    std::string msg = "`" + word + "` is not a Trainer `fsdp` option (" + valid +
                      "; lower case, separated by spaces): `TrainingArguments` raises `ValueError: " + word +
                      " is not a valid FSDPOption` at start-up";
    if (!to.empty()) msg += "; did you mean `" + to + "`?";
    bool exact = r.end - r.begin == word.size() && written.size() >= r.end - v.range.begin;
    out.push_back({r, msg, exact ? to : std::string()});
  }
  if (!out.empty()) return out;
  auto has = [&](std::string_view o) {
    return std::any_of(words.begin(), words.end(), [&](const auto& w) { return w.first == o; });
  };
  if (words.size() == 1 && words[0].first == "offload")
    out.push_back({v.range,
                   "`offload` alone is not a Trainer `fsdp` setting: `TrainingArguments` raises `ValueError` (it needs "
                   "`full_shard` or `shard_grad_op` with it, e.g. `\"full_shard offload\"`)",
                   ""});
  if (has("full_shard") && has("shard_grad_op"))
    out.push_back({v.range,
                   "`full_shard` and `shard_grad_op` together: `TrainingArguments` raises `ValueError` (they are "
                   "two sharding strategies; keep one)",
                   ""});
  return out;
}

class InvalidFsdpValue final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    auto tokens = ConfigRule::prescanTokens();
    for (auto name : trainingArgumentsClasses()) tokens[0].push_back(name);
    return tokens;
  }

  void onNode(RuleContext& cx, TSNode call) override {
    ConfigRule::onNode(cx, call);
    // `TrainingArguments(..., fsdp="full_shard auto_wrap")`: a string literal (a list is not split or
    // looked up; a boolean means full_shard or nothing).
    const auto& classes = trainingArgumentsClasses();
    std::string_view src = cx.file().text;
    if (std::find(classes.begin(), classes.end(), syntax::calleeLastName(call, src)) == classes.end()) return;
    for (const auto& kw : syntax::keywordArguments(call)) {
      if (syntax::textOf(kw.name, src) != "fsdp") continue;
      std::vector<YNode> docs{shardlint::config::fromPythonLiteral(kw.value, src)};
      if (!docs[0].isScalar() || !docs[0].quoted) return;
      ConfigContext ccx(cx.file(), docs, cx.sink());
      reportOptions(ccx, docs[0], /*needEvidence=*/false);
    }
  }

  void checkConfig(ConfigContext& cx) override {
    ConfigRule::checkConfig(cx);
    for (const auto& doc : cx.documents()) {
      if (!doc.isMap()) continue;
      // A script's `--fsdp VALUE` on a command line (config/Links.cpp), or training arguments in a
      // YAML / JSON file (`fsdp: "full_shard auto_wrap"` beside an `fsdp_config` mapping).
      bool scriptArgs = doc.get("__script_args__") != nullptr;
      if (!scriptArgs) {
        auto s = detectFsdp(cx.file(), doc);
        if (!s || (s->role != Role::TrainerJson && s->role != Role::Axolotl) || s->section == s->root) continue;
      }
      const YNode* v = nullptr;
      for (const auto& [k, val] : doc.entries)
        if (k.isScalar() && k.value == "fsdp") v = &val;
      if (!v || !v->isScalar() || v->value.empty()) continue;
      if (!scriptArgs) {
        Resolved r = shardlint::config::resolveYaml11(*v);
        if (!v->quoted && r.type != Resolved::Type::String) continue;  // true/false/null: not an option string
      }
      reportOptions(cx, *v, /*needEvidence=*/true);
    }
  }

 private:
  void reportOptions(ConfigContext& cx, const YNode& v, bool needEvidence) {
    for (auto& p : trainerOptionProblems(cx.file().text, v, needEvidence)) {
      std::optional<Fix> fix;
      // Unsafe like the other misspellings: the run then shards as the word names, which should be the
      // option meant; review it.
      if (!p.replacement.empty())
        fix = Fix{"Replace `" + std::string(cx.file().text.substr(p.range.begin, p.range.end - p.range.begin)) +
                      "` with `" + p.replacement + "`",
                  Applicability::Unsafe, {cx.edit(p.range, p.replacement)}};
      cx.report(info(), p.range, p.message, {}, fix);
    }
  }

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
      bool pinnable = s.role == Role::Accelerate || s.role == Role::LaunchFlags;
      if (number) {
        if (setting.digits > 0 && text.size() == 1 && text[0] >= '1' && text[0] <= '0' + setting.digits) {
          if (pinnable && setting.bare != "sharding_strategy") reportNumberUnderPin(cx, e->first, v, setting);
          continue;
        }
      } else if (std::find(names.begin(), names.end(), upper(text)) != names.end()) {
        if (pinnable && setting.bare == "sharding_strategy" && reportNameUnderPin(cx, e->first, v, names)) continue;
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

  // Before 0.34.0 accelerate looks the backward prefetch and the state-dict type up by name only
  // (`FSDP_BACKWARD_PREFETCH.index(value) + 1`): a number is a `ValueError`. The names, in the order whose
  // position + 1 is the torch enum's value, are the first `digits` of `names`.
  void reportNumberUnderPin(ConfigContext& cx, const YNode& k, const YNode& v, const EnumSetting& setting) {
    if (!cx.project()) return;
    auto pin = fsdp::pinnedBelow(*cx.project(), kAccelerate, kCaseInsensitiveSince);
    if (!pin) return;
    static const std::vector<std::string_view> kPrefetch = {"BACKWARD_PRE", "BACKWARD_POST"};
    static const std::vector<std::string_view> kStateDict = {"FULL_STATE_DICT", "LOCAL_STATE_DICT",
                                                             "SHARDED_STATE_DICT"};
    const auto& order = setting.bare == "backward_prefetch" ? kPrefetch : kStateDict;
    size_t n = static_cast<size_t>(v.value[0] - '1');
    if (n >= order.size()) return;
    std::string to(order[n]);
    std::string msg = "`" + v.value + "` for `" + k.value + "`: the project pins " + *pin +
                      ", which reads this setting by name only and raises `ValueError` for a number; write `" + to +
                      "` (accelerate " + std::string(kCaseInsensitiveSince) + " and later also take the number)";
    std::optional<Fix> fix;
    if (auto t = stringText(cx.file(), v, to))
      fix = Fix{"Write `" + to + "`", Applicability::Unsafe, {cx.edit(v.range, *t)}};
    cx.report(info(), v.range, msg, {}, fix);
  }

  // Before 0.26.0 accelerate reads the sharding strategy as a number only (`int(...)`, and
  // `accelerate launch --fsdp_sharding_strategy` has `type=int`): a name is a `ValueError`.
  bool reportNameUnderPin(ConfigContext& cx, const YNode& k, const YNode& v, const std::vector<std::string_view>& names) {
    if (!cx.project()) return false;
    auto pin = fsdp::pinnedBelow(*cx.project(), kAccelerate, kShardingNamesSince);
    if (!pin) return false;
    auto it = std::find(names.begin(), names.end(), upper(v.value));
    if (it == names.end()) return false;
    std::string to = std::to_string(it - names.begin() + 1);
    std::string msg = "`" + v.value + "` for `" + k.value + "`: the project pins " + *pin +
                      ", which reads the sharding strategy as a number only and raises `ValueError` for a name; write `" +
                      to + "` (" + std::string(*it) + "; accelerate " + std::string(kShardingNamesSince) +
                      " and later also take the name)";
    std::optional<Fix> fix;
    if (auto t = stringText(cx.file(), v, to))
      fix = Fix{"Write `" + to + "`", Applicability::Unsafe, {cx.edit(v.range, *t)}};
    cx.report(info(), v.range, msg, {}, fix);
    return true;
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
