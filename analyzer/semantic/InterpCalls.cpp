// The interpreter's calls (Interp, semantic/Interpreter.h): a call's site and its arguments, method
// calls on what a receiver is, builtins, classes and `functools.partial`, `super()`, callbacks a
// framework runs, and the arguments a function's parameters are bound to. Calls of the project's
// functions end in callFunction (InterpSummaries.cpp); argparse and config loaders: InterpConfigs.cpp.
#include "semantic/Interpreter.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "semantic/InterpreterImpl.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

namespace {

bool isBuiltinPassThrough(std::string_view q) {
  return q == "list" || q == "tuple" || q == "set" || q == "frozenset" || q == "iter" || q == "sorted" ||
         q == "reversed";
}

}  // namespace

// ---------------------------------------------------------------- CallSite

const ValueSet* CallSite::kwarg(std::string_view name) const {
  for (const auto& kw : kwargs)
    if (kw.first == name) return &kw.second;
  return nullptr;
}

const ValueSet* CallSite::arg(size_t i, std::string_view name) const {
  if (i < args.size()) return &args[i];
  return name.empty() ? nullptr : kwarg(name);
}

std::optional<Origin> CallSite::argOrigin(size_t i, std::string_view name) const {
  if (i < argOrigins.size()) return argOrigins[i];
  for (size_t k = 0; k < kwargs.size(); ++k)
    if (kwargs[k].first == name && k < kwargOrigins.size()) return kwargOrigins[k];
  return std::nullopt;
}

std::vector<ValueSet> Interp::bindArgs(const FunctionDef& def, const CallSite& site, ObjId self) {
  std::vector<ValueSet> bound(def.params.size());
  size_t idx = 0;
  if (self != kNoObj && !def.isStatic && !bound.empty()) bound[idx++] = {self};
  for (const auto& a : site.args) {
    if (idx >= bound.size()) break;
    bound[idx++] = a;
  }
  std::vector<bool> passed(bound.size(), false);
  for (size_t i = 0; i < idx; ++i) passed[i] = true;
  for (const auto& [name, v] : site.kwargs) {
    auto it = std::find(def.params.begin(), def.params.end(), name);
    if (it != def.params.end()) {
      bound[static_cast<size_t>(it - def.params.begin())] = v;
      passed[static_cast<size_t>(it - def.params.begin())] = true;
    }
  }
  // A parameter the call does not pass takes its constant default (`flag=False`), unless a splat
  // whose contents are unknown may pass it.
  if (!site.splat)
    for (size_t i = 0; i < bound.size() && i < def.defaults.size(); ++i)
      if (!passed[i] && !def.defaults[i].empty()) {
        bound[i] = {defaultConstant(def.defaults[i])};
      }
  return bound;
}

void Interp::needsCallerValue(const ValueSet& vs) {
  if (!summary_) return;
  for (ObjId v : vs) {
    ObjKind rk = st_.obj(st_.rootOf(v)).kind;
    if (rk == ObjKind::Arg || rk == ObjKind::Global) summary_->contextDependent = true;
  }
}

namespace {
// The `self` of a method: not a static method's first parameter, nor a classmethod's (`cls`).
bool takesSelf(const FunctionDef* def) {
  return def && def->cls && !def->isStatic && !def->params.empty() && def->params[0] == "self";
}

// The method `def` is defined in (directly), when it takes `self`: the `self` that `def` reads is that method's.
// (The innermost function around `def`'s text and the byte before it: not `def` itself.)
const FunctionDef* enclosingMethod(const FunctionDef* def) {
  if (!def || !def->nested || !def->owner || def->span.begin == 0) return nullptr;
  const FunctionDef* outer = def->owner->enclosingFunction(ByteRange{def->span.begin - 1, def->span.end});
  return takesSelf(outer) ? outer : nullptr;
}
}  // namespace

const ClassDef* Interp::receiverClassOf(ObjId r) {
  const Obj& ro = st_.obj(r);
  if (ro.kind == ObjKind::Instance) return ro.cls;
  if (!summary_ || !summary_->def) return nullptr;
  if (ro.kind == ObjKind::Arg && !summary_->params.empty() && summary_->params[0] == r && takesSelf(summary_->def)) {
    summary_->receiverClass = summary_->def->cls;
    return summary_->def->cls;
  }
  // `self.m()` in a function nested in a method: the method's `self`, a module global to the summary until
  // a caller binds it.
  const std::vector<std::string>& params = summary_->def->params;
  if (ro.kind == ObjKind::Global && ro.name == "self" && std::find(params.begin(), params.end(), "self") == params.end()) {
    if (const FunctionDef* m = enclosingMethod(summary_->def)) {
      summary_->receiverClass = m->cls;
      summary_->receiverByClosure = true;
      return m->cls;
    }
  }
  return nullptr;
}

bool Interp::receiverIs(const ValueSet& self, const ClassDef& cls) {
  if (self.empty()) return false;
  for (ObjId r : self)
    if (receiverClassOf(r) != &cls) return false;
  return true;
}

ValueSet Interp::callCallable(const ValueSet& callees, const std::vector<ValueSet>& args, const Origin& origin) {
  // Only what the analysis can see into: a plain function (not a method, whose `self` is not known
  // here) of this module or another module of the project, or a partial of one.
  auto resolve = [&](ObjId c) -> ObjId {
    const Obj& co = st_.obj(c);
    if (co.kind == ObjKind::Function)
      return co.function && (!co.function->cls || co.function->isStatic) ? c : kNoObj;
    if (co.kind == ObjKind::Ref && ses_.provider() && !ses_.opaque(co.name)) {
      ModuleProvider::Found found = ses_.provider()->resolve(co.name, mod_);
      if (found.function && (!found.function->cls || found.function->isStatic))
        return defObject(ObjKind::Function, found.function);
    }
    return kNoObj;
  };
  ValueSet out;
  for (ObjId c : callees) {
    const Obj co = st_.obj(c);
    ObjId callee = kNoObj;
    if (co.kind == ObjKind::Instance && co.name == "functools.partial" && co.inputs().size() == 1) {
      bool known = !co.inputs()[0].empty() &&
                   std::all_of(co.inputs()[0].begin(), co.inputs()[0].end(), [&](ObjId f) { return resolve(f) != kNoObj; });
      if (known) callee = c;
    } else {
      callee = resolve(c);
    }
    if (callee == kNoObj) {
      needsCallerValue({c});  // a callable a caller passes in: what runs depends on it
      continue;
    }
    CallSite site{*this};
    site.origin = origin;
    site.args = args;
    site.argOrigins.assign(args.size(), origin);
    addValues(out, callValue(callee, site, TSNode{}));
  }
  return out;
}

ObjId Interp::defaultConstant(const std::string& d) {
  // A string default is kept with its quotes (ModuleIndex): `"fsdp"`.
  if (d.size() >= 2 && (d[0] == '"' || d[0] == '\''))
    return stringConstant(d.substr(1, d.size() - 2), true, Origin{mod_.fileId(), {}, via_});
  return constant(d);
}

void Interp::bindDataclassFields(const ClassDef& cls, const CallSite& site, ObjId inst) {
  // The generated __init__: positional arguments in field order, keywords by name, else the default.
  if (site.splat) return;  // what a `**kwargs` passes is unknown
  for (size_t i = 0; i < cls.fields.size(); ++i) {
    const auto& [name, d] = cls.fields[i];
    std::optional<ValueSet> v;
    if (i < site.args.size()) v = site.args[i];
    for (const auto& [k, kv] : site.kwargs)
      if (k == name) v = kv;
    // A field's default is the configuration a run gets unless a loader (HfArgumentParser, fire, an
    // `update_config(cfg, **kwargs)`) sets it: read like an argparse default, never deciding dead code.
    if (!v && !d.empty()) v = optionDefaults(ValueSet{defaultConstant(d)}, site.origin);
    if (v) setVar(envKeyFor(inst, name), *v);
  }
}

ValueSet Interp::evalCall(TSNode call) {
  TSNode fn = syntax::field(call, "function");
  TSNode argsNode = syntax::field(call, "arguments");
  CallSite site{*this};
  site.origin = originOf(call);
  if (!ts_node_is_null(argsNode)) {
    if (kindOf(argsNode) == Kind::generator_expression) {
      site.args.push_back(eval(argsNode));
      site.argOrigins.push_back(originOf(argsNode));
    } else {
      for (TSNode a : syntax::namedChildren(argsNode)) {
        Kind ak = kindOf(a);
        if (ak == Kind::comment) continue;
        if (ak == Kind::keyword_argument) {
          TSNode value = syntax::field(a, "value");
          site.kwargs.emplace_back(text(syntax::field(a, "name")), eval(value));
          site.kwargOrigins.push_back(originOf(value));
        } else if (ak == Kind::dictionary_splat) {
          // `f(**kwargs)` with a dict whose literal keys are known: those become keyword arguments.
          ValueSet dicts = eval(ts_node_named_child(a, 0));
          if (dicts.empty()) site.splat = true;
          for (ObjId d : dicts) {
            const Obj& dict = st_.obj(d);
            if (dict.kind != ObjKind::Container || dict.containerKind != 'd') {
              site.splat = true;
              continue;
            }
            if (std::find(dict.keys().begin(), dict.keys().end(), "**") != dict.keys().end() ||
                std::find(dict.keys().begin(), dict.keys().end(), "") != dict.keys().end())
              site.splat = true;
            for (size_t i = 0; i < dict.keys().size() && i < dict.elements().size(); ++i) {
              if (dict.keys()[i].empty() || dict.keys()[i] == "**") continue;
              site.kwargs.emplace_back(dict.keys()[i], dict.elements()[i]);
              site.kwargOrigins.push_back(originOf(a));
            }
          }
        } else if (ak == Kind::list_splat) {
          eval(ts_node_named_child(a, 0));
          site.splat = true;
        } else {
          site.args.push_back(eval(a));
          site.argOrigins.push_back(originOf(a));
        }
      }
    }
  }
  ValueSet result;
  if (kindOf(fn) == Kind::attribute) {
    std::string method = text(syntax::field(fn, "attribute"));
    if (superCall(syntax::field(fn, "object"), method, site, result)) return result;
    ValueSet receivers = eval(syntax::field(fn, "object"));
    for (ObjId r : receivers) {
      const Obj& ro = st_.obj(r);
      if (ro.kind == ObjKind::Ref || ro.kind == ObjKind::Class) {
        for (ObjId callee : getAttr(r, method)) addValues(result, callValue(callee, site, call));
        continue;
      }
      CallSite ms = site;
      ms.receiver = r;
      ms.method = method;
      Event e;
      e.kind = EventKind::MethodCall;
      e.name = method;
      e.target = r;
      e.args = site.args;
      e.kwargs = site.kwargs;
      e.origin = site.origin;
      e.point = newPoint();
      st_.events.push_back(std::move(e));
      if (ro.kind == ObjKind::Container) {
        // Built-in container methods keep track of what the container holds.
        if (method == "append" || method == "extend" || method == "add" || method == "insert" ||
            method == "update") {
          ValueSet added = site.args.empty() ? ValueSet{} : site.args.back();
          if (method == "extend" || method == "update") {
            ValueSet flat;
            for (ObjId a : added) {
              const Obj& ao = st_.obj(a);
              if (ao.kind == ObjKind::Container) for (const auto& el : ao.elements()) addValues(flat, el);
              else addValue(flat, derive(a, "[*]"));
            }
            added = flat;
          }
          st_.obj(r).more().elements.push_back(added);
          if (st_.obj(r).containerKind == 'd') st_.obj(r).more().keys.emplace_back("");
          continue;
        }
        if (method == "items" || method == "values" || method == "copy" || method == "keys") {
          ValueSet all;
          for (const auto& el : ro.elements()) addValues(all, el);
          if (method == "copy") {
            addValue(result, r);
            continue;
          }
          ObjId list = newObject(ObjKind::Container, "", site.origin);
          st_.obj(list).containerKind = 'l';
          if (method == "items") {
            ObjId pair = newObject(ObjKind::Container, "", site.origin);
            st_.obj(pair).containerKind = 't';
            st_.obj(pair).more().elements = {ValueSet{}, all};
            st_.obj(list).more().elements = {{pair}};
          } else if (method == "values") {
            st_.obj(list).more().elements = {all};
          }
          addValue(result, list);
          continue;
        }
      }
      if (ro.kind == ObjKind::Instance && ro.name == "argparse.ArgumentParser" && argparseCall(r, method, site, result))
        continue;
      if (method == "get" && !site.args.empty() && isConfigMapping(r)) {
        // `cfg.get("key", default)` on a loaded YAML mapping that has the key.
        auto key = literal(site.args[0]);
        std::optional<ValueSet> v = key ? configKey(r, *key) : std::nullopt;
        if (v) {
          addValues(result, *v);
          continue;
        }
      }
      const ClassDef* cls = receiverClassOf(r);
      const FunctionDef* m = cls ? methodOf(*cls, method) : nullptr;
      if (m) {
        addValues(result, callFunction(*m, bindArgs(*m, site, r), site.origin));
        continue;
      }
      if (ses_.model().receiverSensitive(method)) needsCallerValue({r});
      if (summary_ && ro.kind != ObjKind::Instance) {
        // A method of a class defined in the file called on a parameter: what runs depends on the caller.
        for (const auto& c : mod_.classes())
          if (c->methods.count(method)) summary_->contextDependent = true;
      }
      if (ses_.model().onCall(ms)) {
        addValues(result, ms.result);
      } else {
        // A method result is made where the method is called.
        addValue(result, deriveAt(r, "." + method + "()", site.origin));
      }
    }
    return result;
  }
  ValueSet callees = eval(fn);
  if (callees.empty()) {
    Event e;
    e.kind = EventKind::Call;
    e.name = text(fn);
    e.args = site.args;
    e.kwargs = site.kwargs;
    e.origin = site.origin;
    e.point = newPoint();
    st_.events.push_back(std::move(e));
  }
  for (ObjId callee : callees) addValues(result, callValue(callee, site, call));
  return result;
}

const FunctionDef* Interp::methodOf(const ClassDef& cls, std::string_view method, int depth) {
  if (const FunctionDef* f = cls.findMethod(method)) return f;
  if (depth >= 8 || !ses_.provider() || !cls.owner) return nullptr;
  // A base another module of the project defines (its own bases in turn).
  for (const std::string& q : cls.allBases()) {
    if (ses_.opaque(q)) continue;
    const ClassDef* base = ses_.provider()->resolve(q, *cls.owner).cls;
    if (!base || base == &cls) continue;
    if (const FunctionDef* f = methodOf(*base, method, depth + 1)) return f;
  }
  return nullptr;
}

// `super().method(...)` in a method of a class defined in the project: the first
// base class (in the project) that defines `method` runs, bound to the same `self`.
bool Interp::superCall(TSNode object, const std::string& method, CallSite& site, ValueSet& result) {
  if (kindOf(object) != Kind::call) return false;
  TSNode fn = syntax::field(object, "function");
  if (kindOf(fn) != Kind::identifier || text(fn) != "super") return false;
  const FunctionDef* def = mod_.enclosingFunction(syntax::rangeOf(object));
  if (!def || !def->cls || def->isStatic || def->params.empty() || def->owner != &mod_) return false;
  ValueSet self = lookupName(def->params[0]);
  if (self.empty()) return false;
  // The bases in their order: those of this module, else those another module of the project defines.
  for (const std::string& q : def->cls->bases) {
    const ClassDef* base = nullptr;
    for (const ClassDef* b : def->cls->localBases)
      if (b->qualname == q) base = b;
    if (!base && ses_.provider() && !ses_.opaque(q)) base = ses_.provider()->resolve(q, mod_).cls;
    if (!base || base == def->cls) continue;
    const FunctionDef* m = methodOf(*base, method);
    if (!m) continue;
    for (ObjId r : self) addValues(result, callFunction(*m, bindArgs(*m, site, r), site.origin));
    return true;
  }
  return false;
}

ValueSet Interp::callValue(ObjId callee, CallSite& siteIn, TSNode node) {
  // A copy here, in this frame: a call site taken by value would sit in evalCall's frame, which an expression
  // nested thousands of calls deep (`f(f(f(...)))`, each argument evaluated first) repeats on the stack.
  CallSite site = siteIn;
  const Obj co = st_.obj(callee);
  auto record = [&](const std::string& name) {
    Event e;
    e.kind = EventKind::Call;
    e.name = name;
    e.args = site.args;
    e.kwargs = site.kwargs;
    e.origin = site.origin;
    e.point = newPoint();
    st_.events.push_back(std::move(e));
  };
  switch (co.kind) {
    case ObjKind::Ref: {
      const std::string& qs = co.name;
      std::string_view q = qs;  // compared with many names below: a size test first, no call
      if (isBuiltinPassThrough(q)) return site.args.empty() ? ValueSet{} : site.args[0];
      if (q == "filter") return site.args.size() > 1 ? site.args[1] : ValueSet{};
      if (q == "getattr" && site.args.size() >= 2) {
        if (auto lit = literal(site.args[1])) {
          ValueSet out;
          for (ObjId o : site.args[0]) addValues(out, getAttr(o, *lit));
          return out;
        }
        return {};
      }
      if (q == "setattr" && site.args.size() >= 3) {
        // `setattr(obj, "name", value)` with a constant name: the assignment `obj.name = value`, located
        // at the name's string.
        if (auto lit = literal(site.args[1]); lit && !lit->empty() && site.argOrigins.size() >= 2) {
          for (ObjId o : site.args[0])
            if (st_.obj(o).kind != ObjKind::Ref) setAttribute(o, *lit, site.args[2], site.argOrigins[1]);
        }
        return {};
      }
      if (q == "itertools.chain" || q == "zip" || q == "enumerate") {
        ObjId c = newObject(ObjKind::Container, "", site.origin);
        st_.obj(c).containerKind = 'l';
        st_.obj(c).more().elements = site.args;
        return {c};
      }
      if (q == "dict") {
        ObjId c = newObject(ObjKind::Container, "", site.origin);
        st_.obj(c).containerKind = 'd';
        for (const auto& [k, v] : site.kwargs) {
          st_.obj(c).more().keys.push_back(k);
          st_.obj(c).more().elements.push_back(v);
        }
        return {c};
      }
      if (q == "isinstance" || q == "hasattr") {
        // A test an `if` may branch on later (`is_fsdp = isinstance(m, FSDPModule)`).
        ObjId t = newObject(ObjKind::Instance, qs, site.origin);
        st_.obj(t).setTag("builtin_test", "1");
        st_.obj(t).more().inputs = site.args;
        return {t};
      }
      if (q == "super" || q == "len" || q == "print" || q == "range") return {};
      if (ses_.provider() && !ses_.opaque(q)) {
        // A function or class defined in another module of the project.
        ModuleProvider::Found found = ses_.provider()->resolve(q, mod_);
        if (found.function) return callValue(defObject(ObjKind::Function, found.function), siteIn, node);
        if (found.cls) return callValue(defObject(ObjKind::Class, found.cls), siteIn, node);
      }
      if (q == "functools.partial" && !site.args.empty()) {
        // A callable that calls args[0] with the bound arguments first.
        ObjId p = newObject(ObjKind::Instance, qs, site.origin);
        Obj& po = st_.obj(p);
        po.more().inputs = {site.args[0]};
        for (size_t i = 1; i < site.args.size(); ++i) {
          po.more().keys.emplace_back();
          po.more().elements.push_back(site.args[i]);
        }
        for (const auto& [k, v] : site.kwargs) {
          po.more().keys.push_back(k);
          po.more().elements.push_back(v);
        }
        return {p};
      }
      record(qs);
      site.qualname = qs;
      if (ValueSet loaded; configLoadCall(qs, site, loaded)) return loaded;
      if (ses_.model().onCall(site)) return site.result;
      // Not understood: a new object, built from the positional arguments (rules may
      // treat `torch.compile(model)` as standing for `model`).
      ObjId made = newObject(ObjKind::Instance, qs, site.origin);
      st_.obj(made).more().inputs = site.args;
      return {made};
    }
    case ObjKind::Function: {
      record(co.name);
      return callFunction(*co.function, bindArgs(*co.function, site, kNoObj), site.origin);
    }
    case ObjKind::Class: {
      record(co.name);
      ObjId inst = newObject(ObjKind::Instance, co.name, site.origin);
      st_.obj(inst).cls = co.cls;
      site.qualname = co.name;
      site.cls = co.cls;
      site.result = {inst};
      ses_.model().onCall(site);
      if (const FunctionDef* init = co.cls->findMethod("__init__")) callFunction(*init, bindArgs(*init, site, inst), site.origin);
      else if (co.cls->dataclass) bindDataclassFields(*co.cls, site, inst);
      return {inst};
    }
    default: {
      if (co.kind == ObjKind::Instance && co.name == "functools.partial" && co.inputs().size() == 1) {
        CallSite bound = site;
        bound.args.clear();
        bound.argOrigins.clear();
        bound.kwargs.clear();
        bound.kwargOrigins.clear();
        for (size_t i = 0; i < co.keys().size() && i < co.elements().size(); ++i) {
          if (co.keys()[i].empty()) {
            bound.args.push_back(co.elements()[i]);
            bound.argOrigins.push_back(co.origin);
          } else {
            bound.kwargs.emplace_back(co.keys()[i], co.elements()[i]);
            bound.kwargOrigins.push_back(co.origin);
          }
        }
        bound.args.insert(bound.args.end(), site.args.begin(), site.args.end());
        bound.argOrigins.insert(bound.argOrigins.end(), site.argOrigins.begin(), site.argOrigins.end());
        bound.kwargs.insert(bound.kwargs.end(), site.kwargs.begin(), site.kwargs.end());
        bound.kwargOrigins.insert(bound.kwargOrigins.end(), site.kwargOrigins.begin(), site.kwargOrigins.end());
        ValueSet out;
        for (ObjId f : co.inputs()[0]) addValues(out, callValue(f, bound, node));
        return out;
      }
      needsCallerValue({callee});
      // Calling an object: `model(x)` runs its forward.
      Event e;
      e.kind = EventKind::MethodCall;
      e.name = "__call__";
      e.target = callee;
      e.args = site.args;
      e.kwargs = site.kwargs;
      e.origin = site.origin;
      e.point = newPoint();
      st_.events.push_back(std::move(e));
      site.receiver = callee;
      site.method = "__call__";
      if (ses_.model().onCall(site)) return site.result;
      (void)node;
      return {deriveAt(callee, "()", site.origin)};
    }
  }
}

}  // namespace shardlint::semantic
