// FileAnalysis (semantic/Interpreter.h) across a language server's edits: an exclusive arm after the module
// body (a function nothing calls, a driven class, a constructor) that the edit cannot have changed is taken
// from the analysis of the text before the edit, moved onto the new text, instead of being run again.
//
// An arm's part of the store depends on:
// - the module body's part, and what the body left (its interning, its attribute stores): the arms after
//   the body never see what another arm made (FileAnalysis::run);
// - the texts and summaries of the functions it used (Session::Recording::reads) and the definitions it
//   names (their pointers move; a changed one does not);
// - the task's work budget, the store's object limit and the earlier arms' called marks: an arm in which no
//   limit refused anything is taken when none can here (its work, its copies and the objects it asked the
//   store to hold, counted from where this analysis stands); one in which a limit refused something where
//   each of the limit checks it made answers as it did (limitsAlike: a test file whose earlier methods filled
//   the file's store has its later methods' arms taken after an edit that changed how much an earlier one
//   made), else only where this analysis stands exactly where the earlier one did (objects, work, copies),
//   so that every limit decides as it did (the summaries it used count against budgets of their own);
// - the module body's objects, which an arm may change (an annotation, an owner): an arm that changed one,
//   or came after one that did, is run again, and so is every arm after one that does so here.
// The table (ModuleTable::seedSummaries) seeds an analysis only when the edit left the module's own
// statements as they were: the changed bytes lie in the texts of changed functions or in one comment.
// The module body then runs again here, and must make as many objects, events, points, arms and regions
// as before, from no changed function.
#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "semantic/Interpreter.h"

namespace shardlint::semantic {

FileAnalysis::StoreMark FileAnalysis::markOf() const {
  const Store& st = moduleStore_;
  return StoreMark{st.objects.size(), st.events.size(), st.points.size(), st.arms.size(), st.regions.size(),
                   st.constructs};
}

namespace {

bool sameOrigin(const Origin& a, const Origin& b) {
  return a.file == b.file && a.range.begin == b.range.begin && a.range.end == b.range.end && a.via == b.via;
}

bool sameObject(const Obj& a, const Obj& b) {
  if (a.kind != b.kind || a.containerKind != b.containerKind || a.argIndex != b.argIndex || a.parent != b.parent ||
      a.owner != b.owner || a.point != b.point || a.function != b.function || a.cls != b.cls || a.name != b.name ||
      a.label != b.label || !sameOrigin(a.origin, b.origin))
    return false;
  if (a.ownerEdge() != b.ownerEdge() || a.elements() != b.elements() || a.keys() != b.keys() ||
      a.tags() != b.tags() || a.inputs() != b.inputs() || a.inputOrigins().size() != b.inputOrigins().size())
    return false;
  for (size_t i = 0; i < a.inputOrigins().size(); ++i)
    if (!sameOrigin(a.inputOrigins()[i], b.inputOrigins()[i])) return false;
  return true;
}

// One arm's part of the earlier store, moved onto this one: ids past the module body's shift by where the
// part begins here; places and definitions move (SummaryMove). `ok` turns false at the first thing that
// cannot move.
struct Relocation {
  const FileAnalysis::StoreMark& body;  // the module body's part, the same in both stores
  const FileAnalysis::StoreMark& from;  // the arm's part in the earlier store: [from, fromEnd)
  const FileAnalysis::StoreMark& fromEnd;
  const FileAnalysis::StoreMark& to;    // where it begins here
  const SummaryMove& move;
  bool ok = true;

  template <class T>
  T shift(T x, size_t bodyEnd, size_t b, size_t e, size_t at) {
    if (x < 0 || static_cast<size_t>(x) < bodyEnd) return x;
    size_t u = static_cast<size_t>(x);
    if (u >= b && u < e) return static_cast<T>(u - b + at);
    ok = false;  // a part of another arm: never, since the arms do not see each other's objects
    return x;
  }
  ObjId obj(ObjId x) { return shift(x, body.objects, from.objects, fromEnd.objects, to.objects); }
  // A point may also be the one just after the part (where a `return` resumes, where a region ends).
  PointId point(PointId p) {
    if (p >= 0 && static_cast<size_t>(p) == fromEnd.points)
      return static_cast<PointId>(to.points + (fromEnd.points - from.points));
    return shift(p, body.points, from.points, fromEnd.points, to.points);
  }
  int arm(int a) { return shift(a, body.arms, from.arms, fromEnd.arms, to.arms); }
  int construct(int c) {
    return shift(c, static_cast<size_t>(body.constructs), static_cast<size_t>(from.constructs),
                 static_cast<size_t>(fromEnd.constructs), static_cast<size_t>(to.constructs));
  }
  void set(ValueSet& vs) {  // the order holds: the body's ids stay below the arm's
    for (ObjId& x : vs) x = obj(x);
  }
  const void* def(const void* d) { return move.def(d, ok); }
  void site(uint32_t& file, ByteRange& range) { move.site(file, range, ok); }
  void origin(Origin& o) {
    site(o.file, o.range);
    for (Site& v : o.via) site(v.file, v.range);
  }
  void text(const std::string& s) {
    if (spellsPlaceFrom(s, move.firstMoved)) ok = false;
  }
};

}  // namespace

// Whether every limit check an arm made (`old`, run from its begin mark and budget) answers the same when the
// arm starts with `objects` in the store and the task's counts at `work` and `copied` (`armWork`: what the arm
// itself did). The store's own limits count only the module body's objects and the arm's (Store::uncounted),
// so they answer the same anywhere. The work budgets (Budget: calls past kInlineBudget use summaries only,
// past kWorkBudget are not followed; each check reads the count between the arm's start and its start plus
// its work): both starts with the whole arm short of kInlineBudget (no check says over), past kInlineBudget
// with the whole arm short of kWorkBudget, or past kWorkBudget (every check says over). The file's limits
// (kMaxFileObjects, kCopyBudget): what each instantiation asked for moves by the difference of the starts,
// so every one let in must fit still and every one refused must not.
bool FileAnalysis::limitsAlike(const ArmRecord& old, size_t objects, size_t work, size_t copied, size_t armWork) {
  size_t was = old.workBefore;
  bool workAlike = was == work ||
                   (was + armWork <= Budget::kInlineBudget && work + armWork <= Budget::kInlineBudget) ||
                   (was > Budget::kInlineBudget && work > Budget::kInlineBudget &&
                    was + armWork <= Budget::kWorkBudget && work + armWork <= Budget::kWorkBudget) ||
                   (was > Budget::kWorkBudget && work > Budget::kWorkBudget);
  return workAlike && old.fileChecks.moved(old.begin.objects, objects, old.copiedBefore, copied).answerAsMade();
}

bool FileAnalysis::bodyObjectsChanged() const {
  for (size_t i = 0; i < bodyObjects_.size(); ++i)
    if (!sameObject(bodyObjects_[i], moduleStore_.objects[i])) return true;
  return false;
}

void FileAnalysis::prepareSeed() {
  seeded_.clear();
  const FileAnalysis* prev = seed_.previous.get();
  ownsPrevious_ = seed_.previous.use_count() == 1;
  // Only an analysis that records notices an arm of its own changing the body's objects (bodyChanged_).
  if (!prev || !recordArms_ || !prev->recordArms_ || !(prev->bodyMark_ == bodyMark_)) return;
  Relocation check{bodyMark_, bodyMark_, bodyMark_, bodyMark_, seed_.move};
  for (const void* d : prev->bodyReads_) check.def(d);
  if (!check.ok || bodyReads_.size() != prev->bodyReads_.size()) return;
  // Room for as much as the earlier analysis made and some more (the arms taken from it are put in one by one;
  // an arm run again may make more than it did, and growing the store past its room would move all of it).
  const Store& was = prev->moduleStore_;
  auto room = [](auto& v, size_t n) { v.reserve(n + n / 8 + 16); };
  room(moduleStore_.objects, was.objects.size());
  room(moduleStore_.events, was.events.size());
  room(moduleStore_.points, was.points.size());
  room(moduleStore_.arms, was.arms.size());
  room(moduleStore_.regions, was.regions.size());
  for (const ArmRecord& r : prev->arms_) {
    if (!r.reusable) continue;
    auto it = seed_.move.defs.find(r.key);
    const void* key = it == seed_.move.defs.end() ? r.key : it->second;
    if (key) seeded_.emplace(key, &r);
  }
}

const FileAnalysis::ArmRecord* FileAnalysis::seededArm(char kind, const void* key) const {
  if (bodyChanged_) return nullptr;  // an arm here changed the module body's objects: the rest run again
  auto it = seeded_.find(key);
  return it == seeded_.end() || it->second->kind != kind ? nullptr : it->second;
}

bool FileAnalysis::replayArm(const ArmRecord& old, int index, ArmRecord& made) {
  // Taken apart when nothing else holds the earlier analysis (each part is taken once), else copied.
  Store& from = const_cast<Store&>(seed_.previous->moduleStore_);
  // `x` put at the end of `to` (moved when the earlier analysis is taken apart, else copied).
  auto take = [this](auto& to, auto& x) -> auto& {
    if (ownsPrevious_) return to.emplace_back(std::move(x));
    return to.emplace_back(x);
  };
  Store& to = moduleStore_;
  StoreMark at = markOf();
  Relocation rel{bodyMark_, old.begin, old.end, at, seed_.move};
  // What it depends on: the same functions, unchanged; a driven class's hooks, the same ones in order.
  for (const void* d : old.reads) made.reads.push_back(rel.def(d));
  for (const FunctionDef* f : old.called) made.called.push_back(static_cast<const FunctionDef*>(rel.def(f)));
  if (old.members.size() != made.members.size()) return false;
  for (size_t i = 0; i < old.members.size(); ++i)
    if (rel.def(old.members[i]) != made.members[i]) return false;
  for (Cut c : old.cuts) {
    rel.site(c.site.file, c.site.range);
    made.cuts.push_back(std::move(c));
  }
  if (!rel.ok) return false;
  // The limits decide nothing differently: this analysis stands where the earlier one did at the arm's start,
  // or each limit check answers here as it did there (limitsAlike).
  const Budget& budget = session_.budget();
  size_t work = old.workAfter - old.workBefore;
  bool exact = at.objects == old.begin.objects && budget.work == old.workBefore && budget.copied == old.copiedBefore;
  if (!exact && !limitsAlike(old, at.objects, budget.work, budget.copied, work)) return false;

  // Each part is put at its place here once (room made as push_back would, but once for the whole part),
  // then moved onto this text where it lies.
  auto room = [](auto& v, size_t more) {
    if (v.capacity() < v.size() + more) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
  };
  room(to.points, old.end.points - old.begin.points);
  room(to.arms, old.end.arms - old.begin.arms);
  room(to.objects, old.end.objects - old.begin.objects);
  room(to.events, old.end.events - old.begin.events);
  room(to.regions, old.end.regions - old.begin.regions);
  for (size_t i = old.begin.points; i < old.end.points; ++i)
    to.points.push_back(Point{static_cast<int>(to.points.size()), rel.arm(from.points[i].arm)});
  for (size_t i = old.begin.arms; i < old.end.arms; ++i) {
    Arm& a = take(to.arms, from.arms[i]);
    a.construct = rel.construct(a.construct);
    a.parent = rel.arm(a.parent);
    if (a.resumeAt >= 0) a.resumeAt = rel.point(a.resumeAt);
    rel.set(a.test);
  }
  if (old.end.arms > old.begin.arms) to.arms[at.arms].index = index;  // the arm's own, numbered here
  for (size_t i = old.begin.objects; i < old.end.objects && rel.ok; ++i) {
    Obj& o = take(to.objects, from.objects[i]);
    o.parent = rel.obj(o.parent);
    o.owner = rel.obj(o.owner);
    o.point = rel.point(o.point);
    o.function = static_cast<const FunctionDef*>(rel.def(o.function));
    o.cls = static_cast<const ClassDef*>(rel.def(o.cls));
    rel.origin(o.origin);
    if (ObjMore* more = o.moreIfAny()) {
      for (ValueSet& e : more->elements) rel.set(e);
      for (ValueSet& in : more->inputs) rel.set(in);
      for (Origin& in : more->inputOrigins) rel.origin(in);
      for (const auto& [k, v] : more->tags) rel.text(v);
    }
  }
  for (size_t i = old.begin.events; i < old.end.events && rel.ok; ++i) {
    Event& e = take(to.events, from.events[i]);
    e.target = rel.obj(e.target);
    for (ValueSet& a : e.args) rel.set(a);
    for (auto& kw : e.kwargs) rel.set(kw.second);
    rel.origin(e.origin);
    e.point = rel.point(e.point);
    for (const auto& [k, v] : e.attrs()) rel.text(v);
  }
  for (size_t i = old.begin.regions; i < old.end.regions && rel.ok; ++i) {
    Region& r = take(to.regions, from.regions[i]);
    rel.set(r.subject);
    for (Term& t : r.terms) {
      rel.set(t.left);
      rel.set(t.right);
    }
    r.begin = rel.point(r.begin);
    r.end = rel.point(r.end);
  }
  if (!rel.ok) {  // back to where it stood
    to.objects.resize(at.objects);
    to.events.resize(at.events);
    to.points.resize(at.points);
    to.arms.resize(at.arms);
    to.regions.resize(at.regions);
    made.reads.clear();
    made.called.clear();
    made.cuts.clear();
    return false;
  }
  to.constructs = at.constructs + (old.end.constructs - old.begin.constructs);
  // What running it does to the task: the calls it marks, the cuts it notes, the work it costs.
  for (const FunctionDef* f : made.called) session_.markCalled(f);
  for (const Cut& c : made.cuts) session_.noteCut(c);
  Budget& b = session_.budget();
  made.begin = at;
  made.end = markOf();
  made.workBefore = b.work;
  made.copiedBefore = b.copied;
  b.work += work;
  b.copied += old.copiedAfter - old.copiedBefore;
  made.workAfter = b.work;
  made.copiedAfter = b.copied;
  made.fileChecks = old.fileChecks.moved(old.begin.objects, at.objects, old.copiedBefore, made.copiedBefore);
  made.reusable = true;
  made.limited = old.limited;
  return true;
}

}  // namespace shardlint::semantic
