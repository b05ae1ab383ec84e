#include "fsdp/FsdpModel.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "fsdp/Versions.h"
#include "semantic/Interpreter.h"

namespace shardlint::rules::fsdp {

using semantic::CallSite;
using semantic::EventKind;
using semantic::kNoObj;
using semantic::Obj;
using semantic::ObjKind;

namespace {

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool endsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
std::string_view lastComponent(std::string_view q) {
  auto dot = q.rfind('.');
  return dot == std::string_view::npos ? q : q.substr(dot + 1);
}

std::optional<std::string> literalOf(const Store& st, const ValueSet* vs) {
  // One constant, or several that agree (`cfg.freeze or cfg.use_peft` with both defaults False).
  // An option the engine has no value for (semantic "option_value": an attribute of an
  // `argparse.Namespace(**config)`) joined with an option's default is read as that default, as the
  // command line may change either (`args.x` from `parse_args()` or from a `--config` file).
  if (!vs || vs->empty()) return std::nullopt;
  std::optional<std::string> name;
  bool defaulted = false, fromOptions = false;
  for (ObjId id : *vs) {
    const Obj& o = st.obj(id);
    if (o.kind == ObjKind::Derived && o.hasTag("option_value")) {
      fromOptions = true;
      continue;
    }
    if (o.kind != ObjKind::Literal || (name && *name != o.name)) return std::nullopt;
    name = o.name;
    defaulted = defaulted || o.hasTag("option_default");
  }
  if (fromOptions && !defaulted) return std::nullopt;
  return name;
}

// SL203's fact: an FSDP1 sharding strategy as torch names it (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD,
// _HYBRID_SHARD_ZERO2), from `ShardingStrategy.X`, a string (accelerate's plugin takes "no_shard" in any case) or
// the enum's number (accelerate: `FSDP_SHARDING_STRATEGY.index(name) + 1`); "?" when it is not one of those.
std::string shardingName(std::string_view written) {
  static const char* const kNames[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"};
  if (auto dot = written.rfind('.'); dot != std::string_view::npos) written = written.substr(dot + 1);
  if (written.size() == 1 && written[0] >= '1' && written[0] <= '5') return kNames[written[0] - '1'];
  std::string upper(written);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "HYBRID_SHARD_ZERO2") upper = "_HYBRID_SHARD_ZERO2";
  for (const char* n : kNames)
    if (upper == n) return upper;
  return "?";
}

// The strategy a `sharding_strategy=` argument gives: every value one known strategy (a constant, or
// `ShardingStrategy.X`, which the engine reads as a qualified name or an attribute), else "?".
std::string shardingOf(const Store& st, const ValueSet* vs) {
  if (!vs || vs->empty()) return "?";
  std::string found;
  for (ObjId id : *vs) {
    const Obj& o = st.obj(id);
    std::string name = o.kind == ObjKind::Literal || o.kind == ObjKind::Ref || o.kind == ObjKind::Derived
                           ? shardingName(o.name)
                           : "?";
    if (name == "?" || (!found.empty() && found != name)) return "?";
    found = name;
  }
  return found;
}

bool anyTagged(const Store& st, const ValueSet& vs, std::string_view tag) {
  return std::any_of(vs.begin(), vs.end(), [&](ObjId id) { return st.obj(id).hasTag(tag); });
}

ValueSet flattenModules(const Store& st, const ValueSet& vs) {
  ValueSet out;
  st.flatten(vs, out);
  out.erase(std::remove_if(out.begin(), out.end(), [&](ObjId id) { return st.obj(id).kind == ObjKind::Literal; }),
            out.end());
  return out;
}

ValueSet makeResult(semantic::Interp& in, const std::vector<ValueSet>& values, const semantic::Origin& origin) {
  if (values.size() == 1) return values[0];
  ObjId c = in.newObject(ObjKind::Container, "", origin);
  in.store().obj(c).containerKind = 't';
  in.store().obj(c).setElements(values);
  return {c};
}

std::string calleeText(const CallSite& site) {
  std::string_view src = site.in.file().text;
  std::string_view call = src.substr(site.origin.range.begin, site.origin.range.end - site.origin.range.begin);
  auto paren = call.find('(');
  return std::string(call.substr(0, paren));
}

// ------------------------------------------------- optimizers recognised by use
// An object made by a call the analysis cannot see into (an unknown class or function: `Prodigy(...)`,
// `FancyOpt(...)` from an unresolved module), whose first argument holds a module's parameters
// (`m.parameters()`, `m.named_parameters()`, param-group dicts, a list of them), is an optimizer once
// the code uses it as one: handed to an LR scheduler, to `accelerator.prepare` / Fabric's `setup`
// alongside other objects, or to `Trainer(optimizers=(opt, sched))` (each enough alone); or both
// stepped (`opt.step()`, `scaler.step(opt)`) and zeroed (`opt.zero_grad()`) or passed as
// `optimizer=` (two signals needed: an EMA or SWA helper is built from parameters and stepped too).
// Helpers named as averages (ema, swa, average, polyak) never are.
enum OptUse : unsigned { kStepped = 1, kZeroed = 2, kOptimizerKw = 4 };

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

// A use of `ids` as an optimizer: `strong` promotes a candidate at once; otherwise the signal is
// recorded and two different ones promote it. `text` is how the use is written (`ema.step`), whose
// averaging name rules it out.
void noteOptimizerUse(Store& st, const ValueSet& ids, unsigned signal, bool strong, std::string_view text = {}) {
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

bool handlePrepare(CallSite& site, const Obj& acc) {
  Store& st = site.in.store();
  std::string fsdp(acc.tag("fsdp"));
  std::string orig(acc.tag("use_orig_params"));
  std::string origFrom(acc.tag("orig_from"));
  std::string prepareId = std::to_string(site.origin.file) + ":" + std::to_string(site.origin.range.begin);
  std::vector<ValueSet> results;
  std::vector<ObjId> optimizersSeen;
  std::string call = calleeText(site);
  if (site.args.size() >= 2)  // an object built from parameters prepared with others is the optimizer
    for (const ValueSet& arg : site.args) noteOptimizerUse(st, arg, 0, true);
  for (const ValueSet& arg : site.args) {
    if (fsdp.empty() || anyTagged(st, arg, "optimizer") || anyTagged(st, arg, "dataloader") ||
        anyTagged(st, arg, "scheduler")) {
      for (ObjId id : arg)
        if (st.obj(id).hasTag("optimizer")) optimizersSeen.push_back(id);
      results.push_back(arg);
      continue;
    }
    ValueSet out;
    for (ObjId m : arg) {
      if (st.obj(m).hasTag("fsdp_wrapper")) {  // already wrapped: prepare() does not wrap it again
        semantic::addValue(out, m);
        continue;
      }
      std::string replaces = fsdp == "2" ? "1" : orig == "False" ? "1" : orig == "True" ? "0" : "?";
      std::map<std::string, std::string, std::less<>> attrs{{"api", "accelerate"},     {"fsdp_version", fsdp},
                                                            {"replaces", replaces},    {"prepare", prepareId},
                                                            {"call", call},            {"orig_from", origFrom}};
      for (const char* k : {"config", "config_line", "config_col", "config_value", "plugin_call", "plugin_args"})
        if (acc.hasTag(k)) attrs[k] = std::string(acc.tag(k));
      if (fsdp == "1") attrs["sharding"] = acc.hasTag("sharding") ? std::string(acc.tag("sharding")) : "?";
      site.in.domainEvent("wrap", m, site.origin, std::move(attrs));
      if (fsdp == "2") {
        semantic::addValue(out, m);
      } else {
        ObjId w = site.in.newObject(ObjKind::Instance, "accelerate.prepared_model", site.origin);
        st.obj(w).setTag("fsdp_wrapper", "accelerate");
        st.obj(w).setInputs({{m}});
        semantic::addValue(out, w);
      }
    }
    results.push_back(out);
  }
  // SL201's fact: what one FSDP2 `prepare` call holds. accelerate (1.6+) counts the torch modules and
  // optimizers among the arguments and raises a ValueError unless both are there or neither is.
  // "optimizers": arguments that are certainly an optimizer (a known optimizer class); "others":
  // arguments that are neither such an optimizer nor a known dataloader or scheduler (maybe a model).
  if (fsdp == "2" && !acc.hasTag("accelerate_before_fsdp2") && !acc.hasTag("fsdp_conditional")) {
    size_t certainOpt = 0, others = 0;
    for (const ValueSet& arg : site.args) {
      bool opt = !arg.empty() && std::all_of(arg.begin(), arg.end(), [&](ObjId id) {
        const Obj& o = st.obj(id);
        return o.hasTag("optimizer") && isOptimizerQualname(o.name);
      });
      bool known = !arg.empty() && std::all_of(arg.begin(), arg.end(), [&](ObjId id) {
        return st.obj(id).hasTag("dataloader") || st.obj(id).hasTag("scheduler");
      });
      if (opt) ++certainOpt;
      else if (!known) ++others;
    }
    std::map<std::string, std::string, std::less<>> attrs{{"prepare", prepareId},
                                                          {"call", call},
                                                          {"optimizers", std::to_string(certainOpt)},
                                                          {"others", std::to_string(others)},
                                                          {"wrapped_optimizers", std::to_string(optimizersSeen.size())},
                                                          {"splat", site.splat ? "1" : "0"}};
    for (const char* k : {"config", "config_line", "config_col"})
      if (acc.hasTag(k)) attrs[k] = std::string(acc.tag(k));
    site.in.domainEvent("accelerate_fsdp2_prepare", site.receiver, site.origin, std::move(attrs));
  }
  // accelerate re-points a pre-built optimizer only on the FSDP2 path (fsdp2_switch_optimizer_parameters).
  if (fsdp == "2")
    for (ObjId o : optimizersSeen)
      site.in.domainEvent("repoint", o, site.origin,
                          {{"prepare", prepareId}, {"fsdp_version", fsdp}, {"call", call}});
  site.result = makeResult(site.in, results, site.origin);
  return true;
}

// SL201's fact: `accelerator.prepare_model(model)` under FSDP2 raises `ValueError: FSDP2 preparation should be
// done via accelerate.prepare()` unless `evaluation_mode=True`, the model was already prepared (it returns
// early), or tensor parallelism is on (an earlier branch). Each is a reason for no event here.
void noteFsdp2PrepareModel(CallSite& site, const Obj& acc) {
  Store& st = site.in.store();
  if (acc.tag("fsdp") != "2" || acc.hasTag("accelerate_before_fsdp2") || acc.hasTag("fsdp_conditional") ||
      acc.hasTag("parallelism_config") ||
      site.splat)
    return;
  const ValueSet* model = site.arg(0, "model");
  if (!model || model->empty()) return;
  auto prepared = [&](ObjId m) {  // by an earlier `prepare`: prepare_model returns it unchanged
    return std::any_of(st.events.begin(), st.events.end(), [&](const Event& e) {
      return e.kind == EventKind::Domain && e.name == "wrap" && e.target == m && e.attr("api") == "accelerate";
    });
  };
  for (ObjId m : *model) {
    const Obj& o = st.obj(m);
    if (prepared(m) || o.hasTag("fsdp_wrapper") || o.hasTag("optimizer") ||
        o.hasTag("dataloader") || o.hasTag("scheduler") || o.kind == ObjKind::Literal)
      return;
  }
  if (const ValueSet* eval = site.arg(2, "evaluation_mode")) {
    auto lit = literalOf(st, eval);
    if (!lit || *lit != "False") return;
  }
  std::map<std::string, std::string, std::less<>> attrs{{"call", calleeText(site)}};
  for (const char* k : {"config", "config_line", "config_col"})
    if (acc.hasTag(k)) attrs[k] = std::string(acc.tag(k));
  site.in.domainEvent("accelerate_fsdp2_prepare_model", site.receiver, site.origin, std::move(attrs));
}

// Whether Fabric's FSDPStrategy replaces the parameters it wraps (FSDP1 with use_orig_params=False):
// "1" with `why` set when written in the strategy or implied by a Lightning older than 2.1 that the
// project pins (its strategy defaulted to False; 2.1 made it True); "0" when kept; "?" when unknown.
std::string fabricReplaces(const Obj& fabric, const std::map<std::string, std::string>& facts, std::string& why) {
  std::string_view orig = fabric.tag("use_orig_params");
  if (orig == "False") {
    why = "`FSDPStrategy(use_orig_params=False)`";
    return "1";
  }
  if (orig == "True") return "0";
  if (orig == "?") return "?";
  if (auto pin = pinnedBelow(facts, {"lightning", "pytorch-lightning", "lightning-fabric"}, "2.1")) {
    why = "the project pins " + *pin + ", a Lightning before 2.1, whose `FSDPStrategy` defaults to "
          "`use_orig_params=False`";
    return "1";
  }
  return "0";  // Lightning 2.1+ defaults to use_orig_params=True
}

bool handleFabric(CallSite& site, const Obj& fabric, const std::map<std::string, std::string>& facts) {
  bool fsdp = fabric.hasTag("fsdp");
  std::string call = calleeText(site);
  if (site.method == "setup" || site.method == "setup_module") {
    if (site.args.empty()) return false;
    std::string why;
    std::string replaces = fsdp ? fabricReplaces(fabric, facts, why) : "";
    if (fsdp)
      for (ObjId m : site.args[0])
        site.in.domainEvent("wrap", m, site.origin,
                            {{"api", "fabric"}, {"fsdp_version", "1"}, {"replaces", replaces}, {"call", call},
                             {"why", why}});
    if (site.method == "setup")
      for (size_t i = 1; i < site.args.size(); ++i) noteOptimizerUse(site.in.store(), site.args[i], 0, true);
    if (fsdp && site.method == "setup")
      for (size_t i = 1; i < site.args.size(); ++i)
        for (ObjId o : site.args[i])
          if (site.in.store().obj(o).hasTag("optimizer")) site.in.domainEvent("repoint", o, site.origin, {{"call", call}});
    // ModelParallelStrategy: the strategy's `setup_module` runs `parallelize_fn(module, device_mesh)` here
    // (its `fully_shard` calls are the wraps); an optimizer passed along is only wrapped
    // (Strategy.setup_optimizer), never re-pointed. The module is sharded in place: the result stands for it.
    if (fabric.hasTag("model_parallel") && !fabric.inputs().empty()) {
      Store& st = site.in.store();
      size_t before = st.events.size();
      ObjId mesh = site.in.derive(site.receiver, ".device_mesh");
      site.in.callCallable(fabric.inputs()[0], {site.args[0], {mesh}}, site.origin);
      for (size_t i = before; i < st.events.size(); ++i)
        if (st.events[i].kind == EventKind::Domain && st.events[i].name == "wrap")
          st.events[i].attrs["strategy"] = "ModelParallelStrategy";
    }
    site.result = makeResult(site.in, site.args, site.origin);
    return true;
  }
  if (site.method == "setup_optimizers") {
    site.result = makeResult(site.in, site.args, site.origin);
    return true;
  }
  return false;
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

// transformers' TrainingArguments and the trl configs that derive from it.
bool isTrainingArguments(std::string_view q) {
  return (startsWith(q, "transformers.") && endsWith(q, "TrainingArguments")) ||
         (startsWith(q, "trl.") && endsWith(q, "Config") && !endsWith(q, "ModelConfig") && !endsWith(q, "ScriptArguments"));
}

// transformers' Trainer, a trl trainer, or a project class deriving from one (resolved bases).
bool isHfTrainer(std::string_view q) {
  return (startsWith(q, "transformers.") || startsWith(q, "trl.")) && endsWith(q, "Trainer");
}
bool derivesFromHfTrainer(const semantic::ClassDef* cls, int depth = 0) {
  if (!cls || depth > 8) return false;
  for (const auto& b : cls->bases)
    if (isHfTrainer(b)) return true;
  for (const semantic::ClassDef* b : cls->localBases)
    if (derivesFromHfTrainer(b, depth + 1)) return true;
  return false;
}

// What `fsdp=` of TrainingArguments says: "on" (a non-empty option string or list, True), "off" ("",
// False, None, an empty list, not passed), "?" (not a constant).
std::string trainerFsdpSetting(const Store& st, const ValueSet* v) {
  if (!v) return "off";
  if (v->empty()) return "?";
  std::string out;
  for (ObjId id : *v) {
    const Obj& o = st.obj(id);
    std::string one;
    if (o.kind == ObjKind::Literal) {
      if (o.name == "True") one = "on";
      else if (o.name == "False" || o.name == "None") one = "off";
      else if (o.hasTag("inexact")) one = "?";
      else if (o.hasTag("str") || !semantic::truthOfConstant(o.name).has_value())  // a string
        one = o.name.find_first_not_of(" \t") == std::string::npos ? "off" : "on";
      else one = "?";  // a number
    } else if (o.kind == ObjKind::Container && (o.containerKind == 'l' || o.containerKind == 't')) {
      one = o.elements().empty() ? "off" : "on";
    } else {
      one = "?";
    }
    if (!out.empty() && out != one) return "?";
    out = one;
  }
  return out;
}

// The text written for the call's i-th keyword (its value, or the `**dict` it comes from), when it is
// in the call's file; empty otherwise.
std::string_view writtenKeyword(const CallSite& site, size_t i) {
  if (i >= site.kwargs.size() || i >= site.kwargOrigins.size()) return {};
  std::string_view src = site.in.file().text;
  const semantic::Origin& at = site.kwargOrigins[i];
  if (at.file != site.origin.file || at.range.end > src.size() || at.range.begin >= at.range.end) return {};
  return src.substr(at.range.begin, at.range.end - at.range.begin);
}

// The written text of keyword `name` of the call and where it is ("file:begin-end"), when in the call's file.
std::pair<std::string, std::string> keywordText(const CallSite& site, std::string_view name) {
  for (size_t i = 0; i < site.kwargs.size(); ++i) {
    if (site.kwargs[i].first != name) continue;
    std::string_view written = writtenKeyword(site, i);
    if (written.empty()) continue;
    const semantic::Origin& at = site.kwargOrigins[i];
    return {std::string(written),
            std::to_string(at.file) + ":" + std::to_string(at.range.begin) + "-" + std::to_string(at.range.end)};
  }
  return {};
}

}  // namespace

bool isOptimizerQualname(std::string_view q) {
  std::string_view last = lastComponent(q);
  if (last == "_AdamW" && (startsWith(q, "torchao.optim.") || startsWith(q, "torchao.prototype.low_bit_optim.")))
    return true;  // torchao's plain AdamW with its options (bf16 stochastic rounding)
  if (last.empty() || !std::isupper(static_cast<unsigned char>(last[0]))) return false;
  if (startsWith(q, "torch.optim.lr_scheduler") || startsWith(q, "torch.optim.swa_utils")) return false;
  if (last == "Optimizer" || last == "LRScheduler") return false;
  if (startsWith(q, "torch.optim.")) return true;
  if (startsWith(q, "bitsandbytes.optim.") || startsWith(q, "apex.optimizers.") ||
      startsWith(q, "deepspeed.ops.adam.") || startsWith(q, "timm.optim.") || startsWith(q, "torch_optimizer."))
    return true;
  if (q == "transformers.AdamW" || q == "transformers.Adafactor" || q == "transformers.optimization.AdamW" ||
      q == "transformers.optimization.Adafactor" || q == "lion_pytorch.Lion" ||
      q == "lion_pytorch.lion_pytorch.Lion" || q == "torch.distributed.optim.ZeroRedundancyOptimizer")
    return true;
  // Third-party optimizer packages, by their import paths: DeepSpeed's CPU / fused ops (FusedAdam,
  // DeepSpeedCPUAdam, FusedLamb, FusedLion, DeepSpeedCPULion, DeepSpeedCPUAdagrad), torchdistx's
  // AnyPrecisionAdamW, Prodigy, Muon (Muon, MuonWithAuxAdam, SingleDeviceMuon...), torchao's low-bit
  // optimizers (AdamW8bit, AdamW4bit, AdamWFp8, _AdamW, CPUOffloadOptimizer; also under their
  // prototype path), schedule-free optimizers (AdamWScheduleFree, SGDScheduleFree, RAdamScheduleFree;
  // not ScheduleFreeWrapper, which wraps an optimizer).
  if (startsWith(q, "deepspeed.ops.lamb.") || startsWith(q, "deepspeed.ops.lion.") ||
      startsWith(q, "deepspeed.ops.adagrad.") || startsWith(q, "torchdistx.optimizers.") || startsWith(q, "prodigyopt.") ||
      startsWith(q, "muon.") || startsWith(q, "torchao.optim.") || startsWith(q, "torchao.prototype.low_bit_optim."))
    return true;
  if (startsWith(q, "schedulefree.") && last.find("ScheduleFree") != std::string_view::npos &&
      last.find("Wrapper") == std::string_view::npos)
    return true;
  return false;
}

std::vector<std::vector<std::string_view>> optimizerAndWrapTokens() {
  // Optimizers come from modules named *optim* (torch.optim, bitsandbytes.optim, apex.optimizers,
  // timm.optim, torch_optimizer), from transformers (AdamW, Adafactor), Lion, or subclasses of Optimizer.
  // Optimizers recognised by use (built from parameters, then stepped and zeroed, or handed to a
  // scheduler) are called `step` and `zero_grad`, or given to a scheduler.
  return {{"optim", "AdamW", "Adafactor", "Lion", "Optimizer", "Prodigy", "Muon", "ScheduleFree", "zero_grad",
           "schedule"},
          {"fsdp", "FSDP", "fully_shard", "FullyShardedDataParallel", "Fabric"}};
}

bool isFullyShard(std::string_view q) {
  return startsWith(q, "torch.distributed.") && endsWith(q, ".fully_shard") &&
         q.find("fsdp") != std::string_view::npos;
}

bool isFsdp1Class(std::string_view q) {
  return startsWith(q, "torch.distributed.fsdp") && endsWith(q, ".FullyShardedDataParallel");
}

bool FsdpCallModel::frameworkApi(std::string_view q) const {
  // Frameworks whose wrapping and optimizer handling the model describes (accelerate,
  // Lightning and Fabric, transformers' Trainer, composer): their implementation is
  // library code, modelled rather than interpreted, even inside a checkout of them.
  std::string_view top = q.substr(0, q.find('.'));
  return top == "accelerate" || top == "lightning" || top == "lightning_fabric" || top == "pytorch_lightning" ||
         top == "transformers" || top == "composer";
}

bool FsdpCallModel::receiverSensitive(std::string_view method) const {
  return method == "prepare" || method == "prepare_model" || method == "setup" || method == "setup_module" ||
         method == "setup_optimizers";
}

std::vector<std::string> FsdpCallModel::frameworkOrder(const std::vector<std::string>& bases) const {
  for (const auto& b : bases) {
    if (b == "pytorch_lightning.LightningModule" || b == "lightning.LightningModule" ||
        b == "lightning.pytorch.LightningModule" || b == "pytorch_lightning.core.LightningModule" ||
        b == "lightning.pytorch.core.LightningModule") {
      // Trainer.fit: setup, then the strategy wraps (configure_model / configure_sharded_model),
      // then configure_optimizers, then the loop.
      return {"setup", "configure_sharded_model", "configure_model", "configure_optimizers", "on_train_start",
              "training_step", "on_train_epoch_end"};
    }
  }
  return {};
}

bool FsdpCallModel::onCall(CallSite& site) {
  Store& st = site.in.store();
  if (site.receiver != kNoObj) {
    const Obj recv = st.obj(site.receiver);
    if (recv.hasTag("accelerator") && site.method == "prepare") return handlePrepare(site, recv);
    if (recv.hasTag("accelerator") && site.method == "prepare_model") noteFsdp2PrepareModel(site, recv);
    if (recv.hasTag("fabric")) return handleFabric(site, recv, facts_);
    const std::string& m = site.method;
    // SL206's fact: `model.compile(...)` (nn.Module.compile compiles the module in place).
    if (m == "compile" && recv.hasTag("fsdp_wrapper"))
      site.in.domainEvent("compile", site.receiver, site.origin, {{"call", calleeText(site)}});
    if (m == "requires_grad_") {
      auto lit = literalOf(st, site.arg(0, "requires_grad"));
      if (!lit || *lit == "True") st.obj(site.receiver).setTag("requires_grad", "1");
      site.result = {site.receiver};
      return true;
    }
    // SL105's facts: calls that put new Parameter objects in place of a module's parameters.
    // `to_empty` materialises every parameter anew; `load_state_dict(sd, assign=True)` assigns the
    // loaded tensors as the parameters (a plain `load_state_dict` copies in place: not a replacement).
    if (m == "to_empty") site.in.domainEvent("replace_params", site.receiver, site.origin, {{"how", "to_empty"}});
    if (m == "load_state_dict" && literalOf(st, site.arg(2, "assign")) == std::optional<std::string>("True"))
      site.in.domainEvent("replace_params", site.receiver, site.origin, {{"how", "load_state_dict"}});
    if (m == "to" || m == "cuda" || m == "cpu" || m == "half" || m == "bfloat16" || m == "float" || m == "train" ||
        m == "eval" || m == "to_empty" || m == "apply") {
      site.result = {site.receiver};
      return true;
    }
    if (m == "zero_grad" || (m == "step" && recv.name.find("optim") != std::string::npos))
      markMethodOptimizer(site.in, site.receiver);
    if (m == "step" || m == "zero_grad")
      noteOptimizerUse(st, {site.receiver}, m == "step" ? kStepped : kZeroed, false, calleeText(site));
    if (m != "zero_grad" && m != "__call__") noteOptimizerUses(site);
    return false;
  }

  const std::string& q = site.qualname;
  auto listed = [&](const char* fact) {
    auto it = facts_.find(fact);
    if (it == facts_.end() || q.empty()) return false;
    std::string_view list = it->second;
    for (size_t start = 0; start <= list.size();) {
      size_t comma = list.find(',', start);
      std::string_view item = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (item == q || (endsWith(q, item) && q.size() > item.size() && q[q.size() - item.size() - 1] == '.')) return true;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return false;
  };
  bool localOptimizer = listed("optimizers");  // configured in-house optimizer builders (setting)
  if (site.cls) {
    for (const auto& b : site.cls->allBases())
      if (b == "torch.optim.Optimizer" || b == "torch.optim.optimizer.Optimizer" || isOptimizerQualname(b))
        localOptimizer = true;
  }
  if (localOptimizer || (!site.cls && isOptimizerQualname(q))) {
    ObjId o = site.cls ? site.result.at(0) : site.in.newObject(ObjKind::Instance, q, site.origin);
    Obj& obj = st.obj(o);
    obj.setTag("optimizer", std::string(lastComponent(q)));
    if (const ValueSet* params = site.arg(0, "params")) {
      obj.setInputs({*params}, {site.argOrigin(0, "params").value_or(site.origin)});
    }
    site.result = {o};
    return true;
  }
  if (site.cls) return false;
  // PEFT: `get_peft_model(model, cfg)` freezes the model's parameters and adds new adapter ones (SL105).
  // The result stays an unknown function's result, which stands for the model.
  // `PeftModel.from_pretrained(model, path, is_trainable=True)` does the same with a saved adapter (without
  // `is_trainable=True` nothing is trainable: an inference model).
  bool loadsAdapter = startsWith(q, "peft.") && endsWith(q, "PeftModel.from_pretrained") &&
                      literalOf(st, site.kwarg("is_trainable")) == std::optional<std::string>("True");
  if ((startsWith(q, "peft.") && lastComponent(q) == "get_peft_model") || loadsAdapter) {
    if (const ValueSet* model = site.arg(0, "model"))
      for (ObjId m : *model)
        site.in.domainEvent("replace_params", m, site.origin,
                            {{"how", loadsAdapter ? "PeftModel.from_pretrained" : "get_peft_model"}});
    return false;
  }
  if (q == "torch.nn.Parameter" || q == "torch.nn.parameter.Parameter") {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("free_param", "1");
    site.result = {o};
    return true;
  }
  if (startsWith(q, "torch.") && q.find('.', 6) == std::string::npos) {
    std::string_view f = lastComponent(q);
    if (f == "randn" || f == "rand" || f == "zeros" || f == "ones" || f == "empty" || f == "full" ||
        f == "tensor" || f == "zeros_like" || f == "ones_like" || f == "randn_like" || f == "empty_like") {
      ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
      st.obj(o).setTag("tensor", "1");
      if (literalOf(st, site.kwarg("requires_grad")) == std::optional<std::string>("True"))
        st.obj(o).setTag("requires_grad", "1");
      site.result = {o};
      return true;
    }
  }
  // SL206's fact: `torch.compile(model)`; the call stays an unknown function's result, which stands for the model.
  if (q == "torch.compile") {
    if (const ValueSet* model = site.arg(0, "model"))
      for (ObjId m : *model) site.in.domainEvent("compile", m, site.origin, {{"call", calleeText(site)}});
    return false;
  }
  if (q == "torch.distributed.fsdp.wrap.enable_wrap") {
    // FSDP1's wrapping context: `wrap(m)` inside it calls wrapper_cls(m, **kwargs).
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    const ValueSet* cls = site.kwarg("wrapper_cls");
    bool fsdp1 = cls && std::any_of(cls->begin(), cls->end(), [&](ObjId c) { return isFsdp1Class(st.obj(c).name); });
    if (fsdp1) {
      st.obj(o).setTag("fsdp1_wrap_context", "1");
      const ValueSet* orig = site.kwarg("use_orig_params");
      auto lit = literalOf(st, orig);
      const char* replaces = !orig ? "1" : lit == std::optional<std::string>("True") ? "0"
                           : lit == std::optional<std::string>("False") ? "1" : "?";
      st.obj(o).setTag("replaces", replaces);
    }
    site.result = {o};
    return true;
  }
  if (q == "torch.distributed.fsdp.wrap.wrap") {
    const ValueSet* modArg = site.arg(0, "module");
    const Obj* context = nullptr;
    for (const ValueSet& c : site.in.contexts())
      for (ObjId id : c)
        if (st.obj(id).hasTag("fsdp1_wrap_context")) context = &st.obj(id);
    if (!modArg) return false;
    if (!context) {  // outside enable_wrap, wrap() returns the module unchanged
      site.result = *modArg;
      return true;
    }
    std::map<std::string, std::string, std::less<>> attrs{{"api", "fsdp1"}, {"fsdp_version", "1"},
                                                          {"call", calleeText(site)},
                                                          {"replaces", std::string(context->tag("replaces"))}};
    for (ObjId m : flattenModules(st, *modArg)) site.in.domainEvent("wrap", m, site.origin, attrs);
    ObjId w = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(w).setTag("fsdp_wrapper", "fsdp1");
    st.obj(w).setInputs({*modArg});
    site.result = {w};
    return true;
  }
  if (isFullyShard(q) || isFsdp1Class(q) || listed("wraps")) {
    const ValueSet* modArg = site.arg(0, "module");
    if (!modArg) return false;
    bool fsdp1 = isFsdp1Class(q);
    std::map<std::string, std::string, std::less<>> attrs{{"api", fsdp1 ? "fsdp1" : "fully_shard"},
                                                          {"fsdp_version", fsdp1 ? "1" : "2"},
                                                          {"call", calleeText(site)}};
    ValueSet ignored;
    if (fsdp1) {
      const ValueSet* orig = site.kwarg("use_orig_params");
      auto lit = literalOf(st, orig);
      if (orig && !lit) site.in.needsCallerValue(*orig);  // a caller may bind it (a config's default)
      // Not written as a constant but bound to one (an argparse or dataclass default, a parameter's
      // default): the message names the expression as written and its value.
      if (orig && lit)
        if (auto [written, at] = keywordText(site, "use_orig_params"); !at.empty() && written != *lit)
          attrs["orig_params_as"] = written;
      // Joined with an option a config file named on the command line may give (`argparse.Namespace(**config)`).
      if (orig && lit && attrs.count("orig_params_as") && anyTagged(st, *orig, "option_value"))
        attrs["orig_params_or_config"] = "1";
      // Read from a YAML file the script loads (semantic "config_file"): the message names it.
      if (orig && lit && attrs.count("orig_params_as")) {
        std::string_view file = st.obj(orig->front()).tag("config_file");
        if (!file.empty() && std::all_of(orig->begin(), orig->end(),
                                         [&](ObjId v) { return st.obj(v).tag("config_file") == file; }))
          attrs["orig_params_in"] = std::string(file);
      }
      attrs["replaces"] = !orig ? "1" : lit == std::optional<std::string>("True") ? "0"
                                     : lit == std::optional<std::string>("False") ? "1" : "?";
      if (!orig && site.splat) attrs["orig_params_splat"] = "1";  // `**kwargs` may set it
      // SL206's fact: the module wrapped is `torch.compile(...)`'s result (compile before the wrap).
      for (ObjId m : *modArg)
        if (st.obj(m).kind == ObjKind::Instance && st.obj(m).name == "torch.compile") attrs["wraps_compiled"] = "1";
      if (site.kwarg("auto_wrap_policy")) attrs["auto_wrap"] = "1";
      // SL203: "FULL_SHARD" (also when not given: FSDP1's default), another strategy, or "?" (not known here).
      const ValueSet* strategy = site.kwarg("sharding_strategy");
      attrs["sharding"] = strategy ? shardingOf(st, strategy) : site.splat ? "?" : "FULL_SHARD";
      for (const char* k : {"ignored_modules", "ignored_states"})
        if (const ValueSet* v = site.kwarg(k)) semantic::addValues(ignored, flattenModules(st, *v));
    } else {
      attrs["replaces"] = "1";
      if (const ValueSet* v = site.kwarg("ignored_params")) semantic::addValues(ignored, flattenModules(st, *v));
      // SL104's fact: `reshard_after_forward` as given to `fully_shard` itself ("default" when not
      // given, the constant when it is one, "?" otherwise). A project's own wrap helper listed in the
      // settings gets none: what it passes on is unknown.
      if (isFullyShard(q)) {
        const ValueSet* raf = site.kwarg("reshard_after_forward");
        auto lit = literalOf(st, raf);
        if (raf && !lit) site.in.needsCallerValue(*raf);  // a caller may bind it (a helper's parameter)
        attrs["reshard_after_forward"] = raf ? lit.value_or("?") : site.splat ? "?" : "default";
      }
    }
    if (!ignored.empty()) attrs["ignored"] = "1";
    for (ObjId m : flattenModules(st, *modArg)) site.in.domainEvent("wrap", m, site.origin, attrs, {ignored});
    if (fsdp1) {
      ObjId w = site.in.newObject(ObjKind::Instance, q, site.origin);
      st.obj(w).setTag("fsdp_wrapper", "fsdp1");
      // SL206: how `use_orig_params` was given, for a compile of the wrapper ("replaces" as on the wrap event).
      for (const char* k : {"replaces", "orig_params_as", "orig_params_in", "orig_params_or_config", "orig_params_splat"})
        if (auto it = attrs.find(k); it != attrs.end()) st.obj(w).setTag(k, it->second);
      st.obj(w).setTag("wrap_call", std::string(attrs["call"]));
      st.obj(w).setInputs({*modArg});
      site.result = {w};
    } else {
      site.result = *modArg;
    }
    return true;
  }
  if (startsWith(q, "accelerate") && endsWith(q, "FullyShardedDataParallelPlugin")) {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    Obj& obj = st.obj(o);
    obj.setTag("fsdp_plugin", "1");
    obj.setTag("fsdp_version", literalOf(st, site.kwarg("fsdp_version")).value_or("1"));
    obj.setTag("use_orig_params", literalOf(st, site.kwarg("use_orig_params")).value_or(""));
    // SL203: FSDP1's strategy: the keyword, else the launcher's FSDP_SHARDING_STRATEGY (a linked config), else
    // FULL_SHARD (accelerate's FullyShardedDataParallelPlugin.__post_init__); "?" for `**kwargs` without it.
    if (const ValueSet* strategy = site.kwarg("sharding_strategy")) obj.setTag("sharding", shardingOf(st, strategy));
    else if (site.splat) obj.setTag("sharding", "?");
    // Where the call ends (a fix adds `use_orig_params=True` there): "file:end", and whether it has arguments.
    obj.setTag("plugin_call", std::to_string(site.origin.file) + ":" + std::to_string(site.origin.range.end));
    obj.setTag("plugin_args", site.args.empty() && site.kwargs.empty() ? "0" : "1");
    // Keywords that come from a `**dict` with constant keys (SL403 checks them at the splat): "name@begin-end;...".
    std::string splatted;
    for (size_t i = 0; i < site.kwargs.size(); ++i) {
      if (!startsWith(writtenKeyword(site, i), "**")) continue;
      const semantic::Origin& at = site.kwargOrigins[i];
      splatted += site.kwargs[i].first + "@" + std::to_string(at.range.begin) + "-" + std::to_string(at.range.end) + ";";
    }
    if (!splatted.empty()) obj.setTag("plugin_splat_kwargs", splatted);
    // The accelerate the project declares (SL403 judges the plugin's names with its releases).
    if (auto pin = facts_.find("requires:accelerate"); pin != facts_.end()) obj.setTag("requires_accelerate", pin->second);
    site.result = {o};
    return true;
  }
  if (q == "accelerate.Accelerator" || q == "accelerate.accelerator.Accelerator") {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("accelerator", "1");
    if (auto pin = facts_.find("requires:accelerate"); pin != facts_.end())
      st.obj(o).setTag("requires_accelerate", pin->second);
    auto fact = [&](const char* k) {
      auto it = facts_.find(k);
      return it == facts_.end() ? std::string() : it->second;
    };
    bool fromPlugin = false;
    if (const ValueSet* plugin = site.kwarg("fsdp_plugin")) {
      for (ObjId p : *plugin) {
        const Obj& po = st.obj(p);
        if (!po.hasTag("fsdp_plugin")) {  // `plugin if use_fsdp else None`: FSDP on one path only
          st.obj(o).setTag("fsdp_conditional", "1");
          continue;
        }
        fromPlugin = true;
        if (po.hasTag("sharding")) st.obj(o).setTag("sharding", std::string(po.tag("sharding")));
        else if (!fact("sharding_strategy").empty()) st.obj(o).setTag("sharding", shardingName(fact("sharding_strategy")));
        else st.obj(o).setTag("sharding", "FULL_SHARD");
        std::string version(po.tag("fsdp_version")), orig(po.tag("use_orig_params"));
        st.obj(o).setTag("fsdp", version);
        if (orig == "True" || orig == "False") {
          st.obj(o).setTag("use_orig_params", orig);
          st.obj(o).setTag("orig_from", "code");
        } else if (!fact("use_orig_params").empty()) {  // unset in code: the launcher's setting applies
          st.obj(o).setTag("use_orig_params", fact("use_orig_params") == "true" ? "True" : "False");
          st.obj(o).setTag("orig_from", "config");
        } else {
          st.obj(o).setTag("use_orig_params", "False");  // FullyShardedDataParallelPlugin() defaults to false
          st.obj(o).setTag("orig_from", "code-default");
          for (const char* k : {"plugin_call", "plugin_args"})
            if (po.hasTag(k)) st.obj(o).setTag(k, std::string(po.tag(k)));
        }
      }
    }
    if (!fromPlugin && fact("accelerate_fsdp").empty() && !fact("fsdp-version").empty()) {
      // The `fsdp-version` setting: assumed for accelerate scripts nothing else describes.
      st.obj(o).setTag("fsdp", fact("fsdp-version"));
      st.obj(o).setTag("use_orig_params", "True");  // the launcher's default
      st.obj(o).setTag("orig_from", "config");
    }
    if (!fromPlugin && !fact("accelerate_fsdp").empty()) {  // FSDP comes from a linked config
      st.obj(o).setTag("fsdp", fact("accelerate_fsdp"));
      st.obj(o).setTag("sharding", fact("sharding_strategy").empty() ? "FULL_SHARD" : shardingName(fact("sharding_strategy")));
      std::string orig = fact("use_orig_params");
      st.obj(o).setTag("use_orig_params", orig == "false" ? "False" : "True");  // launcher default: true
      st.obj(o).setTag("orig_from", "config");
    }
    for (const char* k : {"config", "config_line", "config_col", "config_value"})
      if (!fact(k).empty()) st.obj(o).setTag(k, fact(k));
    // accelerate before 1.6 has no FSDP2 (`fsdp_version` is not read): nothing SL201 judges applies.
    if (auto pin = pinnedBelow(facts_, {"accelerate"}, "1.6")) st.obj(o).setTag("accelerate_before_fsdp2", *pin);
    if (site.kwarg("parallelism_config")) st.obj(o).setTag("parallelism_config", "1");
    site.result = {o};
    return true;
  }
  if (endsWith(q, ".FSDPStrategy") && (startsWith(q, "lightning") || startsWith(q, "pytorch_lightning"))) {
    // use_orig_params: "True"/"False" as written, "?" when not a literal, absent when not passed.
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    if (const ValueSet* orig = site.kwarg("use_orig_params")) {
      auto lit = literalOf(st, orig);
      st.obj(o).setTag("use_orig_params", lit == std::optional<std::string>("True")    ? "True"
                                          : lit == std::optional<std::string>("False") ? "False"
                                                                                       : "?");
    }
    site.result = {o};
    return true;
  }
  if (endsWith(q, ".ModelParallelStrategy") && (startsWith(q, "lightning") || startsWith(q, "pytorch_lightning"))) {
    // Fabric's takes `parallelize_fn(module, device_mesh)`, which its `setup_module` runs (the Trainer's
    // takes none: the LightningModule's `configure_model` does the sharding, in the order frameworkOrder gives).
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("model_parallel", "1");
    if (const ValueSet* fn = site.arg(0, "parallelize_fn")) st.obj(o).setInputs({*fn});
    site.result = {o};
    return true;
  }
  if (q == "lightning.Fabric" || q == "lightning.fabric.Fabric" || q == "lightning_fabric.Fabric" ||
      q == "lightning.fabric.fabric.Fabric") {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("fabric", "1");
    if (const ValueSet* strat = site.kwarg("strategy")) {
      ValueSet parallelize;
      for (ObjId s : *strat) {
        const Obj& so = st.obj(s);
        if (so.hasTag("model_parallel") && !so.inputs().empty()) {
          st.obj(o).setTag("model_parallel", "1");
          semantic::addValues(parallelize, so.inputs()[0]);
          continue;
        }
        std::string name = so.name;
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        if (so.kind == ObjKind::Literal && name.find("fsdp") != std::string::npos) {
          st.obj(o).setTag("fsdp", "1");
        } else if (so.kind == ObjKind::Instance && endsWith(so.name, "FSDPStrategy")) {
          st.obj(o).setTag("fsdp", "1");
          if (so.hasTag("use_orig_params")) st.obj(o).setTag("use_orig_params", std::string(so.tag("use_orig_params")));
        }
      }
      if (!parallelize.empty()) st.obj(o).setInputs({parallelize});
    }
    site.result = {o};
    return true;
  }
  if (endsWith(q, ".DataLoader")) {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("dataloader", "1");
    site.result = {o};
    return true;
  }
  if (startsWith(q, "torch.optim.lr_scheduler") || q == "torch.optim.swa_utils.SWALR" ||
      (startsWith(q, "diffusers.") && q.find("get_scheduler") != std::string::npos) ||
      (startsWith(q, "transformers.") && q.find("schedule") != std::string::npos)) {
    if (const ValueSet* opt = site.arg(0, "optimizer")) noteOptimizerUse(st, *opt, 0, true);
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("scheduler", "1");
    site.result = {o};
    return true;
  }
  if (isTrainingArguments(q)) {
    // Whether the arguments enable FSDP (`fsdp="full_shard auto_wrap"`): the Trainer then refuses
    // optimizers built outside it (SL202).
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("training_args", "1");
    const ValueSet* fsdp = site.kwarg("fsdp");
    st.obj(o).setTag("trainer_fsdp", site.splat && !fsdp ? "?" : trainerFsdpSetting(st, fsdp));
    auto [text, at] = keywordText(site, "fsdp");
    if (!at.empty()) {
      st.obj(o).setTag("trainer_fsdp_text", "fsdp=" + text);
      st.obj(o).setTag("trainer_fsdp_at", at);
    }
    site.result = {o};
    return true;
  }
  if (isHfTrainer(q) || (site.cls && derivesFromHfTrainer(site.cls))) {
    if (const ValueSet* pair = site.kwarg("optimizers")) {  // Trainer(optimizers=(opt, sched))
      for (ObjId c : *pair)
        if (st.obj(c).kind == ObjKind::Container && !st.obj(c).elements().empty())
          noteOptimizerUse(st, st.obj(c).elements()[0], 0, true);
      noteTrainerOptimizers(site, pair);
    } else if (!site.splat) {
      noteTrainerOptimizers(site, nullptr);  // the Trainer builds its own optimizer (SL202's controls only)
    }
  }
  noteOptimizerUses(site);
  return false;
}

// Where FSDP is enabled for a Trainer call: "args" (its TrainingArguments say so), "config" (the accelerate config
// the script is launched with), else ""; `setting` is the arguments' own ("on", "off", "?"; "" without arguments),
// and `attrs` gets what the finding or the control names. `callerValues`: ask for the caller's arguments when the
// analysis cannot read them here (findings only).
std::string FsdpCallModel::trainerFsdpFrom(CallSite& site, std::map<std::string, std::string, std::less<>>& attrs,
                                           std::string& setting, bool callerValues) {
  Store& st = site.in.store();
  std::string from;
  setting.clear();
  if (const ValueSet* args = site.arg(1, "args")) {
    for (ObjId a : *args) {
      const Obj& ao = st.obj(a);
      std::string one = ao.hasTag("training_args") ? std::string(ao.tag("trainer_fsdp")) : "?";
      if (!setting.empty() && setting != one) one = "?";
      setting = one;
      if (one == "on" || one == "off") {
        attrs["fsdp_text"] = std::string(ao.tag("trainer_fsdp_text"));
        attrs["fsdp_at"] = std::string(ao.tag("trainer_fsdp_at"));
      }
      if (one == "on")
        attrs["args_at"] = std::to_string(ao.origin.file) + ":" + std::to_string(ao.origin.range.begin) + "-" +
                           std::to_string(ao.origin.range.end);
    }
    if (setting == "on") from = "args";
    else if (callerValues) site.in.needsCallerValue(*args);  // a caller may pass arguments that enable FSDP
  }
  if (from.empty()) {
    auto fact = [&](const char* k) {
      auto it = facts_.find(k);
      return it == facts_.end() ? std::string() : it->second;
    };
    if (!fact("accelerate_fsdp").empty()) {
      from = "config";
      for (const char* k : {"config", "config_line", "config_col"})
        if (!fact(k).empty()) attrs[k] = fact(k);
      attrs["fsdp_version"] = fact("accelerate_fsdp");
    }
  }
  return from;
}

void FsdpCallModel::noteTrainerOptimizers(CallSite& site, const ValueSet* pair) {
  // SL202: `Trainer(..., optimizers=(opt, sched))` where FSDP is on raises in `Trainer.__init__` when
  // either is not None. What is passed: the tuple's elements, each a value that is not the constant None.
  // Without `optimizers=` (or with `(None, None)`) nothing is passed.
  Store& st = site.in.store();
  bool optimizer = false, scheduler = false, known = pair == nullptr, unsure = false;
  for (ObjId c : pair ? *pair : ValueSet{}) {
    const Obj& co = st.obj(c);
    if (co.kind != ObjKind::Container || co.elements().size() != 2) continue;
    known = true;
    // A parameter's value is the caller's (it may pass None): not counted here, and the summary is
    // interpreted at each call instead.
    auto passed = [&](const ValueSet& vs) {
      site.in.needsCallerValue(vs);
      return std::any_of(vs.begin(), vs.end(), [&](ObjId v) {
        const Obj& o = st.obj(v);
        ObjKind rk = st.obj(st.rootOf(v)).kind;
        if (rk == ObjKind::Arg || rk == ObjKind::Global) unsure = true;
        return !(o.kind == ObjKind::Literal && o.name == "None") && rk != ObjKind::Arg && rk != ObjKind::Global;
      });
    };
    optimizer = optimizer || passed(co.elements()[0]);
    scheduler = scheduler || passed(co.elements()[1]);
  }
  if (!known) {
    site.in.needsCallerValue(*pair);  // a caller may pass the tuple
    return;
  }
  std::map<std::string, std::string, std::less<>> attrs;
  attrs["call"] = calleeText(site);
  std::string setting;
  if (!optimizer && !scheduler) {
    // A control of SL202 (`shardlint probe --controls`): FSDP on and the Trainer left to build its own optimizer.
    if (unsure || site.splat || trainerFsdpFrom(site, attrs, setting, false).empty()) return;
    attrs["kind"] = "own";
    attrs["fsdp_from"] = setting == "on" ? "args" : "config";
    site.in.domainEvent("trainer_control", kNoObj, site.origin, std::move(attrs));
    return;
  }
  attrs["passed"] = optimizer && scheduler ? "an optimizer and a scheduler" : optimizer ? "an optimizer" : "a scheduler";
  // FSDP on: by the arguments, else by the accelerate config the script is launched with.
  std::string from = trainerFsdpFrom(site, attrs, setting, true);
  semantic::Origin at = site.origin;
  for (size_t i = 0; i < site.kwargs.size() && i < site.kwargOrigins.size(); ++i)
    if (site.kwargs[i].first == "optimizers") at = site.kwargOrigins[i];
  if (from.empty()) {
    // A control: an optimizer handed over while the arguments turn FSDP off as written (`fsdp=""`), no config on.
    if (setting == "off" && !attrs["fsdp_text"].empty() && !site.splat) {
      attrs["kind"] = "off";
      site.in.domainEvent("trainer_control", kNoObj, at, std::move(attrs));
    }
    return;
  }
  attrs["fsdp_from"] = from;
  site.in.domainEvent("trainer_optimizers", kNoObj, at, std::move(attrs));
}

// ------------------------------------------------------------------ queries

// A whole object (a model, an argument), not an attribute, element, literal or display.
static bool isBareObject(const Store& st, ObjId id) {
  ObjKind k = st.obj(id).kind;
  return k == ObjKind::Instance || k == ObjKind::Arg || k == ObjKind::Global;
}

bool isPlainClass(const semantic::ClassDef& cls) {
  for (const auto& b : cls.allBases())
    if (b != "object" && b != "abc.ABC" && b != "typing.Generic" && b != "typing.NamedTuple") return false;
  return true;
}

// Storing a module in an attribute makes it a submodule only when the holder is an
// nn.Module: a plain class (`class Guard:` keeping `self.module = module`) only
// refers to it, so the module keeps its own identity.
static bool canOwnModules(const Store& st, ObjId owner) {
  const Obj& o = st.obj(owner);
  if (o.kind != ObjKind::Instance || !o.cls) return true;
  return !isPlainClass(*o.cls);
}

ObjId objectAt(const Store& st, const Lineage& l) {
  ObjId cur = l.root;
  for (const auto& edge : l.edges) {
    if (cur == kNoObj) return kNoObj;
    ObjId next = kNoObj;
    for (size_t i = 0; i < st.objects.size() && next == kNoObj; ++i)
      if (st.objects[i].owner == cur && st.objects[i].ownerEdge() == edge) next = static_cast<ObjId>(i);
    cur = next;
  }
  return cur;
}

static Lineage lineageImpl(const Store& st, ObjId o, int depth, bool lookThrough);

Lineage lineageOf(const Store& st, ObjId o, int depth) { return lineageImpl(st, o, depth, true); }

Lineage writtenLineage(const Store& st, ObjId o) { return lineageImpl(st, o, 0, false); }

std::string_view edgeName(std::string_view edge) {
  size_t mark = edge.find(kCallSiteMark);
  return mark == std::string_view::npos ? edge : edge.substr(0, mark);
}

// Methods of nn.Module (and of containers) whose result is a view of the receiver, or the receiver
// itself: calling them twice gives the same thing.
bool isViewCall(std::string_view edge) {
  static const std::set<std::string_view> views = {
      ".parameters()", ".named_parameters()", ".modules()", ".named_modules()", ".children()", ".named_children()",
      ".buffers()", ".named_buffers()", ".state_dict()", ".values()", ".items()", ".keys()", ".to()", ".cuda()",
      ".cpu()", ".float()", ".half()", ".bfloat16()", ".double()", ".train()", ".eval()", ".requires_grad_()",
      ".get_submodule()", ".get_parameter()", ".get_input_embeddings()", ".get_output_embeddings()",
      ".get_base_model()", ".get_decoder()", ".get_encoder()", ".base_model()", ".unwrap()", ".module()"};
  return views.count(edge) > 0;
}

// A lineage edge for derived object `id`: a call that makes something carries its site.
static std::string edgeOf(const Obj& d) {
  const std::string& name = d.name;
  if (name.size() < 2 || name.compare(name.size() - 2, 2, "()") != 0 || isViewCall(name)) return name;
  return name + kCallSiteMark + std::to_string(d.origin.file) + ":" + std::to_string(d.origin.range.begin);
}

static Lineage lineageImpl(const Store& st, ObjId o, int depth, bool lookThrough) {
  std::vector<std::string> edges;
  ObjId cur = o;
  while (cur != kNoObj && st.obj(cur).kind == ObjKind::Derived) {
    edges.push_back(edgeOf(st.obj(cur)));
    cur = st.obj(cur).parent;
  }
  std::reverse(edges.begin(), edges.end());
  if (cur != kNoObj && st.obj(cur).owner != kNoObj && depth < 32 && canOwnModules(st, st.obj(cur).owner)) {
    const Obj& r = st.obj(cur);
    Lineage outer = lineageImpl(st, r.owner, depth + 1, lookThrough);
    outer.edges.push_back(r.ownerEdge());
    outer.edges.insert(outer.edges.end(), edges.begin(), edges.end());
    return outer;
  }
  if (cur != kNoObj && depth < 32 && lookThrough) {
    const Obj& r = st.obj(cur);
    // The lineage of the object `r` stands for, continued by `edges` less a leading
    // edge that steps into the wrapper's inner module.
    auto through = [&](std::string_view innerA, std::string_view innerB) {
      Lineage inner = lineageOf(st, r.inputs()[0][0], depth + 1);
      size_t skip = !edges.empty() && (edges[0] == innerA || edges[0] == innerB) ? 1 : 0;
      inner.edges.insert(inner.edges.end(), edges.begin() + static_cast<long>(skip), edges.end());
      return inner;
    };
    // An unknown *function* applied to a whole object (`torch.compile(model)`,
    // `get_peft_model(model)`, `apply_checkpointing(model)`) stands for that object.
    std::string_view fn = lastComponent(r.name);
    // `copy.deepcopy(model)` / `copy.copy(model)` are new objects: sharding the copy
    // leaves the original (and an optimizer of it) alone.
    bool copies = r.name == "copy.deepcopy" || r.name == "copy.copy";
    bool untagged = r.tags().empty() || (r.tags().size() == 1 && r.hasTag("optimizer_use"));
    if (r.kind == ObjKind::Instance && untagged && !r.cls && !fn.empty() && !copies &&
        std::islower(static_cast<unsigned char>(fn[0])) && !r.inputs().empty() && r.inputs()[0].size() == 1 &&
        isBareObject(st, r.inputs()[0][0]))
      return through("._orig_mod", ".module");
    if (r.hasTag("fsdp_wrapper") && r.inputs().size() == 1 && r.inputs()[0].size() == 1)
      return through(".module", "._fsdp_wrapped_module");
  }
  return Lineage{cur, std::move(edges)};
}

static bool edgeMatches(const std::string& a, const std::string& b) {
  if (a == b) return true;
  bool ai = !a.empty() && a[0] == '[', bi = !b.empty() && b[0] == '[';
  return ai && bi && (a == "[*]" || b == "[*]");
}

bool sameLineage(const Lineage& a, const Lineage& b) { return a.root != kNoObj && within(a, b) && within(b, a); }

bool within(const Lineage& a, const Lineage& b) {
  if (a.root != b.root || a.root == kNoObj || b.edges.size() > a.edges.size()) return false;
  for (size_t i = 0; i < b.edges.size(); ++i)
    if (!edgeMatches(a.edges[i], b.edges[i])) return false;
  return true;
}

static bool isParamsEdge(const std::string& e) {
  return e == ".parameters()" || e == ".named_parameters()";
}

Lineage moduleOfSource(const Lineage& src) {
  Lineage m = src;
  for (size_t i = src.edges.size(); i-- > 0;) {
    if (isParamsEdge(src.edges[i])) {
      m.edges.resize(i);
      return m;
    }
  }
  while (!m.edges.empty() && m.edges.back()[0] == '[') m.edges.pop_back();
  if (!m.edges.empty() && m.edges.back()[0] == '.' && edgeName(m.edges.back()).back() != ')') m.edges.pop_back();
  return m;
}

bool isWholeParams(const Lineage& src) {
  return std::any_of(src.edges.begin(), src.edges.end(), isParamsEdge);
}

std::string render(const Store& st, const Lineage& l) {
  std::string s = l.root == kNoObj ? "?" : st.describe(l.root);
  for (const auto& e : l.edges) s += edgeName(e);
  return s;
}

ValueSet paramSources(const Store& st, const ValueSet& arg, int depth) {
  ValueSet out;
  if (depth > 32) return out;  // containers may nest (or contain themselves)
  for (ObjId id : arg) {
    const Obj& o = st.obj(id);
    if (o.kind == ObjKind::Literal) continue;
    if (o.kind == ObjKind::Container) {
      for (size_t i = 0; i < o.elements().size(); ++i) {
        if (o.containerKind == 'd' && i < o.keys().size() && o.keys()[i] != "params" && !o.keys()[i].empty() &&
            o.keys()[i] != "**")
          continue;
        semantic::addValues(out, paramSources(st, o.elements()[i], depth + 1));
      }
      continue;
    }
    semantic::addValue(out, id);
  }
  return out;
}

std::vector<ObjId> optimizers(const Store& st) {
  std::vector<ObjId> out;
  for (size_t i = 0; i < st.objects.size(); ++i)
    if (st.objects[i].hasTag("optimizer") && !expectedToFail(st, st.objects[i].point) &&
        !neverRuns(st, st.objects[i].point))
      out.push_back(static_cast<ObjId>(i));
  return out;
}

std::vector<const Event*> domainEvents(const Store& st, std::string_view kind) {
  std::vector<const Event*> out;
  for (const Event& e : st.events)
    if (e.kind == EventKind::Domain && e.name == kind && !expectedToFail(st, e.point) && !neverRuns(st, e.point))
      out.push_back(&e);
  return out;
}

namespace {

// What a "the model is (not) sharded yet" test asks: an FSDP1 wrapper object, or a module that
// `fully_shard` made an FSDPModule; nullopt for any other test.
enum class ShardTest { Fsdp1, Fsdp2 };
std::optional<ShardTest> shardTestOf(const semantic::Region& r, std::string_view n) {
  std::string_view last = lastComponent(n);
  if (r.kind == "isinstance") {
    if (last == "FSDPModule") return ShardTest::Fsdp2;
    if (last == "FullyShardedDataParallel" || (startsWith(n, "torch.distributed.") && last == "FSDP"))
      return ShardTest::Fsdp1;
  } else if (r.kind == "hasattr") {
    if (n == "reshard" || n == "unshard") return ShardTest::Fsdp2;
    if (n == "_fsdp_wrapped_module") return ShardTest::Fsdp1;
  }
  return std::nullopt;
}

// `v` is sharded at point `at` in the way `test` asks, on every path.
bool shardedAt(const Store& st, ObjId v, ShardTest test, semantic::PointId at) {
  const semantic::Obj& o = st.obj(v);
  if (test == ShardTest::Fsdp1) return o.tag("fsdp_wrapper") == "fsdp1";
  Lineage l = lineageOf(st, v);
  if (l.root == kNoObj) return false;
  for (const Event& e : st.events) {
    if (e.kind != EventKind::Domain || e.name != "wrap" || e.attr("api") != "fully_shard" || e.target == kNoObj)
      continue;
    if (!st.dominates(e.point, at) || st.neverRuns(e.point) || expectedToFail(st, e.point)) continue;
    Lineage t = lineageOf(st, e.target);
    if (within(t, l) && within(l, t)) return true;
  }
  return false;
}

}  // namespace

bool neverRuns(const Store& st, semantic::PointId p) {
  if (st.regions.empty() || p == semantic::kNoPoint) return false;
  if (st.neverRuns(p)) return true;
  for (const semantic::Region* r : st.regionsAt(p)) {
    if (!r->negated || r->subject.empty() || (r->kind != "isinstance" && r->kind != "hasattr")) continue;
    std::vector<ShardTest> tests;
    for (const auto& n : r->names)
      if (auto t = shardTestOf(*r, n)) tests.push_back(*t);
    if (tests.empty()) continue;
    // A value that the same variable holds wrapped too, by an FSDP1 wrapper made on every path before
    // the test (`m = FSDP(m)` in an arm its flag always selects, merged with the arm not taken), is
    // that wrapper there.
    auto superseded = [&](ObjId v) {
      return std::any_of(r->subject.begin(), r->subject.end(), [&](ObjId w) {
        const semantic::Obj& wo = st.obj(w);
        return w != v && wo.tag("fsdp_wrapper") == "fsdp1" && !wo.inputs().empty() &&
               std::binary_search(wo.inputs()[0].begin(), wo.inputs()[0].end(), v) && st.dominates(wo.point, r->begin);
      });
    };
    // The test holds (the code runs only when it does not) for every value: some named class matches.
    bool allSharded = std::all_of(r->subject.begin(), r->subject.end(), [&](ObjId v) {
      return superseded(v) ||
             std::any_of(tests.begin(), tests.end(), [&](ShardTest t) { return shardedAt(st, v, t, r->begin); });
    });
    if (allSharded) return true;
  }
  return false;
}

std::string onlyWhen(const Store& st, std::initializer_list<semantic::PointId> points) {
  std::vector<std::string> conds;
  for (semantic::PointId p : points)
    for (auto& c : st.conditionsAt(p))
      if (std::find(conds.begin(), conds.end(), c) == conds.end()) conds.push_back(std::move(c));
  if (conds.empty()) return "";
  std::string out = "only when ";
  for (size_t i = 0; i < conds.size(); ++i) {
    if (i) out += " and ";
    out += conds[i];
  }
  return out;
}

std::vector<ValueSet> sourcesPerOptimizer(const Store& st, ObjId opt, const ValueSet& sources) {
  std::vector<ValueSet> groups{sources};
  if (st.regions.empty() || sources.size() < 2) return groups;
  for (const semantic::Region* r : st.regionsAt(st.obj(opt).point)) {
    if (r->kind != "iteration") continue;
    std::vector<ValueSet> next;
    for (const ValueSet& g : groups) {
      // Which of the iteration's objects each source stems from (through containers too).
      std::vector<ValueSet> per;
      ValueSet common;
      for (ObjId s : g) {
        bool any = false;
        for (size_t i = 0; i < r->subject.size(); ++i) {
          ValueSet alt;
          st.flatten({r->subject[i]}, alt);
          if (std::any_of(alt.begin(), alt.end(), [&](ObjId a) { return st.contains(a, s); })) {
            if (per.size() < r->subject.size()) per.resize(r->subject.size());
            semantic::addValue(per[i], s);
            any = true;
          }
        }
        if (!any) semantic::addValue(common, s);
      }
      size_t used = static_cast<size_t>(std::count_if(per.begin(), per.end(), [](const ValueSet& v) { return !v.empty(); }));
      if (used < 2) {
        next.push_back(g);
        continue;
      }
      for (ValueSet& p : per)
        if (!p.empty()) {
          semantic::addValues(p, common);
          next.push_back(std::move(p));
        }
    }
    groups = std::move(next);
  }
  return groups;
}

bool expectedToFail(const Store& st, semantic::PointId p) {
  if (st.regions.empty()) return false;
  for (const semantic::Region* r : st.regionsAt(p)) {
    if (r->kind != "with") continue;
    for (const auto& n : r->names)
      if (n == "pytest.raises" || n == ".assertRaises" || n == ".assertRaisesRegex" || n == ".assertRaisesRegexp")
        return true;
  }
  return false;
}

Lineage alreadyShardedBy(const Store& st, const Event& wrap) {
  if (wrap.target == kNoObj || st.regions.empty()) return {};
  Lineage target = lineageOf(st, wrap.target);
  for (const semantic::Region* r : st.regionsAt(wrap.point)) {
    if (r->negated) continue;
    bool sharded = false;
    for (const auto& n : r->names) {
      std::string_view last = lastComponent(n);
      if (r->kind == "isinstance")
        sharded = sharded || last == "FSDPModule" || last == "FullyShardedDataParallel" ||
                  (startsWith(n, "torch.distributed.") && last == "FSDP");
      else if (r->kind == "hasattr")
        sharded = sharded || n == "reshard" || n == "unshard" || n == "_fsdp_wrapped_module";
    }
    if (!sharded) continue;
    for (ObjId subj : r->subject) {
      Lineage l = lineageOf(st, subj);
      if (within(target, l)) return l;
    }
  }
  return {};
}

static bool isFalseLiteral(const Store& st, const ValueSet* vs) {
  auto lit = literalOf(st, vs);
  return lit && *lit == "False";
}

bool wrappedBefore(const Store& st, const Event& w, semantic::PointId p) {
  if (st.dominates(w.point, p)) return true;
  if (!st.precedes(w.point, p)) return false;
  for (int a = st.points[static_cast<size_t>(w.point)].arm; a >= 0 && !st.insideArm(p, a);
       a = st.arms[static_cast<size_t>(a)].parent) {
    const semantic::Arm& arm = st.arms[static_cast<size_t>(a)];
    if (!arm.loop && !arm.alwaysTaken(st)) return false;
  }
  return true;
}

bool frozen(const Store& st, const Lineage& l) {
  for (const Event& e : st.events) {
    bool freeze = (e.kind == EventKind::MethodCall && e.name == "requires_grad_" &&
                   ((!e.args.empty() && isFalseLiteral(st, &e.args[0])) ||
                    std::any_of(e.kwargs.begin(), e.kwargs.end(), [&](const auto& kw) {
                      return kw.first == "requires_grad" && isFalseLiteral(st, &kw.second);
                    }))) ||
                  (e.kind == EventKind::SetAttr && e.name == "requires_grad" && !e.args.empty() &&
                   isFalseLiteral(st, &e.args[0]));
    if (!freeze || e.target == kNoObj) continue;
    Lineage t = lineageOf(st, e.target);
    Lineage frozenModule = isWholeParams(t) ? moduleOfSource(t) : t;
    if (within(l, frozenModule) || within(frozenModule, l)) return true;
  }
  return false;
}

bool isCreatedHere(const Store& st, ObjId root) {
  if (root == kNoObj) return false;
  const Obj& r = st.obj(root);
  if (r.kind != ObjKind::Instance || r.hasTag("optimizer") || r.hasTag("accelerator") || r.hasTag("dataloader") ||
      r.hasTag("scheduler") || r.hasTag("fabric") || r.hasTag("fsdp_wrapper"))
    return false;
  // Built from a whole existing object (`DDP(model)`, `helper(model)`): possibly the same
  // module in another form, not a separate one.
  // Components built inside the call's own arguments (`nn.Sequential(nn.Linear(...))`) are fresh.
  for (const auto& in : r.inputs())
    for (ObjId v : in) {
      const Obj& vo = st.obj(v);
      bool inside = vo.origin.file == r.origin.file && vo.origin.range.begin >= r.origin.range.begin &&
                    vo.origin.range.end <= r.origin.range.end;
      if (isBareObject(st, v) && !inside && !vo.hasTag("free_param") && !vo.hasTag("tensor")) return false;
    }
  return true;
}

std::optional<Note> linkedConfigNote(const Event& e, std::string message) {
  if (e.attr("config").empty() || e.attr("config_line").empty()) return std::nullopt;
  try {
    Location loc;
    loc.path = std::string(e.attr("config"));
    loc.start.line = static_cast<uint32_t>(std::stoul(std::string(e.attr("config_line")))) - 1;
    loc.start.codepointColumn = static_cast<uint32_t>(std::stoul(std::string(e.attr("config_col")))) - 1;
    loc.end = loc.start;
    return Note{loc, std::move(message)};
  } catch (...) {
    return std::nullopt;
  }
}

std::string_view wrapApiName(const Event& wrap) {
  std::string_view api = wrap.attr("api");
  if (api == "fully_shard") return "FSDP2 `fully_shard`";
  if (api == "fsdp1") return "FSDP1 `FullyShardedDataParallel`";
  if (api == "accelerate") return wrap.attr("fsdp_version") == "2" ? "accelerate FSDP2 `prepare`" : "accelerate FSDP1 `prepare`";
  if (api == "fabric") return "Fabric FSDP `setup_module`";
  return api;
}

std::string oneLine(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace shardlint::rules::fsdp
