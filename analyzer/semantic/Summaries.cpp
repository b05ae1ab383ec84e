#include "semantic/Summaries.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

// ---------------------------------------------------------------- Summary

std::string Summary::describe() const {
  std::ostringstream os;
  auto names = [&](const ValueSet& vs) {
    std::string s;
    for (ObjId id : vs) {
      if (!s.empty()) s += " | ";
      s += store.describe(id);
      const Obj& o = store.obj(id);
      if (!o.tags().empty()) {
        s += " {";
        bool first = true;
        for (const auto& [k, v] : o.tags()) {
          s += (first ? "" : ", ") + k + (v.empty() ? "" : "=" + v);
          first = false;
        }
        s += "}";
      }
    }
    return s.empty() ? std::string("?") : s;
  };
  for (const Event& e : store.events) {
    if (e.kind != EventKind::Domain) continue;
    os << e.name << " " << (e.target == kNoObj ? "?" : store.describe(e.target));
    for (const auto& [k, v] : e.attrs()) os << " " << k << "=" << v;
    os << "\n";
  }
  for (const auto& [key, vs] : attrWrites) os << "sets " << key << " = " << names(vs) << "\n";
  if (!returns.empty()) os << "returns " << names(returns) << "\n";
  return os.str();
}

// ---------------------------------------------------------------- compaction

namespace {
// Drops the objects of a finished summary that nothing a caller can see refers to (an
// attribute read and dropped, the result of a call nobody used): callers copy every
// object of a summary at each call site, so these only cost memory and time. Kept: the
// parameters, globals, tagged objects, whatever events, returns, attribute writes,
// regions and arms' flags mention, and transitively their parents, owners, elements and inputs, and the
// objects a kept object owns (rules find children through ownership).
void compact(Summary& s) {
  Store& st = s.store;
  const size_t n = st.objects.size();
  std::vector<char> keep(n, 0);
  std::vector<ObjId> work;
  auto mark = [&](ObjId id) {
    if (id >= 0 && static_cast<size_t>(id) < n && !keep[static_cast<size_t>(id)]) {
      keep[static_cast<size_t>(id)] = 1;
      work.push_back(id);
    }
  };
  auto markSet = [&](const ValueSet& vs) {
    for (ObjId id : vs) mark(id);
  };
  for (ObjId p : s.params) mark(p);
  markSet(s.returns);
  for (const auto& [key, vs] : s.attrWrites) {
    mark(std::atoi(key.c_str() + 1));
    markSet(vs);
  }
  for (const Event& e : st.events) {
    mark(e.target);
    for (const auto& a : e.args) markSet(a);
    for (const auto& kv : e.kwargs) markSet(kv.second);
  }
  for (const Region& r : st.regions) {
    markSet(r.subject);
    for (const Term& t : r.terms) {
      markSet(t.left);
      markSet(t.right);
    }
  }
  for (const Arm& a : st.arms) markSet(a.test);
  for (size_t i = 0; i < n; ++i) {
    const Obj& o = st.objects[i];
    if (!o.tags().empty() || o.kind == ObjKind::Arg || o.kind == ObjKind::Global) mark(static_cast<ObjId>(i));
  }
  for (bool grew = true; grew;) {
    while (!work.empty()) {
      const Obj& o = st.objects[static_cast<size_t>(work.back())];
      work.pop_back();
      mark(o.parent);
      mark(o.owner);
      for (const auto& e : o.elements()) markSet(e);
      for (const auto& in : o.inputs()) markSet(in);
    }
    grew = false;
    for (size_t i = 0; i < n; ++i) {
      const Obj& o = st.objects[i];
      if (!keep[i] && o.owner != kNoObj && keep[static_cast<size_t>(o.owner)]) {
        mark(static_cast<ObjId>(i));
        grew = true;
      }
    }
  }
  size_t kept = 0;
  for (char k : keep) kept += k != 0;
  if (kept == n) return;
  std::vector<ObjId> to(n, kNoObj);
  std::vector<Obj> objects;
  objects.reserve(kept);
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) {
      to[i] = static_cast<ObjId>(objects.size());
      objects.push_back(std::move(st.objects[i]));
    }
  auto id = [&](ObjId x) { return x < 0 || static_cast<size_t>(x) >= n ? x : to[static_cast<size_t>(x)]; };
  auto set = [&](ValueSet& vs) {
    ValueSet out;
    for (ObjId x : vs)
      if (ObjId y = id(x); y != kNoObj) out.push_back(y);
    vs = std::move(out);  // the order of ids is kept, so the set stays sorted
  };
  for (Obj& o : objects) {
    o.parent = id(o.parent);
    o.owner = id(o.owner);
    ObjMore* more = o.moreIfAny();
    if (!more) continue;
    if (o.owner == kNoObj) more->ownerEdge.clear();
    for (auto& e : more->elements) set(e);
    for (auto& in : more->inputs) set(in);
  }
  st.objects = std::move(objects);
  for (Event& e : st.events) {
    e.target = id(e.target);
    for (auto& a : e.args) set(a);
    for (auto& kv : e.kwargs) set(kv.second);
  }
  for (Region& r : st.regions) {
    set(r.subject);
    for (Term& t : r.terms) {
      set(t.left);
      set(t.right);
    }
  }
  for (Arm& a : st.arms) set(a.test);
  for (ObjId& p : s.params) p = id(p);
  set(s.returns);
  for (auto& [key, vs] : s.attrWrites) {
    size_t dot = key.find('.');
    std::string rest = dot == std::string::npos ? std::string() : key.substr(dot);
    std::string renamed(1, '#');  // (not "#" + ...: GCC 12 warns falsely about that)
    renamed += std::to_string(id(std::atoi(key.c_str() + 1)));
    renamed += rest;
    key = std::move(renamed);
    set(vs);
  }
  std::sort(s.attrWrites.begin(), s.attrWrites.end());
}
}  // namespace

// ---------------------------------------------------------------- SummaryCache

std::shared_ptr<const Summary> SummaryCache::find(const FunctionDef* def) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = map_.find(def->owner);
  if (m == map_.end()) return nullptr;
  auto it = m->second.find(def);
  if (it == m->second.end()) return nullptr;
  used_.splice(used_.end(), used_, it->second.used);
  return it->second.summary;
}

std::shared_ptr<const Summary> SummaryCache::insert(std::shared_ptr<const Summary> s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = map_[s->def->owner].try_emplace(s->def);
  if (!fresh) return it->second.summary;
  items_ += itemsOf(*s);
  it->second.summary = s;
  it->second.used = used_.insert(used_.end(), s->def);
  while (items_ > maxItems_ && used_.size() > 1) {
    const FunctionDef* old = used_.front();
    auto m = map_.find(old->owner);
    auto e = m->second.find(old);
    items_ -= itemsOf(*e->second.summary);
    used_.pop_front();
    m->second.erase(e);
    if (m->second.empty()) map_.erase(m);
  }
  return s;
}

void SummaryCache::forget(const Module* module, std::vector<std::shared_ptr<const Summary>>* dropped) {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = map_.find(module);
  if (m == map_.end()) return;
  for (auto& [def, kept] : m->second) {
    items_ -= itemsOf(*kept.summary);
    used_.erase(kept.used);
    if (dropped) dropped->push_back(std::move(kept.summary));
  }
  map_.erase(m);
}

size_t SummaryCache::items() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_;
}

// ---------------------------------------------------------------- moving a summary

bool spellsPlaceFrom(std::string_view text, uint32_t first) {
  uint64_t n = 0;
  bool digits = false;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      n = std::min<uint64_t>(n * 10 + static_cast<uint64_t>(text[i] - '0'), uint64_t{1} << 40);
      digits = true;
      continue;
    }
    if (digits && n >= first) return true;
    n = 0;
    digits = false;
  }
  return false;
}

const void* SummaryMove::def(const void* d, bool& ok) const {
  if (!d) return d;
  if (auto it = defs.find(d); it != defs.end()) {
    if (!it->second) ok = false;
    return it->second;
  }
  if (deadDefs && deadDefs->count(d)) ok = false;
  return d;
}

namespace {
// SummaryMove::site, in a form the walks below inline (a summary holds thousands of places).
inline void moveSite(const SummaryMove& m, uint32_t& file, ByteRange& range, bool& ok, bool write) {
  if (file == m.fromFile) {
    std::optional<ByteRange> to = m.place(range);
    if (!to) ok = false;
    else if (write) range = *to;
    if (write) file = m.toFile;
  } else if (file < m.deadFiles.size() && m.deadFiles[file]) {
    ok = false;
  }
}
}  // namespace

void SummaryMove::site(uint32_t& file, ByteRange& range, bool& ok, bool write) const {
  moveSite(*this, file, range, ok, write);
}

namespace {
// What moveSummary does to one summary: `write` false only checks that everything in it can move.
bool moveParts(Summary& s, const SummaryMove& move, bool write) {
  bool ok = true;
  auto def = [&](const void* d) { return move.def(d, ok); };
  auto site = [&](uint32_t& file, ByteRange& range) { moveSite(move, file, range, ok, write); };
  auto origin = [&](Origin& o) {
    site(o.file, o.range);
    for (Site& v : o.via) site(v.file, v.range);
  };
  const void* d = def(s.def);
  if (write) s.def = static_cast<const FunctionDef*>(d);
  std::set<const FunctionDef*> calls;  // filled only when writing; checking maps each call all the same
  for (const FunctionDef* c : s.calls) {
    const void* m = def(c);
    if (write) calls.insert(static_cast<const FunctionDef*>(m));
  }
  if (write) s.calls = std::move(calls);
  const void* rc = def(s.receiverClass);
  if (write) s.receiverClass = static_cast<const ClassDef*>(rc);
  for (Obj& o : s.store.objects) {
    if (!ok) return false;
    const void* f = def(o.function);
    const void* c = def(o.cls);
    if (write) {
      o.function = static_cast<const FunctionDef*>(f);
      o.cls = static_cast<const ClassDef*>(c);
    }
    origin(o.origin);
    if (ObjMore* more = o.moreIfAny()) {
      for (Origin& in : more->inputOrigins) origin(in);
      for (const auto& [k, v] : more->tags) ok = ok && !spellsPlaceFrom(v, move.firstMoved);
    }
  }
  for (Event& e : s.store.events) {
    origin(e.origin);
    for (const auto& [k, v] : e.attrs()) ok = ok && !spellsPlaceFrom(v, move.firstMoved);
  }
  return ok;
}
}  // namespace

std::shared_ptr<const Summary> moveSummary(std::shared_ptr<const Summary> s, const SummaryMove& move,
                                           std::vector<std::shared_ptr<const Summary>>* dropped) {
  if (!s) return nullptr;
  // Held only here: moved where it is (it was made as a mutable Summary) in one walk, and dropped, half
  // moved, when something in it cannot move.
  if (s.use_count() == 1) {
    std::shared_ptr<Summary> out = std::const_pointer_cast<Summary>(std::move(s));
    if (moveParts(*out, move, true)) return out;
    if (dropped) dropped->push_back(std::move(out));
    return nullptr;
  }
  // Else checked first (the check writes nothing: const_cast only to share the walk with the move), then
  // a copy is moved.
  if (!moveParts(const_cast<Summary&>(*s), move, false)) return nullptr;
  auto out = std::make_shared<Summary>(*s);
  moveParts(*out, move, true);
  return out;
}

// ---------------------------------------------------------------- Session

void Session::noteCut(Cut cut) {
  if (recording_) recording_->cuts.push_back(cut);
  if (!cutCallees_.insert(cut.callee).second) return;
  cuts_.push_back(std::move(cut));
}

const Summary* Session::summary(const FunctionDef* def) {
  if (recording_) recording_->reads.push_back(def);
  if (auto it = local_.find(def); it != local_.end()) {
    if (recording_) note(*it->second);
    return it->second.get();
  }
  if (inProgress_.count(def)) return nullptr;
  std::shared_ptr<const Summary> s;
  if (auto seeded = seeded_.find(def); seeded != seeded_.end()) {
    s = seeded->second;
    ++seededHits_;
    if (shared_ && s->pure && !(keepLocal_ && def->owner == keepLocal_)) s = shared_->insert(std::move(s));
  } else if ((s = shared_ ? shared_->find(def) : nullptr)) {
    ++sharedHits_;
  } else {
    // Summaries are computed on demand, a callee's inside its caller's: a chain of
    // thousands of helpers calling each other would nest that deep on the C++ stack.
    // Past kMaxSummaryDepth the callee is treated like a recursive call (unknown effects,
    // caller marked truncated and impure); it gets its own summary when reached from a
    // shallower point (at the latest when it is analysed as a function nothing called).
    if (depth_ >= kMaxSummaryDepth) return nullptr;
    std::shared_ptr<const Summary> made = compute(def);
    bool share = shared_ && made->pure && !(keepLocal_ && def->owner == keepLocal_);
    s = share ? shared_->insert(std::move(made)) : std::move(made);
  }
  for (const FunctionDef* c : s->calls) called_.insert(c);
  if (recording_) note(*s);
  return (local_[def] = std::move(s)).get();
}

void Session::note(const Summary& s) {
  recording_->reads.insert(recording_->reads.end(), s.calls.begin(), s.calls.end());
  recording_->called.insert(recording_->called.end(), s.calls.begin(), s.calls.end());
}

std::vector<std::shared_ptr<const Summary>> Session::pureSummariesOf(const Module* module) const {
  std::vector<std::shared_ptr<const Summary>> out;
  for (const auto& [def, s] : local_)
    if (def->owner == module && s->pure) out.push_back(s);
  return out;
}

bool Session::atDepthLimit() const { return depth_ >= kMaxSummaryDepth; }

std::unique_ptr<Summary> Session::compute(const FunctionDef* def) {
  struct Enter {
    Session& s;
    const FunctionDef* def;
    Budget own;
    Budget* saved;
    Enter(Session& x, const FunctionDef* d) : s(x), def(d), saved(x.budget_) {
      ++s.depth_;
      s.inProgress_.insert(def);
      s.budget_ = &own;  // a fresh budget: the summary does not depend on the work done before it
    }
    ~Enter() {
      s.budget_ = saved;
      s.inProgress_.erase(def);
      --s.depth_;
    }
  } enter(*this, def);
  if (provider_) provider_->use(*def->owner);  // its tree is needed
  auto s = std::make_unique<Summary>();
  s->def = def;
  Frame frame;
  Interp in(*def->owner, *this, s->store, frame, s.get());
  Origin origin{def->owner->fileId(), syntax::rangeOf(syntax::field(def->node, "name")), {}};
  for (size_t i = 0; i < def->params.size(); ++i) {
    ObjId id = in.newObject(ObjKind::Arg, def->params[i], origin);
    s->store.obj(id).argIndex = static_cast<int>(i);
    frame.env[def->params[i]] = {id};
    s->params.push_back(id);
  }
  in.execBody(*def);
  s->returns = frame.returns;
  // Attributes the caller can reach: those of its arguments and module globals, and those of the
  // objects it returns (`args = parser.parse_args(); return args` carries the options' defaults).
  std::set<ObjId> returnedRoots;
  for (ObjId r : s->returns) returnedRoots.insert(s->store.rootOf(r));
  for (const auto& [key, vs] : frame.attrs) {
    ObjId id = std::atoi(key.c_str() + 1);
    ObjId root = s->store.rootOf(id);
    ObjKind rk = s->store.obj(root).kind;
    if (rk == ObjKind::Arg || rk == ObjKind::Global || returnedRoots.count(root)) s->attrWrites.emplace_back(key, vs);
  }
  std::sort(s->attrWrites.begin(), s->attrWrites.end());
  s->truncated = s->truncated || s->store.objects.size() >= kMaxStoreObjects;
  for (const auto& o : s->store.objects) s->hasDomainFacts = s->hasDomainFacts || !o.tags().empty();
  for (const auto& e : s->store.events) s->hasDomainFacts = s->hasDomainFacts || e.kind == EventKind::Domain;
  compact(*s);
  // Summaries live as long as the run (shared) or the task: no spare capacity.
  s->store.objects.shrink_to_fit();
  s->store.events.shrink_to_fit();
  s->store.points.shrink_to_fit();
  s->store.arms.shrink_to_fit();
  s->store.regions.shrink_to_fit();
  s->store.dropMemo();  // the interning tables serve only the interpretation that built it
  return s;
}

}  // namespace shardlint::semantic
