// SL105 params-replaced-after-optimizer: an optimizer built from a module's parameters, then
// the module's parameters are replaced (PEFT adapters, `to_empty`, `load_state_dict(assign=True)`)
// before the module is wrapped or prepared, and the optimizer is used with the wrapped model.
#include <algorithm>
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/Staleness.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::kNoObj;

class ParamsReplacedAfterOptimizer final : public Rule {
 public:
  const RuleInfo& info() const override { return *info_; }
  explicit ParamsReplacedAfterOptimizer(const RuleInfo* info) : info_(info) {}

  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    auto tokens = optimizerAndWrapTokens();
    tokens.push_back({"get_peft_model", "PeftModel", "to_empty", "assign"});
    return tokens;
  }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  static std::string whatHappens(std::string_view how) {
    if (how == "PeftModel.from_pretrained")
      return "`PeftModel.from_pretrained(..., is_trainable=True)` freezes those parameters and adds the loaded "
             "adapter's parameters, so the optimizer holds only frozen base weights and none of the adapters";
    if (how == "get_peft_model")
      return "`get_peft_model` freezes those parameters and adds new LoRA adapter parameters, so the optimizer "
             "holds only frozen base weights and none of the adapters";
    if (how == "to_empty")
      return "`to_empty` replaces every parameter of the module it is called on with a new Parameter object, so the "
             "optimizer holds tensors the model no longer uses";
    return "`load_state_dict(..., assign=True)` assigns the loaded tensors as new Parameter objects, so the "
           "optimizer holds tensors the model no longer uses";
  }

  static std::string consequence(const Store& st, std::string_view how, const Event& wrap, ObjId opt) {
    bool repointed = std::any_of(st.events.begin(), st.events.end(), [&](const Event& e) {
      return e.kind == semantic::EventKind::Domain && e.name == "repoint" && e.target == opt;
    });
    bool peft = how == "get_peft_model" || how == "PeftModel.from_pretrained";
    if (!peft && wrap.attr("api") == "accelerate" && wrap.attr("fsdp_version") == "2" && repointed)
      return "accelerate FSDP2 `prepare` then fails with KeyError \"A parameter in the optimizer couldn't be "
             "switched to its sharded version\"";
    return "after " + std::string(wrapApiName(wrap)) + " wraps the model, training silently updates nothing";
  }

  // Each optimizer built from a module's parameters (one a wrap does not make stale by itself, not in
  // `skip`), with a replacement of that module's parameters and a later wrap of it, in the order
  // optimizer, replacement, wrap (`optimizerFirst`) or replacement, optimizer, wrap. `visit(opt, r, w)`
  // returns true when it is done with that optimizer.
  template <class Visit>
  static void forEachOrder(const Store& st, const std::vector<const Event*>& replacements,
                           const std::vector<const Event*>& wraps, const std::vector<StaleOptimizer>& stale,
                           const std::set<ObjId>& skip, bool optimizerFirst, Visit visit) {
    for (ObjId opt : optimizers(st)) {
      if (skip.count(opt) ||
          std::any_of(stale.begin(), stale.end(), [&](const StaleOptimizer& s) { return s.optimizer == opt; }))
        continue;
      const auto& o = st.obj(opt);
      if (o.inputs().empty()) continue;
      ValueSet sources = paramSources(st, o.inputs()[0]);
      if (sources.empty()) continue;
      bool done = false;
      for (const Event* r : replacements) {
        if (done) break;
        semantic::PointId first = optimizerFirst ? o.point : r->point, second = optimizerFirst ? r->point : o.point;
        if (r->target == kNoObj || !st.precedes(first, second)) continue;
        Lineage replaced = lineageOf(st, r->target);
        if (replaced.root == kNoObj || !sourcesRelatedTo(st, sources, replaced)) continue;
        for (const Event* w : wraps) {
          if (w->target == kNoObj || alreadyShardedBy(st, *w).root != kNoObj) continue;
          if (!st.precedes(second, w->point)) continue;
          Lineage target = lineageOf(st, w->target);
          if (!within(target, replaced) && !within(replaced, target)) continue;
          if (visit(opt, *r, *w)) {
            done = true;
            break;
          }
        }
      }
    }
  }

  void check(RuleContext& cx, const Store& st) {
    auto replacements = domainEvents(st, "replace_params");
    if (replacements.empty()) return;
    auto wraps = domainEvents(st, "wrap");
    // An optimizer that a wrap itself makes stale (FSDP1 / accelerate FSDP1 with use_orig_params=False,
    // `fully_shard`) is SL101's or SL402's: building it after the wrap fixes the replacement too.
    auto stale = staleOptimizers(st, [](const Event&) { return true; });
    std::set<ObjId> reported;
    forEachOrder(st, replacements, wraps, stale, {}, true, [&](ObjId opt, const Event& r, const Event& w) {
      const Event* use = useFromWrap(st, opt, w, r);
      if (!use) return false;
      report(cx, st, opt, r, w, *use);
      reported.insert(opt);
      return true;
    });
    if (cx.wantsControls()) emitControls(cx, st, replacements, wraps, stale, reported);
  }

  // The replacement's name in a replay spec (ReplaySpec::replacement).
  static std::string replayName(std::string_view how) {
    if (how == "get_peft_model") return "get_peft_model";
    if (how == "PeftModel.from_pretrained") return "peft_from_pretrained";
    if (how == "to_empty") return "to_empty";
    return "load_state_dict_assign";
  }

  // Controls: an optimizer built after the replacement (on every path), from the module it replaced, then
  // handed to or used after a wrap that keeps or re-points the parameters it is given (the wraps SL105
  // reports at when the order is the other way round). The probe replays the replacement, the optimizer
  // and the wrap in that order and expects the optimizer to hold every trainable parameter.
  void emitControls(RuleContext& cx, const Store& st, const std::vector<const Event*>& replacements,
                    const std::vector<const Event*>& wraps, const std::vector<StaleOptimizer>& stale,
                    const std::set<ObjId>& reported) {
    forEachOrder(st, replacements, wraps, stale, reported, false, [&](ObjId opt, const Event& r, const Event& w) {
      const auto& o = st.obj(opt);
      std::string_view api = w.attr("api"), replaces = w.attr("replaces");
      bool repointed = std::any_of(st.events.begin(), st.events.end(), [&](const Event& e) {
        return e.kind == semantic::EventKind::Domain && e.name == "repoint" && e.target == opt;
      });
      // Wraps that keep or re-point the parameters an optimizer was given; others (use_orig_params=False,
      // `fully_shard`, a value the analysis cannot read) make it stale by themselves: SL101's and SL402's.
      bool fsdp2 = api == "accelerate" && w.attr("fsdp_version") == "2";
      bool keeps = (api == "fsdp1" || api == "fabric" || (api == "accelerate" && !fsdp2)) && replaces == "0";
      if (!(fsdp2 && repointed) && !(api == "fabric" && repointed) && !keeps) return false;
      if (!useFromWrap(st, opt, w, r)) return false;
      std::map<std::string, std::string> facts{{"shape", "params-replaced-before-optimizer"},
                                               {"wrap_api", std::string(api)},
                                               {"fsdp_version", fsdp2 ? "2" : "1"},
                                               {"use_orig_params", "1"},
                                               {"replacement", replayName(r.attr("how"))}};
      if (api == "fabric" && repointed) facts["joint"] = "1";
      Event here;
      here.origin = o.origin;
      ValueSet sources = paramSources(st, o.inputs()[0]);
      std::string source = writtenSource(cx, st, opt, here);
      if (source.empty()) source = render(st, moduleOfSource(writtenLineage(st, sources.front())));
      cx.control(info(), o.origin.primaryIn(r.origin),
                 "optimizer built from the parameters of `" + source + "` after `" + std::string(r.attr("how")) +
                     "` replaces them, before " + std::string(wrapApiName(w)) + " wraps the model",
                 std::move(facts));
      return true;
    });
  }

  void report(RuleContext& cx, const Store& st, ObjId opt, const Event& r, const Event& w, const Event& use) {
    const auto& o = st.obj(opt);
    std::string how(r.attr("how"));
    std::string call = "`" + how + "`";
    semantic::Site primary = o.origin.primaryIn(r.origin);
    semantic::Site replacedAt = r.origin.primaryIn(o.origin);
    std::vector<Note> notes;
    // Both inside methods of one class (built in __init__, replaced in setup()): point into the class.
    const auto* builtIn = cx.enclosingFunction(o.origin.site());
    const auto* replacedIn = cx.enclosingFunction(r.origin.site());
    if (builtIn && replacedIn && builtIn->cls && builtIn->cls == replacedIn->cls && primary != o.origin.site()) {
      notes.push_back(cx.note(primary, "the optimizer is built through this call"));
      notes.push_back(cx.note(replacedAt, "and the parameters are replaced through this later call"));
      primary = o.origin.site();
      replacedAt = r.origin.site();
    }
    // Reported at the construction itself: its argument as written names the source.
    Event here;
    here.origin = primary == o.origin.site() ? o.origin : r.origin;
    std::string source = writtenSource(cx, st, opt, here);
    // In a class's method: `self.model.parameters()` as written there.
    if (source.empty() && primary == o.origin.site()) source = writtenParamsOwner(cx, o);
    if (source.empty()) {
      ValueSet sources = paramSources(st, o.inputs()[0]);
      source = render(st, moduleOfSource(writtenLineage(st, sources.empty() ? kNoObj : sources.front())));
    }
    std::string msg = "optimizer is built from the parameters of `" + source + "` before " + call +
                      " replaces them; " + whatHappens(how) + "; " + consequence(st, how, w, opt) +
                      "; build the optimizer after " + call + ", from the model's current parameters";
    std::string when = onlyWhen(st, {o.point, r.point, w.point, use.point});
    if (!when.empty()) msg += " (this holds " + when + ")";
    notes.push_back(cx.note(replacedAt, "the parameters are replaced here, after the optimizer was built"));
    if (primary != o.origin.site()) notes.push_back(cx.note(o.origin.site(), "the optimizer is constructed here"));
    notes.push_back(cx.note(w.origin.primaryIn(o.origin), "the model is wrapped here"));
    if (use.origin.site() != w.origin.site())
      notes.push_back(cx.note(use.origin.primaryIn(o.origin), "the stale optimizer is used here"));
    cx.report(info(), primary, std::move(msg), std::move(notes));
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL105(const RuleInfo* info) { return std::make_unique<ParamsReplacedAfterOptimizer>(info); }

}  // namespace shardlint::rules
