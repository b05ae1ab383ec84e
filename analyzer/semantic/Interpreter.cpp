#include "semantic/Interpreter.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "config/Yaml.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

using syntax::Kind;
using syntax::PyKinds;

namespace {

Kind kindOf(TSNode n) { return PyKinds::instance().kind(n); }

bool isBuiltinName(std::string_view n) {
  static const std::set<std::string_view> names = {
      "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "breakpoint", "bytearray", "bytes",
      "callable", "chr", "classmethod", "compile", "complex", "delattr", "dict", "dir", "divmod", "enumerate",
      "eval", "exec", "exit", "filter", "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash",
      "help", "hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "list", "locals", "map",
      "max", "memoryview", "min", "next", "object", "oct", "open", "ord", "pow", "print", "property", "quit",
      "range", "repr", "reversed", "round", "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum",
      "super", "tuple", "type", "vars", "zip", "Exception", "ValueError", "KeyError", "RuntimeError",
      "TypeError", "NotImplementedError", "AssertionError", "ImportError", "OSError", "StopIteration"};
  return names.count(n) > 0;
}

bool isBuiltinPassThrough(std::string_view q) {
  return q == "list" || q == "tuple" || q == "set" || q == "frozenset" || q == "iter" || q == "sorted" ||
         q == "reversed";
}

// ---- a trainer class's lifecycle (FileAnalysis::run): what its methods read and assign on `self`

// What one method's body does with `self` (its first parameter), read from the syntax: the attributes it
// names (`self.X` anywhere) and those it assigns (`self.X = ...`, also inside tuple targets).
struct SelfUse {
  const FunctionDef* def = nullptr;
  std::set<std::string> mentioned, assigned;
};

void selfTargets(TSNode target, std::string_view self, std::string_view src, std::set<std::string>& out) {
  if (ts_node_is_null(target)) return;
  Kind k = kindOf(target);
  if (k == Kind::attribute) {
    TSNode obj = syntax::field(target, "object");
    if (kindOf(obj) == Kind::identifier && syntax::textOf(obj, src) == self)
      out.emplace(syntax::textOf(syntax::field(target, "attribute"), src));
  } else if (k == Kind::pattern_list || k == Kind::tuple_pattern || k == Kind::list_pattern || k == Kind::tuple ||
             k == Kind::list || k == Kind::parenthesized_expression || k == Kind::list_splat_pattern ||
             k == Kind::list_splat || k == Kind::expression_list) {
    for (TSNode c : syntax::namedChildren(target)) selfTargets(c, self, src, out);
  }
}

SelfUse selfUseOf(const FunctionDef& def) {
  SelfUse u;
  u.def = &def;
  if (def.params.empty() || !def.owner) return u;
  std::string_view src = def.owner->file().text, self = def.params[0];
  syntax::walk(syntax::field(def.node, "body"), [&](TSNode n) {
    Kind k = kindOf(n);
    if (k == Kind::attribute) {
      TSNode obj = syntax::field(n, "object");
      if (kindOf(obj) == Kind::identifier && syntax::textOf(obj, src) == self)
        u.mentioned.emplace(syntax::textOf(syntax::field(n, "attribute"), src));
    } else if (k == Kind::assignment || k == Kind::augmented_assignment) {
      selfTargets(syntax::field(n, "left"), self, src, u.assigned);
    }
    return true;
  });
  return u;
}

// A method the lifecycle does not run on its own: a classmethod, a property (getter or setter).
bool decoratedAway(const FunctionDef& def) {
  TSNode parent = ts_node_parent(def.node);
  if (ts_node_is_null(parent) || kindOf(parent) != Kind::decorated_definition) return false;
  std::string_view src = def.owner->file().text;
  for (TSNode d : syntax::namedChildren(parent)) {
    if (kindOf(d) != Kind::decorator) continue;
    std::string_view t = syntax::textOf(d, src);
    for (std::string_view w : {"classmethod", "property", ".setter", ".deleter", "staticmethod"})
      if (t.find(w) != std::string_view::npos) return true;
  }
  return false;
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

// ---------------------------------------------------------------- FileAnalysis

void FileAnalysis::run() {
  Frame frame;
  frame.isModule = true;
  Interp in(module_, session_, moduleStore_, frame);
  in.execBlock(module_.root());
  // Every function's summary, which also tells which functions something calls. A function
  // whose name the file mentions only where it defines it (a test method) cannot be called
  // from here, so its summary is dropped as soon as its flags are known: big test files keep
  // one such summary at a time, not hundreds.
  std::map<const FunctionDef*, bool> worthInPlace;
  // How often each word (a maximal run of letters, digits and `_`) occurs in the text, counted
  // once per file on first use: a name mentioned once is mentioned only where it is defined.
  std::unordered_map<std::string_view, int> wordCounts;
  auto mentionedOnce = [&](const FunctionDef& f) {
    if (wordCounts.empty()) {
      std::string_view text = module_.file().text;
      auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
      for (size_t i = 0; i < text.size();) {
        if (!word(text[i])) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < text.size() && word(text[j])) ++j;
        ++wordCounts[text.substr(i, j - i)];
        i = j;
      }
    }
    auto it = wordCounts.find(f.name);
    return it != wordCounts.end() && it->second == 1;
  };
  for (const auto& f : module_.functions()) {
    const Summary* s = session_.summary(f.get());
    if (!s || f->nested || !session_.mayRelease(f.get()) || !mentionedOnce(*f)) continue;
    worthInPlace[f.get()] = s->contextDependent || s->hasDomainFacts || s->truncated;
    session_.release(f.get());
  }
  int construct = moduleStore_.constructs++;
  int index = 0;
  // Classes a framework drives: their hooks run in the framework's order on one instance.
  std::set<const FunctionDef*> driven;
  for (const auto& c : module_.classes()) {
    std::vector<const FunctionDef*> hooks;
    for (const auto& name : session_.model().frameworkOrder(c->allBases()))
      if (const FunctionDef* f = c->findMethod(name); f && !session_.called(f)) hooks.push_back(f);
    if (hooks.empty()) continue;
    // The instance is constructed before the framework calls any hook.
    if (const FunctionDef* init = c->findMethod("__init__"))
      hooks.insert(hooks.begin(), init);
    frame.arm = in.openArm(construct, index++, false);
    frame.reachable = true;
    Origin origin{module_.fileId(), syntax::rangeOf(syntax::field(c->node, "name")), {}};
    ObjId self = in.newObject(ObjKind::Arg, "self", origin);
    moduleStore_.obj(self).argIndex = 0;
    moduleStore_.obj(self).cls = c.get();
    for (const FunctionDef* f : hooks) {
      std::vector<ValueSet> args{{self}};
      for (size_t i = 1; i < f->params.size(); ++i) {
        ObjId id = in.newObject(ObjKind::Arg, f->params[i], origin);
        moduleStore_.obj(id).argIndex = static_cast<int>(i);
        args.push_back({id});
      }
      in.analyzeInPlace(*f, args);
      driven.insert(f);
    }
    frame.arm = -1;
  }
  // Classes whose constructor nothing here runs (instantiated in another file, through a registry, by
  // Hydra): `__init__` runs on a fresh instance of the class, in its own arm, its other parameters
  // unknown, so the methods it calls on `self` and the base-class `__init__` it reaches through
  // `super()` run in its order. No other method runs after it: nothing here says in which order they do.
  for (const auto& c : module_.classes()) {
    auto own = c->methods.find("__init__");
    if (own == c->methods.end()) continue;
    const FunctionDef* init = own->second;
    if (init->nested || init->isStatic || init->params.empty() || session_.called(init) || driven.count(init))
      continue;
    const Summary* s = session_.summary(init);
    if (!s || (!s->contextDependent && !s->hasDomainFacts && !s->truncated)) continue;
    frame.arm = in.openArm(construct, index++, false);
    frame.reachable = true;
    Origin origin{module_.fileId(), syntax::rangeOf(syntax::field(c->node, "name")), {}};
    ObjId self = in.newObject(ObjKind::Instance, c->qualname, origin);
    moduleStore_.obj(self).cls = c.get();
    std::vector<ValueSet> args{{self}};
    for (size_t i = 1; i < init->params.size(); ++i) {
      ObjId id = in.newObject(ObjKind::Arg, init->params[i], origin);
      moduleStore_.obj(id).argIndex = static_cast<int>(i);
      args.push_back({id});
    }
    size_t eventsBefore = moduleStore_.events.size(), objectsBefore = moduleStore_.objects.size();
    in.analyzeInPlace(*init, args);
    driven.insert(init);
    bool constructorActs = std::any_of(moduleStore_.events.begin() + static_cast<std::ptrdiff_t>(eventsBefore),
                                       moduleStore_.events.end(),
                                       [](const Event& e) { return e.kind == EventKind::Domain; });
    // Only a constructor that acts (a domain event) or makes what the model calls an anchor (an
    // optimizer) gives the later methods something to say; other classes (most of a model zoo's) skip the
    // lifecycle and the summaries of their public methods.
    bool anchored = constructorActs;
    for (size_t i = objectsBefore; !anchored && i < moduleStore_.objects.size(); ++i)
      anchored = session_.model().lifecycleAnchor(moduleStore_.objects[i]);
    if (frame.reachable && anchored) runLifecycle(in, frame, *c, self, origin, constructorActs);
    frame.arm = -1;
  }
  for (const auto& f : module_.functions()) {
    if (f->nested || session_.called(f.get()) || driven.count(f.get())) continue;
    if (auto w = worthInPlace.find(f.get()); w != worthInPlace.end()) {
      if (!w->second) continue;
    } else {
      const Summary* s = session_.summary(f.get());
      if (!s || (!s->contextDependent && !s->hasDomainFacts && !s->truncated)) continue;
    }
    frame.arm = in.openArm(construct, index++, false);
    frame.reachable = true;
    std::vector<ValueSet> args;
    Origin origin{module_.fileId(), syntax::rangeOf(syntax::field(f->node, "name")), {}};
    for (size_t i = 0; i < f->params.size(); ++i) {
      ObjId id = in.newObject(ObjKind::Arg, f->params[i], origin);
      moduleStore_.obj(id).argIndex = static_cast<int>(i);
      args.push_back({id});
    }
    in.analyzeInPlace(*f, args);
    frame.arm = -1;
  }
}

void FileAnalysis::runLifecycle(Interp& in, Frame& frame, const ClassDef& cls, ObjId self, const Origin& origin,
                                bool constructorActs) {
  // The class's methods and its project bases' (another module's through the module provider), the
  // class's own first; `byName` is the one a call on the instance runs.
  std::vector<const ClassDef*> chain;
  std::function<void(const ClassDef&, int)> collect = [&](const ClassDef& c, int depth) {
    if (std::find(chain.begin(), chain.end(), &c) != chain.end()) return;
    chain.push_back(&c);
    if (depth >= 8) return;
    for (const std::string& q : c.bases) {
      const ClassDef* base = nullptr;
      for (const ClassDef* b : c.localBases)
        if (b->qualname == q) base = b;
      if (!base && session_.provider() && !session_.opaque(q) && c.owner)
        base = session_.provider()->resolve(q, *c.owner).cls;
      if (base && base != &c) collect(*base, depth + 1);
    }
  };
  collect(cls, 0);
  std::map<std::string, const FunctionDef*, std::less<>> byName;
  std::vector<SelfUse> uses;
  for (const ClassDef* c : chain) {
    if (c->owner && c->owner != &module_ && session_.provider()) session_.provider()->use(*c->owner);
    for (const auto& [name, def] : c->methods) {
      if (def->nested || def->isStatic || def->params.empty()) continue;
      byName.emplace(name, def);
      uses.push_back(selfUseOf(*def));
    }
  }
  // Construction: every `__init__` of the chain, and the private helpers (`_build_optimizer`) that only
  // construction names on `self`. What any other method assigns on `self` (`self.optimizer = ...` in a
  // `setup_optimizers()`) has an unknown value when another method starts: nothing here says in which
  // order they run, so each method starts with those attributes unknown.
  std::set<const FunctionDef*> construction;
  for (const SelfUse& u : uses)
    if (u.def->name == "__init__") construction.insert(u.def);
  for (bool grew = true; grew;) {
    grew = false;
    for (const SelfUse& u : uses) {
      const std::string& n = u.def->name;
      bool isPrivate = n.size() > 1 && n[0] == '_' && !(n.size() > 4 && n.compare(0, 2, "__") == 0 &&
                                                         n.compare(n.size() - 2, 2, "__") == 0);
      if (construction.count(u.def) || !isPrivate) continue;
      bool named = false, onlyThere = true;
      for (const SelfUse& v : uses) {
        if (!v.mentioned.count(n) || v.def == u.def) continue;
        named = true;
        onlyThere = onlyThere && construction.count(v.def) > 0;
      }
      if (named && onlyThere) {
        construction.insert(u.def);
        grew = true;
      }
    }
  }
  // What the methods other than `m` and construction assign (`m`'s own assignments are its own flow).
  auto unknownAt = [&](const FunctionDef* m) {
    std::set<std::string> out;
    for (const SelfUse& u : uses)
      if (u.def != m && u.def->name != m->name && !construction.count(u.def))
        out.insert(u.assigned.begin(), u.assigned.end());
    return out;
  };
  // The lifecycle: each public method (`train`, `fit`, `step`, ...) on the constructed instance, in its
  // own arm under the constructor's, so one method's effects never reach another's (the methods it calls
  // on `self` run inside it, in its order).
  constexpr size_t kMaxLifecycleMethods = 32;
  std::vector<const FunctionDef*> methods;
  for (const auto& [name, def] : byName) {
    if (name.empty() || name[0] == '_' || decoratedAway(*def)) continue;
    // Only a method that reads or sets something on `self` can see what the constructor did.
    auto u = std::find_if(uses.begin(), uses.end(), [&](const SelfUse& v) { return v.def == def; });
    if (u == uses.end() || u->mentioned.empty()) continue;
    // And only when the constructor or the method itself records a domain fact (a model-wrapping
    // call, say): otherwise the run tells nothing the method's own arm does not.
    if (!constructorActs) {
      const Summary* s = session_.summary(def);
      if (!s || (!s->hasDomainFacts && !s->truncated)) continue;
    }
    methods.push_back(def);
    if (methods.size() >= kMaxLifecycleMethods) break;
  }
  if (methods.empty()) return;
  int constructed = frame.arm;
  int construct = moduleStore_.constructs++;
  std::unordered_map<std::string, ValueSet> after = frame.env;
  std::string selfKey = "#" + std::to_string(self) + ".";
  int index = 0;
  for (const FunctionDef* m : methods) {
    frame.env = after;
    frame.arm = constructed;
    frame.arm = in.openArm(construct, index++, false);
    frame.reachable = true;
    for (const std::string& attr : unknownAt(m)) {
      ObjId id = in.newObject(ObjKind::Derived, "." + attr, origin);
      moduleStore_.obj(id).parent = self;
      frame.env[selfKey + attr] = {id};
    }
    std::vector<ValueSet> args{{self}};
    for (size_t i = 1; i < m->params.size(); ++i) {
      ObjId id = in.newObject(ObjKind::Arg, m->params[i], origin);
      moduleStore_.obj(id).argIndex = static_cast<int>(i);
      args.push_back({id});
    }
    in.analyzeInPlace(*m, args);
  }
  frame.env = std::move(after);
  frame.arm = constructed;
  frame.reachable = true;
}

std::vector<FileAnalysis::Root> FileAnalysis::roots() const { return {{"<module>", &moduleStore_}}; }

// ---------------------------------------------------------------- Interp basics

Interp::Interp(const Module& module, Session& session, Store& store, Frame& frame, Summary* summary)
    : mod_(module), ses_(session), st_(store), frame_(frame), summary_(summary) {}

PointId Interp::newPoint() {
  st_.points.push_back(Point{static_cast<int>(st_.points.size()), frame_.arm});
  return static_cast<PointId>(st_.points.size() - 1);
}

ObjId Interp::newObject(ObjKind kind, std::string name, const Origin& origin) {
  Obj o;
  o.kind = kind;
  o.name = std::move(name);
  o.origin = origin;
  o.point = newPoint();
  st_.objects.push_back(std::move(o));
  return static_cast<ObjId>(st_.objects.size() - 1);
}

ObjId Interp::derive(ObjId parent, std::string edge) {
  auto key = std::make_pair(parent, edge);
  if (auto it = st_.memo().derived.find(key); it != st_.memo().derived.end()) return it->second;
  ObjId id = newObject(ObjKind::Derived, edge, st_.obj(parent).origin);
  st_.obj(id).parent = parent;
  st_.memo().derived[key] = id;
  return id;
}

ObjId Interp::deriveAt(ObjId parent, std::string edge, const Origin& at) {
  // Keyed by the call's own site, not by the chain of calls that reached it: a chain per object would
  // multiply objects with every level of helpers (one summary's call, instantiated at every caller).
  std::string key = edge + '\x1f' + std::to_string(at.file) + ':' + std::to_string(at.range.begin);
  auto memoKey = std::make_pair(parent, std::move(key));
  if (auto it = st_.memo().derived.find(memoKey); it != st_.memo().derived.end()) return it->second;
  ObjId id = newObject(ObjKind::Derived, std::move(edge), at);
  st_.obj(id).parent = parent;
  st_.memo().derived[std::move(memoKey)] = id;
  return id;
}

ObjId Interp::constant(const std::string& value) {
  auto it = st_.memo().literals.find(value);
  if (it != st_.memo().literals.end()) return it->second;
  ObjId id = newObject(ObjKind::Literal, value, Origin{mod_.fileId(), {}, via_});
  st_.memo().literals[value] = id;
  return id;
}

ObjId Interp::stringConstant(const std::string& value, bool exact, const Origin& origin) {
  std::string key(exact ? "s:" : "s?:");  // (not `"s:" + value`: GCC 12 warns falsely about that)
  key += value;
  auto it = st_.memo().literals.find(key);
  if (it != st_.memo().literals.end()) return it->second;
  ObjId id = newObject(ObjKind::Literal, value, origin);
  st_.memo().literals[key] = id;
  // A string spelled like a constant (`"False"`, `"0"`, `""`) is told apart from it; a string not
  // read exactly (`f"{x}"`, `b"a"`) is never equal to another.
  if (!exact) st_.obj(id).setTag("inexact", "1");
  if (truthOfConstant(value).has_value() || value.empty()) st_.obj(id).setTag("str", "1");
  return id;
}

ObjId Interp::ref(const std::string& qualname) {
  if (auto it = st_.memo().refs.find(qualname); it != st_.memo().refs.end()) return it->second;
  ObjId id = newObject(ObjKind::Ref, qualname, Origin{});
  st_.memo().refs[qualname] = id;
  return id;
}

void Interp::domainEvent(std::string kind, ObjId target, const Origin& origin,
                         std::map<std::string, std::string, std::less<>> attrs, std::vector<ValueSet> args) {
  Event e;
  e.kind = EventKind::Domain;
  e.name = std::move(kind);
  e.target = target;
  e.origin = origin;
  e.attrs = std::move(attrs);
  e.args = std::move(args);
  e.point = newPoint();
  st_.events.push_back(std::move(e));
}

std::optional<std::string> Interp::literal(const ValueSet& vs) const {
  if (vs.size() != 1) return std::nullopt;
  const Obj& o = st_.obj(vs[0]);
  if (o.kind != ObjKind::Literal) return std::nullopt;
  return o.name;
}

Origin Interp::originOf(TSNode n) const { return Origin{mod_.fileId(), syntax::rangeOf(n), via_}; }

std::string Interp::text(TSNode n) const { return std::string(syntax::textOf(n, mod_.file().text)); }

std::string Interp::envKeyFor(ObjId obj, std::string_view attr) const {
  return "#" + std::to_string(obj) + "." + std::string(attr);
}

int Interp::openArm(int construct, int index, bool loop) {
  Arm a;
  a.construct = construct;
  a.index = index;
  a.loop = loop;
  a.parent = frame_.arm;
  st_.arms.push_back(std::move(a));
  return static_cast<int>(st_.arms.size() - 1);
}

ObjId Interp::defObject(ObjKind kind, const void* def) {
  if (auto d = st_.memo().defs.find(def); d != st_.memo().defs.end()) return d->second;
  ObjId id;
  if (kind == ObjKind::Function) {
    auto f = static_cast<const FunctionDef*>(def);
    id = newObject(ObjKind::Function, f->qualname, Origin{});
    st_.obj(id).function = f;
  } else {
    auto c = static_cast<const ClassDef*>(def);
    id = newObject(ObjKind::Class, c->qualname, Origin{});
    st_.obj(id).cls = c;
  }
  st_.memo().defs[def] = id;
  return id;
}

ValueSet Interp::lookupName(std::string_view name) {
  std::string key(name);
  if (auto it = frame_.env.find(key); it != frame_.env.end()) return it->second;
  if (auto it = mod_.imports().find(name); it != mod_.imports().end()) return {ref(it->second)};
  if (const FunctionDef* tf = mod_.topFunction(name)) {
    auto d = st_.memo().defs.find(tf);
    if (d != st_.memo().defs.end()) return {d->second};
    ObjId id = newObject(ObjKind::Function, tf->qualname, Origin{});
    st_.obj(id).function = tf;
    return {st_.memo().defs[tf] = id};
  }
  if (const ClassDef* tc = mod_.topClass(name)) {
    auto d = st_.memo().defs.find(tc);
    if (d != st_.memo().defs.end()) return {d->second};
    ObjId id = newObject(ObjKind::Class, tc->qualname, Origin{});
    st_.obj(id).cls = tc;
    return {st_.memo().defs[tc] = id};
  }
  if (frame_.globalsFrame) {
    if (auto it = frame_.globalsFrame->env.find(key); it != frame_.globalsFrame->env.end()) return it->second;
  }
  if (ses_.provider() && !isBuiltinName(name)) {
    for (const auto& star : mod_.starImports()) {  // `from helpers import *`
      if (ses_.opaque(star + "." + key)) continue;
      ModuleProvider::Found found = ses_.provider()->resolve(star + "." + key, mod_);
      if (found.function) return {defObject(ObjKind::Function, found.function)};
      if (found.cls) return {defObject(ObjKind::Class, found.cls)};
    }
  }
  if (!frame_.isModule && !frame_.globalsFrame && !isBuiltinName(name)) {
    if (auto it = frame_.globals.find(key); it != frame_.globals.end()) return {it->second};
    ObjId id = newObject(ObjKind::Global, key, Origin{});
    frame_.globals[key] = id;
    return {id};
  }
  return {ref(key)};  // a builtin or an unresolved name
}

ValueSet Interp::getAttr(ObjId obj, std::string_view attr) {
  const Obj& o = st_.obj(obj);
  if (o.kind == ObjKind::Ref) return {ref(o.name + "." + std::string(attr))};
  if (o.kind == ObjKind::Class && o.cls) {
    if (const FunctionDef* f = o.cls->findMethod(attr)) {
      auto d = st_.memo().defs.find(f);
      if (d != st_.memo().defs.end()) return {d->second};
      ObjId id = newObject(ObjKind::Function, f->qualname, Origin{});
      st_.obj(id).function = f;
      return {st_.memo().defs[f] = id};
    }
  }
  if (auto it = frame_.env.find(envKeyFor(obj, attr)); it != frame_.env.end()) return it->second;
  if (o.kind == ObjKind::Container && o.hasTag("config_attrs") && isConfigMapping(obj))
    if (std::optional<ValueSet> v = configKey(obj, attr)) return *v;  // OmegaConf: `cfg.key` is `cfg["key"]`
  bool options = o.kind == ObjKind::Instance && o.name == "argparse.Namespace";
  ObjId d = derive(obj, "." + std::string(attr));  // may move the objects: `o` is not read after it
  // An option the engine has no value for, of an `argparse.Namespace` (one built from a dict,
  // `argparse.Namespace(**config)`, or one `parse_args` made): what the run's command line (or a
  // config file it names) gives. A rule may read a default such a value joins with as the default.
  if (options) st_.obj(d).setTag("option_value", "1");
  return {d};
}

// ---------------------------------------------------------------- statements

void Interp::execBlock(TSNode block) {
  if (ts_node_is_null(block)) return;
  std::vector<TSNode> statements = syntax::namedChildren(block);
  std::vector<Region> rest;  // `if not <test>: return` guards what follows in this block
  for (size_t i = 0; i < statements.size() && frame_.reachable; ++i) {
    execStatement(statements[i]);
    for (Region& r : pendingRest_) {
      r.begin = static_cast<PointId>(st_.points.size());
      rest.push_back(std::move(r));
    }
    pendingRest_.clear();
  }
  closeRegions(rest);
}

void Interp::closeRegions(std::vector<Region>& regions) {
  PointId end = static_cast<PointId>(st_.points.size());
  for (Region& r : regions) {
    r.end = end;
    if (r.begin < r.end) st_.regions.push_back(std::move(r));
  }
  regions.clear();
}

void Interp::openIterationRegions(TSNode target, std::vector<Region>& out) {
  std::vector<TSNode> todo{target};
  while (!todo.empty()) {
    TSNode t = todo.back();
    todo.pop_back();
    if (ts_node_is_null(t)) continue;
    Kind k = kindOf(t);
    if (k == Kind::attribute || k == Kind::subscript) continue;
    if (k != Kind::identifier) {
      for (TSNode c : syntax::namedChildren(t)) todo.push_back(c);
      continue;
    }
    auto it = frame_.env.find(text(t));
    if (it == frame_.env.end() || it->second.size() < 2) continue;
    Region r;
    r.kind = "iteration";
    r.subject = it->second;
    r.names = {text(t)};
    r.begin = static_cast<PointId>(st_.points.size());
    out.push_back(std::move(r));
  }
}

static bool hasCall(TSNode n) {
  std::vector<TSNode> todo{n};
  while (!todo.empty()) {
    TSNode c = todo.back();
    todo.pop_back();
    Kind k = kindOf(c);
    if (k == Kind::call || k == Kind::lambda || k == Kind::await || k == Kind::named_expression ||
        k == Kind::list_comprehension || k == Kind::generator_expression)
      return true;
    for (TSNode ch : syntax::namedChildren(c)) todo.push_back(ch);
  }
  return false;
}

static bool truthTestable(const Store& st, const ValueSet& vs) {
  return !vs.empty() && std::all_of(vs.begin(), vs.end(), [&](ObjId v) {
    ObjKind k = st.obj(v).kind;
    return k == ObjKind::Literal || k == ObjKind::Arg || k == ObjKind::Global;
  });
}

void Interp::addTruthTest(TSNode cond, bool negated, std::vector<Region>& out) {
  ValueSet v = eval(cond);
  if (!truthTestable(st_, v)) return;
  Region r;
  r.kind = "truth";
  r.subject = std::move(v);
  r.negated = negated;
  r.names.push_back(text(cond));
  out.push_back(std::move(r));
}

void Interp::addCondition(TSNode cond, bool negated, std::vector<Region>& out) {
  Region r;
  bool bindable = false;
  conditionTerm(cond, r.terms, bindable, 0);
  if (!bindable || r.terms.empty()) return;
  r.kind = "truth";
  r.negated = negated;
  for (const Term& t : r.terms) {
    addValues(r.subject, t.left);
    addValues(r.subject, t.right);
  }
  // The condition as written, on one line.
  std::string written;
  for (char c : text(cond)) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\\';
    if (!space) written += c;
    else if (!written.empty() && written.back() != ' ' && written.back() != '(' && written.back() != '[')
      written += ' ';
  }
  while (!written.empty() && written.back() == ' ') written.pop_back();
  r.names.push_back(std::move(written));
  out.push_back(std::move(r));
}

int Interp::conditionTerm(TSNode n, std::vector<Term>& terms, bool& bindable, int depth) {
  Kind k = ts_node_is_null(n) ? Kind::Other : kindOf(n);
  if (k == Kind::parenthesized_expression && ts_node_named_child_count(n) == 1 && depth < 32)
    return conditionTerm(ts_node_named_child(n, 0), terms, bindable, depth + 1);
  int at = static_cast<int>(terms.size());
  terms.emplace_back();  // filled below: operands are appended after it
  Term t;
  if (depth >= 32) {
    // Unknown
  } else if (k == Kind::not_operator) {
    t.op = Term::Op::Not;
    t.operands.push_back(conditionTerm(syntax::field(n, "argument"), terms, bindable, depth + 1));
  } else if (k == Kind::boolean_operator) {
    t.op = text(syntax::field(n, "operator")) == "and" ? Term::Op::And : Term::Op::Or;
    t.operands.push_back(conditionTerm(syntax::field(n, "left"), terms, bindable, depth + 1));
    t.operands.push_back(conditionTerm(syntax::field(n, "right"), terms, bindable, depth + 1));
  } else if (k == Kind::identifier || k == Kind::attribute || k == Kind::true_ || k == Kind::false_ ||
             k == Kind::none) {
    ValueSet v = eval(n);
    if (truthTestable(st_, v)) {
      t.op = Term::Op::Truth;
      t.left = std::move(v);
      bindable = true;
    }
  } else if (k == Kind::comparison_operator) {
    std::vector<TSNode> operands;
    std::vector<std::string_view> ops;
    uint32_t count = ts_node_child_count(n);
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_child(n, i);
      if (ts_node_is_named(c)) {
        if (kindOf(c) != Kind::comment) operands.push_back(c);
      } else {
        ops.push_back(ts_node_type(c));
      }
    }
    static const std::pair<std::string_view, Term::Op> kOps[] = {
        {"==", Term::Op::Eq}, {"!=", Term::Op::NotEq}, {"is", Term::Op::Is}, {"is not", Term::Op::IsNot},
        {"in", Term::Op::In}, {"not in", Term::Op::NotIn}};
    Term::Op op = Term::Op::Unknown;
    if (ops.size() == 1)
      for (const auto& [spelled, o] : kOps)
        if (ops[0] == spelled) op = o;
    // Operands are read again here (the condition was evaluated already): only those without calls.
    if (op != Term::Op::Unknown && operands.size() == 2 && !hasCall(operands[0]) && !hasCall(operands[1])) {
      ValueSet l = eval(operands[0]), r = eval(operands[1]);
      auto bound = [&](const ValueSet& vs) { return truthTestable(st_, vs); };
      auto someBinding = [&](const ValueSet& vs) {
        return std::any_of(vs.begin(), vs.end(), [&](ObjId v) {
          ObjKind ok = st_.obj(v).kind;
          return ok == ObjKind::Arg || ok == ObjKind::Global;
        });
      };
      bool ok = false;
      if (op == Term::Op::Eq || op == Term::Op::NotEq) {
        ok = bound(l) && bound(r);
      } else if (op == Term::Op::Is || op == Term::Op::IsNot) {
        // `x is None` (either way round): x a constant, a parameter, a global or an object known
        // not to be None.
        auto side = [&](const ValueSet& vs) {
          return !vs.empty() && std::all_of(vs.begin(), vs.end(), [&](ObjId v) {
            ObjKind ok2 = st_.obj(v).kind;
            return ok2 == ObjKind::Literal || ok2 == ObjKind::Arg || ok2 == ObjKind::Global ||
                   st_.isNone(v).has_value();
          });
        };
        ok = side(l) && side(r) && (someBinding(l) || someBinding(r) || (literal(l) && literal(r)) ||
                                    kindOf(operands[1]) == Kind::none || kindOf(operands[0]) == Kind::none);
      } else {
        Kind rk = kindOf(operands[1]);
        t.display = rk == Kind::tuple || rk == Kind::list || rk == Kind::set;
        std::vector<TSNode> items = syntax::namedChildren(operands[1]);
        bool splat = t.display && std::any_of(items.begin(), items.end(),
                                              [](TSNode e) { return kindOf(e) == Kind::list_splat; });
        ok = !splat && bound(l) && !r.empty() && std::all_of(r.begin(), r.end(), [&](ObjId v) {
               ObjKind ok2 = st_.obj(v).kind;
               return ok2 == ObjKind::Container || ok2 == ObjKind::Arg || ok2 == ObjKind::Global;
             });
      }
      if (ok) {
        t.op = op;
        t.left = std::move(l);
        t.right = std::move(r);
        bindable = true;
      }
    }
  }
  terms[static_cast<size_t>(at)] = std::move(t);
  return at;
}

void Interp::addTest(const std::string& kind, const ValueSet& subject, const ValueSet& what, bool negated,
                     std::vector<Region>& out) {
  Region r;
  r.kind = kind;
  r.subject = subject;
  r.negated = negated;
  ValueSet flat;
  st_.flatten(what, flat);
  for (ObjId w : flat) {
    const Obj& o = st_.obj(w);
    if (o.kind == ObjKind::Ref || o.kind == ObjKind::Class || o.kind == ObjKind::Literal) r.names.push_back(o.name);
  }
  if (!r.subject.empty() && !r.names.empty()) out.push_back(std::move(r));
}

void Interp::guardsOf(TSNode cond, bool negated, std::vector<Region>& out, bool conditions) {
  // Conditions nest as deep as the source; an explicit stack keeps C++ recursion flat.
  std::vector<std::pair<TSNode, bool>> todo{{cond, negated}};
  while (!todo.empty()) {
    auto [c, neg] = todo.back();
    todo.pop_back();
    if (ts_node_is_null(c)) continue;
    switch (kindOf(c)) {
      case Kind::parenthesized_expression:
        if (ts_node_named_child_count(c) == 1) todo.emplace_back(ts_node_named_child(c, 0), neg);
        break;
      case Kind::not_operator: todo.emplace_back(syntax::field(c, "argument"), !neg); break;
      case Kind::boolean_operator:
        // `a and b` holds both in its true arm; `a or b` holds neither negated in its false arm.
        if ((text(syntax::field(c, "operator")) == "and") != neg) {
          todo.emplace_back(syntax::field(c, "left"), neg);
          todo.emplace_back(syntax::field(c, "right"), neg);
        } else if (conditions) {
          addCondition(c, neg, out);  // `a or b`, `not (a and b)`: one condition of its parts
        }
        break;
      case Kind::comparison_operator:
        if (conditions) addCondition(c, neg, out);
        if (conditions) addUndecided(c, neg, out);
        break;
      case Kind::call: {
        TSNode fn = syntax::field(c, "function");
        std::string f = kindOf(fn) == Kind::identifier ? text(fn) : std::string();
        if (f != "isinstance" && f != "hasattr") {
          if (conditions) addUndecided(c, neg, out);
          break;
        }
        std::vector<TSNode> args;
        for (TSNode a : syntax::namedChildren(syntax::field(c, "arguments")))
          if (kindOf(a) != Kind::comment) args.push_back(a);
        if (args.size() != 2 || hasCall(args[0]) || hasCall(args[1]) || kindOf(args[0]) == Kind::keyword_argument ||
            kindOf(args[1]) == Kind::keyword_argument)
          break;
        addTest(f, eval(args[0]), eval(args[1]), neg, out);
        break;
      }
      case Kind::identifier:
        for (ObjId o : lookupName(text(c))) {
          const Obj& ob = st_.obj(o);
          if (ob.hasTag("builtin_test") && ob.inputs().size() == 2) {
            ValueSet subject = ob.inputs()[0], what = ob.inputs()[1];
            addTest(ob.name, subject, what, neg, out);
          }
        }
        addTruthTest(c, neg, out);
        if (conditions) addUndecided(c, neg, out);
        break;
      case Kind::attribute:
        addTruthTest(c, neg, out);
        if (conditions) addUndecided(c, neg, out);
        break;
      default: break;
    }
  }
}

ValueSet Interp::conditionOperand(TSNode n) {
  while (!ts_node_is_null(n) && kindOf(n) == Kind::parenthesized_expression && ts_node_named_child_count(n) == 1)
    n = ts_node_named_child(n, 0);
  if (ts_node_is_null(n)) return {};
  if (kindOf(n) == Kind::call) {
    auto it = conditionCalls_.find(n.id);
    return it == conditionCalls_.end() ? ValueSet{} : it->second;
  }
  return hasCall(n) ? ValueSet{} : eval(n);
}

void Interp::addUndecided(TSNode cond, bool negated, std::vector<Region>& out) {
  auto oneLine = [&](TSNode node) {
    std::string written;
    for (char ch : text(node)) {
      bool space = ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\\';
      if (!space) written += ch;
      else if (!written.empty() && written.back() != ' ' && written.back() != '(' && written.back() != '[')
        written += ' ';
    }
    while (!written.empty() && written.back() == ' ') written.pop_back();
    return written;
  };
  Region r;
  r.kind = "condition";
  r.negated = negated;
  if (kindOf(cond) == Kind::comparison_operator) {
    std::vector<TSNode> operands;
    std::vector<std::string> ops;
    uint32_t count = ts_node_child_count(cond);
    for (uint32_t i = 0; i < count; ++i) {
      TSNode c = ts_node_child(cond, i);
      if (ts_node_is_named(c)) {
        if (kindOf(c) != Kind::comment) operands.push_back(c);
      } else {
        ops.emplace_back(ts_node_type(c));
      }
    }
    if (operands.size() != 2 || ops.size() != 1) return;
    auto constant = [&](TSNode c) {
      Kind k = kindOf(c);
      if (k == Kind::unary_operator) k = kindOf(syntax::field(c, "argument"));
      return k == Kind::integer || k == Kind::float_ || k == Kind::string || k == Kind::none || k == Kind::true_ ||
             k == Kind::false_;
    };
    std::string op = ops[0];
    TSNode operand = operands[0], other = operands[1];
    if (constant(operands[0]) && !constant(operands[1])) {
      std::swap(operand, other);
      static const std::pair<const char*, const char*> kFlip[] = {{"<", ">"}, {">", "<"}, {"<=", ">="}, {">=", "<="}};
      for (const auto& [a, b] : kFlip)
        if (op == a) op = b;
    }
    if (!constant(other)) return;
    r.subject = conditionOperand(operand);
    r.names = {oneLine(cond), op, oneLine(other)};
  } else {
    r.subject = conditionOperand(cond);
    r.names = {oneLine(cond), "truth"};
  }
  if (!r.subject.empty()) out.push_back(std::move(r));
}

namespace {
thread_local int tThreadEvalDepth = 0;  // eval/execStatement frames of every Interp on this thread
struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth) : d(++depth) { ++tThreadEvalDepth; }
  ~DepthGuard() {
    --d;
    --tThreadEvalDepth;
  }
};
}  // namespace

void Interp::cutByNesting(TSNode n, bool acrossCalls) {
  uint32_t at = ts_node_start_byte(n);
  if (acrossCalls && summary_) {  // what was cut depends on where the summary was computed
    summary_->truncated = true;
    summary_->pure = false;
  }
  ses_.noteCut(Cut{Site{mod_.fileId(), {at, at}}, "",
                   acrossCalls ? "expressions, blocks and the calls between them nest more than " +
                                     std::to_string(kMaxThreadEvalDepth) + " levels deep"
                               : "expressions and blocks nest more than " + std::to_string(kMaxEvalDepth) +
                                     " levels deep"});
}

bool Interp::tooDeep(TSNode n) {
  if (evalDepth_ >= kMaxEvalDepth) {
    cutByNesting(n, false);
    return true;
  }
  if (tThreadEvalDepth >= kMaxThreadEvalDepth) {
    cutByNesting(n, true);
    return true;
  }
  return false;
}

void Interp::execStatement(TSNode st) {
  ++ses_.budget().work;
  if (tooDeep(st)) return;
  DepthGuard guard(evalDepth_);
  switch (kindOf(st)) {
    case Kind::expression_statement:
      for (TSNode c : syntax::namedChildren(st)) {
        if (kindOf(c) == Kind::assignment || kindOf(c) == Kind::augmented_assignment) execStatement(c);
        else eval(c);
      }
      break;
    case Kind::assignment: {
      TSNode right = syntax::field(st, "right");
      ValueSet value;
      if (!ts_node_is_null(right)) {
        if (kindOf(right) == Kind::assignment) {
          execStatement(right);
          value = eval(syntax::field(right, "left"));
        } else {
          value = eval(right);
        }
      }
      TSNode left = syntax::field(st, "left");
      if (!ts_node_is_null(right)) assign(left, value, originOf(right));
      break;
    }
    case Kind::augmented_assignment: {
      TSNode left = syntax::field(st, "left");
      ValueSet rhs = eval(syntax::field(st, "right"));
      std::string op = text(syntax::field(st, "operator"));
      if (op == "+=") {
        ValueSet old = eval(left);
        ObjId c = newObject(ObjKind::Container, "", originOf(st));
        st_.obj(c).containerKind = 'l';
        st_.obj(c).more().elements = {old, rhs};
        assign(left, {c}, originOf(st));
      }
      break;
    }
    case Kind::if_statement: execIf(st); break;
    case Kind::for_statement: execLoop(st, true); break;
    case Kind::while_statement: execLoop(st, false); break;
    case Kind::try_statement: execTry(st); break;
    case Kind::with_statement: execWith(st); break;
    case Kind::match_statement: execMatch(st); break;
    case Kind::function_definition:
    case Kind::class_definition:
    case Kind::decorated_definition: execDefinition(st); break;
    case Kind::return_statement: {
      if (ts_node_named_child_count(st) > 0) {
        ValueSet v = eval(ts_node_named_child(st, 0));
        addValues(frame_.returns, v);
        Event e;
        e.kind = EventKind::Return;
        e.name = "return";
        e.args = {v};
        e.origin = originOf(st);
        e.point = newPoint();
        st_.events.push_back(std::move(e));
      }
      // The arms this return leaves, up to the function's own (Arm::returns).
      for (int a = frame_.arm; a >= 0 && a != frame_.baseArm; a = st_.arms[static_cast<size_t>(a)].parent)
        st_.arms[static_cast<size_t>(a)].returns = true;
      frame_.reachable = false;
      break;
    }
    case Kind::raise_statement:
      for (TSNode c : syntax::namedChildren(st)) eval(c);
      frame_.reachable = false;
      break;
    case Kind::import_statement:
    case Kind::import_from_statement: execImport(st); break;
    case Kind::block:
    case Kind::Error:
      for (TSNode c : syntax::namedChildren(st)) {
        if (!frame_.reachable) break;
        execStatement(c);
        pendingRest_.clear();  // an early-return guard covers only the rest of a real block
      }
      break;
    case Kind::comment:
    case Kind::pass_statement:
    case Kind::break_statement:
    case Kind::continue_statement:
    case Kind::global_statement:
    case Kind::nonlocal_statement:
    case Kind::future_import_statement: break;
    default:
      for (TSNode c : syntax::namedChildren(st)) eval(c);
      break;
  }
}

void Interp::execImport(TSNode n) {
  std::map<std::string, std::string, std::less<>> bound;
  mod_.collectImport(n, bound);
  for (const auto& [name, qual] : bound) setVar(name, ValueSet{ref(qual)});
}

void Interp::execDefinition(TSNode n) {
  TSNode def = kindOf(n) == Kind::decorated_definition ? syntax::field(n, "definition") : n;
  uint32_t start = ts_node_start_byte(def);
  std::string name = text(syntax::field(def, "name"));
  if (kindOf(def) == Kind::function_definition) {
    for (const auto& f : mod_.functions()) {
      if (f->span.begin != start) continue;
      ObjId id;
      if (auto d = st_.memo().defs.find(f.get()); d != st_.memo().defs.end()) id = d->second;
      else {
        id = newObject(ObjKind::Function, f->qualname, originOf(def));
        st_.obj(id).function = f.get();
        st_.memo().defs[f.get()] = id;
      }
      setVar(name, ValueSet{id});
      return;
    }
  } else if (kindOf(def) == Kind::class_definition) {
    for (const auto& c : mod_.classes()) {
      if (c->span.begin != start) continue;
      ObjId id;
      if (auto d = st_.memo().defs.find(c.get()); d != st_.memo().defs.end()) id = d->second;
      else {
        id = newObject(ObjKind::Class, c->qualname, originOf(def));
        st_.obj(id).cls = c.get();
        st_.memo().defs[c.get()] = id;
      }
      setVar(name, ValueSet{id});
      return;
    }
  }
}

void Interp::execIf(TSNode n) {
  int construct = st_.constructs++;
  int outerArm = frame_.arm;
  std::vector<Changes> outs;  // of the arms that reach the end; each starts after the first condition
  bool hasElse = false;
  std::vector<TSNode> earlier;  // the conditions of the arms before this one (false in this arm)
  bool firstTerminates = false;
  // `if flag:` / `if not flag:` with a flag a call site may make constant: its arm, and a plain
  // `else`, record the flag (Arm::test).
  TSNode flagNode = syntax::field(n, "condition");
  bool flagNegated = false;
  for (;;) {
    Kind k = kindOf(flagNode);
    if (k == Kind::parenthesized_expression && ts_node_named_child_count(flagNode) == 1)
      flagNode = ts_node_named_child(flagNode, 0);
    else if (k == Kind::not_operator)
      flagNode = syntax::field(flagNode, "argument"), flagNegated = !flagNegated;
    else
      break;
  }
  ValueSet flag;
  if (kindOf(flagNode) == Kind::identifier || kindOf(flagNode) == Kind::attribute) {
    flag = eval(flagNode);
    if (!truthTestable(st_, flag)) flag.clear();
  }
  std::vector<TSNode> alternatives = syntax::fieldChildren(n, "alternative");
  bool plainElse = alternatives.size() == 1 && kindOf(alternatives[0]) != Kind::elif_clause;
  auto runArm = [&](int index, TSNode cond, TSNode body) {
    frame_.arm = outerArm;
    frame_.arm = openArm(construct, index, false);
    if (!flag.empty() && (index == 0 || plainElse)) {
      st_.arms[static_cast<size_t>(frame_.arm)].test = flag;
      st_.arms[static_cast<size_t>(frame_.arm)].testNegated = flagNegated != (index != 0);
    }
    beginArm();
    frame_.reachable = true;
    if (!ts_node_is_null(cond)) {
      ++recordConditionCalls_;
      eval(cond);
      --recordConditionCalls_;
    }
    TSNode own = index == 0 ? syntax::field(n, "condition") : cond;
    std::vector<Region> guards;
    guardsOf(own, false, guards);
    // A long elif chain (a dispatch on a name) would give each arm a condition per earlier arm: only
    // the nearest kConditionsPerArm are read as conditions; plain flags and tests are all kept.
    for (size_t i = 0; i < earlier.size(); ++i)
      guardsOf(earlier[i], true, guards, earlier.size() - i <= kConditionsPerArm);
    for (Region& g : guards) g.begin = static_cast<PointId>(st_.points.size());
    execBlock(body);
    closeRegions(guards);
    Changes changes = endArm();
    if (frame_.reachable) outs.push_back(std::move(changes));
    else st_.arms[static_cast<size_t>(frame_.arm)].terminates = true;
    if (index == 0) firstTerminates = !frame_.reachable;
    earlier.push_back(own);
  };
  ++recordConditionCalls_;
  eval(syntax::field(n, "condition"));
  --recordConditionCalls_;
  runArm(0, TSNode{}, syntax::field(n, "consequence"));
  int index = 1;
  for (TSNode alt : syntax::fieldChildren(n, "alternative")) {
    if (kindOf(alt) == Kind::elif_clause) {
      runArm(index++, syntax::field(alt, "condition"), syntax::field(alt, "consequence"));
    } else {
      hasElse = true;
      runArm(index++, TSNode{}, syntax::field(alt, "body"));
    }
  }
  if (!hasElse) outs.emplace_back();  // no arm taken: the environment as it was
  frame_.arm = outerArm;
  frame_.reachable = !outs.empty();
  if (outs.empty()) clearEnv();
  else apply(merged(outs));
  // `if not isinstance(m, FSDPModule): return` -- what follows runs only when the test holds.
  if (index == 1 && firstTerminates) {
    pendingRest_.clear();
    guardsOf(syntax::field(n, "condition"), true, pendingRest_);  // execBlock sets where they begin
  }
}

void Interp::execLoop(TSNode n, bool isFor) {
  int construct = st_.constructs++;
  int outerArm = frame_.arm;
  ValueSet iter;
  if (isFor) iter = eval(syntax::field(n, "right"));
  beginArm();
  frame_.arm = openArm(construct, 0, true);
  if (isFor) {
    ValueSet elems;
    for (ObjId v : iter) {
      const Obj& o = st_.obj(v);
      if (o.kind == ObjKind::Container) {
        for (const auto& e : o.elements()) addValues(elems, e);
      } else {
        addValue(elems, derive(v, "[*]"));
      }
    }
    assign(syntax::field(n, "left"), elems, originOf(syntax::field(n, "right")));
  } else {
    eval(syntax::field(n, "condition"));
  }
  std::vector<Region> iterations;
  if (isFor) openIterationRegions(syntax::field(n, "left"), iterations);
  size_t regionsBefore = st_.regions.size(), armsBefore = st_.arms.size();
  execBlock(syntax::field(n, "body"));
  closeRegions(iterations);
  Changes body = endArm();
  widenLoopTests(body, regionsBefore, armsBefore);
  std::vector<Changes> outs(1);  // the loop not entered
  if (frame_.reachable) outs.push_back(std::move(body));
  frame_.arm = outerArm;
  frame_.reachable = true;
  apply(merged(outs));
  TSNode alt = syntax::field(n, "alternative");
  if (!ts_node_is_null(alt)) execBlock(syntax::field(alt, "body"));
}

void Interp::widenLoopTests(const Changes& body, size_t regionsBefore, size_t armsBefore) {
  // The body ran once, with the values from before the loop; a later pass sees what the body
  // assigned. A test in the body that read a value the body then replaced may see the new one too.
  if (body.empty()) return;
  std::vector<std::pair<const ValueSet*, const std::optional<ValueSet>*>> replaced;
  for (const auto& [key, now] : body) {
    auto it = frame_.env.find(key);
    if (it != frame_.env.end() && !it->second.empty()) replaced.emplace_back(&it->second, &now);
  }
  auto widen = [&](ValueSet& vs) {
    if (vs.empty()) return;
    for (const auto& [old, now] : replaced) {
      bool read = std::any_of(old->begin(), old->end(),
                              [&](ObjId v) { return std::binary_search(vs.begin(), vs.end(), v); });
      if (!read) continue;
      if (!*now || (*now)->empty()) {  // unbound or unknown after the body
        vs.clear();
        return;
      }
      addValues(vs, **now);
    }
  };
  for (size_t i = regionsBefore; i < st_.regions.size(); ++i) {
    Region& r = st_.regions[i];
    if (r.kind != "truth") continue;
    widen(r.subject);
    for (Term& t : r.terms) {
      widen(t.left);
      widen(t.right);
    }
  }
  for (size_t i = armsBefore; i < st_.arms.size(); ++i) widen(st_.arms[i].test);
}

void Interp::execTry(TSNode n) {
  int bodyConstruct = st_.constructs++;
  int handlerConstruct = st_.constructs++;
  int outerArm = frame_.arm;
  beginArm();
  frame_.arm = openArm(bodyConstruct, 0, false);
  execBlock(syntax::field(n, "body"));
  bool bodyReachable = frame_.reachable;
  Changes afterBody = endArm();
  frame_.arm = outerArm;
  // A handler starts where the body started or where it ended.
  Changes handlerStart = merged({Changes{}, afterBody});
  std::vector<Changes> outs;
  TSNode elseClause{}, finallyClause{};
  int index = 1;
  for (TSNode c : syntax::namedChildren(n)) {
    Kind k = kindOf(c);
    if (k == Kind::except_clause) {
      frame_.arm = openArm(handlerConstruct, index++, false);
      beginArm();
      apply(handlerStart);
      frame_.reachable = true;
      for (TSNode cc : syntax::namedChildren(c)) {
        if (kindOf(cc) == Kind::block) execBlock(cc);
        else if (kindOf(cc) != Kind::comment) eval(cc);
      }
      Changes changes = endArm();
      if (frame_.reachable) outs.push_back(std::move(changes));
      else st_.arms[static_cast<size_t>(frame_.arm)].terminates = true;
      frame_.arm = outerArm;
    } else if (k == Kind::else_clause) {
      elseClause = c;
    } else if (k == Kind::finally_clause) {
      finallyClause = c;
    }
  }
  if (bodyReachable) {
    beginArm();
    apply(afterBody);
    frame_.reachable = true;
    if (!ts_node_is_null(elseClause)) {
      frame_.arm = openArm(handlerConstruct, 0, false);
      execBlock(syntax::field(elseClause, "body"));
      frame_.arm = outerArm;
    }
    Changes changes = endArm();
    if (frame_.reachable) outs.push_back(std::move(changes));
  }
  frame_.reachable = !outs.empty();
  apply(outs.empty() ? handlerStart : merged(outs));
  if (!ts_node_is_null(finallyClause)) {
    bool reach = frame_.reachable;
    frame_.reachable = true;
    for (TSNode cc : syntax::namedChildren(finallyClause))
      if (kindOf(cc) == Kind::block) execBlock(cc);
    frame_.reachable = frame_.reachable && reach;
  }
}

void Interp::contextNames(TSNode call, std::vector<std::string>& names) {
  if (kindOf(call) != Kind::call) return;
  TSNode fn = syntax::field(call, "function");
  if (hasCall(fn)) return;
  for (ObjId callee : eval(fn))
    if (st_.obj(callee).kind == ObjKind::Ref) names.push_back(st_.obj(callee).name);
  if (kindOf(fn) == Kind::attribute) names.push_back("." + text(syntax::field(fn, "attribute")));
}

void Interp::execBody(const FunctionDef& def) {
  // A decorator that is a context manager's call (`@torch.inference_mode()`, `@torch.no_grad()`) runs
  // each call of the function inside that context: a "with" region over the body, as for `with`.
  Region with;
  with.kind = "with";
  TSNode parent = ts_node_parent(def.node);
  if (!ts_node_is_null(parent) && kindOf(parent) == Kind::decorated_definition)
    for (TSNode d : syntax::namedChildren(parent))
      if (kindOf(d) == Kind::decorator && ts_node_named_child_count(d) > 0)
        contextNames(ts_node_named_child(d, 0), with.names);
  with.begin = static_cast<PointId>(st_.points.size());
  execBlock(syntax::field(def.node, "body"));
  if (!with.names.empty()) {
    std::vector<Region> regions{std::move(with)};
    closeRegions(regions);
  }
}

void Interp::execWith(TSNode n) {
  Region with;
  with.kind = "with";
  ValueSet entered;  // the context managers, for calls in the body (CallModel)
  for (TSNode c : syntax::namedChildren(n)) {
    if (kindOf(c) != Kind::with_clause) continue;
    for (TSNode item : syntax::namedChildren(c)) {
      if (kindOf(item) != Kind::with_item) continue;
      TSNode value = syntax::field(item, "value");
      if (kindOf(value) == Kind::as_pattern) {
        ValueSet v = eval(ts_node_named_child(value, 0));
        addValues(entered, v);
        TSNode alias = syntax::field(value, "alias");
        if (!ts_node_is_null(alias)) {
          TSNode target = ts_node_named_child_count(alias) > 0 ? ts_node_named_child(alias, 0) : alias;
          assign(target, v, originOf(value));
        }
      } else {
        addValues(entered, eval(value));
      }
      // The context manager's callee (`pytest.raises`, `self.assertRaises`), for rules that
      // treat the body specially.
      contextNames(kindOf(value) == Kind::as_pattern ? ts_node_named_child(value, 0) : value, with.names);
    }
  }
  with.begin = static_cast<PointId>(st_.points.size());
  contexts_.push_back(std::move(entered));
  execBlock(syntax::field(n, "body"));
  contexts_.pop_back();
  if (!with.names.empty()) {
    std::vector<Region> regions{std::move(with)};
    closeRegions(regions);
  }
}

void Interp::execMatch(TSNode n) {
  eval(syntax::field(n, "subject"));
  int construct = st_.constructs++;
  int outerArm = frame_.arm;
  std::vector<Changes> outs(1);  // no case matched
  int index = 0;
  TSNode body = syntax::field(n, "body");
  for (TSNode c : syntax::namedChildren(body)) {
    if (kindOf(c) != Kind::case_clause) continue;
    frame_.arm = outerArm;
    frame_.arm = openArm(construct, index++, false);
    beginArm();
    frame_.reachable = true;
    TSNode guard = syntax::field(c, "guard");
    if (!ts_node_is_null(guard)) eval(guard);
    execBlock(syntax::field(c, "consequence"));
    Changes changes = endArm();
    if (frame_.reachable) outs.push_back(std::move(changes));
    else st_.arms[static_cast<size_t>(frame_.arm)].terminates = true;
  }
  frame_.arm = outerArm;
  frame_.reachable = true;
  apply(merged(outs));
}

// ---------------------------------------------------------------- the environment across branches

namespace {
using EnvMap = std::unordered_map<std::string, ValueSet>;
// Binds `key` (at `it`, its entry or end()) to `value`, or unbinds it when there is none.
void put(EnvMap& env, EnvMap::iterator it, const std::string& key, std::optional<ValueSet> value) {
  if (!value) {
    if (it != env.end()) env.erase(it);
  } else if (it != env.end()) {
    it->second = std::move(*value);
  } else {
    env.emplace(key, std::move(*value));
  }
}
}  // namespace

void Interp::setVar(const std::string& key, std::optional<ValueSet> value) {
  auto it = frame_.env.find(key);
  if (!logs_.empty() && logs_.back().keys.insert(key).second)
    logs_.back().before.emplace_back(key, it == frame_.env.end() ? std::nullopt : std::optional<ValueSet>(it->second));
  put(frame_.env, it, key, std::move(value));
}

void Interp::beginArm() { logs_.emplace_back(); }

Interp::Changes Interp::endArm() {
  EnvLog log = std::move(logs_.back());
  logs_.pop_back();
  Changes changes;
  for (auto& [key, old] : log.before) {
    auto it = frame_.env.find(key);
    std::optional<ValueSet> now = it == frame_.env.end() ? std::nullopt : std::optional<ValueSet>(it->second);
    if (now == old) continue;
    changes.emplace_back(key, std::move(now));
    put(frame_.env, it, key, std::move(old));  // undone: the outer arm's log never saw this write
  }
  return changes;
}

Interp::Changes Interp::merged(const std::vector<Changes>& arms) const {
  std::unordered_map<std::string, std::vector<const std::optional<ValueSet>*>> byKey;
  std::vector<const std::string*> order;  // first-change order, for a deterministic result
  for (size_t a = 0; a < arms.size(); ++a)
    for (const auto& [key, value] : arms[a]) {
      auto [it, inserted] = byKey.try_emplace(key, arms.size(), nullptr);
      if (inserted) order.push_back(&it->first);
      it->second[a] = &value;
    }
  Changes out;
  for (const std::string* key : order) {
    const auto& values = byKey.find(*key)->second;
    auto cur = frame_.env.find(*key);
    std::optional<ValueSet> joined;
    for (const std::optional<ValueSet>* v : values) {
      const ValueSet* vs = v ? (*v ? &**v : nullptr) : (cur == frame_.env.end() ? nullptr : &cur->second);
      if (!vs) continue;
      if (!joined) joined.emplace();
      addValues(*joined, *vs);
    }
    out.emplace_back(*key, std::move(joined));
  }
  return out;
}

void Interp::apply(const Changes& changes) {
  for (const auto& [key, value] : changes) setVar(key, value);
}

void Interp::clearEnv() {
  std::vector<std::string> keys;
  for (const auto& [key, value] : frame_.env) keys.push_back(key);
  for (const auto& key : keys) setVar(key, std::nullopt);
}

std::string Interp::subscriptEdge(TSNode sub) {
  if (ts_node_is_null(sub)) return "[*]";
  Kind k = kindOf(sub);
  if (k == Kind::integer) return "[" + text(sub) + "]";
  if (k == Kind::unary_operator && kindOf(syntax::field(sub, "argument")) == Kind::integer) return "[" + text(sub) + "]";
  if (k == Kind::string) {
    if (auto lit = literal(eval(sub))) return "['" + *lit + "']";
  }
  return "[*]";
}

void Interp::setAttribute(ObjId obj, const std::string& attr, const ValueSet& value, const Origin& origin) {
  setVar(envKeyFor(obj, attr), value);
  st_.noteOwnership(obj, attr, value);
  recordSetAttr(obj, attr, value, origin);
}

void Interp::recordSetAttr(ObjId obj, const std::string& attr, const ValueSet& value, const Origin& origin) {
  Event e;
  e.kind = EventKind::SetAttr;
  e.name = attr;
  e.target = obj;
  e.args = {value};
  e.origin = origin;
  e.point = newPoint();
  st_.events.push_back(std::move(e));
}

void Interp::assign(TSNode target, const ValueSet& value, const Origin& origin) {
  if (ts_node_is_null(target)) return;
  switch (kindOf(target)) {
    case Kind::identifier:
      setVar(text(target), value);
      for (ObjId v : value)
        if (st_.obj(v).kind == ObjKind::Instance && st_.obj(v).label.empty()) st_.obj(v).label = text(target);
      break;
    case Kind::attribute: {
      std::string attr = text(syntax::field(target, "attribute"));
      for (ObjId o : eval(syntax::field(target, "object"))) {
        if (st_.obj(o).kind == ObjKind::Ref) continue;
        for (ObjId v : value)
          if (st_.obj(v).kind == ObjKind::Instance && st_.obj(v).label.empty()) st_.obj(v).label = text(target);
        setAttribute(o, attr, value, originOf(target));
      }
      break;
    }
    case Kind::subscript: {
      TSNode sub = syntax::field(target, "subscript");
      std::string key = subscriptEdge(sub);
      for (ObjId o : eval(syntax::field(target, "value"))) {
        setVar("#" + std::to_string(o) + key, value);
        Obj& dict = st_.obj(o);
        if (dict.kind == ObjKind::Container && dict.containerKind == 'd' && key.size() > 4 && key[1] == '\'') {
          std::string k = key.substr(2, key.size() - 4);  // "['name']" -> name
          ObjMore& m = dict.more();
          auto it = std::find(m.keys.begin(), m.keys.end(), k);
          if (it != m.keys.end()) {
            m.elements[static_cast<size_t>(it - m.keys.begin())] = value;
          } else {
            m.keys.push_back(k);
            m.elements.push_back(value);
          }
        }
        recordSetAttr(o, key, value, originOf(target));
      }
      break;
    }
    case Kind::pattern_list:
    case Kind::tuple_pattern:
    case Kind::list_pattern:
    case Kind::tuple:
    case Kind::list:
    case Kind::expression_list: {
      std::vector<TSNode> targets = syntax::namedChildren(target);
      targets.erase(std::remove_if(targets.begin(), targets.end(),
                                   [](TSNode t) { return kindOf(t) == Kind::comment; }),
                    targets.end());
      const Obj* single = value.size() == 1 ? &st_.obj(value[0]) : nullptr;
      bool spread = single && single->kind == ObjKind::Container && single->elements().size() == targets.size();
      for (size_t i = 0; i < targets.size(); ++i) {
        if (spread) {
          ValueSet ev = st_.obj(value[0]).elements()[i];
          assign(targets[i], ev, origin);
        } else {
          ValueSet ev;
          for (ObjId v : value) addValue(ev, derive(v, "[" + std::to_string(i) + "]"));
          assign(targets[i], ev, origin);
        }
      }
      break;
    }
    case Kind::parenthesized_expression:
      if (ts_node_named_child_count(target) > 0) assign(ts_node_named_child(target, 0), value, origin);
      break;
    case Kind::list_splat_pattern:
      if (ts_node_named_child_count(target) > 0) assign(ts_node_named_child(target, 0), {}, origin);
      break;
    default: break;
  }
}

// ---------------------------------------------------------------- expressions

ValueSet Interp::eval(TSNode n) {
  if (ts_node_is_null(n)) return {};
  // Pathologically deep expressions (`1 + 1 + ... + 1`, thousands of parentheses)
  // are not followed past this depth: unknown value, no crash.
  if (tooDeep(n)) return {};
  DepthGuard guard(evalDepth_);
  switch (kindOf(n)) {
    case Kind::identifier: return lookupName(text(n));
    case Kind::attribute: {
      std::string attr = text(syntax::field(n, "attribute"));
      ValueSet out;
      for (ObjId v : eval(syntax::field(n, "object"))) addValues(out, getAttr(v, attr));
      return out;
    }
    case Kind::call: {
      if (recordConditionCalls_ == 0) return evalCall(n);
      ValueSet v = evalCall(n);
      conditionCalls_[n.id] = v;
      return v;
    }
    case Kind::subscript: {
      ValueSet base = eval(syntax::field(n, "value"));
      TSNode sub = syntax::field(n, "subscript");
      ValueSet subv = eval(sub);
      std::optional<std::string> lit = literal(subv);
      std::string edge = subscriptEdge(sub);
      bool literalKey = edge != "[*]";
      ValueSet out;
      for (ObjId v : base) {
        const Obj& o = st_.obj(v);
        if (o.kind == ObjKind::Container && literalKey) {
          if (o.containerKind == 'd') {
            for (size_t i = 0; i < o.keys().size(); ++i)
              if (o.keys()[i] == *lit) addValues(out, o.elements()[i]);
            continue;
          }
          int idx = 0;
          auto [p, ec] = std::from_chars(lit->data(), lit->data() + lit->size(), idx);
          if (ec == std::errc() && idx >= 0 && static_cast<size_t>(idx) < o.elements().size()) {
            addValues(out, o.elements()[static_cast<size_t>(idx)]);
            continue;
          }
        }
        if (o.kind == ObjKind::Container && !literalKey) {
          for (const auto& e : o.elements()) addValues(out, e);
          continue;
        }
        auto it = frame_.env.find("#" + std::to_string(v) + edge);
        if (it != frame_.env.end()) addValues(out, it->second);
        else addValue(out, derive(v, edge));
      }
      return out;
    }
    case Kind::parenthesized_expression:
    case Kind::await: {
      ValueSet out;
      for (TSNode c : syntax::namedChildren(n)) out = eval(c);
      return out;
    }
    case Kind::list:
    case Kind::tuple:
    case Kind::set:
    case Kind::expression_list:
    case Kind::pattern_list: {
      ObjId c = kNoObj;
      std::vector<ValueSet> elems;
      for (TSNode e : syntax::namedChildren(n)) {
        Kind ek = kindOf(e);
        if (ek == Kind::comment) continue;
        if (ek == Kind::list_splat) elems.push_back(eval(ts_node_named_child(e, 0)));
        else elems.push_back(eval(e));
      }
      c = newObject(ObjKind::Container, "", originOf(n));
      Kind k = kindOf(n);
      st_.obj(c).containerKind = k == Kind::list ? 'l' : k == Kind::set ? 's' : 't';
      st_.obj(c).more().elements = std::move(elems);
      return {c};
    }
    case Kind::dictionary: {
      std::vector<ValueSet> elems;
      std::vector<std::string> keys;
      for (TSNode e : syntax::namedChildren(n)) {
        if (kindOf(e) == Kind::pair) {
          ValueSet kv = eval(syntax::field(e, "key"));
          keys.push_back(literal(kv).value_or(""));
          elems.push_back(eval(syntax::field(e, "value")));
        } else if (kindOf(e) == Kind::dictionary_splat) {
          keys.emplace_back("**");
          elems.push_back(eval(ts_node_named_child(e, 0)));
        }
      }
      ObjId c = newObject(ObjKind::Container, "", originOf(n));
      st_.obj(c).containerKind = 'd';
      st_.obj(c).more().elements = std::move(elems);
      st_.obj(c).more().keys = std::move(keys);
      return {c};
    }
    case Kind::string:
    case Kind::concatenated_string: {
      std::string value;
      // Read exactly: no interpolation, no escape, no prefix that changes the value (f, b, r).
      bool exact = true;
      std::function<void(TSNode)> collect = [&](TSNode s) {
        uint32_t count = ts_node_child_count(s);
        for (uint32_t i = 0; i < count; ++i) {
          TSNode c = ts_node_child(s, i);
          std::string_view type = ts_node_type(c);
          if (kindOf(c) == Kind::string_content) {
            std::string t = text(c);
            if (t.find('\\') != std::string::npos) exact = false;
            value += t;
          } else if (kindOf(c) == Kind::string) {
            collect(c);
          } else if (type == "interpolation") {
            exact = false;
          } else if (type == "string_start") {
            for (char ch : text(c))
              if (ch != '"' && ch != '\'' && ch != 'u' && ch != 'U') exact = false;
          }
        }
      };
      collect(n);
      return {stringConstant(value, exact, originOf(n))};
    }
    case Kind::integer:
    case Kind::float_:
    case Kind::true_:
    case Kind::false_:
    case Kind::none: {
      std::string value = text(n);
      auto it = st_.memo().literals.find(value);
      if (it != st_.memo().literals.end()) return {it->second};
      ObjId id = newObject(ObjKind::Literal, value, originOf(n));
      st_.memo().literals[value] = id;
      return {id};
    }
    case Kind::unary_operator: {
      ValueSet v = eval(syntax::field(n, "argument"));
      if (auto lit = literal(v); lit && text(syntax::field(n, "operator")) == "-") {
        std::string value = "-" + *lit;
        auto it = st_.memo().literals.find(value);
        if (it != st_.memo().literals.end()) return {it->second};
        ObjId id = newObject(ObjKind::Literal, value, originOf(n));
        st_.memo().literals[value] = id;
        return {id};
      }
      return {};
    }
    case Kind::list_comprehension:
    case Kind::generator_expression:
    case Kind::set_comprehension:
    case Kind::dictionary_comprehension: return evalComprehension(n);
    case Kind::binary_operator: {
      ValueSet l = eval(syntax::field(n, "left"));
      ValueSet r = eval(syntax::field(n, "right"));
      if (text(syntax::field(n, "operator")) != "+") return {};
      ObjId c = newObject(ObjKind::Container, "", originOf(n));
      st_.obj(c).containerKind = 'l';
      st_.obj(c).more().elements = {l, r};
      return {c};
    }
    case Kind::boolean_operator: {
      ValueSet out = eval(syntax::field(n, "left"));
      addValues(out, eval(syntax::field(n, "right")));
      return out;
    }
    case Kind::conditional_expression: {
      std::vector<TSNode> parts = syntax::namedChildren(n);
      ValueSet out;
      for (size_t i = 0; i < parts.size(); ++i) {
        ValueSet v = eval(parts[i]);
        if (i != 1) addValues(out, v);
      }
      return out;
    }
    case Kind::named_expression: {
      ValueSet v = eval(syntax::field(n, "value"));
      assign(syntax::field(n, "name"), v, originOf(n));
      return v;
    }
    case Kind::lambda: return {};
    default:
      for (TSNode c : syntax::namedChildren(n)) eval(c);
      return {};
  }
}

ValueSet Interp::evalComprehension(TSNode n) {
  beginArm();  // the comprehension's own scope: undone at the end
  TSNode body = syntax::field(n, "body");
  std::vector<Region> iterations;
  for (TSNode c : syntax::namedChildren(n)) {
    if (kindOf(c) == Kind::for_in_clause) {
      ValueSet iter = eval(syntax::field(c, "right"));
      ValueSet elems;
      for (ObjId v : iter) {
        const Obj& o = st_.obj(v);
        if (o.kind == ObjKind::Container) {
          for (const auto& e : o.elements()) addValues(elems, e);
        } else {
          addValue(elems, derive(v, "[*]"));
        }
      }
      assign(syntax::field(c, "left"), elems, originOf(c));
      openIterationRegions(syntax::field(c, "left"), iterations);
    } else if (kindOf(c) == Kind::if_clause) {
      for (TSNode cc : syntax::namedChildren(c)) eval(cc);
    }
  }
  ValueSet value;
  if (kindOf(n) == Kind::dictionary_comprehension && kindOf(body) == Kind::pair) {
    eval(syntax::field(body, "key"));
    value = eval(syntax::field(body, "value"));
  } else {
    value = eval(body);
  }
  closeRegions(iterations);
  endArm();
  ObjId c = newObject(ObjKind::Container, "", originOf(n));
  st_.obj(c).containerKind = kindOf(n) == Kind::dictionary_comprehension ? 'd' : 'l';
  st_.obj(c).more().elements = {value};
  if (st_.obj(c).containerKind == 'd') st_.obj(c).more().keys = {""};
  return {c};
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

ValueSet Interp::optionDefaults(const ValueSet& vs, const Origin& origin) {
  // The command line or a config loader may set it: a constant a rule may read as the default
  // configuration, never one that decides which code runs (Store::truthOf, equalityOf and isNone do
  // not read it).
  ValueSet marked;
  for (ObjId v : vs) {
    if (st_.obj(v).kind != ObjKind::Literal) {
      addValue(marked, v);
      continue;
    }
    std::string name = st_.obj(v).name;
    auto tags = st_.obj(v).tags();  // copied: newObject may move the objects
    ObjId d = newObject(ObjKind::Literal, name, origin);
    for (const auto& [k, t] : tags) st_.obj(d).setTag(k, t);
    st_.obj(d).setTag("option_default", "1");
    addValue(marked, d);
  }
  return marked;
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

bool Interp::argparseCall(ObjId parser, const std::string& method, const CallSite& site, ValueSet& result) {
  // `argparse.ArgumentParser`: `add_argument` records an option's default (`default=`, or the
  // `store_true` / `store_false` action's), and `parse_args()` gives an object whose attributes hold
  // them: the configuration a run without that option on its command line gets.
  if (method == "add_argument_group" || method == "add_mutually_exclusive_group") {
    addValue(result, parser);
    return true;
  }
  if (method == "add_argument") {
    std::string dest;
    for (const ValueSet& a : site.args) {
      auto flag = literal(a);
      if (!flag || flag->empty()) continue;
      std::string f = *flag;
      if (f.rfind("--", 0) == 0) {
        dest = f.substr(2);
        break;
      }
      if (dest.empty()) dest = f[0] == '-' ? f.substr(1) : f;
    }
    std::optional<ValueSet> value;
    for (const auto& [k, v] : site.kwargs) {
      if (k == "dest") {
        if (auto d = literal(v)) dest = *d;
      } else if (k == "default") {
        value = v;
      } else if (k == "action" && !value) {
        auto act = literal(v);
        if (act && *act == "store_true") value = ValueSet{constant("False")};
        else if (act && *act == "store_false") value = ValueSet{constant("True")};
      }
    }
    std::replace(dest.begin(), dest.end(), '-', '_');
    if (dest.empty() || !value) return true;
    value = optionDefaults(*value, site.origin);
    st_.obj(parser).more().keys.push_back(dest);
    st_.obj(parser).more().elements.push_back(*value);
    return true;
  }
  if (method == "parse_args" || method == "parse_known_args") {
    ObjId args = newObject(ObjKind::Instance, "argparse.Namespace", site.origin);
    const Obj& po = st_.obj(parser);
    for (size_t i = 0; i < po.keys().size() && i < po.elements().size(); ++i)
      setVar(envKeyFor(args, po.keys()[i]), po.elements()[i]);
    if (method == "parse_known_args") {
      ObjId pair = newObject(ObjKind::Container, "", site.origin);
      st_.obj(pair).containerKind = 't';
      st_.obj(pair).more().elements = {ValueSet{args}, ValueSet{}};
      addValue(result, pair);
    } else {
      addValue(result, args);
    }
    return true;
  }
  return false;
}

bool Interp::isConfigMapping(ObjId o) const {
  const Obj& ob = st_.obj(o);
  return ob.kind == ObjKind::Container && ob.containerKind == 'd' && ob.hasTag("config_file");
}

std::optional<ValueSet> Interp::configKey(ObjId mapping, std::string_view key) const {
  const Obj& ob = st_.obj(mapping);
  std::optional<ValueSet> v;
  for (size_t i = 0; i < ob.keys().size() && i < ob.elements().size(); ++i) {
    if (ob.keys()[i].empty() || ob.keys()[i] == "**") return std::nullopt;  // `update(...)`: any key may change
    if (ob.keys()[i] == key) v = ob.elements()[i];
  }
  return v;
}

std::optional<ObjId> Interp::configValue(const config::YNode& n, bool omega, const std::string& source,
                                         const Origin& origin, size_t& budget) {
  if (budget == 0) return std::nullopt;
  --budget;
  using YKind = config::YNode::Kind;
  auto tagged = [&](ObjId lit) {
    // The file's value unless the command line (`OmegaConf.from_cli`, an argparse override) sets
    // it: read like an argparse default, never deciding dead code.
    ObjId v = optionDefaults(ValueSet{lit}, origin)[0];
    st_.obj(v).setTag("config_file", source);
    return v;
  };
  if (!n.tag.empty() && n.tag != "!!str" && n.tag != "tag:yaml.org,2002:str" &&
      !(n.isMap() && (n.tag == "!!map" || n.tag == "tag:yaml.org,2002:map")))
    return std::nullopt;  // a constructor the engine does not run
  switch (n.kind) {
    case YKind::Null: return tagged(constant("None"));
    case YKind::Scalar: {
      config::Resolved r = config::resolveYaml11(n);
      switch (r.type) {
        case config::Resolved::Type::Null: return tagged(constant("None"));
        case config::Resolved::Type::Bool: return tagged(constant(r.boolean ? "True" : "False"));
        case config::Resolved::Type::Int: return tagged(constant(std::to_string(r.integer)));
        case config::Resolved::Type::Float: return std::nullopt;
        case config::Resolved::Type::String:
          // OmegaConf's interpolations and its missing value are resolved when read: unknown here.
          if (omega && (n.value.find("${") != std::string::npos || n.value == "???")) return std::nullopt;
          return tagged(stringConstant(n.value, true, origin));
      }
      return std::nullopt;
    }
    case YKind::Map: {
      ObjId d = newObject(ObjKind::Container, "", origin);
      st_.obj(d).containerKind = 'd';
      st_.obj(d).setTag("config_file", source);
      if (omega) st_.obj(d).setTag("config_attrs", "1");  // a DictConfig: `cfg.key` reads like `cfg["key"]`
      std::map<std::string, int, std::less<>> written;
      for (const auto& entry : n.entries)
        if (entry.first.isScalar()) ++written[entry.first.value];
      for (const auto& [k, v] : n.entries) {
        // Only names: a key written twice, a merge (`<<`) or a non-string key leaves that key unknown.
        if (!k.isScalar() || !k.tag.empty() || k.value == "<<" || written[k.value] != 1) continue;
        if (!k.quoted && config::resolveYaml11(k).type != config::Resolved::Type::String) continue;
        std::optional<ObjId> value = configValue(v, omega, source, origin, budget);
        if (!value) continue;
        st_.obj(d).more().keys.push_back(k.value);
        st_.obj(d).more().elements.push_back(ValueSet{*value});
      }
      return d;
    }
    default: return std::nullopt;  // sequences, aliases
  }
}

ObjId Interp::mergeConfigs(ObjId a, ObjId b, const Origin& origin, int depth) {
  // `OmegaConf.merge(a, b)`: b's keys win; two mappings under one key merge key by key.
  ObjId m = newObject(ObjKind::Container, "", origin);
  st_.obj(m).containerKind = 'd';
  st_.obj(m).setTag("config_file", std::string(st_.obj(b).tag("config_file")));
  st_.obj(m).setTag("config_attrs", "1");
  std::vector<std::string> keys = st_.obj(a).keys();
  std::vector<ValueSet> elements = st_.obj(a).elements();
  const std::vector<std::string> bKeys = st_.obj(b).keys();
  const std::vector<ValueSet> bElements = st_.obj(b).elements();
  for (size_t i = 0; i < bKeys.size() && i < bElements.size(); ++i) {
    auto it = bKeys[i].empty() ? keys.end() : std::find(keys.begin(), keys.end(), bKeys[i]);
    if (it == keys.end()) {
      keys.push_back(bKeys[i]);
      elements.push_back(bElements[i]);
      continue;
    }
    ValueSet& old = elements[static_cast<size_t>(it - keys.begin())];
    if (depth < 32 && old.size() == 1 && bElements[i].size() == 1 && isConfigMapping(old[0]) &&
        isConfigMapping(bElements[i][0]))
      old = ValueSet{mergeConfigs(old[0], bElements[i][0], origin, depth + 1)};
    else
      old = bElements[i];
  }
  st_.obj(m).more().keys = std::move(keys);
  st_.obj(m).more().elements = std::move(elements);
  return m;
}

bool Interp::configLoadCall(const std::string& q, const CallSite& site, ValueSet& result) {
  if (q == "omegaconf.OmegaConf.from_cli") {
    ObjId o = newObject(ObjKind::Instance, q, site.origin);
    st_.obj(o).setTag("config_cli", "1");
    addValue(result, o);
    return true;
  }
  if (q == "omegaconf.OmegaConf.merge") {
    // Loaded files merged (later ones win) with the command line's (`from_cli`, whose values the
    // loaded ones are already read as defaults for); anything else merged in may set any key.
    if (site.splat || !site.kwargs.empty()) return false;
    std::optional<ObjId> merged;
    for (const ValueSet& a : site.args) {
      if (a.size() != 1) return false;
      if (st_.obj(a[0]).hasTag("config_cli")) continue;
      if (!isConfigMapping(a[0])) return false;
      merged = merged ? mergeConfigs(*merged, a[0], site.origin, 0) : a[0];
    }
    if (!merged) return false;
    addValue(result, *merged);
    return true;
  }
  bool omega = q == "omegaconf.OmegaConf.load";
  if (!omega && q != "yaml.safe_load" && q != "yaml.load" && q != "yaml.full_load" && q != "yaml.unsafe_load")
    return false;
  if (site.splat || !ses_.provider()) return false;
  if (q == "yaml.load")  // PyYAML's own loaders resolve scalars alike; BaseLoader and custom ones do not
    if (const ValueSet* loader = site.arg(1, "Loader")) {
      static const std::set<std::string, std::less<>> known = {
          "yaml.SafeLoader", "yaml.FullLoader", "yaml.Loader", "yaml.UnsafeLoader",
          "yaml.CSafeLoader", "yaml.CFullLoader", "yaml.CLoader", "yaml.CUnsafeLoader"};
      if (loader->size() != 1 || st_.obj((*loader)[0]).kind != ObjKind::Ref || !known.count(st_.obj((*loader)[0]).name))
        return false;
    }
  // The path: a string written in the code (OmegaConf.load's argument, or `open`'s), never one the
  // command line may change (an argparse default).
  auto pathOf = [&](const ValueSet& vs) -> std::optional<std::string> {
    if (vs.size() != 1) return std::nullopt;
    const Obj& o = st_.obj(vs[0]);
    if (o.kind != ObjKind::Literal || o.hasTag("inexact") || o.hasTag("option_default") || o.name.empty())
      return std::nullopt;
    if (!o.hasTag("str") && truthOfConstant(o.name).has_value()) return std::nullopt;  // a number, None
    return o.name;
  };
  const ValueSet* arg = site.arg(0, omega ? "file_" : "stream");
  if (!arg || arg->size() != 1) return false;
  std::optional<std::string> path;
  const Obj& a = st_.obj((*arg)[0]);
  const ValueSet* spelled = a.kind == ObjKind::Instance && a.name == "open" && !a.inputs().empty() ? &a.inputs()[0]
                            : omega                                                             ? arg
                                                                                                : nullptr;
  if (spelled) path = pathOf(*spelled);
  if (!path) {
    if (spelled) needsCallerValue(*spelled);  // `def load(path): return OmegaConf.load(path)`: a caller may name it
    return false;
  }
  std::optional<std::string> text = ses_.provider()->dataFile(*path, mod_);
  if (!text) return false;
  SourceFile file(*path, std::move(*text));
  std::vector<config::YNode> docs;
  try {
    docs = config::parseYaml(file);
  } catch (const std::exception&) {
    return false;  // malformed: the load fails at run time, or reads what the engine does not
  }
  if (docs.size() != 1 || !docs[0].isMap()) return false;
  size_t budget = kMaxConfigNodes;
  std::optional<ObjId> mapping = configValue(docs[0], omega, *path, site.origin, budget);
  if (!mapping) return false;
  addValue(result, *mapping);
  return true;
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
      const ClassDef* cls = ro.kind == ObjKind::Instance ? ro.cls : nullptr;
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
      const std::string& q = co.name;
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
        ObjId t = newObject(ObjKind::Instance, q, site.origin);
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
        ObjId p = newObject(ObjKind::Instance, q, site.origin);
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
      record(q);
      site.qualname = q;
      if (ValueSet loaded; configLoadCall(q, site, loaded)) return loaded;
      if (ses_.model().onCall(site)) return site.result;
      // Not understood: a new object, built from the positional arguments (rules may
      // treat `torch.compile(model)` as standing for `model`).
      ObjId made = newObject(ObjKind::Instance, q, site.origin);
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

namespace {
const Summary kInPlace{};  // stands for the summary of a function analysed in place
}  // namespace

ValueSet Interp::analyzeInPlace(const FunctionDef& def, const std::vector<ValueSet>& args) {
  return callFunction(def, args, Origin{}, true);
}

ValueSet Interp::callFunction(const FunctionDef& def, const std::vector<ValueSet>& args, const Origin& callsite,
                              bool inPlace) {
  const Module& owner = def.owner ? *def.owner : mod_;
  bool cutByDepth = ses_.atDepthLimit();
  // Analysed in place, the body runs here: its summary is not needed (recursion is cut by `inlining_`).
  const Summary* s = inPlace && !summary_ ? &kInPlace : ses_.summary(&def);
  ValueSet result;
  if (!s) {  // recursion, or past the depth limit: its effects are unknown here
    if (summary_) {
      summary_->truncated = true;
      summary_->pure = false;  // what was cut depends on where the chain was entered
    }
    if (cutByDepth && !inPlace)
      ses_.noteCut(Cut{callsite.site(), def.qualname,
                       "calls nest more than " + std::to_string(kMaxSummaryDepth) + " functions deep"});
    return result;
  }
  if (summary_) {
    summary_->pure = summary_->pure && s->pure;
    if (!inPlace) summary_->calls.insert(&def);
    summary_->calls.insert(s->calls.begin(), s->calls.end());
  }
  if (!inPlace) ses_.markCalled(&def);
  if (!inPlace && ses_.budget().work > Budget::kWorkBudget) {
    if (summary_) summary_->truncated = true;
    return result;
  }
  constexpr size_t kMaxInlineDepth = 8;
  if (!inPlace && (!s->contextDependent || summary_ || inlining_.count(&def) || via_.size() >= kMaxInlineDepth ||
                   ses_.budget().work > Budget::kInlineBudget)) {
    if (summary_ && s->contextDependent) summary_->contextDependent = true;
    instantiate(*s, args, callsite, result);
    return result;
  }
  // Interpret the body in the caller's context: parameters bound to the actual
  // values, module globals visible, attribute stores shared.
  if (ses_.provider()) ses_.provider()->use(owner);  // its tree is needed
  Frame callee;
  callee.arm = frame_.arm;
  callee.baseArm = frame_.arm;
  size_t armsBefore = st_.arms.size();
  callee.globalsFrame = frame_.isModule ? &frame_ : frame_.globalsFrame;
  for (const auto& [k, v] : frame_.env)
    if (!k.empty() && k[0] == '#') callee.env.emplace(k, v);
  for (size_t i = 0; i < def.params.size() && i < args.size(); ++i) callee.env[def.params[i]] = args[i];
  Interp in(owner, ses_, st_, callee);
  in.via_ = callsite.via;
  if (!inPlace) in.via_.push_back(callsite.site());
  in.inlining_ = inlining_;
  in.inlining_.insert(&def);
  in.execBody(def);
  // Its returns resume here, after the call's last point.
  for (size_t i = armsBefore; i < st_.arms.size(); ++i)
    if (st_.arms[i].returns && st_.arms[i].resumeAt < 0) st_.arms[i].resumeAt = static_cast<PointId>(st_.points.size());
  for (const auto& [k, v] : callee.env)
    if (!k.empty() && k[0] == '#') setVar(k, v);
  return callee.returns;
}

void Interp::instantiate(const Summary& s, const std::vector<ValueSet>& args, const Origin& callsite,
                         ValueSet& result, bool recordVia) {
  const Store& ss = s.store;
  size_t size = ss.objects.size() + ss.events.size();
  if (st_.objects.size() + ss.objects.size() > kMaxStoreObjects || size > Budget::kMaxInstantiated ||
      ses_.budget().copied + size > Budget::kCopyBudget) {
    if (summary_) summary_->truncated = true;
    return;
  }
  ses_.budget().copied += size;
  auto via = [&](const Origin& o) {
    if (!recordVia) return o;
    Origin out;
    out.file = o.file;
    out.range = o.range;
    out.via = callsite.via;
    out.via.push_back(callsite.site());
    out.via.insert(out.via.end(), o.via.begin(), o.via.end());
    return out;
  };
  std::vector<int> armMap(ss.arms.size());
  std::map<int, int> constructMap;
  for (size_t i = 0; i < ss.arms.size(); ++i) {
    const Arm& a = ss.arms[i];
    auto [it, fresh] = constructMap.emplace(a.construct, 0);
    if (fresh) it->second = st_.constructs++;
    Arm copy;
    copy.construct = it->second;
    copy.index = a.index;
    copy.loop = a.loop;
    copy.parent = a.parent < 0 ? frame_.arm : armMap[static_cast<size_t>(a.parent)];
    copy.terminates = a.terminates;
    copy.returns = a.returns;
    copy.testNegated = a.testNegated;
    st_.arms.push_back(std::move(copy));
    armMap[i] = static_cast<int>(st_.arms.size() - 1);
  }
  std::vector<PointId> pointMap(ss.points.size());
  for (size_t i = 0; i < ss.points.size(); ++i) {
    int arm = ss.points[i].arm < 0 ? frame_.arm : armMap[static_cast<size_t>(ss.points[i].arm)];
    st_.points.push_back(Point{static_cast<int>(st_.points.size()), arm});
    pointMap[i] = static_cast<PointId>(st_.points.size() - 1);
  }
  // Returns resume after the copied points: the function's own, at the end of this call; those of calls
  // inside it, where their call ended there.
  for (size_t i = 0; i < ss.arms.size(); ++i) {
    Arm& copy = st_.arms[static_cast<size_t>(armMap[i])];
    PointId r = ss.arms[i].resumeAt;
    if (!copy.returns) continue;
    copy.resumeAt = r >= 0 && static_cast<size_t>(r) < ss.points.size() ? pointMap[static_cast<size_t>(r)]
                                                                         : static_cast<PointId>(st_.points.size());
  }
  auto mapPoint = [&](PointId p) { return p < 0 ? newPoint() : pointMap[static_cast<size_t>(p)]; };
  std::vector<ValueSet> map(ss.objects.size());
  auto mapSet = [&](const ValueSet& vs) {
    ValueSet out;
    for (ObjId id : vs) addValues(out, map[static_cast<size_t>(id)]);
    return out;
  };
  for (size_t i = 0; i < ss.objects.size(); ++i) {
    const Obj& o = ss.objects[i];
    switch (o.kind) {
      case ObjKind::Arg:
        if (o.argIndex >= 0 && static_cast<size_t>(o.argIndex) < args.size())
          map[i] = args[static_cast<size_t>(o.argIndex)];
        break;
      case ObjKind::Global: map[i] = lookupName(o.name); break;
      case ObjKind::Ref: map[i] = {ref(o.name)}; break;
      case ObjKind::Function:
      case ObjKind::Class: {
        const void* key = o.function ? static_cast<const void*>(o.function) : static_cast<const void*>(o.cls);
        if (auto d = st_.memo().defs.find(key); d != st_.memo().defs.end()) {
          map[i] = {d->second};
        } else {
          ObjId id = newObject(o.kind, o.name, o.origin);
          st_.obj(id).function = o.function;
          st_.obj(id).cls = o.cls;
          st_.memo().defs[key] = id;
          map[i] = {id};
        }
        break;
      }
      case ObjKind::Derived: {
        bool isAttr = o.name.size() > 1 && o.name[0] == '.' && o.name.back() != ')';
        bool isCall = o.name.size() >= 2 && o.name.compare(o.name.size() - 2, 2, "()") == 0;
        for (ObjId p : map[static_cast<size_t>(o.parent)]) {
          if (isAttr) addValues(map[i], getAttr(p, std::string_view(o.name).substr(1)));
          else if (isCall) addValue(map[i], deriveAt(p, o.name, via(o.origin)));  // a call inside the function
          else addValue(map[i], derive(p, o.name));
        }
        break;
      }
      case ObjKind::Literal:
      case ObjKind::Instance:
      case ObjKind::Container: {
        Obj copy;
        copy.kind = o.kind;
        copy.name = o.name;
        copy.label = o.label;
        copy.containerKind = o.containerKind;
        if (!o.keys().empty()) copy.more().keys = o.keys();
        copy.cls = o.cls;
        copy.function = o.function;
        if (!o.tags().empty()) copy.more().tags = o.tags();
        copy.origin = via(o.origin);
        copy.point = mapPoint(o.point);
        for (const auto& io : o.inputOrigins()) copy.more().inputOrigins.push_back(via(io));
        st_.objects.push_back(std::move(copy));
        map[i] = {static_cast<ObjId>(st_.objects.size() - 1)};
        break;
      }
    }
  }
  // Second pass: contents may refer to objects created later (`xs = []; xs.append(p)`).
  for (size_t i = 0; i < ss.objects.size(); ++i) {
    const Obj& o = ss.objects[i];
    if (o.kind == ObjKind::Derived && !o.tags().empty()) {
      // Annotations a CallModel gave a derived object (a method result used as an optimizer).
      for (ObjId d : map[i]) {
        if (st_.obj(d).kind != ObjKind::Derived || !st_.obj(d).tags().empty()) continue;
        st_.obj(d).more().tags = o.tags();
        for (const auto& in : o.inputs()) st_.obj(d).more().inputs.push_back(mapSet(in));
        for (const auto& io : o.inputOrigins()) st_.obj(d).more().inputOrigins.push_back(via(io));
        st_.obj(d).origin = via(o.origin);
      }
      continue;
    }
    if (o.kind != ObjKind::Instance && o.kind != ObjKind::Container && o.kind != ObjKind::Literal) continue;
    Obj& copy = st_.obj(map[i].front());
    for (const auto& e : o.elements()) copy.more().elements.push_back(mapSet(e));
    for (const auto& in : o.inputs()) copy.more().inputs.push_back(mapSet(in));
    if (o.owner != kNoObj && !map[static_cast<size_t>(o.owner)].empty()) {
      copy.owner = map[static_cast<size_t>(o.owner)].front();
      copy.more().ownerEdge = o.ownerEdge();
    }
  }
  for (size_t i = 0; i < ss.arms.size(); ++i)
    if (!ss.arms[i].test.empty()) st_.arms[static_cast<size_t>(armMap[i])].test = mapSet(ss.arms[i].test);
  for (const Event& e : ss.events) {
    Event base;
    base.kind = e.kind;
    base.name = e.name;
    for (const auto& a : e.args) base.args.push_back(mapSet(a));
    for (const auto& [k, v] : e.kwargs) base.kwargs.emplace_back(k, mapSet(v));
    base.attrs = e.attrs;
    base.origin = via(e.origin);
    base.point = mapPoint(e.point);
    ValueSet targets = e.target == kNoObj ? ValueSet{} : map[static_cast<size_t>(e.target)];
    if (targets.empty()) {
      if (e.target == kNoObj) st_.events.push_back(base);
      continue;
    }
    for (ObjId t : targets) {
      Event copy = base;
      copy.target = t;
      if (copy.kind == EventKind::SetAttr && !copy.args.empty()) st_.noteOwnership(t, copy.name, copy.args[0]);
      st_.events.push_back(std::move(copy));
    }
  }
  for (const Region& r : ss.regions) {
    if (r.begin < 0 || static_cast<size_t>(r.end) > pointMap.size() || r.begin >= r.end) continue;
    Region copy = r;
    copy.subject = mapSet(r.subject);
    for (Term& t : copy.terms) {
      t.left = mapSet(t.left);
      t.right = mapSet(t.right);
    }
    copy.begin = pointMap[static_cast<size_t>(r.begin)];
    copy.end = pointMap[static_cast<size_t>(r.end - 1)] + 1;
    st_.regions.push_back(std::move(copy));
  }
  for (const auto& [key, vs] : s.attrWrites) {
    size_t dot = key.find('.');
    if (dot == std::string::npos) continue;
    ObjId id = std::atoi(key.c_str() + 1);
    std::string attr = key.substr(dot + 1);
    ValueSet mapped = mapSet(vs);
    for (ObjId p : map[static_cast<size_t>(id)]) setVar(envKeyFor(p, attr), mapped);
  }
  addValues(result, mapSet(s.returns));
}

}  // namespace shardlint::semantic
