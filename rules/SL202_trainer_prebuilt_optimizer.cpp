// SL202 trainer-prebuilt-optimizer: transformers' Trainer given `optimizers=(opt, sched)` while FSDP is
// enabled, which `Trainer.__init__` refuses with a RuntimeError.
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;

// "file:begin-end" (FsdpModel's keywordText) as a site.
std::optional<semantic::Site> parseSite(std::string_view at) {
  size_t colon = at.find(':'), dash = at.find('-');
  if (colon == std::string_view::npos || dash == std::string_view::npos || dash < colon) return std::nullopt;
  try {
    semantic::Site s;
    s.file = static_cast<uint32_t>(std::stoul(std::string(at.substr(0, colon))));
    s.range.begin = static_cast<uint32_t>(std::stoul(std::string(at.substr(colon + 1, dash - colon - 1))));
    s.range.end = static_cast<uint32_t>(std::stoul(std::string(at.substr(dash + 1))));
    return s;
  } catch (...) {
    return std::nullopt;
  }
}

class TrainerPrebuiltOptimizer final : public Rule {
 public:
  explicit TrainerPrebuiltOptimizer(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  std::vector<std::vector<std::string_view>> prescanTokens() const override { return {{"optimizers"}, {"Trainer"}}; }

  void finish(RuleContext& cx) override {
    std::set<std::pair<uint32_t, uint32_t>> seen, controlsSeen;
    uint32_t self = cx.analysis().module().fileId();
    for (const auto& root : cx.analysis().roots()) {
      const Store& st = *root.store;
      for (const Event* e : domainEvents(st, "trainer_optimizers")) {
        // At the `optimizers=` argument when it is in this file, else at the call that leads to it.
        semantic::Site primary = e->origin.siteIn(self);
        if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) continue;
        bool fromArgs = e->attr("fsdp_from") == "args";
        std::string why = fromArgs ? "its `TrainingArguments` enable FSDP (`" + std::string(e->attr("fsdp_text")) + "`)"
                                   : "the accelerate config the script is launched with enables FSDP";
        std::string msg = "`" + std::string(e->attr("call")) + "(..., optimizers=...)` is given " +
                          std::string(e->attr("passed")) + " built outside it while " + why +
                          ": `Trainer.__init__` raises `RuntimeError: Passing `optimizers` is not allowed if ... "
                          "PyTorch FSDP is enabled`, because FSDP wraps the model after the Trainer is built; let the "
                          "Trainer build them (`optim=`, `lr_scheduler_type=` in the arguments) or override "
                          "`create_optimizer` / `create_scheduler` in a `Trainer` subclass";
        std::vector<Note> notes;
        if (primary != e->origin.site()) notes.push_back(cx.note(e->origin.site(), "`optimizers=` is passed here"));
        if (fromArgs) {
          if (auto at = parseSite(e->attr("fsdp_at")))
            notes.push_back(cx.note(*at, "FSDP is enabled here"));
        } else if (auto n = linkedConfigNote(*e, "FSDP is enabled by this config")) {
          notes.push_back(*n);
        }
        cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
      }
      if (!cx.wantsControls()) continue;
      // Controls (`shardlint probe --controls`): a Trainer with FSDP on that builds its own optimizer, and one
      // handed an optimizer while its arguments turn FSDP off as written. The probe runs each for one step.
      for (const Event* e : domainEvents(st, "trainer_control")) {
        semantic::Site primary = e->origin.site();
        if (primary.file != self || !controlsSeen.insert({primary.file, primary.range.begin}).second) continue;
        bool own = e->attr("kind") == "own";
        bool fromArgs = e->attr("fsdp_from") == "args";
        std::map<std::string, std::string> facts{{"shape", own ? "trainer-builds-optimizer" : "trainer-prebuilt-optimizer"},
                                                 {"wrap_api", "trainer"},
                                                 {"fsdp_from", own ? (fromArgs ? "args" : "launcher") : "off"}};
        if (own && !fromArgs && !e->attr("fsdp_version").empty()) facts["fsdp_version"] = std::string(e->attr("fsdp_version"));
        std::string call(e->attr("call"));
        std::string msg =
            own ? "`" + call + "(...)` builds its own optimizer while " +
                      (fromArgs ? "its `TrainingArguments` enable FSDP (`" + std::string(e->attr("fsdp_text")) + "`)"
                                : std::string("the accelerate config the script is launched with enables FSDP"))
                : "`" + call + "(..., optimizers=...)` is given an optimizer built outside it while its "
                                "`TrainingArguments` leave FSDP off (`" + std::string(e->attr("fsdp_text")) + "`)";
        cx.control(info(), primary, std::move(msg), std::move(facts));
      }
    }
  }

 private:
  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL202(const RuleInfo* info) { return std::make_unique<TrainerPrebuiltOptimizer>(info); }

}  // namespace shardlint::rules
