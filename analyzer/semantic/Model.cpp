#include "semantic/Model.h"

#include <algorithm>
#include <cctype>

namespace shardlint::semantic {

std::shared_ptr<const void> ReaderFacts::get(const void* key, const Stamp& stamp,
                                             const std::function<std::shared_ptr<const void>()>& make) const {
  Data* d = data_.get();
  if (!d) d = data_.install(std::make_unique<Data>());
  std::lock_guard<std::recursive_mutex> lock(d->mu);
  Entry& e = d->entries[key];
  if (!e.value || !(e.stamp == stamp)) {
    e.value = make();
    e.stamp = stamp;
  }
  return e.value;
}

void addValue(ValueSet& vs, ObjId id) {
  if (id == kNoObj) return;
  auto it = std::lower_bound(vs.begin(), vs.end(), id);
  if (it == vs.end() || *it != id) vs.insert(it, id);
}

void addValues(ValueSet& vs, const ValueSet& more) {
  for (ObjId id : more) addValue(vs, id);
}

ValueSet Event::allArgs() const {
  ValueSet out;
  for (const auto& a : args) addValues(out, a);
  for (const auto& kw : kwargs) addValues(out, kw.second);
  return out;
}

void Store::forgetInterned(ObjId first) {
  Memo* m = memo_.get();
  if (!m) return;
  auto forget = [first](auto& table) {
    for (auto it = table.begin(); it != table.end();) it = it->second >= first ? table.erase(it) : std::next(it);
  };
  forget(m->derived);
  forget(m->refs);
  forget(m->literals);
  forget(m->defs);
}

std::vector<int> Store::armChain(int arm) const {
  std::vector<int> chain;
  for (int a = arm; a >= 0; a = arms[static_cast<size_t>(a)].parent) chain.push_back(a);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

bool Store::mayHappenBefore(PointId a, PointId b) const {
  if (a < 0 || b < 0 || a == b) return false;
  const Point& pa = points[static_cast<size_t>(a)];
  const Point& pb = points[static_cast<size_t>(b)];
  std::vector<int> A = armChain(pa.arm), B = armChain(pb.arm);
  size_t k = 0;
  while (k < A.size() && k < B.size() && A[k] == B[k]) ++k;
  bool inLoop = false;
  for (size_t i = 0; i < k; ++i) inLoop = inLoop || arms[static_cast<size_t>(A[i])].loop;
  // Leaving an arm that always returns or raises never reaches b.
  for (size_t i = k; i < A.size(); ++i) {
    const Arm& arm = arms[static_cast<size_t>(A[i])];
    if (arm.terminates && !(arm.returns && arm.resumeAt >= 0 && b >= arm.resumeAt)) return false;
  }
  bool exclusive = k < A.size() && k < B.size() &&
                   arms[static_cast<size_t>(A[k])].construct == arms[static_cast<size_t>(B[k])].construct &&
                   arms[static_cast<size_t>(A[k])].index != arms[static_cast<size_t>(B[k])].index;
  if (exclusive) return inLoop;
  if (pa.ordinal < pb.ordinal) return true;
  return inLoop;
}

bool Store::dominates(PointId a, PointId b) const {
  if (a < 0 || b < 0) return false;
  const Point& pa = points[static_cast<size_t>(a)];
  const Point& pb = points[static_cast<size_t>(b)];
  if (pa.ordinal >= pb.ordinal) return false;
  std::vector<int> A = armChain(pa.arm), B = armChain(pb.arm);
  size_t k = 0;
  while (k < A.size() && k < B.size() && A[k] == B[k]) ++k;
  for (size_t i = k; i < A.size(); ++i)
    if (!arms[static_cast<size_t>(A[i])].alwaysTaken(*this)) return false;
  return true;
}

bool Arm::alwaysTaken(const Store& st) const {
  if (loop || test.empty()) return false;
  return std::all_of(test.begin(), test.end(), [&](ObjId v) {
    auto t = st.truthOf(v);
    return t.has_value() && *t != testNegated;
  });
}

bool Store::precedes(PointId a, PointId b) const {
  if (a < 0 || b < 0) return false;
  return points[static_cast<size_t>(a)].ordinal < points[static_cast<size_t>(b)].ordinal && mayHappenBefore(a, b);
}

int Store::commonLoop(PointId a, PointId b) const {
  if (a < 0 || b < 0) return -1;
  std::vector<int> A = armChain(points[static_cast<size_t>(a)].arm), B = armChain(points[static_cast<size_t>(b)].arm);
  int loop = -1;
  for (size_t k = 0; k < A.size() && k < B.size() && A[k] == B[k]; ++k)
    if (arms[static_cast<size_t>(A[k])].loop) loop = A[k];
  return loop;
}

std::optional<bool> truthOfConstant(std::string_view t) {
  if (t == "True") return true;
  if (t == "False" || t == "None") return false;
  if (!t.empty() && t[0] == '-') t.remove_prefix(1);
  if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.')) return std::nullopt;
  for (char c : t)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '+' && c != '-')
      return std::nullopt;
  // Zero when every digit before an exponent is 0 (`0`, `0.0`, `0e5`); hex and the like are not read.
  for (char c : t) {
    if (c == 'e' || c == 'E') break;
    if (c == 'x' || c == 'X' || c == 'b' || c == 'B' || c == 'o' || c == 'O' || c == 'j' || c == 'J')
      return std::nullopt;
    if (c >= '1' && c <= '9') return true;
  }
  return false;
}

std::optional<bool> Store::truthOf(ObjId o) const {
  if (o == kNoObj) return std::nullopt;
  const Obj& ob = obj(o);
  if (ob.kind != ObjKind::Literal || ob.hasTag("option_default")) return std::nullopt;
  // A string whose value is not read exactly (an f-string, bytes, escapes) is non-empty when what
  // was read of it is.
  if (ob.hasTag("inexact")) return ob.name.empty() ? std::nullopt : std::optional<bool>(true);
  if (ob.hasTag("str")) return !ob.name.empty();
  if (auto t = truthOfConstant(ob.name)) return t;
  return true;  // any other string literal is non-empty
}

namespace {
// What kind of constant a literal object is: 's' a string read exactly, 'i' a decimal integer,
// 'b' True/False, 'n' None, 0 anything else (a float, hex, an inexact string).
char constantKind(const Obj& o) {
  if (o.kind != ObjKind::Literal || o.hasTag("inexact") || o.hasTag("option_default")) return 0;
  if (o.hasTag("str")) return 's';
  if (o.name == "True" || o.name == "False") return 'b';
  if (o.name == "None") return 'n';
  if (truthOfConstant(o.name).has_value()) {
    std::string_view t = o.name;
    bool negative = !t.empty() && t[0] == '-';
    if (negative) t.remove_prefix(1);
    if (t.empty() || (t.size() > 1 && t[0] == '0') || (negative && t == "0")) return 0;  // -0 == 0
    for (char c : t)
      if (!std::isdigit(static_cast<unsigned char>(c))) return 0;
    return 'i';
  }
  return 's';  // a string not spelled like a constant
}
}  // namespace

std::optional<bool> Store::equalityOf(ObjId a, ObjId b) const {
  if (a == kNoObj || b == kNoObj) return std::nullopt;
  const Obj& x = obj(a);
  const Obj& y = obj(b);
  char kx = constantKind(x), ky = constantKind(y);
  if (!kx || !ky) return std::nullopt;
  if (kx == ky) return x.name == y.name;
  // True == 1 in Python: a bool and an integer are not told apart here.
  if ((kx == 'b' && ky == 'i') || (kx == 'i' && ky == 'b')) return std::nullopt;
  return false;  // a string, a number and None are never equal to one another
}

std::optional<bool> Store::isNone(ObjId o) const {
  if (o == kNoObj) return std::nullopt;
  const Obj& ob = obj(o);
  switch (ob.kind) {
    case ObjKind::Literal:
      if (ob.hasTag("option_default")) return std::nullopt;  // the command line may set it
      if (ob.hasTag("str") || ob.hasTag("inexact")) return false;
      return ob.name == "None";
    case ObjKind::Container:
    case ObjKind::Function:
    case ObjKind::Class: return false;
    case ObjKind::Instance: {
      if (ob.cls) return false;
      // A call of a name spelled like a class (`torch.optim.AdamW(...)`) makes an object.
      std::string_view n = ob.name;
      size_t dot = n.rfind('.');
      if (dot != std::string_view::npos) n.remove_prefix(dot + 1);
      bool camel = n.size() > 1 && std::isupper(static_cast<unsigned char>(n[0])) &&
                   std::any_of(n.begin(), n.end(), [](char c) { return std::islower(static_cast<unsigned char>(c)); });
      if (camel) return false;
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

namespace {
// Three-valued logic over a region's terms: a part that is not known stays unknown, and `and` is
// false when any operand is, `or` true when any is.
std::optional<bool> termValue(const Store& st, const std::vector<Term>& terms, int i, int depth) {
  if (i < 0 || static_cast<size_t>(i) >= terms.size() || depth > 64) return std::nullopt;
  const Term& t = terms[static_cast<size_t>(i)];
  // The same answer for every value of each side, or none.
  auto overPairs = [&](auto&& decide) -> std::optional<bool> {
    if (t.left.empty() || t.right.empty()) return std::nullopt;
    std::optional<bool> out;
    for (ObjId a : t.left)
      for (ObjId b : t.right) {
        auto v = decide(a, b);
        if (!v || (out && *out != *v)) return std::nullopt;
        out = v;
      }
    return out;
  };
  auto negate = [](std::optional<bool> v) { return v ? std::optional<bool>(!*v) : std::nullopt; };
  switch (t.op) {
    case Term::Op::Unknown: return std::nullopt;
    case Term::Op::Truth: {
      if (t.left.empty()) return std::nullopt;
      std::optional<bool> out;
      for (ObjId v : t.left) {
        auto x = st.truthOf(v);
        if (!x || (out && *out != *x)) return std::nullopt;
        out = x;
      }
      return out;
    }
    case Term::Op::Eq:
    case Term::Op::NotEq: {
      auto v = overPairs([&](ObjId a, ObjId b) { return st.equalityOf(a, b); });
      return t.op == Term::Op::Eq ? v : negate(v);
    }
    case Term::Op::Is:
    case Term::Op::IsNot: {
      // Only `x is None` is read: identity of anything else is not known.
      auto v = overPairs([&](ObjId a, ObjId b) -> std::optional<bool> {
        auto an = st.isNone(a), bn = st.isNone(b);
        if (an && bn && *an && *bn) return true;
        if ((an && bn) && (*an != *bn)) return false;
        return std::nullopt;
      });
      return t.op == Term::Op::Is ? v : negate(v);
    }
    case Term::Op::In:
    case Term::Op::NotIn: {
      auto v = overPairs([&](ObjId a, ObjId c) -> std::optional<bool> {
        const Obj& co = st.obj(c);
        if (co.kind != ObjKind::Container || co.containerKind == 'd' || (co.containerKind != 't' && !t.display))
          return std::nullopt;
        bool any = false;
        for (const ValueSet& e : co.elements()) {
          if (e.size() != 1) return std::nullopt;
          auto eq = st.equalityOf(a, e.front());
          if (!eq) return std::nullopt;
          any = any || *eq;
        }
        return any;
      });
      return t.op == Term::Op::In ? v : negate(v);
    }
    case Term::Op::Not:
      return t.operands.size() == 1 ? negate(termValue(st, terms, t.operands[0], depth + 1)) : std::nullopt;
    case Term::Op::And:
    case Term::Op::Or: {
      bool isAnd = t.op == Term::Op::And;
      bool unknown = t.operands.empty();
      for (int k : t.operands) {
        auto v = termValue(st, terms, k, depth + 1);
        if (!v) unknown = true;
        else if (*v != isAnd) return !isAnd;  // a false operand of `and`, a true one of `or`
      }
      return unknown ? std::nullopt : std::optional<bool>(isAnd);
    }
  }
  return std::nullopt;
}
}  // namespace

std::optional<bool> Store::conditionOf(const Region& r) const {
  if (r.kind != "truth") return std::nullopt;
  if (!r.terms.empty()) return termValue(*this, r.terms, 0, 0);
  if (r.subject.empty()) return std::nullopt;
  std::optional<bool> out;
  for (ObjId v : r.subject) {
    auto t = truthOf(v);
    if (!t || (out && *out != *t)) return std::nullopt;
    out = t;
  }
  return out;
}

bool Store::neverRuns(PointId p) const {
  return anyRegionAt(p, [&](const Region& r) {
    if (r.kind != "truth") return false;
    auto v = conditionOf(r);
    return v && *v == r.negated;
  });
}

std::vector<std::string> Store::conditionsAt(PointId p) const {
  std::vector<std::string> out;
  anyRegionAt(p, [&](const Region& r) {
    if (r.kind != "truth" || r.names.empty()) return false;
    // Known: a plain flag whose every value is a constant (true on some paths, false on others is
    // no condition a message could name); a condition whose value is known.
    bool known = r.terms.empty() ? !r.subject.empty() && std::all_of(r.subject.begin(), r.subject.end(),
                                                                     [&](ObjId v) { return truthOf(v).has_value(); })
                                 : conditionOf(r).has_value();
    if (known) return false;
    // A plain flag is true or false; a comparison or combination reads as written.
    std::string c = "`" + r.names.front() + "`";
    if (r.terms.empty()) c += r.negated ? " is false" : " is true";
    else if (r.negated) c += " is false";
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
    return false;
  });
  return out;
}

std::vector<const Region*> Store::regionsAt(PointId p) const {
  std::vector<const Region*> out;
  anyRegionAt(p, [&](const Region& r) {
    out.push_back(&r);
    return false;
  });
  return out;
}

bool Store::insideArm(PointId p, int arm) const {
  if (p < 0 || arm < 0) return false;
  for (int a = points[static_cast<size_t>(p)].arm; a >= 0; a = arms[static_cast<size_t>(a)].parent)
    if (a == arm) return true;
  return false;
}

bool Store::armChainPrefix(PointId outer, PointId inner) const {
  if (outer < 0 || inner < 0) return false;
  std::vector<int> A = armChain(points[static_cast<size_t>(outer)].arm),
                   B = armChain(points[static_cast<size_t>(inner)].arm);
  return A.size() <= B.size() && std::equal(A.begin(), A.end(), B.begin());
}

bool Store::derivesFrom(ObjId o, ObjId ancestor) const {
  for (ObjId cur = o; cur != kNoObj; cur = obj(cur).kind == ObjKind::Derived ? obj(cur).parent : kNoObj)
    if (cur == ancestor) return true;
  return false;
}

bool Store::contains(ObjId ancestor, ObjId o) const {
  for (int depth = 0; o != kNoObj && depth < 64; ++depth) {
    if (o == ancestor) return true;
    const Obj& cur = obj(o);
    o = cur.kind == ObjKind::Derived ? cur.parent : cur.owner;
  }
  return false;
}

void Store::noteOwnership(ObjId target, const std::string& attr, const ValueSet& value) {
  if (attr.empty() || attr[0] == '[') return;
  for (ObjId v : value) {
    Obj& o = obj(v);
    if ((o.kind != ObjKind::Instance && o.kind != ObjKind::Container) || o.owner != kNoObj || v == target) continue;
    if (contains(v, target)) continue;  // no cycles
    o.owner = target;
    o.more().ownerEdge = "." + attr;
  }
}

ObjId Store::rootOf(ObjId o) const {
  while (o != kNoObj && obj(o).kind == ObjKind::Derived) o = obj(o).parent;
  return o;
}

bool Store::pathFrom(ObjId o, ObjId ancestor, std::vector<std::string_view>& edges) const {
  edges.clear();
  for (ObjId cur = o; cur != kNoObj; cur = obj(cur).kind == ObjKind::Derived ? obj(cur).parent : kNoObj) {
    if (cur == ancestor) {
      std::reverse(edges.begin(), edges.end());
      return true;
    }
    if (obj(cur).kind == ObjKind::Derived) edges.push_back(obj(cur).name);
  }
  edges.clear();
  return false;
}

void Store::flatten(const ValueSet& vs, ValueSet& out) const {
  std::vector<ObjId> work(vs.rbegin(), vs.rend());
  std::vector<bool> seen(objects.size(), false);
  while (!work.empty()) {  // iterative: containers may contain themselves (`xs.append(xs)`)
    ObjId id = work.back();
    work.pop_back();
    if (seen[static_cast<size_t>(id)]) continue;
    seen[static_cast<size_t>(id)] = true;
    const Obj& o = obj(id);
    if (o.kind == ObjKind::Container) {
      for (const auto& e : o.elements()) work.insert(work.end(), e.rbegin(), e.rend());
    } else {
      addValue(out, id);
    }
  }
}

std::string Store::describe(ObjId id) const {
  if (id == kNoObj) return "?";
  const Obj& o = obj(id);
  switch (o.kind) {
    case ObjKind::Derived: return describe(o.parent) + o.name;
    case ObjKind::Instance: return o.label.empty() ? o.name + "(...)" : o.label;
    case ObjKind::Container:
      return o.containerKind == 'd' ? "{...}" : o.containerKind == 't' ? "(...)" : "[...]";
    case ObjKind::Literal: return o.name;
    case ObjKind::Arg: return o.name;
    default: return o.name;
  }
}

std::string Store::dump() const {
  std::string out;
  auto set = [&](const ValueSet& vs) {
    std::string s = "{";
    for (ObjId id : vs) s += (s.size() > 1 ? "," : "") + std::to_string(id);
    return s + "}";
  };
  for (size_t i = 0; i < objects.size(); ++i) {
    const Obj& o = objects[i];
    if (o.kind == ObjKind::Literal || o.kind == ObjKind::Ref || o.kind == ObjKind::Function || o.kind == ObjKind::Class)
      continue;
    out += "obj " + std::to_string(i) + " " + describe(static_cast<ObjId>(i)) + " @p" + std::to_string(o.point);
    for (const auto& [k, v] : o.tags()) out += " " + k + "=" + v;
    for (const auto& in : o.inputs()) out += " in" + set(in);
    if (o.kind == ObjKind::Container) for (const auto& e : o.elements()) out += " el" + set(e);
    out += "\n";
  }
  static const char* kinds[] = {"call", "method", "setattr", "domain", "return"};
  for (const Event& e : events) {
    out += std::string("ev p") + std::to_string(e.point) + " ord" +
           std::to_string(points[static_cast<size_t>(e.point)].ordinal) + " arm" +
           std::to_string(points[static_cast<size_t>(e.point)].arm) + " " + kinds[static_cast<int>(e.kind)] + " " +
           e.name + " target=" + (e.target == kNoObj ? std::string("-") : describe(e.target));
    for (const auto& a : e.args) out += " " + set(a);
    for (const auto& [k, v] : e.kwargs) out += " " + k + "=" + set(v);
    for (const auto& [k, v] : e.attrs()) out += " " + k + ":" + v;
    out += "\n";
  }
  for (const Region& r : regions) {
    out += "region p" + std::to_string(r.begin) + "..p" + std::to_string(r.end) + " " + (r.negated ? "not " : "") +
           r.kind + " " + set(r.subject);
    for (const auto& n : r.names) out += " " + n;
    out += "\n";
  }
  return out;
}

}  // namespace shardlint::semantic
