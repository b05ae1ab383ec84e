// SL203 local-grad-norm: `torch.nn.utils.clip_grad_norm_` over the parameters of an FSDP1 model whose sharding
// strategy shards (FULL_SHARD, the default; SHARD_GRAD_OP; HYBRID_*). Each rank holds only its shard of every
// gradient, so torch's clip computes the norm of that shard: every rank clips by a different, partial norm and
// the ranks silently diverge (measured on torch 2.15, SL203_local_grad_norm.md). FSDP1's own
// `model.clip_grad_norm_(max_norm)` all-reduces the norm. Also accelerate's `accelerator.clip_grad_norm_(params,
// max)` with FSDP1 when `params` is provably not the prepared model's `.parameters()`: accelerate then falls
// through to torch's clip (accelerator.py, `clip_grad_norm_`). FSDP2 is never reported: its gradients are
// DTensors, whose norm torch computes across ranks.
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "syntax/TreeSitter.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;
using semantic::ObjKind;

bool isTorchClip(std::string_view q) {
  return q == "torch.nn.utils.clip_grad_norm_" || q == "torch.nn.utils.clip_grad_norm" ||
         q == "torch.nn.utils.clip_grad.clip_grad_norm_" || q == "torch.nn.utils.clip_grad.clip_grad_norm";
}

// A strategy that shards the gradients (NO_SHARD keeps them whole and all-reduced; "?" is not known here).
bool shards(std::string_view s) {
  return s == "FULL_SHARD" || s == "SHARD_GRAD_OP" || s == "HYBRID_SHARD" || s == "_HYBRID_SHARD_ZERO2";
}

bool fsdp1Wrap(const Event& w) {
  std::string_view api = w.attr("api");
  return w.target != kNoObj && (api == "fsdp1" || (api == "accelerate" && w.attr("fsdp_version") == "1"));
}

bool isComprehension(std::string_view type) {
  return type == "list_comprehension" || type == "set_comprehension" || type == "generator_expression";
}

class LocalGradNorm final : public Rule {
 public:
  explicit LocalGradNorm(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{"clip_grad_norm"}, {"FullyShardedDataParallel", "FSDP", "prepare", "fully_shard"}};
  }

  void finish(RuleContext& cx) override {
    reported_.clear();
    controlled_.clear();
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  // The FSDP1 wraps done on every path before `p` whose module is related to `module` (one lies within the
  // other): the parameters clipped are (or include) parameters that wrap manages.
  static std::vector<const Event*> relatedWraps(const Store& st, const Lineage& module, semantic::PointId p,
                                                std::string_view api = {}) {
    std::vector<const Event*> out;
    if (module.root == kNoObj) return out;
    for (const Event* w : domainEvents(st, "wrap")) {
      if (w->target == kNoObj || !wrappedBefore(st, *w, p)) continue;
      if (!api.empty() && w->attr("api") != api) continue;
      Lineage t = lineageOf(st, w->target);
      if (t.root == module.root && (within(module, t) || within(t, module))) out.push_back(w);
    }
    return out;
  }

  // The module whose parameters a parameter source stands for: `m.parameters()` -> `m`, `m.layer.weight` ->
  // `m.layer.weight` itself (a tensor of `m`).
  static Lineage moduleOf(const Store& st, ObjId src) {
    Lineage l = lineageOf(st, src);
    return isWholeParams(l) ? moduleOfSource(l) : l;
  }

  void check(RuleContext& cx, const Store& st) {
    for (const Event& e : st.events) {
      // The name first: the region queries of neverRuns / expectedToFail cost more than the whole rule otherwise.
      bool torchClip = e.kind == EventKind::Call && isTorchClip(e.name);
      bool method = e.kind == EventKind::MethodCall && e.name == "clip_grad_norm_" && e.target != kNoObj;
      if ((!torchClip && !method) || e.point == semantic::kNoPoint || expectedToFail(st, e.point) ||
          neverRuns(st, e.point))
        continue;
      if (torchClip) checkTorchClip(cx, st, e);
      else checkMethod(cx, st, e);
    }
  }

  // `torch.nn.utils.clip_grad_norm_(params, max_norm)`: every value of `params` holds parameters of an FSDP1
  // unit that shards, wrapped before the call on every path.
  void checkTorchClip(RuleContext& cx, const Store& st, const Event& e) {
    const ValueSet* params = e.arg(0, "parameters");
    if (!params || params->empty()) return;
    const Event* hit = nullptr;
    ObjId hitSource = kNoObj;
    bool noShard = false, fsdp2 = false;
    for (ObjId v : *params) {
      ValueSet sources = paramSources(st, {v});
      if (sources.empty()) return;
      const Event* found = nullptr;
      for (ObjId s : sources) {
        Lineage m = moduleOf(st, s);
        for (const Event* w : relatedWraps(st, m, e.point)) {
          if (w->attr("api") == "fully_shard") fsdp2 = true;
          if (!fsdp1Wrap(*w)) continue;
          if (w->attr("sharding") == "NO_SHARD") noShard = true;
          if (shards(w->attr("sharding")) && !found) found = w, hitSource = s;
        }
      }
      if (!found) {  // a value that is not (known to be) sharded by FSDP1: the call may be right
        if (hit || v != params->front()) return;
        if (noShard) control(cx, e, "clip-no-shard", "`torch.nn.utils.clip_grad_norm_` on an FSDP1 NO_SHARD model");
        else if (fsdp2) control(cx, e, "clip-fsdp2", "`torch.nn.utils.clip_grad_norm_` on an FSDP2 model");
        return;
      }
      hit = hit ? hit : found;
    }
    reportTorchClip(cx, st, e, *hit, hitSource);
  }

  // `model.clip_grad_norm_(max)` on an FSDP1 wrapper (the control), or `accelerator.clip_grad_norm_(params, max)`.
  void checkMethod(RuleContext& cx, const Store& st, const Event& e) {
    const semantic::Obj& recv = st.obj(e.target);
    if (recv.tag("fsdp_wrapper") == "fsdp1" || recv.tag("fsdp_wrapper") == "accelerate") {
      for (const Event* w : relatedWraps(st, lineageOf(st, e.target), e.point))
        if (fsdp1Wrap(*w) && shards(w->attr("sharding"))) {
          control(cx, e, "clip-fsdp1-method", "FSDP1's own `clip_grad_norm_` on a sharded model");
          break;
        }
      return;
    }
    if (!recv.hasTag("accelerator") || recv.tag("fsdp") != "1" || !shards(recv.tag("sharding"))) return;
    const ValueSet* params = e.arg(0, "parameters");
    if (!params || params->empty()) return;
    // The models this accelerator prepared with FSDP1 before the call.
    std::vector<const Event*> prepared;
    for (const Event* w : domainEvents(st, "wrap"))
      if (w->attr("api") == "accelerate" && w->attr("fsdp_version") == "1" && w->target != kNoObj &&
          shards(w->attr("sharding")) && wrappedBefore(st, *w, e.point))
        prepared.push_back(w);
    if (prepared.empty()) return;
    const Event* model = nullptr;
    std::string what;
    bool full = false;
    for (ObjId v : *params) {
      std::string w;
      const Event* m = subsetOf(cx, st, v, prepared, w, full);
      if (!m) {
        if (full && params->size() == 1)
          control(cx, e, "clip-accelerate-full", "`accelerator.clip_grad_norm_` with the prepared FSDP1 model's parameters");
        return;
      }
      if (!model) model = m, what = w;
    }
    reportAccelerate(cx, st, e, *model, what);
  }

  // The prepared model that `v` provably holds only some parameters of, with `what` saying how; null when `v`
  // may be the whole `list(model.parameters())` of a prepared model (`full` set when it is) or is not known.
  const Event* subsetOf(RuleContext& cx, const Store& st, ObjId v, const std::vector<const Event*>& prepared,
                        std::string& what, bool& full) {
    const semantic::Obj& o = st.obj(v);
    auto preparedHolding = [&](const Lineage& l, bool strictly) -> const Event* {
      for (const Event* w : prepared) {
        Lineage t = lineageOf(st, w->target);
        if (within(l, t) && (!strictly || !sameLineage(l, t))) return w;
      }
      return nullptr;
    };
    if (o.kind == ObjKind::Container) {
      // `[p for p in model.parameters() if p.requires_grad]`: a subset when some parameter of the model is frozen
      // (`requires_grad_(False)`, `get_peft_model`); the same list otherwise.
      if (o.origin.file != cx.analysis().module().fileId() || o.elements().size() != 1) return nullptr;
      TSNode n = ts_node_descendant_for_byte_range(cx.root(), o.origin.range.begin, o.origin.range.end);
      if (ts_node_is_null(n) || !isComprehension(ts_node_type(n))) return nullptr;
      bool filtered = false;
      for (TSNode c : syntax::namedChildren(n))
        if (std::string_view(ts_node_type(c)) == "if_clause") filtered = true;
      const ValueSet& el = o.elements().front();
      if (el.size() != 1) return nullptr;
      Lineage src = lineageOf(st, el.front());
      if (src.edges.size() < 2 || edgeName(src.edges.back()) != "[*]" ||
          edgeName(src.edges[src.edges.size() - 2]) != ".parameters()")
        return nullptr;
      Lineage m = moduleOfSource(src);
      const Event* w = preparedHolding(m, false);
      if (!w) return nullptr;
      if (!sameLineage(m, lineageOf(st, w->target))) {
        what = "`" + text(cx, o.origin.site()) + "`, the parameters of a part";
        return w;
      }
      if (!filtered) {
        full = true;
        return nullptr;
      }
      if (!frozen(st, m) && !peftModel(st, m)) return nullptr;
      what = "`" + text(cx, o.origin.site()) + "`, a filtered list that leaves out frozen parameters";
      return w;
    }
    if (o.kind != ObjKind::Derived) return nullptr;
    Lineage l = lineageOf(st, v);
    if (l.root == kNoObj) return nullptr;
    if (!l.edges.empty() && edgeName(l.edges.back()) == ".parameters()") {
      Lineage m = moduleOfSource(l);
      for (const Event* w : prepared)
        if (sameLineage(m, lineageOf(st, w->target))) {
          full = true;
          return nullptr;
        }
      const Event* w = preparedHolding(m, true);
      if (w) what = "`" + render(st, writtenLineage(st, v)) + "`, the parameters of a part";
      return w;
    }
    if (isWholeParams(l)) return nullptr;  // named_parameters(), an element of them: not read
    const Event* w = preparedHolding(l, true);
    if (w) what = "`" + render(st, writtenLineage(st, v)) + "`, one tensor";
    return w;
  }

  // PEFT froze the model's own parameters (`get_peft_model(model, ...)` on it or on what it lies in).
  static bool peftModel(const Store& st, const Lineage& m) {
    for (const Event* r : domainEvents(st, "replace_params")) {
      if (r->target == kNoObj) continue;
      Lineage t = lineageOf(st, r->target);
      if (t.root == m.root && (within(m, t) || within(t, m))) return true;
    }
    return false;
  }

  // The source text at `site`, on one line ("" when not readable).
  static std::string text(RuleContext& cx, const semantic::Site& site) {
    const std::string& t = cx.file(site.file).text;
    if (site.range.begin >= site.range.end || site.range.end > t.size()) return "";
    return oneLine(std::string_view(t).substr(site.range.begin, site.range.end - site.range.begin));
  }

  static std::string shortCall(std::string s) {
    if (s.size() > 70) s = s.substr(0, s.find('(')) + "(...)";
    return s;
  }

  static std::string strategyText(const Event& w) {
    std::string s(w.attr("sharding"));
    return s == "FULL_SHARD" && w.attr("api") == "fsdp1" ? "FULL_SHARD unless given otherwise" : s;
  }

  // The FSDP1 root wrapper object whose method can replace torch's clip: `NAME` in `NAME.parameters()`, a wrapper
  // (FSDP1 or accelerate's prepared FSDP1 model) that no other FSDP1 wrap holds.
  static bool rootWrapper(const Store& st, ObjId src) {
    const semantic::Obj& s = st.obj(src);
    if (s.kind != ObjKind::Derived || s.name != ".parameters()" || s.parent == kNoObj) return false;
    const semantic::Obj& p = st.obj(s.parent);
    if (p.tag("fsdp_wrapper") != "fsdp1" && p.tag("fsdp_wrapper") != "accelerate") return false;
    Lineage l = lineageOf(st, s.parent);
    for (const Event* w : domainEvents(st, "wrap")) {
      if (!fsdp1Wrap(*w)) continue;
      Lineage t = lineageOf(st, w->target);
      if (within(l, t) && !sameLineage(l, t)) return false;
    }
    return true;
  }

  // `torch.nn.utils.clip_grad_norm_(NAME.parameters(), M[, norm_type])` -> `NAME.clip_grad_norm_(M[, norm_type])`:
  // FSDP1's method takes (max_norm, norm_type); a call with other arguments (error_if_nonfinite, foreach, a
  // splat) gets no fix.
  std::optional<Fix> fixFor(RuleContext& cx, const semantic::Site& site, std::string& receiver) {
    if (site.file != cx.analysis().module().fileId()) return std::nullopt;
    TSNode call = syntax::nodeSpanning(cx.root(), site.range, "call");
    if (ts_node_is_null(call) || syntax::rangeOf(call).begin != site.range.begin ||
        syntax::rangeOf(call).end != site.range.end)
      return std::nullopt;
    TSNode args = syntax::field(call, "arguments");
    if (ts_node_is_null(args) || std::string_view(ts_node_type(args)) != "argument_list") return std::nullopt;
    const std::string& src = cx.file().text;
    std::vector<TSNode> list;
    for (TSNode a : syntax::namedChildren(args))
      if (std::string_view(ts_node_type(a)) != "comment") list.push_back(a);
    if (list.size() < 2 || list.size() > 3) return std::nullopt;
    TSNode first = list[0];
    if (std::string_view(ts_node_type(first)) != "call") return std::nullopt;
    TSNode fn = syntax::field(first, "function");
    TSNode fargs = syntax::field(first, "arguments");
    if (ts_node_is_null(fn) || std::string_view(ts_node_type(fn)) != "attribute" || ts_node_is_null(fargs) ||
        ts_node_named_child_count(fargs) != 0)
      return std::nullopt;
    TSNode obj = syntax::field(fn, "object");
    TSNode attr = syntax::field(fn, "attribute");
    if (ts_node_is_null(obj) || ts_node_is_null(attr) || syntax::textOf(attr, src) != "parameters")
      return std::nullopt;
    std::string_view objType = ts_node_type(obj);
    if (objType != "identifier" && objType != "attribute") return std::nullopt;
    std::vector<std::string> rest;
    for (size_t i = 1; i < list.size(); ++i) {
      std::string_view type = ts_node_type(list[i]);
      if (type == "keyword_argument") {
        std::string_view k = syntax::textOf(syntax::field(list[i], "name"), src);
        if (k != "max_norm" && k != "norm_type") return std::nullopt;
      } else if (type == "list_splat" || type == "dictionary_splat") {
        return std::nullopt;
      }
      rest.emplace_back(syntax::textOf(list[i], src));
    }
    receiver = std::string(syntax::textOf(obj, src));
    std::string replacement = receiver + ".clip_grad_norm_(" + rest[0] + (rest.size() > 1 ? ", " + rest[1] : "") + ")";
    return Fix{"Call `" + oneLine(receiver) + ".clip_grad_norm_(...)`, FSDP1's method", Applicability::Safe,
               {cx.edit(site, replacement)}};
  }

  void reportTorchClip(RuleContext& cx, const Store& st, const Event& e, const Event& w, ObjId src) {
    semantic::Site primary = e.origin.primaryIn(w.origin);
    semantic::Site own = e.origin.site();
    if (!reported_.insert({primary.file, primary.range.begin}).second) return;
    std::string call = shortCall(text(cx, own));
    std::string model = render(st, writtenLineage(st, w.target));
    std::string receiver;
    std::optional<Fix> fix;
    // FSDP1's method is a collective: a clip that only some ranks run (under a rank check) would hang there.
    const semantic::Region* guard = rankGuard(st, e.point);
    if (primary == own && rootWrapper(st, src) && !guard) fix = fixFor(cx, own, receiver);
    semantic::Site wrapAt = w.origin.primaryIn(e.origin);
    std::string wrap = shortCall(text(cx, wrapAt));
    std::string how = w.attr("api") == "accelerate" ? "accelerate FSDP1 `prepare`" : "`" + shortCall(text(cx, w.origin.site())) + "`";
    if (wrapAt != w.origin.site()) how += " through `" + wrap + "`";
    how += ", " + strategyText(w);
    std::string head = primary == own ? "`" + call + "`"
                                      : "`" + shortCall(text(cx, primary)) + "` calls `" + call + "`, which";
    std::string use = fix ? "`" + oneLine(receiver) + ".clip_grad_norm_(max_norm)`"
                          : "the FSDP1 root's `clip_grad_norm_(max_norm)`";
    std::string params = render(st, writtenLineage(st, src));
    std::string msg = head + " computes the norm of the gradients of `" + params + "`, sharded by FSDP1 (" + how +
                      "): each rank holds only its shard of every gradient, so each rank clips by the norm of its own "
                      "shard, a different and partial total, and the ranks' updates silently diverge; call " + use +
                      " instead (FSDP1's method, which all-reduces the norm across ranks)";
    if (guard)
      msg += "; FSDP1's method is a collective that every rank must call, and this clip runs only when " +
             rankGuardText(*guard) + ": move the clip out of the rank check (no automatic fix)";
    std::string when = onlyWhen(st, {e.point, w.point});
    if (!when.empty()) msg += " (this holds " + when + ")";
    std::vector<Note> notes;
    std::string named = model.find('(') == std::string::npos ? "`" + model + "`" : "the model";
    notes.push_back(cx.note(wrapAt, named + " is sharded here (" + std::string(wrapApiName(w)) + ")"));
    if (primary != own) notes.push_back(cx.note(own, "torch's clip runs here"));
    cx.report(info(), primary, std::move(msg), std::move(notes), std::move(fix));
  }

  void reportAccelerate(RuleContext& cx, const Store& st, const Event& e, const Event& w, const std::string& what) {
    semantic::Site primary = e.origin.primaryIn(w.origin);
    semantic::Site own = e.origin.site();
    if (!reported_.insert({primary.file, primary.range.begin}).second) return;
    std::string call = shortCall(text(cx, own));
    std::string model = render(st, writtenLineage(st, w.target));
    std::string head = primary == own ? "`" + call + "`"
                                      : "`" + shortCall(text(cx, primary)) + "` calls `" + call + "`, which";
    std::string msg = head + " is given " + what + " of `" + model + "`, not `" + model +
                      ".parameters()`: with FSDP1 accelerate uses the model's own `clip_grad_norm_` only when the "
                      "list equals `list(model.parameters())` and otherwise falls through to "
                      "`torch.nn.utils.clip_grad_norm_`, which on a sharded model (" + std::string(w.attr("sharding")) +
                      ") computes each rank's norm of its own shard: the ranks clip by different, too small norms and "
                      "silently diverge; pass `" + model + ".parameters()` (parameters without gradients count for "
                      "nothing in the norm)";
    std::string when = onlyWhen(st, {e.point, w.point});
    if (!when.empty()) msg += " (this holds " + when + ")";
    std::vector<Note> notes;
    semantic::Site wrapAt = w.origin.primaryIn(e.origin);
    notes.push_back(cx.note(wrapAt, "`" + model + "` is prepared here (accelerate FSDP1 `prepare`, " +
                                        std::string(w.attr("sharding")) + ")"));
    if (std::optional<Note> n = linkedConfigNote(w, "the FSDP1 setting comes from here")) notes.push_back(*n);
    if (primary != own) notes.push_back(cx.note(own, "the clip runs here"));
    cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
  }

  // Controls (RuleContext::control): a clip the rule examined and found right, for the probe's contrast.
  void control(RuleContext& cx, const Event& e, const std::string& shape, std::string how) {
    if (!cx.wantsControls() || !controlled_.insert(shape).second) return;
    std::map<std::string, std::string> facts{{"shape", shape}};
    facts["wrap_api"] = shape == "clip-fsdp2" ? "fully_shard" : shape == "clip-accelerate-full" ? "accelerate" : "fsdp1";
    facts["fsdp_version"] = shape == "clip-fsdp2" ? "2" : "1";
    if (shape == "clip-accelerate-full") facts["use_orig_params"] = "1";  // as the finding's replay
    cx.control(info(), e.origin.primary(), std::move(how), std::move(facts));
  }

  const RuleInfo* info_;
  std::set<std::pair<uint32_t, uint32_t>> reported_;
  std::set<std::string> controlled_;
};

}  // namespace

std::unique_ptr<Rule> makeSL203(const RuleInfo* info) { return std::make_unique<LocalGradNorm>(info); }

}  // namespace shardlint::rules
