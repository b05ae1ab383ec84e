// The interpreter's basics (Interp, semantic/Interpreter.h): objects, constants, points and arms in the
// store, names and attributes. Its other parts, each Interp's members on one subject:
// InterpStatements.cpp (statements, blocks, branches, assignment), InterpConditions.cpp (the regions
// conditions and loops establish), InterpJoins.cpp (the environment across branches),
// InterpExpressions.cpp (expressions), InterpCalls.cpp (calls and what they bind), InterpConfigs.cpp
// (argparse options and loaded YAML configs), InterpSummaries.cpp (calls of the project's functions:
// summaries instantiated, bodies interpreted in the caller's context); FileAnalysis.cpp runs one file.
// Helpers they share: InterpreterImpl.h.
#include "semantic/Interpreter.h"

#include <charconv>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

namespace {

bool isBuiltinName(std::string_view n) {
  // Every name of Python 3.11's `builtins` module (the exceptions and warnings too: `raise RuntimeWarning(...)`
  // in a function is a call of the builtin, not of a module global a caller may bind).
  static const std::set<std::string_view> names = {
      "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
      "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
      "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
      "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError", "Exception",
      "ExceptionGroup", "FileExistsError", "FileNotFoundError", "FloatingPointError", "FutureWarning",
      "GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError", "IndexError",
      "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt", "LookupError", "MemoryError",
      "ModuleNotFoundError", "NameError", "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError",
      "OverflowError", "PendingDeprecationWarning", "PermissionError", "ProcessLookupError", "RecursionError",
      "ReferenceError", "ResourceWarning", "RuntimeError", "RuntimeWarning", "StopAsyncIteration", "StopIteration",
      "SyntaxError", "SyntaxWarning", "SystemError", "SystemExit", "TabError", "TimeoutError", "TypeError",
      "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError",
      "UnicodeWarning", "UserWarning", "ValueError", "Warning", "ZeroDivisionError", "abs", "aiter", "all", "anext",
      "any", "ascii", "bin", "bool", "breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod",
      "compile", "complex", "delattr", "dict", "dir", "divmod", "enumerate", "eval", "exec", "exit", "filter",
      "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash", "help", "hex", "id", "input", "int",
      "isinstance", "issubclass", "iter", "len", "list", "locals", "map", "max", "memoryview", "min", "next",
      "object", "oct", "open", "ord", "pow", "print", "property", "quit", "range", "repr", "reversed", "round",
      "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "vars", "zip"};
  return names.count(n) > 0;
}

}  // namespace

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
  auto& memo = st_.memo().derived;
  auto key = std::make_pair(parent, std::move(edge));
  auto it = memo.lower_bound(key);  // one search, whether found or not
  if (it != memo.end() && !(key < it->first)) return it->second;
  ObjId id = newObject(ObjKind::Derived, key.second, st_.obj(parent).origin);
  st_.obj(id).parent = parent;
  memo.emplace_hint(it, std::move(key), id);
  return id;
}

ObjId Interp::deriveAt(ObjId parent, std::string edge, const Origin& at) {
  // Keyed by the call's own site, not by the chain of calls that reached it: a chain per object would
  // multiply objects with every level of helpers (one summary's call, instantiated at every caller).
  std::string key = edge;
  key += '\x1f';
  key += std::to_string(at.file);
  key += ':';
  key += std::to_string(at.range.begin);
  auto& memo = st_.memo().derived;
  auto memoKey = std::make_pair(parent, std::move(key));
  auto it = memo.lower_bound(memoKey);
  if (it != memo.end() && !(memoKey < it->first)) return it->second;
  ObjId id = newObject(ObjKind::Derived, std::move(edge), at);
  st_.obj(id).parent = parent;
  memo.emplace_hint(it, std::move(memoKey), id);
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
  auto& refs = st_.memo().refs;
  auto it = refs.lower_bound(qualname);
  if (it != refs.end() && it->first == qualname) return it->second;
  ObjId id = newObject(ObjKind::Ref, qualname, Origin{});
  refs.emplace_hint(it, qualname, id);
  return id;
}

void Interp::domainEvent(std::string kind, ObjId target, const Origin& origin,
                         std::map<std::string, std::string, std::less<>> attrs, std::vector<ValueSet> args) {
  Event e;
  e.kind = EventKind::Domain;
  e.name = std::move(kind);
  e.target = target;
  e.origin = origin;
  e.setAttrs(std::move(attrs));
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

namespace {
// Writes `#<object>.<attr>`, the key of an attribute store (Frame::attrs), to `out` (room for `cap` bytes):
// its length, or 0 when it does not fit.
size_t spellAttrKey(char* out, size_t cap, ObjId obj, std::string_view attr) {
  char digits[16];
  size_t d = static_cast<size_t>(std::to_chars(digits, digits + sizeof digits, obj).ptr - digits);
  size_t n = d + 2 + attr.size();
  if (n > cap) return 0;
  out[0] = '#';
  std::memcpy(out + 1, digits, d);
  out[d + 1] = '.';
  attr.copy(out + d + 2, attr.size());
  return n;
}
}  // namespace

std::string Interp::envKeyFor(ObjId obj, std::string_view attr) const {
  std::string key(attr.size() + 18, '\0');
  key.resize(spellAttrKey(key.data(), key.size(), obj, attr));
  return key;
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
  if (auto it = frame_.env.find(name); it != frame_.env.end()) return it->second;
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
    if (auto it = frame_.globalsFrame->env.find(name); it != frame_.globalsFrame->env.end()) return it->second;
  }
  std::string key(name);  // past the names bound here
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
  {
    // envKeyFor(obj, attr), spelled on the stack when it fits: an attribute is read far more often than stored.
    char buf[128];
    std::string spelled;
    size_t n = spellAttrKey(buf, sizeof buf, obj, attr);
    std::string_view key = n ? std::string_view(buf, n) : std::string_view(spelled = envKeyFor(obj, attr));
    if (auto it = frame_.attrs.find(key); it != frame_.attrs.end()) return it->second;
  }
  if (o.kind == ObjKind::Container && o.hasTag("config_attrs") && isConfigMapping(obj))
    if (std::optional<ValueSet> v = configKey(obj, attr)) return *v;  // OmegaConf: `cfg.key` is `cfg["key"]`
  bool options = o.kind == ObjKind::Instance && o.name == "argparse.Namespace";
  std::string edge(1, '.');  // (not "." + ...: GCC 12 warns falsely about that)
  edge += attr;
  ObjId d = derive(obj, std::move(edge));  // may move the objects: `o` is not read after it
  // An option the engine has no value for, of an `argparse.Namespace` (one built from a dict,
  // `argparse.Namespace(**config)`, or one `parse_args` made): what the run's command line (or a
  // config file it names) gives. A rule may read a default such a value joins with as the default.
  if (options) st_.obj(d).setTag("option_value", "1");
  return {d};
}

}  // namespace shardlint::semantic
