// SL205 forward-bypasses-fsdp: `model.forward(x)` on a module that FSDP2 (`fully_shard`, or accelerate's
// FSDP2 `prepare`, which applies it to the root) made an FSDP unit. `fully_shard` installs its all-gather as
// a forward pre-hook, which only `nn.Module.__call__` runs: calling `forward` directly computes with the
// sharded DTensor parameters (a RuntimeError, "got mixed torch.Tensor and DTensor"), or, when an earlier
// call left them unsharded, with gradients that are never reduce-scattered (measured on torch 2.15).
// Also a unit's `forward` called inside a project class's own method (`self.blocks[i].forward(h)`) when
// every instance of that class made here has those parts sharded.
#include <algorithm>
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "syntax/TreeSitter.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;

// A wrap that makes its target an FSDP2 unit: `fully_shard` (also inside Fabric's ModelParallelStrategy),
// or accelerate's `prepare` with FSDP2 (fsdp2_prepare_model always applies `fully_shard` to the root).
bool fsdp2Unit(const Event& w) {
  std::string_view api = w.attr("api");
  return w.target != kNoObj && (api == "fully_shard" || (api == "accelerate" && w.attr("fsdp_version") == "2"));
}

class ForwardBypassesFsdp final : public Rule {
 public:
  const RuleInfo& info() const override { return *info_; }
  explicit ForwardBypassesFsdp(const RuleInfo* info) : info_(info) {}

  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{".forward"}, {"fully_shard", "prepare"}};
  }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  struct Hit {
    const Event* call;
    const Event* wrap;
    std::string how;  // "" for a receiver that is the sharded object; else the class whose instances tie it
  };

  // `register_fsdp_forward_method(m, "forward")` (or a name not known here) for an object related to `l`:
  // FSDP2 then runs its hooks around `m.forward`.
  static bool registered(const Store& st, const Lineage& l) {
    for (const Event& e : st.events) {
      if (e.kind != EventKind::Call || !std::string_view(e.name).ends_with("register_fsdp_forward_method") || e.args.empty()) continue;
      bool named = e.args.size() >= 2 && !e.args[1].empty() && std::all_of(e.args[1].begin(), e.args[1].end(), [&](ObjId n) {
        const semantic::Obj& o = st.obj(n);
        return o.kind == semantic::ObjKind::Literal && o.name != "forward";
      });
      if (named) continue;
      for (ObjId m : e.args[0]) {
        Lineage ml = lineageOf(st, m);
        if (ml.root == kNoObj || within(ml, l) || within(l, ml)) return true;
      }
      if (e.args[0].empty()) return true;
    }
    return false;
  }

  // The receiver itself is the sharded object: a wrap of it on every path to the call.
  const Event* unitWrap(const Store& st, const Event& e, const std::vector<const Event*>& wraps) {
    for (const Event* w : wraps)
      if (w->target == e.target && wrappedBefore(st, *w, e.point)) return w;
    return nullptr;
  }

  // Evidence that the parameters may be unsharded when the call runs: `unshard()` of the receiver, or a
  // call of a module holding it (the root keeps its parameters unsharded after a forward; a module with
  // `reshard_after_forward=False` too) that may run before it.
  // `unshard` is set when the reason is an `unshard()` of the receiver.
  static bool maybeUnsharded(const Store& st, const Event& e, const Event& w, bool* unshard = nullptr) {
    Lineage l = lineageOf(st, e.target);
    for (const Event& u : st.events) {
      if (u.kind != EventKind::MethodCall || u.target == kNoObj || !st.mayHappenBefore(u.point, e.point)) continue;
      if (u.name == "unshard" && u.target == e.target) {
        if (unshard) *unshard = true;
        return true;
      }
      if (u.name == "__call__" && w.attr("reshard_after_forward") != "True") {
        Lineage c = lineageOf(st, u.target);
        if (c.root != kNoObj && within(l, c)) return true;
      }
    }
    return false;
  }

  // Inside a method of a project class, the receiver is a part of `self` (`self.blocks[i]`): every instance
  // of that class in this store has that part sharded (a `fully_shard` of it before any call of the
  // instance, and some call of it). Returns one such wrap.
  const Event* tiedWrap(RuleContext& cx, const Store& st, const Event& e, const std::vector<const Event*>& wraps,
                        std::string& cls) {
    ObjId self = st.rootOf(e.target);
    if (self == kNoObj || self == e.target) return nullptr;
    const semantic::Obj& so = st.obj(self);
    if (so.kind != semantic::ObjKind::Arg || so.argIndex != 0) return nullptr;
    const semantic::FunctionDef* f = cx.enclosingFunction(e.origin.site());
    if (!f || !f->cls || f->isStatic || f->params.empty() || f->params[0] != so.name) return nullptr;
    if (so.origin.file != e.origin.file || so.origin.range.begin < f->span.begin || so.origin.range.end > f->span.end)
      return nullptr;  // not this method's own `self`
    std::vector<std::string_view> path;
    if (!st.pathFrom(e.target, self, path) || path.empty()) return nullptr;
    const Event* found = nullptr;
    size_t instances = 0;
    for (size_t i = 0; i < st.objects.size(); ++i) {
      const semantic::Obj& o = st.objects[i];
      if (o.kind != semantic::ObjKind::Instance || o.cls != f->cls) continue;
      ++instances;
      Lineage part = lineageOf(st, static_cast<ObjId>(i));
      if (part.root == kNoObj) return nullptr;
      for (std::string_view edge : path) part.edges.emplace_back(edge);
      std::vector<const Event*> calls;
      for (const Event& c : st.events)
        if (c.kind == EventKind::MethodCall && (c.name == "__call__" || c.name == "forward") &&
            c.target == static_cast<ObjId>(i) && !neverRuns(st, c.point))
          calls.push_back(&c);
      if (calls.empty()) return nullptr;
      const Event* w = nullptr;
      for (const Event* cand : wraps) {
        if (cand->attr("api") != "fully_shard" || !sameLineage(lineageOf(st, cand->target), part)) continue;
        if (std::all_of(calls.begin(), calls.end(), [&](const Event* c) { return wrappedBefore(st, *cand, c->point); }))
          w = cand;
      }
      if (!w || registered(st, part)) return nullptr;
      found = found ? found : w;
    }
    if (!instances) return nullptr;
    cls = f->cls->name;
    return found;
  }

  void check(RuleContext& cx, const Store& st) {
    std::vector<const Event*> wraps;
    for (const Event* w : domainEvents(st, "wrap"))
      if (fsdp2Unit(*w)) wraps.push_back(w);
    if (wraps.empty()) return;
    // One call site may be several events (one per value of the receiver): every one must be a hit.
    std::map<std::pair<uint32_t, uint32_t>, std::vector<const Event*>> bySite;
    std::vector<std::pair<uint32_t, uint32_t>> order;
    for (const Event& e : st.events) {
      if (e.kind != EventKind::MethodCall || e.name != "forward") continue;
      auto key = std::make_pair(e.origin.file, e.origin.range.begin);
      auto& v = bySite[key];
      if (v.empty()) order.push_back(key);
      v.push_back(&e);
    }
    std::set<std::pair<uint32_t, uint32_t>> reported;
    for (const auto& key : order) {
      std::vector<Hit> hits;
      bool all = true;
      for (const Event* e : bySite[key]) {
        if (expectedToFail(st, e->point) || neverRuns(st, e->point)) continue;
        if (e->target == kNoObj) {
          all = false;
          break;
        }
        std::string cls;
        const Event* w = unitWrap(st, *e, wraps);
        if (w) {
          bool unshard = false;
          std::string control = registered(st, lineageOf(st, e->target)) ? "bypass-registered"
                                : maybeUnsharded(st, *e, *w, &unshard)     ? (unshard ? "bypass-unshard" : "-")
                                                                           : "";
          // The `unshard()` control only for a unit with no separately sharded part (what its replay shards).
          if (control == "bypass-unshard" && hasShardedPart(st, e->target, wraps)) control = "-";
          if (!control.empty()) {
            if (control != "-") emitControl(cx, *e, control);
            w = nullptr;
          }
        }
        if (!w) w = tiedWrap(cx, st, *e, wraps, cls);
        if (!w) {
          all = false;
          break;
        }
        hits.push_back({e, w, cls});
      }
      if (!all || hits.empty()) continue;
      const Hit& h = hits.front();
      semantic::Site primary = h.call->origin.primaryIn(h.wrap->origin);
      auto at = std::make_pair(primary.file, primary.range.begin);
      if (!reported.insert(at).second) continue;
      report(cx, st, h);
    }
    // The control every correct script has: a sharded module called through `__call__` (the first one).
    // Only where some `.forward(` call was examined (the replay contrasts the two calls).
    if (cx.wantsControls() && reported.empty() && !order.empty())
      for (const Event& e : st.events)
        if (e.kind == EventKind::MethodCall && e.name == "__call__" && e.target != kNoObj &&
            !expectedToFail(st, e.point) && !neverRuns(st, e.point) && unitWrap(st, e, wraps)) {
          emitControl(cx, e, "bypass-call");
          break;
        }
  }

  static bool hasShardedPart(const Store& st, ObjId module, const std::vector<const Event*>& wraps) {
    Lineage l = lineageOf(st, module);
    return std::any_of(wraps.begin(), wraps.end(), [&](const Event* w) {
      Lineage p = lineageOf(st, w->target);
      return within(p, l) && !within(l, p);
    });
  }

  // Controls (RuleContext::control): a `.forward` the rule found correct (`register_fsdp_forward_method`,
  // `unshard()` first), or a unit called through `__call__`.
  void emitControl(RuleContext& cx, const Event& e, const std::string& shape) {
    std::string how = shape == "bypass-registered" ? "`forward` of an FSDP2 unit registered with "
                                                     "`register_fsdp_forward_method`"
                      : shape == "bypass-unshard"  ? "`forward` of an FSDP2 unit after `unshard()`"
                                                   : "an FSDP2 unit called through `__call__`";
    cx.control(info(), e.origin.primary(), how, {{"shape", shape}, {"wrap_api", "fully_shard"}, {"fsdp_version", "2"}});
  }

  // The source text at `site`, on one line.
  static std::string written(RuleContext& cx, const semantic::Site& site) {
    const std::string& text = cx.file(site.file).text;
    if (site.range.begin >= site.range.end || site.range.end > text.size()) return "";
    return oneLine(std::string_view(text).substr(site.range.begin, site.range.end - site.range.begin));
  }

  // `X.forward(args)` -> `X(args)`: the bytes of `.forward` between the receiver and the arguments, when
  // the call is that plain expression in the linted file (the bound method is used for nothing else).
  std::optional<Fix> fixFor(RuleContext& cx, const semantic::Site& site, std::string& receiver, bool ownCall) {
    if (site.file != cx.analysis().module().fileId()) return std::nullopt;
    TSNode call = syntax::nodeSpanning(cx.root(), site.range, "call");
    if (ts_node_is_null(call) || syntax::rangeOf(call).begin != site.range.begin ||
        syntax::rangeOf(call).end != site.range.end)
      return std::nullopt;
    TSNode fn = syntax::field(call, "function");
    if (ts_node_is_null(fn) || std::string_view(ts_node_type(fn)) != "attribute") return std::nullopt;
    TSNode obj = syntax::field(fn, "object");
    TSNode attr = syntax::field(fn, "attribute");
    TSNode args = syntax::field(call, "arguments");
    if (ts_node_is_null(obj) || ts_node_is_null(attr) || ts_node_is_null(args) ||
        std::string_view(ts_node_type(args)) != "argument_list")
      return std::nullopt;
    const std::string& src = cx.file().text;
    receiver = std::string(syntax::textOf(obj, src));
    if (ownCall) return std::nullopt;  // a class of the project that defines `__call__`: not the same call
    semantic::Site cut{site.file, {ts_node_end_byte(obj), ts_node_end_byte(attr)}};
    // Unsafe: `__call__` also runs every other hook registered on the module (forward pre-hooks and hooks of
    // other libraries), which the direct call skipped; whether those should run here is the user's call.
    return Fix{"Call `" + oneLine(receiver) + "(...)` instead of `.forward(...)`", Applicability::Unsafe,
               {cx.edit(cut, "")}};
  }

  // The receiver is an instance of a project class that defines (or inherits from a project class) `__call__`.
  static bool definesCall(const Store& st, ObjId o) {
    const semantic::ClassDef* c = st.obj(o).cls;
    return c && c->findMethod("__call__") != nullptr;
  }

  void report(RuleContext& cx, const Store& st, const Hit& h) {
    const Event& e = *h.call;
    semantic::Site primary = e.origin.primaryIn(h.wrap->origin);
    semantic::Site own = e.origin.site();
    std::string callText = written(cx, own);
    if (callText.size() > 60) callText = callText.substr(0, callText.find('(')) + "(...)";
    std::string receiver;
    std::optional<Fix> fix = primary == own ? fixFor(cx, own, receiver, definesCall(st, e.target)) : std::nullopt;
    if (receiver.empty()) receiver = callText.substr(0, callText.rfind(".forward"));
    std::string model = render(st, writtenLineage(st, h.wrap->target));
    // The wrap as written where the call sees it; for a method's `self` part, the `fully_shard` call itself.
    semantic::Site wrapAt = h.how.empty() ? h.wrap->origin.primaryIn(e.origin) : h.wrap->origin.site();
    std::string wrapText = written(cx, wrapAt);
    if (wrapText.size() > 60) wrapText = wrapText.substr(0, wrapText.find('(')) + "(...)";
    std::string api(wrapApiName(*h.wrap));
    std::string unit = h.how.empty() ? "an FSDP2 unit (`" + wrapText + "`)"
                                     : "an FSDP2 unit in every `" + h.how + "` made here (`" + wrapText + "`)";
    std::string head;
    if (primary == own) {
      head = "`" + callText + "` calls `forward` directly, but `" + receiver + "` is " + unit;
    } else {
      std::string outer = written(cx, primary);
      if (outer.size() > 60) outer = outer.substr(0, outer.find('(')) + "(...)";
      std::string as = receiver == model ? "" : " with `" + receiver + "` = `" + model + "`";
      head = "`" + outer + "` calls `" + callText + "`" + as + ", and `" + model + "` is " + unit;
    }
    std::string msg = head + ": FSDP2's pre-forward hook that all-gathers the parameters runs only through `" +
                      receiver +
                      "(...)`, so this computes with the sharded DTensor parameters (\"RuntimeError: ... got mixed "
                      "torch.Tensor and DTensor\") or, when an earlier call left them unsharded, with gradients that "
                      "are never reduce-scattered; call `" + receiver + "(...)`" + (primary == own ? "" : " there") +
                      ", or `register_fsdp_forward_method(" + receiver + ", \"forward\")` first";
    std::string when = onlyWhen(st, {e.point, h.wrap->point});
    if (!when.empty()) msg += " (this holds " + when + ")";
    std::vector<Note> notes;
    notes.push_back(cx.note(wrapAt, "`" + model + "` is sharded here (" + api + ")"));
    if (primary != own) notes.push_back(cx.note(own, "`forward` is called directly here"));
    cx.report(info(), primary, std::move(msg), std::move(notes), std::move(fix));
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL205(const RuleInfo* info) { return std::make_unique<ForwardBypassesFsdp>(info); }

}  // namespace shardlint::rules
