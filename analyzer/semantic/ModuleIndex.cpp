#include "semantic/ModuleIndex.h"

#include <algorithm>

#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

using syntax::Kind;
using syntax::PyKinds;

namespace {
Kind kindOf(TSNode n) { return PyKinds::instance().kind(n); }


// The default a call site can bind when `value` is a constant (`True`, `False`, `None`, a number, a plain
// one-line string kept with its quotes: `"fsdp"`), else empty.
std::string constantDefault(TSNode value, std::string_view src) {
  Kind vk = ts_node_is_null(value) ? Kind::comment : kindOf(value);
  if (vk == Kind::true_ || vk == Kind::false_ || vk == Kind::none || vk == Kind::integer || vk == Kind::float_)
    return std::string(syntax::textOf(value, src));
  if (vk != Kind::string) return {};
  // A plain one-line string: no prefix, interpolation, escape or inner quote.
  std::string_view t = syntax::textOf(value, src);
  bool plain = t.size() >= 2 && (t[0] == '"' || t[0] == '\'') && t.back() == t[0] &&
               t.find('\\') == std::string_view::npos && t.find('\n') == std::string_view::npos &&
               t.substr(1, t.size() - 2).find(t[0]) == std::string_view::npos;
  return plain ? std::string(t) : std::string();
}
}  // namespace

// ---------------------------------------------------------------- ClassDef

const FunctionDef* ClassDef::findMethod(std::string_view name) const {
  auto it = methods.find(name);
  if (it != methods.end()) return it->second;
  for (const ClassDef* b : localBases)
    if (b != this)
      if (const FunctionDef* f = b->findMethod(name)) return f;
  return nullptr;
}

std::vector<std::string> ClassDef::allBases() const {
  std::vector<std::string> out = bases;
  for (const ClassDef* b : localBases) {
    if (b == this) continue;
    for (auto& q : b->allBases()) out.push_back(q);
  }
  return out;
}

// ---------------------------------------------------------------- Module

Module::Module(const SourceFile& file, TSNode root, std::string moduleName, uint32_t fileId, bool isPackage)
    : file_(file), root_(root), moduleName_(std::move(moduleName)), fileId_(fileId), isPackage_(isPackage) {
  collectDefinitions(root_, nullptr, moduleName_, true);
}

const FunctionDef* Module::topFunction(std::string_view name) const {
  auto it = topFunctions_.find(name);
  return it == topFunctions_.end() ? nullptr : it->second;
}

const ClassDef* Module::topClass(std::string_view name) const {
  auto it = topClasses_.find(name);
  return it == topClasses_.end() ? nullptr : it->second;
}

std::vector<std::string> Module::starImports() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : imports_)
    if (!k.empty() && k[0] == '*') out.push_back(v);
  return out;
}

std::optional<std::string> Module::importOf(std::string_view name) const {
  auto it = imports_.find(name);
  if (it == imports_.end()) return std::nullopt;
  return it->second;
}

const FunctionDef* Module::enclosingFunction(ByteRange range) const {
  const FunctionDef* best = nullptr;
  for (const auto& f : functions_) {
    uint32_t b = f->span.begin, e = f->span.end;
    if (b <= range.begin && range.end <= e && (!best || b >= best->span.begin)) best = f.get();
  }
  return best;
}

void Module::collectImport(TSNode stmt, ImportMap& into) const {
  std::string_view src = file_.text;
  Kind k = kindOf(stmt);
  if (k == Kind::import_statement) {
    for (TSNode c : syntax::namedChildren(stmt)) {
      if (kindOf(c) == Kind::aliased_import) {
        into[std::string(syntax::textOf(syntax::field(c, "alias"), src))] =
            std::string(syntax::textOf(syntax::field(c, "name"), src));
      } else if (kindOf(c) == Kind::dotted_name) {
        std::string full(syntax::textOf(c, src));
        std::string first = full.substr(0, full.find('.'));
        into[first] = first;
      }
    }
  } else if (k == Kind::import_from_statement) {
    TSNode mod = syntax::field(stmt, "module_name");
    std::string base(syntax::textOf(mod, src));
    base.erase(std::remove_if(base.begin(), base.end(), [](char ch) { return ch == ' ' || ch == '\n'; }),
               base.end());
    // `from ..x import y` in module a.b.c resolves to a.x.y (a package's __init__ is its own base).
    size_t dots = 0;
    while (dots < base.size() && base[dots] == '.') ++dots;
    if (dots > 0) {
      std::vector<std::string> parts;
      for (size_t start = 0; start <= moduleName_.size();) {
        size_t dot = moduleName_.find('.', start);
        parts.push_back(moduleName_.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
      size_t drop = dots - (isPackage_ ? 1 : 0);
      if (drop <= parts.size()) {
        parts.resize(parts.size() - drop);
        std::string pkg;
        for (const auto& p : parts) pkg += (pkg.empty() ? "" : ".") + p;
        std::string rest = base.substr(dots);
        base = pkg.empty() ? rest : rest.empty() ? pkg : pkg + "." + rest;
      }
      // beyond the top level: keep the dotted spelling; it resolves to nothing in the project
    }
    for (TSNode c : syntax::namedChildren(stmt))
      if (kindOf(c) == Kind::wildcard_import) into["*" + base] = base;  // `from base import *`
    for (TSNode c : syntax::fieldChildren(stmt, "name")) {
      if (kindOf(c) == Kind::aliased_import) {
        std::string name(syntax::textOf(syntax::field(c, "name"), src));
        into[std::string(syntax::textOf(syntax::field(c, "alias"), src))] =
            base + (base.empty() || base.back() == '.' ? "" : ".") + name;
      } else {
        std::string name(syntax::textOf(c, src));
        into[name.substr(name.rfind('.') + 1)] = base + (base.empty() || base.back() == '.' ? "" : ".") + name;
      }
    }
  }
}

void Module::collectDefinitions(TSNode rootBody, const ClassDef* rootCls, const std::string& rootPrefix,
                                bool rootTopLevel) {
  std::string_view src = file_.text;
  // Blocks nest as deep as the source: an explicit stack of the bodies being walked, in document
  // order (a body is finished before the statements after its definition), no C++ recursion.
  struct Body {
    syntax::NodeList stmts;
    size_t next = 0;
    const ClassDef* cls;
    std::string prefix;
    bool topLevel;
  };
  std::vector<Body> stack;
  stack.push_back(Body{syntax::namedChildren(rootBody), 0, rootCls, rootPrefix, rootTopLevel});
  while (!stack.empty()) {
    if (stack.back().next == stack.back().stmts.size()) {
      stack.pop_back();
      continue;
    }
    Body& top = stack.back();
    TSNode st = top.stmts[top.next++];
    const ClassDef* cls = top.cls;
    const std::string prefix = top.prefix;
    bool topLevel = top.topLevel;
    // Walks `body` next, before the rest of this one (`top` is not used after this).
    auto descend = [&](TSNode body, const ClassDef* c, const std::string& pre, bool tl) {
      stack.push_back(Body{syntax::namedChildren(body), 0, c, pre, tl});
    };
    Kind k = kindOf(st);
    TSNode def = st;
    bool isStatic = false;
    if (k == Kind::decorated_definition) {
      for (TSNode d : syntax::namedChildren(st))
        if (kindOf(d) == Kind::decorator && syntax::textOf(d, src).find("staticmethod") != std::string_view::npos)
          isStatic = true;
      def = syntax::field(st, "definition");
      k = kindOf(def);
    }
    if (k == Kind::function_definition) {
      auto f = std::make_unique<FunctionDef>();
      f->owner = this;
      f->node = def;
      f->span = syntax::rangeOf(def);
      f->extent = syntax::rangeOf(st);
      f->name = std::string(syntax::textOf(syntax::field(def, "name"), src));
      f->qualname = prefix + "." + f->name;
      f->cls = cls;
      f->isStatic = isStatic;
      f->nested = !cls && !topLevel;
      for (TSNode p : syntax::namedChildren(syntax::field(def, "parameters"))) {
        Kind pk = kindOf(p);
        if (pk == Kind::identifier) f->params.emplace_back(syntax::textOf(p, src));
        else if (pk == Kind::default_parameter || pk == Kind::typed_default_parameter) {
          f->params.emplace_back(syntax::textOf(syntax::field(p, "name"), src));
          std::string d = constantDefault(syntax::field(p, "value"), src);
          if (!d.empty()) {
            f->defaults.resize(f->params.size());
            f->defaults.back() = std::move(d);
          }
        } else if (pk == Kind::typed_parameter) {
          TSNode id = ts_node_named_child(p, 0);
          if (kindOf(id) == Kind::identifier) f->params.emplace_back(syntax::textOf(id, src));
        } else if (pk == Kind::dictionary_splat_pattern && ts_node_named_child_count(p) == 1) {
          f->kwargs = std::string(syntax::textOf(ts_node_named_child(p, 0), src));
        }
      }
      const FunctionDef* raw = f.get();
      functions_.push_back(std::move(f));
      if (cls) const_cast<ClassDef*>(cls)->methods[raw->name] = raw;
      else if (topLevel) topFunctions_[raw->name] = raw;
      // Only a body whose text spells `def` or `class` as a word can define anything: most bodies
      // (a method's statements) are passed over without listing them.
      TSNode body = syntax::field(def, "body");
      std::string_view text = syntax::textOf(body, src);
      if (syntax::findWord(text, "def") != std::string_view::npos ||
          syntax::findWord(text, "class") != std::string_view::npos)
        descend(body, nullptr, raw->qualname, false);
    } else if (k == Kind::class_definition) {
      auto c = std::make_unique<ClassDef>();
      c->owner = this;
      c->node = def;
      c->span = syntax::rangeOf(def);
      c->name = std::string(syntax::textOf(syntax::field(def, "name"), src));
      c->qualname = prefix + "." + c->name;
      ClassDef* raw = c.get();
      classes_.push_back(std::move(c));
      if (topLevel) topClasses_[raw->name] = raw;
      TSNode supers = syntax::field(def, "superclasses");
      if (!ts_node_is_null(supers)) {
        for (TSNode b : syntax::namedChildren(supers)) {
          if (kindOf(b) == Kind::keyword_argument) continue;
          std::string txt(syntax::textOf(b, src));
          std::string head = txt.substr(0, txt.find('.'));
          if (auto it = imports_.find(head); it != imports_.end())
            txt = it->second + txt.substr(head.size());
          if (auto it = topClasses_.find(txt); it != topClasses_.end()) {
            raw->localBases.push_back(it->second);
            raw->bases.push_back(it->second->qualname);
          } else {
            raw->bases.push_back(txt);
          }
        }
      }
      // A dataclass: its annotated class attributes are the fields its generated __init__ takes.
      TSNode parent = ts_node_parent(def);
      if (!ts_node_is_null(parent) && kindOf(parent) == Kind::decorated_definition)
        for (TSNode d : syntax::namedChildren(parent))
          if (kindOf(d) == Kind::decorator && syntax::textOf(d, src).find("dataclass") != std::string_view::npos)
            raw->dataclass = true;
      if (raw->dataclass)
        for (TSNode stmt : syntax::namedChildren(syntax::field(def, "body"))) {
          if (kindOf(stmt) != Kind::expression_statement || ts_node_named_child_count(stmt) != 1) continue;
          TSNode as = ts_node_named_child(stmt, 0);
          if (kindOf(as) != Kind::assignment || ts_node_is_null(syntax::field(as, "type"))) continue;
          TSNode left = syntax::field(as, "left");
          if (kindOf(left) != Kind::identifier) continue;
          raw->fields.emplace_back(std::string(syntax::textOf(left, src)), constantDefault(syntax::field(as, "right"), src));
        }
      descend(syntax::field(def, "body"), raw, raw->qualname, false);
    } else if (k == Kind::import_statement || k == Kind::import_from_statement) {
      if (topLevel) collectImport(st, imports_);
    } else if (topLevel && (k == Kind::if_statement || k == Kind::try_statement || k == Kind::with_statement ||
                            k == Kind::block || k == Kind::else_clause || k == Kind::except_clause ||
                            k == Kind::elif_clause || k == Kind::finally_clause)) {
      // Imports and definitions under `if TYPE_CHECKING:` / `try:` still bind module names.
      syntax::NodeList parts = syntax::namedChildren(st);
      for (auto c = parts.rbegin(); c != parts.rend(); ++c)  // the first part on top
        if (kindOf(*c) == Kind::block || kindOf(*c) == Kind::else_clause || kindOf(*c) == Kind::except_clause ||
            kindOf(*c) == Kind::elif_clause || kindOf(*c) == Kind::finally_clause)
          descend(*c, nullptr, prefix, true);
    } else if (!topLevel && (k == Kind::if_statement || k == Kind::for_statement || k == Kind::while_statement ||
                             k == Kind::try_statement || k == Kind::with_statement || k == Kind::block ||
                             k == Kind::else_clause || k == Kind::except_clause || k == Kind::elif_clause ||
                             k == Kind::finally_clause)) {
      syntax::NodeList parts = syntax::namedChildren(st);
      for (auto c = parts.rbegin(); c != parts.rend(); ++c)  // the first part on top
        if (kindOf(*c) == Kind::block || kindOf(*c) == Kind::else_clause || kindOf(*c) == Kind::except_clause ||
            kindOf(*c) == Kind::elif_clause || kindOf(*c) == Kind::finally_clause)
          descend(*c, nullptr, prefix, false);
    }
  }
}

void Module::rebind(TSNode root) {
  root_ = root;
  std::map<uint32_t, TSNode> functions, classes;
  syntax::walk(root, [&](TSNode n) {
    Kind k = kindOf(n);
    if (k == Kind::function_definition) functions[ts_node_start_byte(n)] = n;
    else if (k == Kind::class_definition) classes[ts_node_start_byte(n)] = n;
    return true;
  });
  for (auto& f : functions_)
    if (auto it = functions.find(f->span.begin); it != functions.end()) f->node = it->second;
  for (auto& c : classes_)
    if (auto it = classes.find(c->span.begin); it != classes.end()) c->node = it->second;
}

const FunctionDef* Module::findFunction(std::string_view qualname) const {
  for (const auto& f : functions_)
    if (f->qualname == qualname) return f.get();
  return nullptr;
}

const ClassDef* Module::findClass(std::string_view qualname) const {
  for (const auto& c : classes_)
    if (c->qualname == qualname) return c.get();
  return nullptr;
}

}  // namespace shardlint::semantic
