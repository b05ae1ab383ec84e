// SL204 rank-guarded-state-dict: a state-dict gather that is a collective (every rank must call it) run only
// under a rank guard (`if rank == 0:`, `if accelerator.is_main_process:`, after `if rank != 0: return`): the other
// ranks never join and rank 0 waits in the collective until the process group times out. What is collective was
// measured on torch 2.15 / accelerate 1.15 (SL204_rank_guarded_state_dict.md).
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::ObjKind;

// The FSDP version of the wrap that `model` (any of its values) was sharded by before `p`: "1", "2", or "" when
// no wrap in evidence.
// `wraps`: the store's wrap events (domainEvents), read once per store.
std::string fsdpVersionOf(const Store& st, const std::vector<const Event*>& wraps, const ValueSet& model,
                          semantic::PointId p, std::string_view api = {}) {
  std::string found;
  for (ObjId m : model) {
    const semantic::Obj& o = st.obj(m);
    if (api.empty() && o.tag("fsdp_wrapper") == "fsdp1") return "1";
    Lineage l = lineageOf(st, m);
    if (l.root == semantic::kNoObj) continue;
    for (const Event* w : wraps) {
      if (w->target == semantic::kNoObj || !st.mayHappenBefore(w->point, p)) continue;
      if (!api.empty() && w->attr("api") != api) continue;
      // Fabric's strategies are not all torch FSDP1 (Thunder's FSDP strategy wraps with its own sharding): not read.
      if (w->attr("api") == "fabric") continue;
      Lineage t = lineageOf(st, w->target);
      if (t.root != l.root || !(within(l, t) || within(t, l))) continue;
      std::string v(w->attr("fsdp_version"));
      if (v == "1") return "1";
      if (v == "2") found = "2";
    }
  }
  return found;
}

struct Collective {
  std::string call;   // as the message names it
  std::string why;    // what the call gathers
  std::string shape;  // the probe's replay of the call under a rank guard ("-rank0-only") or on every rank
                      // ("-all-ranks"); empty: no replay (RuleContext::control facts)
  std::string wrapApi, fsdpVersion;
};

std::optional<Collective> collectiveAt(const Store& st, const std::vector<const Event*>& wraps, const Event& e) {
  if (e.kind == EventKind::MethodCall && e.name == "state_dict" && e.target != semantic::kNoObj &&
      e.args.empty()) {
    if (fsdpVersionOf(st, wraps, {e.target}, e.point) != "1") return std::nullopt;  // FSDP2's state_dict() gathers nothing
    return Collective{"`" + render(st, writtenLineage(st, e.target)) + ".state_dict()` on an FSDP1 model",
                      "all-gathers the flat parameters of every FSDP unit (with any state-dict type)", "state-dict",
                      "fsdp1", "1"};
  }
  if (e.kind == EventKind::Call) {
    size_t dot = e.name.rfind('.');
    if (dot == std::string::npos || !isFsdp1Class(std::string_view(e.name).substr(0, dot))) return std::nullopt;
    std::string_view m = std::string_view(e.name).substr(dot + 1);
    if (m != "full_optim_state_dict" && m != "optim_state_dict" && m != "sharded_optim_state_dict")
      return std::nullopt;
    return Collective{"`FSDP." + std::string(m) + "(...)`", "gathers the optimizer state across ranks",
                      m == "sharded_optim_state_dict" ? "" : (m == "optim_state_dict" ? "optim-state-dict" : "full-optim-state-dict"),
                      "fsdp1", "1"};
  }
  if (e.kind == EventKind::MethodCall && e.target != semantic::kNoObj && st.obj(e.target).hasTag("accelerator") &&
      (e.name == "get_state_dict" || e.name == "save_model" || e.name == "save_state")) {
    if (e.name == "save_state") {
      // save_state gathers the model and optimizer state; measured collective with FSDP1 only (see the .md).
      ValueSet models;
      for (const Event* w : wraps)
        if (w->attr("api") == "accelerate" && w->attr("fsdp_version") == "1" && w->target != semantic::kNoObj &&
            st.mayHappenBefore(w->point, e.point))
          semantic::addValue(models, w->target);
      if (models.empty()) return std::nullopt;
      return Collective{"`" + render(st, writtenLineage(st, e.target)) + ".save_state(...)` with accelerate FSDP1",
                        "gathers the model's state dict"};
    }
    if (e.args.empty()) return std::nullopt;
    std::string version = fsdpVersionOf(st, wraps, e.args[0], e.point, "accelerate");
    if (version.empty()) return std::nullopt;
    // The replay prepares an accelerate FSDP2 model (FSDP1's prepare on CPU is not replayed for this rule).
    std::string shape = version != "2" ? "" : e.name == "get_state_dict" ? "accelerate-state-dict" : "accelerate-save-model";
    return Collective{"`" + render(st, writtenLineage(st, e.target)) + "." + e.name + "(...)` of an accelerate FSDP" +
                          version + " model",
                      version == "1" ? "all-gathers the parameters under FULL_STATE_DICT"
                                     : "gathers the full state dict with `get_model_state_dict(full_state_dict=True)`",
                      shape, "accelerate", version};
  }
  return std::nullopt;
}

class RankGuardedStateDict final : public Rule {
 public:
  explicit RankGuardedStateDict(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{"state_dict", "save_model", "save_state"},
            {"rank", "main_process", "global_zero", "process_index", "process_zero"}};
  }

  void finish(RuleContext& cx) override {
    std::set<std::pair<uint32_t, uint32_t>> seen;
    uint32_t self = cx.analysis().module().fileId();
    for (const auto& root : cx.analysis().roots()) {
      const Store& st = *root.store;
      const std::vector<const Event*> wraps = domainEvents(st, "wrap");
      for (const Event& e : st.events) {
        if (e.kind != EventKind::MethodCall && e.kind != EventKind::Call) continue;
        if (e.point == semantic::kNoPoint) continue;
        auto c = collectiveAt(st, wraps, e);  // names first: cheaper than the regions around the call
        if (!c || fsdp::neverRuns(st, e.point) || expectedToFail(st, e.point)) continue;
        const semantic::Region* guard = rankGuard(st, e.point);
        if (!guard && !cx.wantsControls()) continue;
        semantic::Site primary = e.origin.siteIn(self);
        if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) continue;
        if (!guard) {
          // A control: the collective with no rank guard in sight, so every rank makes the call.
          if (!c->shape.empty())
            cx.control(info(), primary, c->call + " on every rank",
                       {{"shape", c->shape + "-all-ranks"}, {"wrap_api", c->wrapApi}, {"fsdp_version", c->fsdpVersion}});
          continue;
        }
        std::string cond = rankGuardText(*guard);
        std::string msg = c->call + " is a collective that every rank must call (it " + c->why +
                          "), but it runs only when " + cond +
                          ": the other ranks never join, and this rank waits in the collective until the process "
                          "group times out (a hang); call it on every rank and guard only the save "
                          "(`torch.save(state, path)` under the rank check)";
        std::vector<Note> notes;
        if (primary != e.origin.site()) notes.push_back(cx.note(e.origin.site(), "the state dict is gathered here"));
        cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
      }
    }
  }

 private:
  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL204(const RuleInfo* info) { return std::make_unique<RankGuardedStateDict>(info); }

}  // namespace shardlint::rules
