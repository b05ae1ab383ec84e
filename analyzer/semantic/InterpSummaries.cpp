// Calls of the project's functions (Interp, semantic/Interpreter.h): callFunction uses the callee's
// summary (instantiate puts its objects, events, arms and regions into this store as if the function
// ran here) or interprets its body in the caller's context; analyzeInPlace runs a function nothing
// calls.
#include "semantic/Interpreter.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

namespace shardlint::semantic {

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
  constexpr size_t kMaxInlineDepth = 8;
  // Analysed in place, the body runs here: its summary is not needed (recursion is cut by `inlining_`). So
  // for a call the task's own interpretation (the module body, an arm) makes of a function whose body such a
  // call interprets anyway (Session::runsDirectly).
  bool direct = !inPlace && !summary_ && !inlining_.count(&def) && via_.size() < kMaxInlineDepth &&
                ses_.budget().work <= Budget::kInlineBudget && ses_.runsDirectly(&def);
  if (direct) ses_.noteDirectRun();
  const Summary* s = (inPlace || direct) && !summary_ ? &kInPlace : ses_.summary(&def);
  Session::Recording* rec = summary_ ? nullptr : ses_.recording();  // the task's own interpretation only
  if (rec && s == &kInPlace) rec->reads.push_back(&def);
  ValueSet result;
  if (!s) {  // recursion, or past the depth limit: its effects are unknown here
    if (summary_) {
      summary_->truncated = true;
      // What was cut depends on where the chain was entered, except a function's call of itself, which
      // is cut wherever its summary is computed (a cut further up the chain makes it impure there).
      if (summary_->def != &def) summary_->pure = false;
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
    if (rec) ++rec->limitHits;
    return result;
  }
  auto overInlineBudget = [&] {
    bool over = ses_.budget().work > Budget::kInlineBudget;
    if (over && rec) ++rec->limitHits;
    return over;
  };
  // A summary made for another receiver class than this call's holds no more than one that depends on the caller.
  bool dependent = s->contextDependent;
  if (!dependent && s->receiverClass) {
    ValueSet closure;
    if (s->receiverByClosure) closure = lookupName("self");
    const ValueSet* self = s->receiverByClosure ? &closure : args.empty() ? nullptr : &args[0];
    dependent = !self || !receiverIs(*self, *s->receiverClass);
  }
  if (!inPlace && !direct &&
      (!dependent || summary_ || inlining_.count(&def) || via_.size() >= kMaxInlineDepth || overInlineBudget())) {
    if (summary_ && dependent) summary_->contextDependent = true;
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
  for (size_t i = 0; i < def.params.size() && i < args.size(); ++i) callee.env[def.params[i]] = args[i];
  Interp in(owner, ses_, st_, callee);
  in.via_ = callsite.via;
  if (!inPlace) in.via_.push_back(callsite.site());
  in.inlining_ = inlining_;
  in.inlining_.insert(&def);
  in.trackAttrWrites_ = true;
  {
    // The attribute stores the callee sees are the caller's: lent for the call (a swap, not a copy;
    // nothing reads the caller's frame while its callee runs), and given back as the call left them,
    // also when the interpretation throws.
    struct Lend {
      Frame& from;
      Frame& to;
      Lend(Frame& f, Frame& t) : from(f), to(t) { std::swap(from.attrs, to.attrs); }
      ~Lend() { std::swap(from.attrs, to.attrs); }
    } lend(frame_, callee);
    in.execBody(def);
  }
  // Its returns resume here, after the call's last point.
  for (size_t i = armsBefore; i < st_.arms.size(); ++i)
    if (st_.arms[i].returns && st_.arms[i].resumeAt < 0) st_.arms[i].resumeAt = static_cast<PointId>(st_.points.size());
  writeBackAttrs(in.attrsBefore_);
  return callee.returns;
}

Interp::Room Interp::roomFor(const Summary& s) const {
  Room r;
  r.size = s.store.objects.size() + s.store.events.size();
  r.objects = st_.objects.size() + s.store.objects.size();
  // The first two do not depend on what came before the current arm; the others may.
  r.overStore = r.objects - st_.uncounted > kMaxStoreObjects || r.size > Budget::kMaxInstantiated;
  r.overFile = r.objects > kMaxFileObjects || ses_.budget().copied + r.size > Budget::kCopyBudget;
  return r;
}

bool Interp::fileAllows(const Room& r) {
  Session::Recording* rec = summary_ ? nullptr : ses_.recording();  // the task's own interpretation only
  if (rec) {
    rec->fileChecks.note(r.objects, ses_.budget().copied + r.size);
    if (r.overFile) ++rec->limitHits;
  }
  return !r.overFile;
}

void Interp::instantiate(const Summary& s, const std::vector<ValueSet>& args, const Origin& callsite,
                         ValueSet& result, bool recordVia) {
  const Store& ss = s.store;
  Room room = roomFor(s);
  // The store's own limits decide the same wherever the arm stands: only the file's are recorded.
  if (room.overStore || !fileAllows(room)) {
    if (summary_) summary_->truncated = true;
    return;
  }
  ses_.budget().copied += room.size;
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
  // What each object of the summary stands for here, in one table filled in the summary's order (a derived
  // object's parent comes before it): most stand for one object, so a vector each would cost an allocation each.
  const size_t n = ss.objects.size();
  std::vector<ObjId> pool;
  pool.reserve(n + n / 4);
  std::vector<uint32_t> start(n + 1, 0);
  auto mapped = [&](ObjId id) {
    size_t i = static_cast<size_t>(id);
    return std::pair<size_t, size_t>{start[i], start[i + 1]};
  };
  auto mapSet = [&](const ValueSet& vs) {
    ValueSet out;
    for (ObjId id : vs) {
      auto [b, e] = mapped(id);
      out.insert(out.end(), pool.begin() + static_cast<std::ptrdiff_t>(b),
                 pool.begin() + static_cast<std::ptrdiff_t>(e));
    }
    if (vs.size() > 1) {  // one object's values are sorted and unique already
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    }
    return out;
  };
  ValueSet derived;  // a derived object's values, gathered before they go into the table
  for (size_t i = 0; i < n; ++i) {
    const Obj& o = ss.objects[i];
    start[i] = static_cast<uint32_t>(pool.size());
    switch (o.kind) {
      case ObjKind::Arg:
        if (o.argIndex >= 0 && static_cast<size_t>(o.argIndex) < args.size()) {
          const ValueSet& a = args[static_cast<size_t>(o.argIndex)];
          pool.insert(pool.end(), a.begin(), a.end());
        }
        break;
      case ObjKind::Global: {
        ValueSet g = lookupName(o.name);
        pool.insert(pool.end(), g.begin(), g.end());
        break;
      }
      case ObjKind::Ref: pool.push_back(ref(o.name)); break;
      case ObjKind::Function:
      case ObjKind::Class: {
        const void* key = o.function ? static_cast<const void*>(o.function) : static_cast<const void*>(o.cls);
        if (auto d = st_.memo().defs.find(key); d != st_.memo().defs.end()) {
          pool.push_back(d->second);
        } else {
          ObjId id = newObject(o.kind, o.name, o.origin);
          st_.obj(id).function = o.function;
          st_.obj(id).cls = o.cls;
          st_.memo().defs[key] = id;
          pool.push_back(id);
        }
        break;
      }
      case ObjKind::Derived: {
        bool isAttr = o.name.size() > 1 && o.name[0] == '.' && o.name.back() != ')';
        bool isCall = o.name.size() >= 2 && o.name.compare(o.name.size() - 2, 2, "()") == 0;
        derived.clear();
        for (auto [k, e] = mapped(o.parent); k < e; ++k) {
          ObjId p = pool[k];
          if (isAttr) addValues(derived, getAttr(p, std::string_view(o.name).substr(1)));
          else if (isCall) addValue(derived, deriveAt(p, o.name, via(o.origin)));  // a call inside the function
          else addValue(derived, derive(p, o.name));
        }
        pool.insert(pool.end(), derived.begin(), derived.end());
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
        pool.push_back(static_cast<ObjId>(st_.objects.size() - 1));
        break;
      }
    }
    start[i + 1] = static_cast<uint32_t>(pool.size());
  }
  // Second pass: contents may refer to objects created later (`xs = []; xs.append(p)`).
  for (size_t i = 0; i < ss.objects.size(); ++i) {
    const Obj& o = ss.objects[i];
    if (o.kind == ObjKind::Derived && !o.tags().empty()) {
      // Annotations a CallModel gave a derived object (a method result used as an optimizer).
      for (auto [k, e] = mapped(static_cast<ObjId>(i)); k < e; ++k) {
        ObjId d = pool[k];
        if (st_.obj(d).kind != ObjKind::Derived || !st_.obj(d).tags().empty()) continue;
        st_.obj(d).more().tags = o.tags();
        for (const auto& in : o.inputs()) st_.obj(d).more().inputs.push_back(mapSet(in));
        for (const auto& io : o.inputOrigins()) st_.obj(d).more().inputOrigins.push_back(via(io));
        st_.obj(d).origin = via(o.origin);
      }
      continue;
    }
    if (o.kind != ObjKind::Instance && o.kind != ObjKind::Container && o.kind != ObjKind::Literal) continue;
    Obj& copy = st_.obj(pool[start[i]]);
    for (const auto& e : o.elements()) copy.more().elements.push_back(mapSet(e));
    for (const auto& in : o.inputs()) copy.more().inputs.push_back(mapSet(in));
    if (auto [b, e] = o.owner == kNoObj ? std::pair<size_t, size_t>{} : mapped(o.owner); b < e) {
      copy.owner = pool[b];
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
    base.setAttrs(e.attrs());
    base.origin = via(e.origin);
    base.point = mapPoint(e.point);
    if (e.target == kNoObj) {
      st_.events.push_back(std::move(base));
      continue;
    }
    for (auto [k, end] = mapped(e.target); k < end; ++k) {
      Event copy = k + 1 < end ? base : std::move(base);  // the last target takes it
      copy.target = pool[k];
      if (copy.kind == EventKind::SetAttr && !copy.args.empty()) st_.noteOwnership(copy.target, copy.name, copy.args[0]);
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
    ValueSet values = mapSet(vs);
    for (auto [k, e] = mapped(id); k < e; ++k) setVar(envKeyFor(pool[k], attr), values);
  }
  addValues(result, mapSet(s.returns));
}

}  // namespace shardlint::semantic
