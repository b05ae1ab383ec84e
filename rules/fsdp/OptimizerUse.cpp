// Optimizers recognised by use: an object built from parameters by a call the analysis cannot see into
// becomes an optimizer once the code uses it as one; and method results used as optimizers.
#include <cctype>

#include "fsdp/FsdpModelImpl.h"

namespace shardlint::rules::fsdp {

using semantic::CallSite;
using semantic::kNoObj;
using semantic::Obj;
using semantic::ObjKind;

// ------------------------------------------------- optimizers recognised by use
// An object made by a call the analysis cannot see into (an unknown class or function: `Prodigy(...)`,
// `FancyOpt(...)` from an unresolved module), whose first argument holds a module's parameters
// (`m.parameters()`, `m.named_parameters()`, param-group dicts, a list of them), is an optimizer once
// the code uses it as one: handed to an LR scheduler, to `accelerator.prepare` / Fabric's `setup`
// alongside other objects, or to `Trainer(optimizers=(opt, sched))` (each enough alone); or both
// stepped (`opt.step()`, `scaler.step(opt)`) and zeroed (`opt.zero_grad()`) or passed as
// `optimizer=` (two signals needed: an EMA or SWA helper is built from parameters and stepped too).
// Helpers named as averages (ema, swa, average, polyak) never are.
// (The signals, OptUse, are in FsdpModelImpl.h: the call model passes them.)

namespace {

bool averagingName(std::string_view text) {
  // The words of the identifiers in `text`: split at non-letters and at camel-case boundaries
  // (`EMAModel` -> EMA, Model; `model_ema` -> model, ema).
  std::vector<std::string> words(1);
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (!std::isalpha(c)) {
      words.emplace_back();
      continue;
    }
    bool upper = std::isupper(c);
    bool prevLower = i > 0 && std::islower(static_cast<unsigned char>(text[i - 1]));
    bool nextLower = i + 1 < text.size() && std::islower(static_cast<unsigned char>(text[i + 1]));
    bool prevUpper = i > 0 && std::isupper(static_cast<unsigned char>(text[i - 1]));
    if (upper && (prevLower || (prevUpper && nextLower))) words.emplace_back();
    words.back().push_back(static_cast<char>(std::tolower(c)));
  }
  for (const auto& w : words)
    if (w == "ema" || w == "emas" || w == "swa" || w.find("averag") != std::string::npos ||
        w.find("polyak") != std::string::npos)
      return true;
  return false;
}

// Does a constructor argument hold a module's parameters?
bool holdsParameters(const Store& st, const ValueSet& arg) {
  for (ObjId id : paramSources(st, arg)) {
    if (st.obj(id).hasTag("free_param")) return true;
    Lineage l = lineageOf(st, id);
    if (l.root == kNoObj) continue;
    for (const auto& e : l.edges) {
      std::string_view n = edgeName(e);
      if (n == ".parameters()" || n == ".named_parameters()") return true;
    }
  }
  return false;
}

// An object that may turn out to be an optimizer by its use (see above).
bool optimizerByUseCandidate(const Store& st, ObjId id) {
  const Obj& o = st.obj(id);
  if (o.kind != ObjKind::Instance || o.cls || o.hasTag("optimizer") || o.name.empty() || o.inputs().empty())
    return false;
  for (const auto& [k, v] : o.tags())
    if (k != "optimizer_use") return false;  // something the model already knows (a scheduler, a wrapper...)
  std::string_view q = o.name;
  // accelerate's `DummyOptim` is a placeholder DeepSpeed replaces by the optimizer of its config.
  if (startsWith(q, "torch.") || startsWith(q, "builtins.") || q.find('.') == std::string_view::npos ||
      averagingName(lastComponent(q)) || startsWith(lastComponent(q), "Dummy"))
    return false;
  return holdsParameters(st, o.inputs()[0]);
}

void promoteOptimizer(Store& st, ObjId id) {
  Obj& o = st.obj(id);
  ValueSet params = o.inputs()[0];
  std::vector<semantic::Origin> origins;
  if (!o.inputOrigins().empty()) origins.push_back(o.inputOrigins()[0]);
  else origins.push_back(o.origin);
  o.setTag("optimizer", std::string(lastComponent(o.name)));
  o.setInputs({params}, origins);
}

}  // namespace

// A use of `ids` as an optimizer: `strong` promotes a candidate at once; otherwise the signal is
// recorded and two different ones promote it. `text` is how the use is written (`ema.step`), whose
// averaging name rules it out.
void noteOptimizerUse(Store& st, const ValueSet& ids, unsigned signal, bool strong, std::string_view text) {
  if (averagingName(text)) return;
  for (ObjId id : ids) {
    if (!optimizerByUseCandidate(st, id)) continue;
    if (strong) {
      promoteOptimizer(st, id);
      continue;
    }
    unsigned seen = 0;
    std::string_view tag = st.obj(id).tag("optimizer_use");
    if (!tag.empty()) seen = static_cast<unsigned>(std::stoul(std::string(tag)));
    seen |= signal;
    if (seen == signal) {
      st.obj(id).setTag("optimizer_use", std::to_string(seen));
      continue;
    }
    promoteOptimizer(st, id);
  }
}

// A method's result (`model.configure_optimizers(...)`) used as an optimizer holds
// the parameters of the object whose method made it, even when its class cannot be read.
void markMethodOptimizer(semantic::Interp& in, ObjId id) {
  Store& st = in.store();
  const Obj& o = st.obj(id);
  if (o.kind != ObjKind::Derived || o.hasTag("optimizer") || o.name.size() < 3 || o.name[0] != '.' ||
      o.name.compare(o.name.size() - 2, 2, "()") != 0 || o.parent == kNoObj)
    return;
  const Obj& parent = st.obj(o.parent);
  if (parent.hasTag("optimizer") || parent.kind == ObjKind::Literal || parent.kind == ObjKind::Ref) return;
  ObjId params = in.derive(o.parent, ".parameters()");
  Obj& opt = st.obj(id);
  opt.setTag("optimizer", opt.name.substr(1, opt.name.size() - 3));
  opt.setInputs({{params}}, {opt.origin});
}

// How the call treats an optimizer it is given: a method result passed as
// `optimizer=` or to `.step(...)` is one (above); an external call that takes an
// optimizer together with other objects (`lib.setup(model, optimizer)`) may re-point
// it to them ("handoff"; Staleness decides whether the wrapped model is among them).
void noteOptimizerUses(CallSite& site) {
  Store& st = site.in.store();
  for (const auto& [k, v] : site.kwargs)
    if (k == "optimizer") {
      for (ObjId id : v) markMethodOptimizer(site.in, id);
      noteOptimizerUse(st, v, kOptimizerKw, false);
    }
  if (site.method == "step" && !site.args.empty()) {
    for (ObjId id : site.args[0]) markMethodOptimizer(site.in, id);
    noteOptimizerUse(st, site.args[0], kStepped, false);  // `scaler.step(opt)`
  }
  ValueSet opts, others;
  auto sort = [&](const ValueSet& vs) {
    for (ObjId id : vs) {
      const Obj& o = st.obj(id);
      if (o.hasTag("optimizer")) semantic::addValue(opts, id);
      else if (o.kind != ObjKind::Literal && o.kind != ObjKind::Ref) semantic::addValue(others, id);
    }
  };
  for (const auto& a : site.args) sort(a);
  for (const auto& [k, v] : site.kwargs) sort(v);
  if (site.receiver != kNoObj) sort({site.receiver});
  if (opts.empty() || others.empty()) return;
  for (ObjId o : opts) site.in.domainEvent("handoff", o, site.origin, {{"call", calleeText(site)}}, {others});
}

}  // namespace shardlint::rules::fsdp
