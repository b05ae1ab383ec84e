// The regions conditions establish (Region, semantic/Model.h), made by the interpreter (Interp,
// semantic/Interpreter.h): isinstance / hasattr tests, "truth" regions for flags, comparisons and
// their combinations, "condition" regions for any other part of an `if` condition, and the
// "iteration" regions of loops and comprehensions; closeRegions ends and stores them.
#include "semantic/Interpreter.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "semantic/InterpreterImpl.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

namespace {

// A condition's text on one line: runs of spaces, line breaks and continuations as one space (none after an
// opening bracket, none at the end).
std::string oneLine(std::string_view text) {
  std::string written;
  for (char c : text) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\\';
    if (!space) written += c;
    else if (!written.empty() && written.back() != ' ' && written.back() != '(' && written.back() != '[')
      written += ' ';
  }
  while (!written.empty() && written.back() == ' ') written.pop_back();
  return written;
}

// A comparison's operands (comments left out) and its operators' tokens, in order.
void comparisonParts(TSNode n, std::vector<TSNode>& operands, std::vector<std::string_view>& ops) {
  for (TSNode c : syntax::children(n)) {
    if (!ts_node_is_named(c)) ops.push_back(ts_node_type(c));
    else if (kindOf(c) != Kind::comment) operands.push_back(c);
  }
}

// What one guardsOf read of the condition's call-free parts, by node: a flag is read for its truth test and
// again for its undecided condition, a comparison's operand for its term and again for its condition. Nothing
// between those reads changes what they give (a read interns what it makes: the same objects again). Used by
// the outermost guardsOf's own reads only (`depth` 1): anything else evaluates as it always does.
using NodeKey = std::pair<const void*, uint32_t>;  // a node's id and start byte
struct GuardReads {
  int depth = 0;
  std::vector<std::pair<NodeKey, ValueSet>> values;
  std::vector<std::pair<NodeKey, bool>> calls;  // hasCall
};
thread_local GuardReads gGuardReads;

template <class T, class Read>
T remembered(std::vector<std::pair<NodeKey, T>>& in, TSNode n, Read&& read) {
  if (gGuardReads.depth != 1) return read();
  NodeKey key{n.id, ts_node_start_byte(n)};
  for (const auto& [k, v] : in)
    if (k == key) return v;
  ++gGuardReads.depth;  // what the read itself evaluates (a comprehension's clauses) is not remembered
  T v = read();
  --gGuardReads.depth;
  in.emplace_back(key, v);
  return v;
}

bool hasCallIn(TSNode n) {
  return remembered(gGuardReads.calls, n, [&] { return hasCall(n); });
}

}  // namespace

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

void Interp::addTruthTest(TSNode cond, bool negated, std::vector<Region>& out) {
  ValueSet v = remembered(gGuardReads.values, cond, [&] { return eval(cond); });
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
  r.names.push_back(oneLine(text(cond)));  // the condition as written, on one line
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
    ValueSet v = remembered(gGuardReads.values, n, [&] { return eval(n); });
    if (truthTestable(st_, v)) {
      t.op = Term::Op::Truth;
      t.left = std::move(v);
      bindable = true;
    }
  } else if (k == Kind::comparison_operator) {
    std::vector<TSNode> operands;
    std::vector<std::string_view> ops;
    comparisonParts(n, operands, ops);
    static const std::pair<std::string_view, Term::Op> kOps[] = {
        {"==", Term::Op::Eq}, {"!=", Term::Op::NotEq}, {"is", Term::Op::Is}, {"is not", Term::Op::IsNot},
        {"in", Term::Op::In}, {"not in", Term::Op::NotIn}};
    Term::Op op = Term::Op::Unknown;
    if (ops.size() == 1)
      for (const auto& [spelled, o] : kOps)
        if (ops[0] == spelled) op = o;
    // Operands are read again here (the condition was evaluated already): only those without calls.
    if (op != Term::Op::Unknown && operands.size() == 2 && !hasCallIn(operands[0]) && !hasCallIn(operands[1])) {
      ValueSet l = remembered(gGuardReads.values, operands[0], [&] { return eval(operands[0]); });
      ValueSet r = remembered(gGuardReads.values, operands[1], [&] { return eval(operands[1]); });
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
        syntax::NodeList items = syntax::namedChildren(operands[1]);
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
  struct Reads {  // the outermost one remembers its reads until it returns
    Reads() { ++gGuardReads.depth; }
    ~Reads() {
      if (--gGuardReads.depth > 0) return;
      gGuardReads.values.clear();
      gGuardReads.calls.clear();
    }
  } reads;
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
  return hasCallIn(n) ? ValueSet{} : remembered(gGuardReads.values, n, [&] { return eval(n); });
}

void Interp::addUndecided(TSNode cond, bool negated, std::vector<Region>& out) {
  Region r;
  r.kind = "condition";
  r.negated = negated;
  if (kindOf(cond) == Kind::comparison_operator) {
    std::vector<TSNode> operands;
    std::vector<std::string_view> ops;
    comparisonParts(cond, operands, ops);
    if (operands.size() != 2 || ops.size() != 1) return;
    auto constant = [&](TSNode c) {
      Kind k = kindOf(c);
      if (k == Kind::unary_operator) k = kindOf(syntax::field(c, "argument"));
      return k == Kind::integer || k == Kind::float_ || k == Kind::string || k == Kind::none || k == Kind::true_ ||
             k == Kind::false_;
    };
    std::string op(ops[0]);
    TSNode operand = operands[0], other = operands[1];
    if (constant(operands[0]) && !constant(operands[1])) {
      std::swap(operand, other);
      static const std::pair<const char*, const char*> kFlip[] = {{"<", ">"}, {">", "<"}, {"<=", ">="}, {">=", "<="}};
      for (const auto& [a, b] : kFlip)
        if (op == a) op = b;
    }
    if (!constant(other)) return;
    r.subject = conditionOperand(operand);
    if (r.subject.empty()) return;  // nothing to bind: kept only with a subject (the names are not spelled)
    r.names = {oneLine(text(cond)), op, oneLine(text(other))};
  } else {
    r.subject = conditionOperand(cond);
    if (r.subject.empty()) return;
    r.names = {oneLine(text(cond)), "truth"};
  }
  out.push_back(std::move(r));
}

}  // namespace shardlint::semantic
