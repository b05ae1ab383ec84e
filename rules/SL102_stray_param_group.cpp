// SL102 stray-param-group: an optimizer of an FSDP-wrapped model holds tensors
// that no FSDP unit manages.
#include <algorithm>
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;
using semantic::ObjKind;

class StrayParamGroup final : public Rule {
 public:
  explicit StrayParamGroup(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }

  std::vector<std::vector<std::string_view>> prescanTokens() const override { return optimizerAndWrapTokens(); }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  struct Stray {
    ObjId source;
    Lineage lineage;
    ObjId root;  // the object as created (nn.Parameter(...), torch.zeros(...), Head())
  };

  // A wrapped module that was stored, through attribute stores, into the source's object
  // (`model.tok_embeddings = nn.Embedding(...)`, then `fully_shard(model.tok_embeddings)`: torchtune's
  // resize_token_embeddings), or into an object the analysis only knows as a constant (it lost which
  // module the helper got): either way the wrap cannot show that the source is a separate module.
  static bool storedIntoSourceOrUnknown(const Store& st, ObjId wrapped, ObjId root) {
    ObjId x = st.rootOf(wrapped);
    for (int hops = 0; hops < 64; ++hops) {
      ObjId owner = st.obj(x).owner;
      if (owner == kNoObj) return false;
      ObjId r = st.rootOf(owner);
      if (r == root || st.obj(r).kind == semantic::ObjKind::Literal) return true;
      x = r;
    }
    return false;
  }

  // Is the source managed by some FSDP wrap: inside a wrapped module, having been
  // attached to it (`model.head = head`, `self.scale = nn.Parameter(...)`) before the wrap?
  static bool managed(const Store& st, const Lineage& src, ObjId root, const std::vector<const Event*>& wraps) {
    const semantic::Event* attach = nullptr;
    if (st.obj(root).owner != kNoObj) {
      for (const Event& e : st.events)
        if (e.kind == EventKind::SetAttr && !e.args.empty() &&
            std::binary_search(e.args[0].begin(), e.args[0].end(), root)) {
          attach = &e;
          break;
        }
    }
    for (const Event* w : wraps) {
      if (w->target == kNoObj) continue;
      if (storedIntoSourceOrUnknown(st, w->target, root)) return true;
      Lineage t = lineageOf(st, w->target);
      if (!within(src, t) && !within(t, moduleOfSource(src))) continue;
      // The wrap took this very object: storing it somewhere later (a checkpoint helper's
      // `self.model = model`) does not make it a separate module.
      if (st.rootOf(w->target) == root) return true;
      if (attach && !st.mayHappenBefore(attach->point, w->point)) continue;  // attached after this wrap
      return true;
    }
    return false;
  }

  static std::string describeStray(const Store& st, const Stray& s) {
    const auto& r = st.obj(s.root);
    if (r.hasTag("free_param")) return "a free `nn.Parameter`";
    if (r.hasTag("tensor")) return "a plain tensor";
    return "parameters of `" + render(st, moduleOfSource(s.lineage)) + "`, a separate module";
  }

  static bool trainable(const Store& st, ObjId root) {
    const auto& r = st.obj(root);
    return !r.hasTag("tensor") || r.hasTag("requires_grad");
  }

  // Sources in `sources` that stem from trainable objects created in the analysed
  // code and for which `stray(lineage, root)` holds.
  template <class Pred>
  static std::vector<Stray> createdHereWhere(const Store& st, const ValueSet& sources, Pred stray) {
    std::vector<Stray> out;
    for (ObjId s : sources) {
      ObjId root = st.rootOf(s);
      if (!isCreatedHere(st, root) || !trainable(st, root)) continue;
      Lineage l = lineageOf(st, s);
      if (stray(l, root)) out.push_back({s, std::move(l), root});
    }
    return out;
  }

  // ... that no wrap manages.
  std::vector<Stray> strays(const Store& st, const ValueSet& sources, const std::vector<const Event*>& wraps) {
    return createdHereWhere(st, sources,
                            [&](const Lineage& l, ObjId root) { return !managed(st, l, root, wraps); });
  }

  // Wraps that manage some of the optimizer's sources, i.e. the model it optimizes.
  static std::vector<const Event*> wrapsOfModel(const Store& st, const ValueSet& sources,
                                                const std::vector<const Event*>& wraps) {
    std::vector<const Event*> out;
    for (const Event* w : wraps) {
      if (w->target == kNoObj) continue;
      Lineage t = lineageOf(st, w->target);
      for (ObjId s : sources) {
        Lineage l = lineageOf(st, s);
        if (within(l, t) || within(t, moduleOfSource(l))) {
          out.push_back(w);
          break;
        }
      }
    }
    return out;
  }

  void reportStray(RuleContext& cx, const Store& st, const semantic::Origin& at, const Stray& s, const Event& w,
                   std::string_view context, std::string consequence) {
    semantic::Site primary = at.primaryIn(w.origin);
    std::string msg = std::string(context) + " " + describeStray(st, s) + " that no FSDP unit manages; " +
                      consequence;
    std::vector<Note> notes;
    notes.push_back(cx.note(st.obj(s.root).origin.primaryIn(at), "the stray tensor or module is created here"));
    notes.push_back(cx.note(w.origin.primaryIn(at), std::string("the model is wrapped by ") +
                                                     std::string(wrapApiName(w)) + " here"));
    cx.report(info(), primary, std::move(msg), std::move(notes));
  }

  static std::string rawConsequence(const Event& w) {
    if (w.attr("fsdp_version") == "2")
      return "FSDP2 mixes plain tensors with DTensors at `step()` and their gradients are never reduced across "
             "ranks, so ranks diverge; wrap the module that owns them (or register them on the wrapped model) "
             "before building the optimizer";
    return "FSDP never reduces their gradients, so each rank applies its local gradient and ranks silently "
           "diverge; register them on the wrapped model or wrap their module";
  }

  void check(RuleContext& cx, const Store& st) {
    auto wraps = domainEvents(st, "wrap");
    if (wraps.empty()) return;
    std::set<std::pair<uint32_t, uint32_t>> done;
    for (ObjId opt : optimizers(st)) {
      const auto& o = st.obj(opt);
      ValueSet ctorSources = o.inputs().empty() ? ValueSet{} : paramSources(st, o.inputs()[0]);
      // One optimizer per iteration (per module, per layer, per parameter) is many optimizers, each
      // holding its own group of sources: each is checked alone, never as one that gains the others.
      std::vector<ValueSet> groups = sourcesPerOptimizer(st, opt, ctorSources);
      // (b) accelerate FSDP2: everything in the optimizer at `prepare` must be a model parameter.
      for (const Event* rp : domainEvents(st, "repoint")) {
        if (rp->target != opt || rp->attr("fsdp_version") != "2") continue;
        // Every non-optimizer argument of that `prepare` is a model candidate (loaders
        // from unknown helpers included); a source inside any of them is a model parameter.
        const Event* w = nullptr;
        std::vector<Lineage> models;
        for (const Event* cand : wraps) {
          if (cand->attr("prepare") != rp->attr("prepare")) continue;
          if (!w) w = cand;
          models.push_back(lineageOf(st, cand->target));
        }
        if (!w) continue;
        auto notModel = [&](const ValueSet& srcs) {
          return createdHereWhere(st, srcs, [&](const Lineage& l, ObjId) {
            return std::none_of(models.begin(), models.end(), [&](const Lineage& m) { return within(l, m); });
          });
        };
        std::string consequence =
            "accelerate's FSDP2 `prepare` raises `KeyError: A parameter in the optimizer couldn't be switched to its "
            "sharded version`; register it on the model (e.g. as `model.<name>`) or keep it out of this optimizer";
        // Which of many optimizers goes to `prepare` is not known: a finding only when each would be one.
        std::vector<Stray> bad;
        for (const ValueSet& g : groups) {
          auto b = notModel(g);
          if (b.empty()) {
            bad.clear();
            break;
          }
          if (bad.empty()) bad = std::move(b);
        }
        if (!bad.empty() && !o.inputOrigins().empty() && done.insert({o.inputOrigins()[0].file, o.inputOrigins()[0].range.begin}).second)
          reportStray(cx, st, o.inputOrigins()[0], bad.front(), *w, "the optimizer's param groups hold",
                      consequence);
        for (const Event& e : st.events) {
          if (e.kind != EventKind::MethodCall || e.name != "add_param_group" || e.target != opt || e.args.empty() ||
              expectedToFail(st, e.point))
            continue;
          if (!st.mayHappenBefore(e.point, w->point)) continue;
          auto badGroup = notModel(paramSources(st, e.args[0]));
          if (!badGroup.empty() && done.insert({e.origin.file, e.origin.range.begin}).second)
            reportStray(cx, st, e.origin, badGroup.front(), *w, "`add_param_group` before `prepare` adds",
                        consequence);
        }
      }
      // Raw wraps of the model each optimizer optimizes; `everyOfModel` when each of them has some.
      std::vector<const Event*> rawModelWraps;
      bool everyOfModel = true;
      for (const ValueSet& g : groups) {
        std::vector<const Event*> raw;
        for (const Event* w : wrapsOfModel(st, g, wraps))
          if (w->attr("api") == "fully_shard" || w->attr("api") == "fsdp1") raw.push_back(w);
        if (raw.empty()) everyOfModel = false;
        // (c) constructed after the wrap, mixing model parameters with stray tensors.
        for (const Event* w : raw) {
          if (!st.mayHappenBefore(w->point, o.point) || o.inputOrigins().empty()) continue;
          auto bad = strays(st, g, wraps);
          if (!bad.empty() && done.insert({o.inputOrigins()[0].file, o.inputOrigins()[0].range.begin}).second)
            reportStray(cx, st, o.inputOrigins()[0], bad.front(), *w, "the optimizer of a wrapped model holds",
                        rawConsequence(*w));
          break;
        }
        for (const Event* w : raw)
          if (std::find(rawModelWraps.begin(), rawModelWraps.end(), w) == rawModelWraps.end()) rawModelWraps.push_back(w);
      }
      std::sort(rawModelWraps.begin(), rawModelWraps.end());  // in event order
      // (a) add_param_group after the wrap. Of many optimizers, the one that gains the group is not
      // known: a finding only when each of them optimizes the wrapped model.
      if (rawModelWraps.empty() || !everyOfModel) continue;
      for (const Event& e : st.events) {
        if (e.kind != EventKind::MethodCall || e.name != "add_param_group" || e.target != opt || e.args.empty() ||
            expectedToFail(st, e.point))
          continue;
        const Event* w = nullptr;
        for (const Event* cand : rawModelWraps)
          if (st.mayHappenBefore(cand->point, e.point)) w = cand;
        if (!w) continue;
        auto bad = strays(st, paramSources(st, e.args[0]), wraps);
        if (!bad.empty() && done.insert({e.origin.file, e.origin.range.begin}).second)
          reportStray(cx, st, e.origin, bad.front(), *w, "`add_param_group` adds", rawConsequence(*w));
      }
    }
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL102(const RuleInfo* info) { return std::make_unique<StrayParamGroup>(info); }

}  // namespace shardlint::rules
