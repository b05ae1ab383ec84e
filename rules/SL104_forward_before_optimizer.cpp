// SL104 forward-before-optimizer: a forward pass of an FSDP2 (`fully_shard`) model runs between
// the wrap and the construction of the optimizer from its parameters. A module that does not
// reshard after forward (the root by default, or `reshard_after_forward=False`) keeps its unsharded
// parameters registered after that forward; the optimizer takes those, and FSDP registers the
// sharded DTensors again at the next step: those weights are never updated.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/Staleness.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;

// `reshard_after_forward` of a `fully_shard` call: "default", a constant, or "?" (unknown, or a
// project helper's wrap with no such fact).
std::string_view rafOf(const Event& wrap) {
  std::string_view v = wrap.attr("reshard_after_forward");
  return v.empty() ? std::string_view("?") : v;
}

// After a forward, the root keeps its parameters unsharded unless `reshard_after_forward=True`
// (not given or None: False for the root); any other module only with `reshard_after_forward=False`.
bool keepsUnshardedAsRoot(std::string_view raf) { return raf == "default" || raf == "None" || raf == "False"; }
bool keepsUnshardedAsPart(std::string_view raf) { return raf == "False"; }

// A torch.nn layer that holds parameters of its own (a positive list: anything else is not counted).
bool paramLayer(std::string_view q) {
  static const char* kNames[] = {"Linear", "Bilinear", "LazyLinear", "Embedding", "EmbeddingBag", "LayerNorm",
                                 "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                                 "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Conv1d", "Conv2d", "Conv3d",
                                 "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MultiheadAttention",
                                 "LSTM", "GRU", "RNN", "PReLU", "Transformer", "TransformerEncoder",
                                 "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer"};
  if (q.substr(0, 9) != "torch.nn.") return false;
  std::string_view last = q.substr(q.rfind('.') + 1);
  return std::find(std::begin(kNames), std::end(kNames), last) != std::end(kNames);
}

bool containerClass(std::string_view q) {
  return q == "torch.nn.Sequential" || q == "torch.nn.ModuleList" || q == "torch.nn.ModuleDict";
}

// Does the object hold parameters for sure: an nn.Parameter made here, a torch.nn layer with
// parameters, a torch.nn container, or an instance of a project class that may be a module?
bool holdsParameters(const semantic::Obj& o) {
  if (o.kind != semantic::ObjKind::Instance || o.hasTag("fsdp_wrapper")) return false;
  if (o.hasTag("free_param")) return true;
  if (o.cls) return !isPlainClass(*o.cls);
  return paramLayer(o.name) || containerClass(o.name);
}

// The parts of the root `called` that hold parameters and lie in none of the separately sharded
// `parts`: the parameters the root's own FSDP group manages. Empty when every such part is sharded
// separately (or inside a separately sharded part); nullopt when the root's parts cannot be listed
// (a model of an unknown class, a container with elements not all sharded).
std::optional<std::vector<std::string>> ownParts(const Store& st, const Lineage& called,
                                                 const std::vector<Lineage>& parts) {
  ObjId id = objectAt(st, called);
  if (id == kNoObj) return std::nullopt;
  const semantic::Obj& o = st.obj(id);
  if (o.kind != semantic::ObjKind::Instance || o.hasTag("fsdp_wrapper")) return std::nullopt;
  bool container = !o.cls && containerClass(o.name);
  if (!container && (!o.cls || isPlainClass(*o.cls))) return std::nullopt;
  auto touched = [&](const Lineage& l) {  // inside a part, or a part inside it
    return std::any_of(parts.begin(), parts.end(), [&](const Lineage& p) { return within(l, p) || within(p, l); });
  };
  if (container) {
    // Its elements: all of them sharded by a pass over `model[*]`, else not known here.
    bool all = std::any_of(parts.begin(), parts.end(), [&](const Lineage& p) {
      return p.root == called.root && p.edges.size() == called.edges.size() + 1 && within(p, called) &&
             edgeName(p.edges.back()) == "[*]";
    });
    if (!all) return std::nullopt;
  }
  std::vector<std::string> left;
  for (size_t i = 0; i < st.objects.size(); ++i) {
    const semantic::Obj& a = st.objects[i];
    if (a.owner != id || !holdsParameters(a)) continue;
    Lineage l = called;
    l.edges.push_back(a.ownerEdge());
    if (touched(l) || frozen(st, l)) continue;
    std::string name = "`" + render(st, l) + "`";
    if (std::find(left.begin(), left.end(), name) == left.end()) left.push_back(name);
  }
  return left;
}

class ForwardBeforeOptimizer final : public Rule {
 public:
  const RuleInfo& info() const override { return *info_; }
  explicit ForwardBeforeOptimizer(const RuleInfo* info) : info_(info) {}

  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {optimizerAndWrapTokens()[0], {"fully_shard"}};
  }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  struct Forward {
    const Event* call;
    ObjId module;  // the module called
  };

  struct Finding {
    ObjId optimizer = kNoObj;
    const Event* forward = nullptr;
    ObjId module = kNoObj;
    const Event* root = nullptr;                  // the wrap of the module the forward ran on
    std::vector<const Event*> kept;               // wraps whose parameters stay unsharded
    std::vector<const Event*> parts;             // parts of the root sharded on their own before the forward
    std::optional<std::vector<std::string>> own;  // the root's own parts with parameters, when known
    const Event* use = nullptr;
  };

  // Does the forward run inside `with torch.inference_mode():` or a function decorated with
  // `@torch.inference_mode()` (the engine's "with" regions)? A forward there makes the root's unsharded
  // parameters inference tensors: the next training forward then fails loudly whatever the order
  // (measured on torch 2.15), which is not this rule's finding.
  static bool underInferenceMode(const Store& st, const Event& f) {
    for (const semantic::Region* r : st.regionsAt(f.point))
      if (r->kind == "with")
        for (const auto& n : r->names)
          if (n.size() >= 14 && n.compare(n.size() - 14, 14, "inference_mode") == 0 &&
              (n.size() == 14 || n[n.size() - 15] == '.'))
            return true;
    return false;
  }

  void check(RuleContext& cx, const Store& st) {
    std::vector<const Event*> wraps;
    for (const Event* w : domainEvents(st, "wrap"))
      if (w->attr("api") == "fully_shard" && w->attr("strategy").empty() && w->target != kNoObj &&
          alreadyShardedBy(st, *w).root == kNoObj)
        wraps.push_back(w);
    if (wraps.empty()) return;
    // A forward: calling the module object (`model(x)`), or calling it where it is stored as an
    // attribute (`self.model(x)`, recorded as a method call named after the attribute).
    std::vector<ObjId> opts = optimizers(st);
    if (opts.empty()) return;
    std::vector<Forward> forwards;
    for (const Event& e : st.events) {
      if (e.kind != EventKind::MethodCall || e.target == kNoObj) continue;
      ObjId module = kNoObj;
      if (e.name == "__call__") {
        module = e.target;
      } else {
        for (const Event* w : wraps) {
          const semantic::Obj& t = st.obj(w->target);
          if (t.owner == kNoObj || t.ownerEdge() != "." + e.name) continue;
          if (sameLineage(lineageOf(st, t.owner), lineageOf(st, e.target))) module = w->target;
        }
      }
      if (module != kNoObj && !expectedToFail(st, e.point) && !neverRuns(st, e.point)) forwards.push_back({&e, module});
    }
    if (forwards.empty()) return;
    // Forwards under inference mode are not this rule's.
    auto excluded = [&](const Forward& f) { return underInferenceMode(st, *f.call); };
    for (ObjId opt : opts) {
      const auto& o = st.obj(opt);
      if (o.inputs().empty()) continue;
      ValueSet sources = paramSources(st, o.inputs()[0]);
      if (sources.empty()) continue;
      bool reported = false;
      std::string control;
      const Event* controlForward = nullptr;
      for (const Forward& f : forwards) {
        if (!st.precedes(f.call->point, o.point) || excluded(f)) continue;
        std::string why;
        if (auto found = judge(st, opt, sources, f, wraps, cx.wantsControls() ? &why : nullptr)) {
          report(cx, st, *found);
          reported = true;
          break;
        }
        if (!why.empty() && control.empty()) control = why, controlForward = f.call;
      }
      if (reported || !cx.wantsControls()) continue;
      if (!control.empty()) {
        emitControl(cx, st, opt, *controlForward, *controlForward, control);
        continue;
      }
      // Built after a root's wrap and before any forward of it, with a forward of it later outside any
      // loop (a shape check, a warm-up; not the training loop every correct script has).
      for (const Forward& f : forwards) {
        if (!st.precedes(o.point, f.call->point) || inLoop(st, f.call->point) || excluded(f)) continue;
        Lineage called = lineageOf(st, f.module);
        const Event* root = called.root == kNoObj ? nullptr : rootWrap(st, called, o.point, wraps);
        if (!root || !sourcesIn(st, sources, called)) continue;
        bool forwardBefore = std::any_of(forwards.begin(), forwards.end(), [&](const Forward& g) {
          return st.precedes(root->point, g.call->point) && st.precedes(g.call->point, o.point) && !excluded(g);
        });
        Event at;
        at.point = o.point;
        if (forwardBefore || !useFromWrap(st, opt, at, at)) break;
        emitControl(cx, st, opt, *f.call, *root, "optimizer-then-forward");
        break;
      }
    }
  }

  // The forward `fw` before optimizer `opt`: a finding, or none. `control` is set to the replay shape
  // of a pattern the rule found correct for a reason the runtime probe can show (a resharding root, a
  // backward or `reshard()` after the forward), when the rest of the pattern is there.
  std::optional<Finding> judge(const Store& st, ObjId opt, const ValueSet& sources, const Forward& fw,
                               const std::vector<const Event*>& wraps, std::string* control) {
    const Event& f = *fw.call;
    Lineage called = lineageOf(st, fw.module);
    if (called.root == kNoObj) return std::nullopt;
    const Event* root = rootWrap(st, called, f.point, wraps);
    if (!root) return std::nullopt;
    Finding out;
    out.optimizer = opt;
    out.forward = &f;
    out.module = fw.module;
    out.root = root;
    bool rootKept = keepsUnshardedAsRoot(rafOf(*root));
    if (rootKept) out.kept.push_back(root);
    for (const Event* w : wraps) {
      if (!st.precedes(w->point, f.point)) continue;
      Lineage part = lineageOf(st, w->target);
      if (!within(part, called) || within(called, part)) continue;
      out.parts.push_back(w);
      if (keepsUnshardedAsPart(rafOf(*w))) out.kept.push_back(w);  // else resharded, or unknown: not claimed
    }
    if (rootKept && !out.parts.empty()) {
      // The root's own group holds what no part holds: nothing, when the parts cover all of it.
      std::vector<Lineage> parts;
      for (const Event* p : out.parts) parts.push_back(lineageOf(st, p->target));
      out.own = ownParts(st, called, parts);
      if (out.own && out.own->empty()) {
        out.kept.erase(out.kept.begin());
        rootKept = false;
      }
    }
    // The parameters are read after the forward (a list taken before it holds the sharded ones).
    const semantic::PointId built = st.obj(opt).point;
    auto related = [&](ObjId t) {
      Lineage l = lineageOf(st, t);
      return l.root != kNoObj && (within(l, called) || within(called, l));
    };
    bool readAfter = std::any_of(st.events.begin(), st.events.end(), [&](const Event& e) {
      return e.kind == EventKind::MethodCall && (e.name == "parameters" || e.name == "named_parameters") &&
             related(e.target) && st.precedes(f.point, e.point) && (e.point == built || st.precedes(e.point, built));
    });
    if (!readAfter || !sourcesIn(st, sources, called)) return std::nullopt;
    Event at;  // uses after the construction
    at.point = built;
    out.use = useFromWrap(st, opt, at, at);
    if (!out.use) return std::nullopt;
    // Some source holds parameters of a module whose parameters stay unsharded.
    bool hit = std::any_of(sources.begin(), sources.end(), [&](ObjId s) {
      Lineage mod = moduleOfSource(lineageOf(st, s));
      if (mod.root == kNoObj) return false;
      return std::any_of(out.kept.begin(), out.kept.end(), [&](const Event* k) {
        Lineage kept = lineageOf(st, k->target);
        if (within(kept, mod)) return true;  // all of `mod`'s parameters, the kept module's among them
        if (!within(mod, kept)) return false;
        // Inside the kept module, but inside a part of it that is sharded separately: not its parameters.
        return std::none_of(out.parts.begin(), out.parts.end(), [&](const Event* p) {
          Lineage part = lineageOf(st, p->target);
          return within(part, kept) && !within(kept, part) && within(mod, part);
        });
      });
    });
    auto between = [&](semantic::PointId p, semantic::PointId a, semantic::PointId b) {
      return st.precedes(a, p) && st.precedes(p, b);
    };
    for (const Event& e : st.events) {
      if (e.kind != EventKind::MethodCall && e.kind != EventKind::Call) continue;
      std::string_view n = e.name;
      bool backward = n == "backward" || (n.size() > 9 && n.substr(n.size() - 9) == ".backward");
      // A backward after the forward reshards the root (post-backward); an explicit `reshard()` too.
      if (backward && between(e.point, f.point, built)) {
        if (hit && control) *control = "forward-backward-before-optimizer";
        return std::nullopt;
      }
      if (e.kind == EventKind::MethodCall && n == "reshard" && related(e.target) && between(e.point, f.point, built)) {
        if (hit && control && rootKept && out.kept.size() == 1) *control = "forward-reshard-before-optimizer";
        return std::nullopt;
      }
      // `set_reshard_after_forward(...)` changes what the wraps said.
      if (e.kind == EventKind::MethodCall && n == "set_reshard_after_forward" && related(e.target) &&
          between(e.point, root->point, built))
        return std::nullopt;
    }
    if (out.kept.empty()) {
      // Every module reshards after forward: the root with `reshard_after_forward=True`, the parts with
      // theirs not given or True.
      bool partsReshard = std::all_of(out.parts.begin(), out.parts.end(), [](const Event* p) {
        std::string_view r = rafOf(*p);
        return r == "default" || r == "None" || r == "True";
      });
      if (control && rafOf(*root) == "True" && partsReshard) *control = "forward-before-optimizer-resharded";
      return std::nullopt;
    }
    if (!hit) return std::nullopt;
    return out;
  }

  // The `fully_shard` call that made the module `called` an FSDP root before point `p`: a wrap of that
  // module, with no wrap of a module around it (a part of a larger tree is not its own root).
  static const Event* rootWrap(const Store& st, const Lineage& called, semantic::PointId p,
                               const std::vector<const Event*>& wraps) {
    const Event* root = nullptr;
    for (const Event* w : wraps) {
      if (!st.precedes(w->point, p)) continue;
      Lineage l = lineageOf(st, w->target);
      if (sameLineage(l, called)) root = root ? root : w;
      else if (within(called, l)) return nullptr;
    }
    return root;
  }

  static bool inLoop(const Store& st, semantic::PointId p) {
    for (int a = st.points[static_cast<size_t>(p)].arm; a >= 0; a = st.arms[static_cast<size_t>(a)].parent)
      if (st.arms[static_cast<size_t>(a)].loop) return true;
    return false;
  }

  // Some source lies in the module `called`, or is all the parameters of a module containing it.
  static bool sourcesIn(const Store& st, const ValueSet& sources, const Lineage& called) {
    return std::any_of(sources.begin(), sources.end(), [&](ObjId s) {
      Lineage mod = moduleOfSource(lineageOf(st, s));
      return mod.root != kNoObj && (within(mod, called) || within(called, mod));
    });
  }

  // Controls (RuleContext::control): an optimizer built right after the wrap, before a forward of the
  // root ("optimizer-then-forward"), and the patterns `judge` found correct.
  void emitControl(RuleContext& cx, const Store& st, ObjId opt, const Event& forward, const Event& root,
                   const std::string& shape) {
    const auto& o = st.obj(opt);
    std::string how = shape == "optimizer-then-forward"            ? "before the forward pass"
                      : shape == "forward-backward-before-optimizer" ? "after a forward and a backward pass"
                      : shape == "forward-reshard-before-optimizer"  ? "after a forward pass and `reshard()`"
                                                                     : "after a forward pass of a root sharded with "
                                                                       "`reshard_after_forward=True`";
    cx.control(info(), o.origin.primaryIn(forward.origin),
               "optimizer built from the parameters of an FSDP2 model " + how,
               {{"shape", shape}, {"wrap_api", "fully_shard"}, {"fsdp_version", "2"}});
    (void)root;
  }

  // The source text at `site`, on one line; a long call shortened to `callee(...)`.
  static std::string written(RuleContext& cx, const semantic::Site& site) {
    const std::string& text = cx.file(site.file).text;
    if (site.range.begin >= site.range.end || site.range.end > text.size()) return "";
    std::string s = oneLine(std::string_view(text).substr(site.range.begin, site.range.end - site.range.begin));
    if (s.size() > 48) {
      size_t paren = s.find('(');
      if (paren != std::string::npos && paren > 0 && paren < 40) s = s.substr(0, paren) + "(...)";
    }
    return s;
  }

  void report(RuleContext& cx, const Store& st, const Finding& fd) {
    const auto& o = st.obj(fd.optimizer);
    const Event& f = *fd.forward;
    semantic::Site primary = o.origin.primaryIn(f.origin);
    semantic::Site forwardAt = f.origin.primaryIn(o.origin);
    semantic::Site rootAt = fd.root->origin.primaryIn(o.origin);
    std::string model = render(st, writtenLineage(st, fd.module));
    std::string source = writtenSource(cx, st, fd.optimizer, f);
    // Inside a method or a function analysed in place: `self.model.parameters()` as written there.
    if (source.empty() && primary == o.origin.site()) source = writtenParamsOwner(cx, o);
    if (source.empty()) {
      ValueSet sources = paramSources(st, o.inputs()[0]);
      source = render(st, moduleOfSource(writtenLineage(st, sources.empty() ? kNoObj : sources.front())));
    }
    std::string fwd = written(cx, forwardAt);
    bool direct = forwardAt == f.origin.site();
    if (direct) {
      // The module as the call spells it (`model`, `self.model`).
      std::string callee = fwd.substr(0, fwd.find('('));
      bool dotted = !callee.empty() && std::all_of(callee.begin(), callee.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
      });
      if (dotted) model = callee;
    }
    std::string forwardText = fwd.empty() ? "a forward pass of `" + model + "`"
                              : direct    ? "a forward pass, `" + fwd + "`"
                                          : "a forward pass of `" + model + "` in `" + fwd + "`";
    // Why the parameters stay unsharded, wrap by wrap.
    std::vector<std::string> why;
    bool rootKept = false;
    std::vector<std::string> partsKept;
    for (const Event* k : fd.kept) {
      if (k == fd.root) {
        rootKept = true;
        continue;
      }
      partsKept.push_back("`" + render(st, writtenLineage(st, k->target)) + "`");
    }
    auto join = [](const std::vector<std::string>& xs, const char* sep = ", ") {
      std::string s;
      for (size_t i = 0; i < xs.size(); ++i) s += (i ? sep : "") + xs[i];
      return s;
    };
    if (rootKept) {
      std::string raf(rafOf(*fd.root));
      std::string given = raf == "default" ? "`reshard_after_forward` not given means False for the root"
                          : raf == "None"  ? "`reshard_after_forward=None` means False for the root"
                                           : "`reshard_after_forward=False`";
      std::string what = "the root `" + model + "`'s parameters";
      if (fd.own && !fd.own->empty()) {
        what = "the parameters that the root `" + model + "` manages itself (" + join(*fd.own) + ")";
      } else if (!fd.parts.empty()) {
        std::vector<std::string> parts;
        for (const Event* p : fd.parts) {
          std::string r = "`" + render(st, writtenLineage(st, p->target)) + "`";
          if (std::find(parts.begin(), parts.end(), r) == parts.end()) parts.push_back(r);
        }
        what = "the parameters that the root `" + model + "` manages itself (those outside the separately sharded " +
               join(parts) + ")";
      }
      why.push_back(what + " unsharded after a forward (" + given + ")");
    }
    if (!partsKept.empty())
      why.push_back("the parameters of " + join(partsKept) + " unsharded after a forward (`reshard_after_forward=False`)");
    std::string wrapText = written(cx, rootAt);
    if (wrapText.empty()) wrapText = "`fully_shard` of `" + model + "`";
    else if (rootAt == fd.root->origin.site()) wrapText = "`" + wrapText + "`";
    else wrapText = "`fully_shard` of `" + model + "` (in `" + wrapText + "`)";
    std::string msg = "optimizer is built from the parameters of `" + source + "` after " + wrapText + " and then " +
                      forwardText + ": FSDP2 leaves " + join(why, " and ") +
                      ", so the optimizer holds those unsharded tensors, not the sharded DTensor parameters that FSDP "
                      "registers again at the next step, and those weights are silently never updated; build the "
                      "optimizer right after `fully_shard`, before any forward pass";
    std::string when = onlyWhen(st, {o.point, f.point, fd.root->point, fd.use->point});
    if (!when.empty()) msg += " (this holds " + when + ")";
    std::vector<Note> notes;
    notes.push_back(cx.note(rootAt, "`" + model + "` is sharded here"));
    notes.push_back(cx.note(forwardAt, direct ? "the forward pass runs here, before the optimizer is built"
                                              : "a forward pass runs through this call, before the optimizer is built"));
    if (primary != o.origin.site()) notes.push_back(cx.note(o.origin.site(), "the optimizer is constructed here"));
    if (fd.use->origin.site() != o.origin.site())
      notes.push_back(cx.note(fd.use->origin.primaryIn(o.origin), "the optimizer is used here"));
    cx.report(info(), primary, std::move(msg), std::move(notes));
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL104(const RuleInfo* info) { return std::make_unique<ForwardBeforeOptimizer>(info); }

}  // namespace shardlint::rules
