// SL103 unsharded-params: trainable parameters the optimizer holds are left
// outside every FSDP unit (blocks sharded but not the root; ignored_* params).
#include <algorithm>
#include <cctype>
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;

class UnshardedParams final : public Rule {
 public:
  explicit UnshardedParams(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }

  std::vector<std::vector<std::string_view>> prescanTokens() const override { return optimizerAndWrapTokens(); }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  // `for block in module: fully_shard(block)` (or over .children() / .values()) shards
  // every child of `module`, so nothing of it is left outside a unit.
  static bool coversAllChildren(const Store& st, const Event& w, const Lineage& t, const Lineage& module) {
    if (t.root != module.root || t.edges.size() <= module.edges.size() || !within(t, module)) return false;
    // `module.modules()` / `named_modules()` yield the module itself too: an unfiltered loop
    // over them shards the root. A filtered one (`if isinstance(m, Block)`, `if type(m) in
    // classes`) picks blocks, which the root is not.
    if (t.edges[module.edges.size()] == ".modules()" || t.edges[module.edges.size()] == ".named_modules()")
      return !filteredInLoop(st, w.point) || filterMayAccept(st, w.point, module);
    static const char* kIter[] = {"[*]", "[1]", ".children()", ".named_children()", ".values()", ".items()"};
    for (size_t i = module.edges.size(); i < t.edges.size(); ++i)
      if (std::find(std::begin(kIter), std::end(kIter), t.edges[i]) == std::end(kIter)) return false;
    return true;
  }

  // The point runs inside a branch within a loop body (the loop's element is filtered).
  static bool filteredInLoop(const Store& st, semantic::PointId p) {
    bool branch = false;
    for (int a = st.points[static_cast<size_t>(p)].arm; a >= 0; a = st.arms[static_cast<size_t>(a)].parent) {
      if (st.arms[static_cast<size_t>(a)].loop) return branch;
      branch = true;
    }
    return false;
  }

  // The loop's filter is an isinstance test that the module itself may pass: its class
  // (or a base) is among the tested classes, or its class is unknown and the test
  // names `nn.Module`.
  static bool filterMayAccept(const Store& st, semantic::PointId p, const Lineage& module) {
    ObjId m = objectAt(st, module);
    std::vector<std::string> classes;
    if (m != kNoObj && st.obj(m).kind == semantic::ObjKind::Instance) {
      classes.push_back(st.obj(m).name);
      if (st.obj(m).cls) for (const auto& b : st.obj(m).cls->allBases()) classes.push_back(b);
    }
    for (const semantic::Region* r : st.regionsAt(p)) {
      if (r->kind != "isinstance" || r->negated) continue;
      for (const auto& n : r->names) {
        if (n == "torch.nn.Module" || n == "torch.nn.modules.module.Module") return true;
        if (std::find(classes.begin(), classes.end(), n) != classes.end()) return true;
      }
    }
    return false;
  }

  static bool parameterless(std::string_view q) {
    // torch.nn modules without parameters of their own.
    static const char* kNames[] = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "ReLU",
                                   "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
                                   "Identity", "Flatten", "Unflatten", "LeakyReLU", "ELU", "Hardswish",
                                   "Hardsigmoid", "Softplus", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
                                   "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
                                   "AdaptiveAvgPool3d", "AdaptiveMaxPool2d", "Upsample", "PixelShuffle",
                                   "CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "BCEWithLogitsLoss",
                                   "BCELoss", "SmoothL1Loss", "KLDivLoss", "CosineSimilarity"};
    if (q.substr(0, 9) != "torch.nn.") return false;
    auto dot = q.rfind('.');
    std::string_view last = q.substr(dot + 1);
    return std::find(std::begin(kNames), std::end(kNames), last) != std::end(kNames);
  }

  struct Coverage {
    bool known = false;              // the module's class is known, so its parts are
    std::vector<std::string> left;   // parts holding parameters outside every unit
  };

  // What of `module` stays outside the units when its class is known: its own
  // parameters (`self.scale = nn.Parameter(...)`) and every parameter-bearing child
  // that no unit covers. Children whose kind is unknown (an argument stored as an
  // attribute) are not counted either way.
  static Coverage coverage(const Store& st, const Lineage& module, const std::vector<const Event*>& wraps) {
    Coverage c;
    ObjId m = objectAt(st, module);
    if (m == kNoObj || st.obj(m).kind != semantic::ObjKind::Instance || !st.obj(m).cls) return c;
    c.known = true;
    for (size_t i = 0; i < st.objects.size(); ++i) {
      const auto& child = st.objects[i];
      if (child.owner != m || child.kind != semantic::ObjKind::Instance || parameterless(child.name)) continue;
      Lineage cl = module;
      cl.edges.push_back(child.ownerEdge());
      bool direct = child.hasTag("free_param");
      bool covered = !direct && std::any_of(wraps.begin(), wraps.end(), [&](const Event* w) {
        if (w->target == kNoObj || alreadyShardedBy(st, *w).root != kNoObj) return false;
        Lineage t = lineageOf(st, w->target);
        return within(cl, t) || coversAllChildren(st, *w, t, cl);
      });
      if (!covered && !frozen(st, cl)) c.left.push_back(render(st, cl));
    }
    return c;
  }

  // The module part of a lineage, for messages: `model.layer1.modules()[*]` -> `model.layer1`.
  static std::string readable(const Store& st, Lineage l) {
    for (size_t i = 0; i < l.edges.size(); ++i)
      if (std::string_view e = edgeName(l.edges[i]); e.size() > 2 && e.compare(e.size() - 2, 2, "()") == 0) {
        l.edges.resize(i);
        break;
      }
    return render(st, l);
  }

  // Gradients of something inside `module` explicitly all-reduced (best effort).
  static bool allReduced(const Store& st, const Lineage& module) {
    for (const Event& e : st.events) {
      if (e.kind != EventKind::Call || e.name.size() < 10 || e.name.compare(e.name.size() - 10, 10, "all_reduce") != 0)
        continue;
      for (ObjId a : e.allArgs())
        if (within(lineageOf(st, a), module)) return true;
    }
    return false;
  }

  // A freeze of something inside `module` that is not inside one of the sharded units.
  static bool frozenOutside(const Store& st, const Lineage& module, const std::vector<Lineage>& units) {
    for (const Event& e : st.events) {
      bool freeze = (e.kind == EventKind::MethodCall && e.name == "requires_grad_") ||
                    (e.kind == EventKind::SetAttr && e.name == "requires_grad");
      if (!freeze || e.target == kNoObj) continue;
      Lineage t = lineageOf(st, e.target);
      if (!within(t, module) && !within(module, moduleOfSource(t))) continue;
      if (!frozen(st, t)) continue;
      bool insideUnit = std::any_of(units.begin(), units.end(), [&](const Lineage& u) { return within(t, u); });
      if (!insideUnit) return true;
    }
    return false;
  }

  // The fix: `fully_shard(<root>)` on a line of its own after the statement that shards the last
  // block (the loop around it, when there is one), at that statement's indentation, with the
  // blocks' mesh and policies. Only where that is plainly
  // possible: the call and the optimizer in the linted file and in one function, the optimizer
  // built after that statement, the root a plain name or attribute path. Unsafe: sharding the root
  // changes what the step computes (the gradients of those parameters are then reduced).
  std::optional<Fix> rootFix(RuleContext& cx, const Event& lastWrap, const semantic::Obj& optimizer, const std::string& root) {
    uint32_t fileId = cx.analysis().module().fileId();
    semantic::Site call = lastWrap.origin.site(), built = optimizer.origin.site();
    if (call.file != fileId || built.file != fileId) return std::nullopt;
    for (char c : root)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return std::nullopt;
    if (root.empty() || std::isdigit(static_cast<unsigned char>(root[0]))) return std::nullopt;
    const std::string& text = cx.file().text;
    TSNode callNode = syntax::nodeSpanning(cx.root(), call.range, "call");
    if (ts_node_is_null(callNode)) return std::nullopt;
    // The statement to follow: the outermost loop around the call within its function, else the
    // call's own statement.
    TSNode stmt = syntax::followingPoint(callNode);
    if (ts_node_is_null(stmt)) return std::nullopt;
    if (cx.enclosingFunction(call) != cx.enclosingFunction(built) || built.range.begin < ts_node_end_byte(stmt))
      return std::nullopt;
    uint32_t start = ts_node_start_byte(stmt);
    size_t lineStart = text.rfind('\n', start == 0 ? 0 : start - 1);
    lineStart = lineStart == std::string::npos || start == 0 ? 0 : lineStart + 1;
    std::string indent = text.substr(lineStart, start - lineStart);
    if (indent.find_first_not_of(" \t") != std::string::npos) return std::nullopt;  // `x = 1; for ...`
    std::string line = std::string(syntax::textOf(syntax::field(callNode, "function"), text)) + "(" + root;
    // The arguments every unit must share (one mesh, one mixed-precision and offload policy); not
    // the per-block ones (`reshard_after_forward`, often computed in the loop).
    for (const auto& kw : syntax::keywordArguments(callNode)) {
      std::string_view name = syntax::textOf(kw.name, text);
      if (name == "mesh" || name == "mp_policy" || name == "offload_policy")
        line += ", " + std::string(name) + "=" + std::string(syntax::textOf(kw.value, text));
    }
    line += ")";
    // After the end of the statement's last line (a trailing comment stays where it is).
    size_t nl = text.find('\n', ts_node_end_byte(stmt));
    uint32_t at = static_cast<uint32_t>(nl == std::string::npos ? text.size() : nl + 1);
    std::string insert = (nl == std::string::npos ? "\n" : "") + indent + line + "\n";
    return Fix{"Add `" + line + "` after the blocks are sharded", Applicability::Unsafe,
               {cx.edit(semantic::Site{fileId, ByteRange{at, at}}, insert)}};
  }

  void check(RuleContext& cx, const Store& st) {
    auto wraps = domainEvents(st, "wrap");
    if (wraps.empty()) return;
    std::set<std::pair<ObjId, std::string>> done;
    for (ObjId opt : optimizers(st)) {
      const auto& o = st.obj(opt);
      if (o.inputs().empty()) continue;
      for (ObjId s : paramSources(st, o.inputs()[0])) {
        Lineage src = lineageOf(st, s);
        // (a) blocks sharded, root never.
        if (isWholeParams(src)) {
          Lineage module = moduleOfSource(src);
          bool covered = false;
          std::vector<const Event*> below;
          std::vector<Lineage> units;
          for (const Event* w : wraps) {
            if (w->target == kNoObj) continue;
            // Re-sharding part of a model known to be sharded already: its root is covered.
            Lineage sharded = alreadyShardedBy(st, *w);
            if (sharded.root != kNoObj) {
              if (within(module, sharded)) covered = true;
              continue;
            }
            Lineage t = lineageOf(st, w->target);
            if (within(module, t) || coversAllChildren(st, *w, t, module)) covered = true;
            else if (within(t, module) && w->attr("api") == "fully_shard") {
              below.push_back(w);
              units.push_back(t);
            }
          }
          // A sharded sub-root that itself contains sharded blocks (Lightning's
          // `fully_shard(self.model)` after its blocks, inside a LightningModule):
          // what lies outside it is unknown, so stay silent (precision first).
          for (size_t i = 0; i < units.size() && !covered; ++i)
            for (size_t j = 0; j < units.size() && !covered; ++j)
              if (i != j && within(units[j], units[i]) && units[j].edges.size() > units[i].edges.size())
                covered = true;
          std::string key = render(st, module);
          Coverage parts;
          if (!covered && !below.empty()) {
            parts = coverage(st, module, wraps);
            if (parts.known && parts.left.empty()) covered = true;  // every part is in some unit
          }
          if (!covered && !below.empty() && !frozenOutside(st, module, units) && !allReduced(st, module) &&
              done.insert({module.root, key}).second) {
            const Event* first = *std::min_element(below.begin(), below.end(), [&](const Event* a, const Event* b) {
              return st.points[static_cast<size_t>(a->point)].ordinal < st.points[static_cast<size_t>(b->point)].ordinal;
            });
            std::string outside = "the parameters outside the sharded blocks (embeddings, final norm, head)";
            if (parts.known) {
              outside = "the parameters of ";
              for (size_t i = 0; i < parts.left.size(); ++i)
                outside += (i ? ", `" : "`") + parts.left[i] + "`";
            }
            std::string msg = "`fully_shard` is applied to submodules of `" + key + "` but never to `" + key +
                              "` itself, while the optimizer holds all of its parameters; " + outside +
                              " stay plain replicated tensors whose gradients are never reduced, so ranks silently "
                              "diverge; call `fully_shard(" + key + ")` after sharding the blocks";
            std::vector<Note> notes;
            semantic::Site primary = first->origin.primaryIn(o.origin);
            if (primary != first->origin.site())
              notes.push_back(cx.note(first->origin.site(), "`fully_shard` is applied to a submodule here"));
            notes.push_back(cx.note(o.origin.primaryIn(first->origin), "the optimizer takes all parameters of `" + key + "` here"));
            const Event* last = *std::max_element(below.begin(), below.end(), [&](const Event* a, const Event* b) {
              return st.points[static_cast<size_t>(a->point)].ordinal < st.points[static_cast<size_t>(b->point)].ordinal;
            });
            cx.report(info(), primary, std::move(msg), std::move(notes), rootFix(cx, *last, o, key));
          }
        }
        // (b) ignored_params / ignored_modules / ignored_states holding trainable optimized parameters.
        for (const Event* w : wraps) {
          if (w->attr("ignored") != "1" || w->args.empty()) continue;
          for (ObjId ig : w->args[0]) {
            Lineage il = lineageOf(st, ig);
            bool overlaps = within(src, il) || within(il, moduleOfSource(src)) || within(il, src);
            if (!overlaps || frozen(st, il)) continue;
            // One finding per wrap call, whatever it ignores.
            if (!done.insert({kNoObj, "ignored@" + std::to_string(w->origin.file) + ":" +
                                          std::to_string(w->origin.range.begin)})
                     .second)
              continue;
            std::string msg = "parameters under `" + readable(st, il) +
                              "` are excluded from FSDP (`ignored_*`) but are trainable and held by the optimizer; "
                              "ignored parameters are not sharded and their gradients are never reduced, so ranks "
                              "silently diverge; freeze them, keep them out of the optimizer, or stop ignoring them";
            std::vector<Note> notes;
            semantic::Site primary = w->origin.primaryIn(o.origin);
            if (primary != w->origin.site()) notes.push_back(cx.note(w->origin.site(), "the wrap that ignores them"));
            notes.push_back(cx.note(o.origin.primaryIn(w->origin), "the optimizer that holds them is built here"));
            cx.report(info(), primary, std::move(msg), std::move(notes));
          }
        }
      }
    }
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL103(const RuleInfo* info) { return std::make_unique<UnshardedParams>(info); }

}  // namespace shardlint::rules
