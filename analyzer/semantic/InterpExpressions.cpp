// The interpreter's expressions (Interp, semantic/Interpreter.h): the values of names, attributes,
// items, literals, containers, operators and comprehensions (calls: InterpCalls.cpp).
#include "semantic/Interpreter.h"

#include <charconv>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "semantic/InterpreterImpl.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

// ---------------------------------------------------------------- expressions

ValueSet Interp::eval(TSNode n) {
  if (ts_node_is_null(n)) return {};
  // Pathologically deep expressions (`1 + 1 + ... + 1`, thousands of parentheses)
  // are not followed past this depth: unknown value, no crash.
  if (tooDeep(n)) return {};
  DepthGuard guard(evalDepth_);
  switch (kindOf(n)) {
    case Kind::identifier: return lookupName(syntax::textOf(n, mod_.file().text));
    case Kind::attribute: {
      std::string_view attr = syntax::textOf(syntax::field(n, "attribute"), mod_.file().text);
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
        std::string key(1, '#');  // (not "#" + ...: GCC 12 warns falsely about that)
        key += std::to_string(v);
        key += edge;
        auto it = frame_.attrs.find(key);
        if (it != frame_.attrs.end()) addValues(out, it->second);
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
        for (TSNode c : syntax::children(s)) {
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
      syntax::NodeList parts = syntax::namedChildren(n);
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

}  // namespace shardlint::semantic
