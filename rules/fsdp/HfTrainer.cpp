// transformers' Trainer and TrainingArguments (and trl's): where FSDP is on for a Trainer, and SL202's facts
// about optimizers handed to it.
#include <algorithm>

#include "fsdp/FsdpModelImpl.h"
#include "syntax/TreeSitter.h"

namespace shardlint::rules::fsdp {

using semantic::CallSite;
using semantic::kNoObj;
using semantic::Obj;
using semantic::ObjKind;

// transformers' TrainingArguments and the trl configs that derive from it.
bool isTrainingArguments(std::string_view q) {
  return (startsWith(q, "transformers.") && endsWith(q, "TrainingArguments")) ||
         (startsWith(q, "trl.") && endsWith(q, "Config") && !endsWith(q, "ModelConfig") && !endsWith(q, "ScriptArguments"));
}

// transformers' Trainer, a trl trainer, or a project class deriving from one (resolved bases).
bool isHfTrainer(std::string_view q) {
  return (startsWith(q, "transformers.") || startsWith(q, "trl.")) && endsWith(q, "Trainer");
}
namespace {

// Whether `init` passes the keyword arguments it is called with on to its base class's `__init__` as
// written: it takes `**name`, names no parameter `optimizers`, mentions `optimizers` nowhere in its body (a
// `kwargs.pop("optimizers")`), and calls `super().__init__(...)` (or `super(Cls, self).__init__(...)`) with
// `**name`. Reads `init`'s syntax (its module's tree must be in use).
bool forwardsKeywords(const semantic::FunctionDef& init) {
  if (!init.owner || std::find(init.params.begin(), init.params.end(), "optimizers") != init.params.end())
    return false;
  const std::string& kw = init.kwargs;
  std::string_view src = init.owner->file().text;
  const auto& kinds = syntax::PyKinds::instance();
  TSNode body = syntax::field(init.node, "body");
  if (kw.empty() || syntax::findWord(syntax::textOf(body, src), "optimizers") != std::string_view::npos) return false;
  bool forwards = false;
  syntax::walk(body, [&](TSNode n) {
    if (forwards) return false;
    if (kinds.kind(n) != syntax::Kind::call) return true;
    std::string_view callee = syntax::textOf(syntax::field(n, "function"), src);
    if (!startsWith(callee, "super(") || !endsWith(callee, ").__init__")) return true;
    for (TSNode a : syntax::namedChildren(syntax::field(n, "arguments")))
      if (kinds.kind(a) == syntax::Kind::dictionary_splat && ts_node_named_child_count(a) == 1 &&
          syntax::textOf(ts_node_named_child(a, 0), src) == kw)
        forwards = true;
    return true;
  });
  return forwards;
}

}  // namespace

bool passesToHfTrainer(semantic::Interp& in, const semantic::ClassDef* cls, int depth) {
  if (!cls || depth > 8) return false;
  semantic::Session& session = in.session();
  // Its bases in order (Python runs the first `__init__` it finds): one reaches the Trainer.
  bool reaches = false;
  for (const auto& b : cls->bases) {
    if (isHfTrainer(b)) {
      reaches = true;
      break;
    }
    const semantic::ClassDef* base = nullptr;
    for (const semantic::ClassDef* l : cls->localBases)
      if (l->qualname == b) base = l;
    if (!base && session.provider() && !session.opaque(b) && cls->owner)
      base = session.provider()->resolve(b, *cls->owner).cls;
    if (!base || base == cls) continue;
    if (passesToHfTrainer(in, base, depth + 1)) {
      reaches = true;
      break;
    }
    if (base->findMethod("__init__")) return false;  // runs before a later base's, and keeps what it is given
  }
  if (!reaches) return false;
  // And its own `__init__`, if any, passes the keywords on.
  auto own = cls->methods.find("__init__");
  if (own == cls->methods.end()) return true;
  if (cls->owner && session.provider()) session.provider()->use(*cls->owner);  // its syntax is read
  return forwardsKeywords(*own->second);
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

}  // namespace shardlint::rules::fsdp
