#include "fsdp/Staleness.h"

#include <algorithm>

namespace shardlint::rules::fsdp {

using semantic::EventKind;
using semantic::kNoObj;

namespace {

// Does event `e` use optimizer `opt` (call a method on it, read its state, pass it on)?
bool uses(const Store& st, const Event& e, ObjId opt) {
  if (e.kind == EventKind::Domain || expectedToFail(st, e.point) || neverRuns(st, e.point)) return false;
  if (e.target != kNoObj && (e.kind == EventKind::MethodCall) && st.derivesFrom(e.target, opt)) return true;
  if (e.kind == EventKind::SetAttr) return false;
  ValueSet flat;
  st.flatten(e.allArgs(), flat);
  return std::any_of(flat.begin(), flat.end(), [&](ObjId a) { return st.derivesFrom(a, opt); });
}

// Param groups re-assigned after the wrap (`opt.param_groups[0]["params"] = ...`) or accelerate/Fabric re-pointing.
bool refreshed(const Store& st, const Event& e, ObjId opt) {
  if (e.kind == EventKind::Domain && e.name == "repoint" && e.target == opt) return true;
  if (e.kind == EventKind::SetAttr && e.name == "['params']" && e.target != kNoObj) {
    std::vector<std::string_view> edges;
    return st.pathFrom(e.target, opt, edges) && !edges.empty() && edges[0] == ".param_groups";
  }
  if (e.kind == EventKind::SetAttr && e.name == "param_groups" && e.target == opt) return true;
  // `opt.param_groups.clear()` then new groups: the groups are rebuilt.
  if (e.kind == EventKind::MethodCall && e.name == "clear" && e.target != kNoObj) {
    std::vector<std::string_view> edges;
    return st.pathFrom(e.target, opt, edges) && edges.size() == 1 && edges[0] == ".param_groups";
  }
  return false;
}

// The optimizer is passed into the call that shards the model and that same call
// re-points it (a project helper rewriting its param groups): every refresh of
// `opt` that shows, in the optimizer's frame, at the wrap's call site.
bool repointedByWrappingCall(const Store& st, const Event& wrap, ObjId opt) {
  const semantic::Origin& made = st.obj(opt).origin;
  semantic::Site call = wrap.origin.primaryIn(made);
  if (call == wrap.origin.site()) return false;  // the wrap is not inside a call made here
  return std::any_of(st.events.begin(), st.events.end(), [&](const Event& r) {
    return refreshed(st, r, opt) && r.origin.primaryIn(made) == call;
  });
}

// An external call after the wrap takes the optimizer together with the wrapped
// model (`model, opt = lib.setup(model, opt)`): it may re-point it.
bool handedOff(const Store& st, const Event& r, ObjId opt, const Event& wrap) {
  if (r.kind != EventKind::Domain || r.name != "handoff" || r.target != opt || r.args.empty()) return false;
  Lineage target = lineageOf(st, wrap.target);
  return std::any_of(r.args[0].begin(), r.args[0].end(), [&](ObjId a) {
    Lineage l = lineageOf(st, a);
    return within(l, target) || within(target, l);
  });
}

// The same variable (label) re-bound to a new optimizer after the wrap, on every
// path that leaves the wrap's branch, before the use: the stale one is only
// reachable on paths that never wrapped.
bool rebuiltAfter(const Store& st, ObjId opt, const Event& wrap, const Event& use) {
  const auto& label = st.obj(opt).label;
  if (label.empty()) return false;
  for (ObjId other : optimizers(st)) {
    const auto& r = st.obj(other);
    if (other == opt || r.label != label) continue;
    if (st.precedes(wrap.point, r.point) && st.armChainPrefix(r.point, wrap.point) && st.precedes(r.point, use.point))
      return true;
  }
  return false;
}

// Does one of the optimizer's parameter sources lie in the wrapped module (or the module it
// belongs to contain it)?
bool relatedTo(const Store& st, const ValueSet& sources, const Lineage& target) {
  return std::any_of(sources.begin(), sources.end(), [&](ObjId s) {
    Lineage src = lineageOf(st, s);
    return within(src, target) || within(target, moduleOfSource(src));
  });
}

// The wrapped object is made anew in each iteration of `loop` before the wrap at `before`: its root,
// or an object on its way there (a builder's result `self.build()`, a conversion's `convert(m)`).
bool madeAfreshIn(const Store& st, ObjId target, ObjId root, int loop, semantic::PointId before) {
  auto fresh = [&](ObjId id) {
    semantic::PointId made = st.obj(id).point;
    return st.insideArm(made, loop) && st.precedes(made, before);
  };
  if (fresh(root)) return true;
  for (int depth = 0; target != kNoObj && depth < 64; ++depth) {
    const auto& t = st.obj(target);
    bool makes = t.kind == semantic::ObjKind::Instance || t.kind == semantic::ObjKind::Container ||
                 (t.kind == semantic::ObjKind::Derived && t.name.size() > 2 &&
                  t.name.compare(t.name.size() - 2, 2, "()") == 0 && !isViewCall(t.name));
    if (makes && fresh(target)) return true;
    if (t.kind == semantic::ObjKind::Derived) target = t.parent;
    else if (t.kind == semantic::ObjKind::Instance && !t.inputs().empty() && t.inputs()[0].size() == 1)
      target = t.inputs()[0][0];  // a wrapper or conversion of one object
    else
      break;
  }
  return false;
}

// Each iteration wraps one element of a container (`for block in model.blocks: fully_shard(block)`) and
// only then builds an optimizer from that same element: the next iteration's wrap is of another
// element, so the loop's back edge does not make the optimizer stale.
bool sameElementAfterWrap(const Store& st, const ValueSet& sources, const Lineage& target, const Event& wrap,
                          semantic::PointId built) {
  if (!st.precedes(wrap.point, built) || sources.empty()) return false;
  bool element = std::any_of(target.edges.begin(), target.edges.end(),
                             [](const std::string& e) { return edgeName(e) == "[*]"; });
  return element && std::all_of(sources.begin(), sources.end(),
                                [&](ObjId s) { return within(lineageOf(st, s), target); });
}

// FSDP2: `fully_shard(model)` after `fully_shard(block)` leaves the block's (already sharded) parameters
// as they are. An optimizer built, after the blocks' wraps, only from parameters of wrapped blocks is not
// made stale by the root's wrap.
bool shardedByChildWrapFirst(const Store& st, const ValueSet& sources, const Event& wrap, semantic::PointId built,
                             const std::vector<const Event*>& wraps) {
  if (wrap.attr("api") != "fully_shard" || sources.empty()) return false;
  Lineage root = lineageOf(st, wrap.target);
  return std::all_of(sources.begin(), sources.end(), [&](ObjId s) {
    Lineage src = lineageOf(st, s);
    return std::any_of(wraps.begin(), wraps.end(), [&](const Event* child) {
      if (child == &wrap || child->target == kNoObj || child->attr("api") != "fully_shard") return false;
      Lineage part = lineageOf(st, child->target);
      return within(part, root) && !within(root, part) && within(src, part) && st.precedes(child->point, built);
    });
  });
}

}  // namespace

std::vector<StaleOptimizer> staleOptimizers(const Store& st, const std::function<bool(const Event&)>& wrapFilter) {
  std::vector<StaleOptimizer> out;
  auto wraps = domainEvents(st, "wrap");
  for (ObjId opt : optimizers(st)) {
    const auto& o = st.obj(opt);
    if (o.inputs().empty()) continue;
    ValueSet sources = paramSources(st, o.inputs()[0]);
    for (const Event* w : wraps) {
      if (w->attr("replaces") != "1" || w->target == kNoObj || !wrapFilter(*w)) continue;
      if (alreadyShardedBy(st, *w).root != kNoObj) continue;  // re-sharding part of a sharded model
      if (!st.mayHappenBefore(o.point, w->point)) continue;
      Lineage target = lineageOf(st, w->target);
      // Only through a loop back edge: a model created afresh in that loop before the
      // wrap is a different object from the one the earlier iteration's optimizer saw.
      if (!st.precedes(o.point, w->point) && target.root != kNoObj) {
        int loop = st.commonLoop(o.point, w->point);
        if (loop >= 0 && madeAfreshIn(st, w->target, target.root, loop, w->point)) continue;
        if (loop >= 0 && sameElementAfterWrap(st, sources, target, *w, o.point)) continue;
      }
      if (!relatedTo(st, sources, target) || repointedByWrappingCall(st, *w, opt)) continue;
      if (shardedByChildWrapFirst(st, sources, *w, o.point, wraps)) continue;
      // A use of this optimizer object after the wrap, not preceded by a refresh.
      const Event* use = nullptr;
      for (const Event& e : st.events) {
        if (!uses(st, e, opt) || !st.mayHappenBefore(w->point, e.point)) continue;
        bool fresh = std::any_of(st.events.begin(), st.events.end(), [&](const Event& r) {
          if (handedOff(st, r, opt, *w) && r.origin.site() == e.origin.site()) return true;  // that call itself
          return (refreshed(st, r, opt) || handedOff(st, r, opt, *w)) && st.mayHappenBefore(w->point, r.point) &&
                 (st.dominates(r.point, e.point) || r.point == e.point);
        });
        if (fresh || rebuiltAfter(st, opt, *w, e)) continue;
        // Prefer a use that runs whatever the flags are (`if apply_fix: fix(opt)` is one path only).
        if (!use) use = &e;
        if (st.conditionsAt(e.point).empty()) {
          use = &e;
          break;
        }
      }
      if (!use) continue;
      out.push_back({opt, w, use, moduleOfSource(writtenLineage(st, sources.empty() ? kNoObj : sources.front()))});
      break;
    }
  }
  return out;
}

// (Staleness.h)
bool sourcesRelatedTo(const Store& st, const ValueSet& sources, const Lineage& target) {
  return relatedTo(st, sources, target);
}

// (Staleness.h)
const Event* useFromWrap(const Store& st, ObjId opt, const Event& wrap, const Event& since) {
  const Event* use = nullptr;
  for (const Event& e : st.events) {
    if (!uses(st, e, opt)) continue;
    bool handed = e.origin.site() == wrap.origin.site() && e.kind != EventKind::Domain;  // to the wrapping call
    if (!handed && !st.mayHappenBefore(wrap.point, e.point)) continue;
    bool fresh = std::any_of(st.events.begin(), st.events.end(), [&](const Event& r) {
      return r.kind != EventKind::Domain && refreshed(st, r, opt) && st.mayHappenBefore(since.point, r.point) &&
             (st.dominates(r.point, e.point) || r.point == e.point);
    });
    if (fresh) continue;
    if (handed) return &e;
    if (!use) use = &e;
    if (st.conditionsAt(e.point).empty()) return &e;
  }
  return use;
}

// (Staleness.h)
std::string writtenParamsOwner(RuleContext& cx, const semantic::Obj& o) {
  if (o.inputOrigins().empty()) return "";
  const semantic::Origin& arg = o.inputOrigins()[0];
  const std::string& text = cx.file(arg.file).text;
  if (arg.range.begin >= arg.range.end || arg.range.end > text.size()) return "";
  std::string w = oneLine(std::string_view(text).substr(arg.range.begin, arg.range.end - arg.range.begin));
  const std::string suffix = ".parameters()";
  if (w.size() > suffix.size() && w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0)
    return w.substr(0, w.size() - suffix.size());
  return "";
}

std::string writtenSource(RuleContext& cx, const Store& st, ObjId opt, const Event& wrap) {
const auto& o = st.obj(opt);
if (o.inputOrigins().empty() || o.origin.primaryIn(wrap.origin) != o.origin.site()) return "";
  const semantic::Origin& arg = o.inputOrigins()[0];
  if (arg.file != cx.analysis().module().fileId() || arg.file != o.origin.file || !arg.via.empty()) return "";
  const std::string& text = cx.file().text;
  if (arg.range.begin >= arg.range.end || arg.range.end > text.size()) return "";
  TSNode n = ts_node_descendant_for_byte_range(cx.root(), arg.range.begin, arg.range.end);
  if (ts_node_is_null(n) || ts_node_start_byte(n) != arg.range.begin || ts_node_end_byte(n) != arg.range.end)
    return "";
  std::string_view type = ts_node_type(n);
  TSNode written{};
  if (type == "list_comprehension" || type == "generator_expression" || type == "set_comprehension") {
    written = n;
  } else if (type == "call") {
    TSNode fn = syntax::field(n, "function");
    TSNode args = syntax::field(n, "arguments");
    if (ts_node_is_null(fn) || std::string_view(ts_node_type(fn)) != "attribute" ||
        (!ts_node_is_null(args) && ts_node_named_child_count(args) != 0))
      return "";
    std::string_view method = syntax::textOf(syntax::field(fn, "attribute"), text);
    if (method != "parameters" && method != "named_parameters") return "";
    written = syntax::field(fn, "object");
  }
  if (ts_node_is_null(written)) return "";
  return oneLine(syntax::textOf(written, text));
}

void emitControls(RuleContext& cx, const RuleInfo& info, const Store& st,
                  const std::function<bool(const Event&)>& wrapFilter, const std::vector<StaleOptimizer>& stale) {
  if (!cx.wantsControls()) return;
  auto wraps = domainEvents(st, "wrap");
  for (ObjId opt : optimizers(st)) {
    if (std::any_of(stale.begin(), stale.end(), [&](const StaleOptimizer& s) { return s.optimizer == opt; })) continue;
    const auto& o = st.obj(opt);
    if (o.inputs().empty()) continue;
    ValueSet sources = paramSources(st, o.inputs()[0]);
    for (const Event* w : wraps) {
      if (w->target == kNoObj || !wrapFilter(*w) || alreadyShardedBy(st, *w).root != kNoObj) continue;
      if (!relatedTo(st, sources, lineageOf(st, w->target))) continue;
      std::string_view api = w->attr("api"), replaces = w->attr("replaces");
      std::map<std::string, std::string> facts{{"wrap_api", std::string(api)},
                                               {"fsdp_version", std::string(w->attr("fsdp_version"))}};
      std::string how;
      if (st.precedes(w->point, o.point)) {
        // accelerate FSDP2 refuses a model prepared without its optimizer (SL201): no correct run to replay.
        if (api == "accelerate" && w->attr("fsdp_version") == "2") break;
        facts["shape"] = "optimizer-after-wrap";
        how = "after " + std::string(wrapApiName(*w)) + " wraps it";
      } else if (st.precedes(o.point, w->point)) {
        // Built first: replayable only where the framework itself keeps or re-points the parameters.
        bool repointed = std::any_of(st.events.begin(), st.events.end(), [&](const Event& e) {
          return e.kind == semantic::EventKind::Domain && e.name == "repoint" && e.target == opt;
        });
        if (api == "fabric" && repointed)
          how = "and handed to Fabric's `setup` together with the model, which re-points it", facts["joint"] = "1";
        else if ((api == "fsdp1" || api == "fabric" || (api == "accelerate" && w->attr("fsdp_version") != "2")) &&
                 replaces == "0")
          how = "before " + std::string(wrapApiName(*w)) + ", which keeps the original parameters (use_orig_params=True" +
                (api == "fabric" ? ", Lightning 2.1+'s default)" : ")");
        else if (api == "accelerate" && w->attr("fsdp_version") == "2" && repointed)
          how = "before accelerate FSDP2 `prepare`, which re-points it";
        else
          break;  // fine for a reason the replay does not model (refreshed param groups, no later use, ...)
        facts["shape"] = "optimizer-before-wrap";
      } else {
        break;  // no order on every path (branches, loops): nothing to replay
      }
      if (api == "fsdp1" || api == "accelerate" || api == "fabric") {
        if (replaces == "?") break;  // use_orig_params not known
        facts["use_orig_params"] = replaces == "0" ? "1" : "0";
      }
      std::string source = writtenSource(cx, st, opt, *w);
      if (source.empty())
        source = render(st, moduleOfSource(writtenLineage(st, sources.empty() ? kNoObj : sources.front())));
      cx.control(info, o.origin.primaryIn(w->origin), "optimizer built from the parameters of `" + source + "` " + how,
                 std::move(facts));
      break;
    }
  }
}

void reportStale(RuleContext& cx, const RuleInfo& info, const Store& st, const StaleOptimizer& s, std::string message,
                 std::vector<Note> extraNotes, std::optional<Fix> fix) {
  const auto& o = st.obj(s.optimizer);
  const Event* w = s.wrap;
  std::vector<Note> notes;
  semantic::Site primary = o.origin.primaryIn(w->origin);
  semantic::Site wrapAt = w->origin.primaryIn(o.origin);
  // Both inside methods of one class (a Trainer builds the optimizer in __init__ and
  // wraps in setup()): the class is what to change, so point into it.
  const auto* builtIn = cx.enclosingFunction(o.origin.site());
  const auto* wrappedIn = cx.enclosingFunction(w->origin.site());
  if (builtIn && wrappedIn && builtIn->cls && builtIn->cls == wrappedIn->cls && primary != o.origin.site()) {
    notes.push_back(cx.note(primary, "the optimizer is built through this call"));
    notes.push_back(cx.note(wrapAt, "and the model is wrapped through this later call"));
    primary = o.origin.site();
    wrapAt = w->origin.site();
  }
  notes.push_back(cx.note(wrapAt, "the model is wrapped here, after the optimizer was built"));
  if (primary != o.origin.site()) notes.push_back(cx.note(o.origin.site(), "the optimizer is constructed here"));
  notes.push_back(cx.note(s.use->origin.primaryIn(o.origin), "the stale optimizer is used here"));
  for (auto& n : extraNotes) notes.push_back(std::move(n));
  cx.report(info, primary, std::move(message), std::move(notes), std::move(fix));
}

}  // namespace shardlint::rules::fsdp
