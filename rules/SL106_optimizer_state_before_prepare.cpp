// SL106 optimizer-state-before-prepare: an optimizer that already holds per-parameter state (loaded with
// `load_state_dict`, or made by its constructor) when accelerate FSDP2 `prepare` re-points it at the sharded
// parameters. accelerate rewrites the param groups only, so that state stays keyed by the original parameters.
#include <algorithm>
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;

// Optimizer classes whose constructor creates per-parameter state: `Adagrad.__init__` fills `state[p]` with
// `step` and `sum` for every parameter. Every other optimizer class of `torch.optim` (torch 2.15: ASGD,
// Adadelta, Adafactor, Adam, AdamW, Adamax, LBFGS, Muon, NAdam, RAdam, RMSprop, Rprop, SGD, SparseAdam) has an
// empty `state` until its first `step`. Third-party classes are not listed: none was measured.
struct EagerStateOptimizer {
  std::string_view qualname;
  std::string_view state;  // the entries the constructor creates, for the message
};
constexpr EagerStateOptimizer kEagerState[] = {
    {"torch.optim.Adagrad", "`step` and `sum`"},
    {"torch.optim.adagrad.Adagrad", "`step` and `sum`"},
};

const EagerStateOptimizer* eagerState(std::string_view qualname) {
  for (const auto& e : kEagerState)
    if (e.qualname == qualname) return &e;
  return nullptr;
}

// `callee(...)`, as a message names a call.
std::string callText(std::string_view callee) {
  std::string out = "`";
  out.append(callee);
  out += "(...)`";
  return out;
}

bool sameOrigin(const semantic::Origin& a, const semantic::Origin& b) {
  return a.site() == b.site() && a.via == b.via;
}

class OptimizerStateBeforePrepare final : public Rule {
 public:
  explicit OptimizerStateBeforePrepare(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{"load_state_dict", "Adagrad"}, {".prepare("}, {"accelerate", "Accelerator"}};
  }

  void finish(RuleContext& cx) override {
    std::set<std::pair<uint32_t, uint32_t>> seen;
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store, seen);
  }

 private:
  // The callee as written at `site` (`optimizer.load_state_dict`, `load_checkpoint`).
  static std::string calleeAt(const RuleContext& cx, const semantic::Site& site) {
    std::string_view text = cx.file(site.file).text;
    if (site.range.end > text.size() || site.range.begin >= site.range.end) return "";
    std::string_view call = text.substr(site.range.begin, site.range.end - site.range.begin);
    return oneLine(call.substr(0, call.find('(')));
  }

  // Where a finding about `what` (an event or object origin) shows in the file: the first call site below the
  // frame it shares with the prepare, else the outermost call site in this file.
  static std::optional<semantic::Site> primaryOf(RuleContext& cx, const semantic::Origin& what,
                                                 const Event& prepare) {
    uint32_t self = cx.analysis().module().fileId();
    semantic::Site primary = what.primaryIn(prepare.origin);
    if (primary.file != self) primary = what.primary();
    if (primary.file != self) return std::nullopt;
    return primary;
  }

  // `optimizer.state.clear()` (or `optimizer.state = ...`) after the prepare: the stale entries are dropped.
  static bool stateClearedAfter(const Store& st, ObjId opt, const Event& prepare) {
    return std::any_of(st.events.begin(), st.events.end(), [&](const Event& e) {
      if (e.target == kNoObj || !st.precedes(prepare.point, e.point)) return false;
      if (e.kind == EventKind::SetAttr && e.name == "state") return e.target == opt;
      if (e.kind != EventKind::MethodCall || e.name != "clear") return false;
      std::vector<std::string_view> edges;
      return st.pathFrom(e.target, opt, edges) && edges.size() == 1 && edges[0] == ".state";
    });
  }

  void check(RuleContext& cx, const Store& st, std::set<std::pair<uint32_t, uint32_t>>& seen) {
    // Only a `prepare` that certainly runs accelerate's FSDP2 path (the plugin, a linked config or the
    // fsdp-version setting; not a plugin on one path only, not an accelerate before 1.6).
    auto prepares = domainEvents(st, "accelerate_fsdp2_prepare");
    if (prepares.empty()) return;
    for (const Event* r : domainEvents(st, "repoint")) {
      if (r->attr("fsdp_version") != "2" || r->target == kNoObj) continue;
      auto p = std::find_if(prepares.begin(), prepares.end(), [&](const Event* e) {
        return e->attr("prepare") == r->attr("prepare") && sameOrigin(e->origin, r->origin);
      });
      if (p == prepares.end()) continue;
      const Event& prepare = **p;
      ObjId opt = r->target;
      if (stateClearedAfter(st, opt, prepare)) continue;
      for (const Event& e : st.events) {
        if (e.kind != EventKind::MethodCall || e.name != "load_state_dict" || e.target != opt) continue;
        if (expectedToFail(st, e.point) || neverRuns(st, e.point) || !st.precedes(e.point, prepare.point)) continue;
        reportLoad(cx, st, e, prepare, seen);
      }
      const auto& o = st.obj(opt);
      if (const EagerStateOptimizer* eager = eagerState(o.name))
        if (!expectedToFail(st, o.point) && !neverRuns(st, o.point)) reportEager(cx, st, opt, *eager, prepare, seen);
    }
  }

  // The accelerator as written in the prepare call (`acc` of `acc.prepare`), for the advice.
  static std::string acceleratorOf(std::string_view call) {
    constexpr std::string_view suffix = ".prepare";
    if (call.size() > suffix.size() && call.substr(call.size() - suffix.size()) == suffix)
      return std::string(call.substr(0, call.size() - suffix.size()));
    return "accelerator";
  }

  static std::string consequence() {
    return "`prepare` shards the model and re-points the optimizer's param groups at the sharded parameters but "
           "leaves `optimizer.state` keyed by the original full-size parameters, so ";
  }

  void reportLoad(RuleContext& cx, const Store& st, const Event& load, const Event& prepare,
                  std::set<std::pair<uint32_t, uint32_t>>& seen) {
    auto primary = primaryOf(cx, load.origin, prepare);
    if (!primary || !seen.insert({primary->file, primary->range.begin}).second) return;
    std::string what = callText(calleeAt(cx, load.origin.site()));
    if (*primary != load.origin.site()) what = callText(calleeAt(cx, *primary)) + " calls " + what + ", which";
    std::string call(prepare.attr("call"));
    std::string msg =
        what + " loads optimizer state before accelerate FSDP2 `" + call + "(...)`: " + consequence() +
        "the loaded state is never used (the first step starts the optimizer's state afresh) and "
        "`optimizer.state_dict()` and `accelerator.save_state` raise a `KeyError`; load the state after `" + call +
        "`, with `" + acceleratorOf(call) + ".load_state(...)` for a checkpoint written by `save_state`, or "
        "`set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))` "
        "(torch.distributed.checkpoint.state_dict) for a state keyed by parameter names";
    std::string when = onlyWhen(st, {load.point, prepare.point});
    if (!when.empty()) msg += " (this holds " + when + ")";
    std::vector<Note> notes;
    if (*primary != load.origin.site()) notes.push_back(cx.note(load.origin.site(), "the state is loaded here"));
    notes.push_back(
        cx.note(prepare.origin.primaryIn(load.origin), "accelerate FSDP2 shards the model and re-points the optimizer here"));
    if (auto n = linkedConfigNote(prepare, "FSDP2 is enabled by this accelerate config")) notes.push_back(*n);
    cx.report(info(), *primary, std::move(msg), std::move(notes), std::nullopt);
  }

  void reportEager(RuleContext& cx, const Store& st, ObjId opt, const EagerStateOptimizer& eager,
                   const Event& prepare, std::set<std::pair<uint32_t, uint32_t>>& seen) {
    const auto& o = st.obj(opt);
    auto primary = primaryOf(cx, o.origin, prepare);
    if (!primary || !seen.insert({primary->file, primary->range.begin}).second) return;
    std::string cls = calleeAt(cx, o.origin.site());
    if (cls.empty()) cls = std::string(eager.qualname);
    std::string what = callText(cls);
    if (*primary != o.origin.site()) what = callText(calleeAt(cx, *primary)) + " builds " + what + ", which";
    std::string call(prepare.attr("call"));
    std::string msg =
        what + " creates its per-parameter state (" + std::string(eager.state) + ") in its constructor, before "
        "accelerate FSDP2 `" + call + "(...)`: " + consequence() +
        "`optimizer.state_dict()` and `accelerator.save_state` raise a `KeyError` (each step adds state for the "
        "sharded parameters beside the stale entries); clear the stale state right after `" + call +
        "`, before the first step (`optimizer.state.clear()`), or use an optimizer that creates its state at "
        "its first step";
    std::string when = onlyWhen(st, {o.point, prepare.point});
    if (!when.empty()) msg += " (this holds " + when + ")";
    std::vector<Note> notes;
    if (*primary != o.origin.site()) notes.push_back(cx.note(o.origin.site(), "the optimizer is constructed here"));
    notes.push_back(
        cx.note(prepare.origin.primaryIn(o.origin), "accelerate FSDP2 shards the model and re-points the optimizer here"));
    if (auto n = linkedConfigNote(prepare, "FSDP2 is enabled by this accelerate config")) notes.push_back(*n);
    cx.report(info(), *primary, std::move(msg), std::move(notes), std::nullopt);
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL106(const RuleInfo* info) { return std::make_unique<OptimizerStateBeforePrepare>(info); }

}  // namespace shardlint::rules
