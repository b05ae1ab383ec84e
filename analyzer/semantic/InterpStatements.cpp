// The interpreter's statements (Interp, semantic/Interpreter.h): blocks, the nesting limit, each kind
// of statement, the branches of `if`, loops, `try`, `with` and `match` (their arms and where they
// meet), definitions and imports, and assignment to names, attributes, items and tuples.
#include "semantic/Interpreter.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "semantic/InterpreterImpl.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

// ---------------------------------------------------------------- statements

void Interp::execBlock(TSNode block) {
  if (ts_node_is_null(block)) return;
  syntax::NodeList statements = syntax::namedChildren(block);
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
    const auto& env = envOf(key);
    auto it = env.find(key);
    if (it != env.end() && !it->second.empty()) replaced.emplace_back(&it->second, &now);
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

// ---------------------------------------------------------------- assignment

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
      syntax::NodeList targets;
      for (TSNode t : syntax::namedChildren(target))
        if (kindOf(t) != Kind::comment) targets.push_back(t);
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

}  // namespace shardlint::semantic
