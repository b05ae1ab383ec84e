// SL301 unknown-fsdp-key: a key inside `fsdp_config` that the consumer ignores silently.
#include <algorithm>

#include "config/ConfigFixes.h"
#include "config/ConfigRule.h"
#include "config/FsdpKeys.h"
#include "fsdp/Versions.h"

namespace shardlint::rules {
namespace {
using namespace config;

const std::vector<std::string> kAccelerate = {"accelerate"};

class UnknownFsdpKey final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    // argparse and Python reject unknown flags / keyword arguments loudly: nothing silent to report.
    if (s.role == Role::LaunchFlags || s.role == Role::Plugin) return;
    if (s.role == Role::Accelerate) checkAccelerateTopLevel(cx, s);
    if (!s.section) return;
    bool trainer = s.role == Role::TrainerJson;
    const auto& table = trainer ? trainerFsdpConfigKeys() : accelerateFsdpKeys();
    std::string consumer = trainer ? "transformers" : s.role == Role::Axolotl ? "axolotl/accelerate" : "accelerate";
    for (const auto& [k, v] : s.section->entries) {
      if (!k.isScalar()) continue;
      std::string name = k.value;
      // transformers strips `fsdp_`; accelerate and axolotl configs spell keys with it.
      std::string lookup = trainer ? std::string(bareKey(name)) : (name.rfind("fsdp_", 0) == 0 ? name : "fsdp_" + name);
      bool known = findKey(table, lookup);
      // axolotl hands fsdp_config to accelerate and to the Trainer: either's keys are read.
      if (s.role == Role::Axolotl) known = known || findKey(trainerFsdpConfigKeys(), bareKey(name));
      if (known) continue;
      // Training arguments, and an fsdp_config shown in documentation, may be read by a trainer built on
      // transformers' that reads keys of its own (ms-swift's `activation_cpu_offload`): quiet there too.
      bool ownKeysPossible =
          trainer && (s.root != s.section || (cx.file().path.size() > 3 &&
                                              cx.file().path.compare(cx.file().path.size() - 3, 3, ".md") == 0));
      if ((s.role == Role::Axolotl && name.rfind("fsdp_", 0) != 0) || ownKeysPossible) {
        // axolotl also accepts un-prefixed keys and forwards others; stay quiet unless it is a known typo.
        bool close = false;
        for (const auto& key : table) close = close || editDistance(lookup, key.name) <= 2;
        if (!close) continue;
      }
      std::string suggestion;
      bool renamed = false;
      const RenamedKey* rename = nullptr;
      if (!trainer)
        for (const auto& r : accelerateRenamedKeys())
          if (r.old == lookup) suggestion = std::string(r.replacement), renamed = true, rename = &r;
      // An accelerate config in a project that pins an accelerate whose launcher still reads the old
      // name: nothing is lost today. (axolotl reads its configs itself: the launcher's versions say
      // nothing there.)
      if (rename && s.role == Role::Accelerate && cx.project() && !rename->ignoredSince.empty())
        if (auto pin = fsdp::pinnedBelow(*cx.project(), kAccelerate, rename->ignoredSince)) {
          reportDeprecated(cx, s, k, name, *rename, *pin);
          continue;
        }
      size_t best = 99, atBest = 0;
      if (!renamed)
        for (const auto& key : table) {
          size_t d = editDistance(lookup, key.name);
          if (d < best) best = d, atBest = 0, suggestion = std::string(key.name);
          atBest += d == best;
        }
      std::string msg = "`" + name + "` is not a key " + consumer + " reads in `fsdp_config`; it is silently ignored";
      bool close = best <= std::max<size_t>(2, lookup.size() / 4);
      if (renamed && suggestion.rfind("fsdp_", 0) == 0) msg += " (it was renamed); use `" + suggestion + "`";
      else if (renamed) msg += "; it is not read from config files (" + suggestion + ")";
      else if (close) msg += "; did you mean `" + suggestion + "`?";
      // The fix renames the key to the renamed one, or to the unique nearest known key. The
      // setting then takes effect where it was ignored: behaviour changes, so it is unsafe.
      std::optional<Fix> fix;
      if ((renamed && suggestion.rfind("fsdp_", 0) == 0) || (!renamed && close && atBest == 1)) {
        std::string to = suggestion;
        bool prefixed = name.rfind("fsdp_", 0) == 0;
        if (trainer && prefixed) to = "fsdp_" + to;  // the file's own spelling
        if (!trainer && !prefixed && s.role == Role::Axolotl) to = std::string(bareKey(to));
        if (!s.section->get(to))
          if (auto text = stringText(cx.file(), k, to))
            fix = Fix{"Rename `" + name + "` to `" + to + "`", Applicability::Unsafe, {cx.edit(k.range, *text)}};
      }
      cx.report(info(), k.range, msg, {}, fix);
    }
  }

  // `name` (the old spelling of `r.replacement`) under a pin that keeps accelerate below the release
  // that stopped reading it: nothing when every allowed release predates the new name (the old one is
  // the only one they read); else a deprecation warning, whose rename is safe when every allowed
  // release reads the new name too, and unsafe when some reads only the old one.
  void reportDeprecated(ConfigContext& cx, const FsdpSettings& s, const YNode& k, const std::string& name,
                        const RenamedKey& r, const std::string& pin) {
    const Facts& facts = *cx.project();
    bool newNameRead = r.replacementSince.empty() || fsdp::pinnedAtLeast(facts, kAccelerate, r.replacementSince);
    if (!r.replacementSince.empty() && fsdp::pinnedBelow(facts, kAccelerate, r.replacementSince)) return;
    std::string to(r.replacement);
    std::string msg = "`" + name + "` is deprecated: the project pins " + pin +
                      (newNameRead ? ", whose launcher still reads it as `" + to + "`"
                                   : ", whose releases all still read it (" + std::string(r.replacementSince) +
                                         " and later as `" + to + "`)") +
                      ", but accelerate " + std::string(r.ignoredSince) + " and later ignore it silently; rename it to `" +
                      to + "`";
    if (!newNameRead)
      msg += " once the pin excludes accelerate before " + std::string(r.replacementSince) +
             ", which reads only the old name";
    std::optional<Fix> fix;
    if (!s.section->get(to))
      if (auto text = stringText(cx.file(), k, to))
        fix = Fix{"Rename `" + name + "` to `" + to + "`", newNameRead ? Applicability::Safe : Applicability::Unsafe,
                  {cx.edit(k.range, *text)}};
    cx.report(info(), k.range, msg, {}, fix).severity = Severity::Warning;
  }

  // FSDP keys written at the top level instead of inside fsdp_config.
  void checkAccelerateTopLevel(ConfigContext& cx, const FsdpSettings& s) {
    const auto& top = accelerateTopLevelKeys();
    for (const auto& [k, v] : s.root->entries) {
      if (!k.isScalar() || k.value.rfind("fsdp_", 0) != 0 || k.value == "fsdp_config") continue;
      if (std::find(top.begin(), top.end(), k.value) != top.end()) continue;
      if (!findKey(accelerateFsdpKeys(), k.value)) continue;
      cx.report(info(), k.range,
                "`" + k.value + "` belongs inside `fsdp_config:`; at the top level accelerate rejects the file "
                "(\"The config file at ... had unknown keys\"); move it under fsdp_config");
    }
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL301(const RuleInfo* info) { return std::make_unique<UnknownFsdpKey>(info); }
}  // namespace shardlint::rules
