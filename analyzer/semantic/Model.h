// The semantic model of one Python file: abstract objects, program points with
// their branch structure, and ordered events. Rules read it; the interpreter
// (Interpreter.h) builds it. Nothing here knows FSDP: domain meaning is added by a
// CallModel (see CallModel.h) through tags, inputs and domain events.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/SourceFile.h"

namespace shardlint::semantic {

using ObjId = int32_t;
using PointId = int32_t;
constexpr ObjId kNoObj = -1;
constexpr PointId kNoPoint = -1;

// A set of abstract objects an expression may evaluate to. Sorted, unique.
// Empty means "unknown".
using ValueSet = std::vector<ObjId>;
void addValue(ValueSet& vs, ObjId id);
void addValues(ValueSet& vs, const ValueSet& more);
// The truth value of a constant as Python spells it (`True`, `False`, `None`, `0`, `1.5`), or none.
std::optional<bool> truthOfConstant(std::string_view text);

enum class ObjKind : uint8_t {
  Ref,        // a qualified name that is not defined in the analysed code (torch.optim.AdamW, torch)
  Function,   // a function or method defined in the analysed code
  Class,      // a class defined in the analysed code
  Instance,   // the result of calling something (a constructed object)
  Derived,    // an attribute, item, element or method result of another object
  Container,  // a list / tuple / set / dict display
  Arg,        // a parameter of the function whose summary is being computed
  Global,     // a module-level variable read by a function (bound at each call site)
  Literal,    // a constant (True, 2, "fsdp")
};

// A place in the analysed sources: a file (index into the project's file table;
// 0 for a single-file run) and a byte range in it.
struct Site {
  uint32_t file = 0;
  ByteRange range;
  bool operator==(const Site& o) const {
    return file == o.file && range.begin == o.range.begin && range.end == o.range.end;
  }
  bool operator!=(const Site& o) const { return !(*this == o); }
};

// Where something happened: its own site plus the call sites through which a
// function summary put it into the analysed body (outermost first).
struct Origin {
  uint32_t file = 0;
  ByteRange range;
  std::vector<Site> via;
  Site site() const { return Site{file, range}; }
  Site primary() const { return via.empty() ? site() : via.front(); }
  // Where this origin shows in `file`: the site itself when it is there, else the innermost call site
  // there that leads to it (the call of a helper in another module, not the `main()` that calls the
  // function making that call); primary() when the chain never passes through `file`.
  Site siteIn(uint32_t inFile) const {
    if (file == inFile) return site();
    for (auto it = via.rbegin(); it != via.rend(); ++it)
      if (it->file == inFile) return *it;
    return primary();
  }
  // Where this origin shows in the frame that `context` was reached through:
  // the first call site below the call chain both share, or the site itself.
  Site primaryIn(const Origin& context) const {
    size_t k = 0;
    while (k < via.size() && k < context.via.size() && via[k] == context.via[k]) ++k;
    return k < via.size() ? via[k] : site();
  }
};

struct FunctionDef;
struct ClassDef;

// An optional part kept on the heap and copied with its owner (a std::unique_ptr with value
// semantics), so the owner keeps its default copy and move.
template <class T>
class HeapPart {
 public:
  HeapPart() = default;
  HeapPart(HeapPart&&) noexcept = default;
  HeapPart& operator=(HeapPart&&) noexcept = default;
  HeapPart(const HeapPart& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  HeapPart& operator=(const HeapPart& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  T* get() const { return p_.get(); }
  T& make() {  // made on first use
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }
  void reset() { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

// Data a store derives from itself and keeps with it (RegionIndex, ReaderFacts): owned through an atomic
// pointer that readers on several threads may install (the first one wins), dropped when the store is
// copied, handed over when it is moved.
template <class T>
class DerivedPart {
 public:
  DerivedPart() = default;
  DerivedPart(const DerivedPart&) {}
  DerivedPart& operator=(const DerivedPart&) {
    reset();
    return *this;
  }
  DerivedPart(DerivedPart&& o) noexcept : p_(o.p_.exchange(nullptr)) {}
  DerivedPart& operator=(DerivedPart&& o) noexcept {
    if (this != &o) delete p_.exchange(o.p_.exchange(nullptr));
    return *this;
  }
  ~DerivedPart() { reset(); }
  void reset() { delete p_.exchange(nullptr); }
  T* get() const { return p_.load(std::memory_order_acquire); }
  // Installs `fresh` when there is none and returns it, else the one another thread installed first.
  T* install(std::unique_ptr<T> fresh) const {
    T* expected = nullptr;
    if (p_.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel)) return fresh.release();
    return expected;
  }
  // Replaces the one there (only the one thread that writes the store does this).
  T* replace(std::unique_ptr<T> fresh) const {
    T* mine = fresh.get();
    delete p_.exchange(fresh.release(), std::memory_order_acq_rel);
    return mine;
  }

 private:
  mutable std::atomic<T*> p_{nullptr};
};

// Which regions cover each point of a store, for the point queries the rules make (regionsAt, neverRuns,
// conditionsAt) once the interpretation is over: without it each query walks every region of the store.
// Built on the first query after the store's regions or points changed in number (regions are added
// complete, never moved); a copy of the store builds its own. The first build may race between threads
// reading a finished store (one wins, the other's is dropped); a rebuild after a change happens only
// while the store is still being written, by the one thread that writes it.
class RegionIndex {
 public:
  struct Data {
    size_t regions = 0, points = 0;
    bool tooLarge = false;        // the index would be too large: the queries walk the regions
    std::vector<uint32_t> start;  // per point, where its regions begin in `ids` (points + 1 entries)
    std::vector<uint32_t> ids;    // region indexes, each point's in the store's order
  };
  // The index for `regions` over `points` points, or null when it would be too large to build (then
  // the caller walks the regions).
  template <class Regions>
  const Data* get(const Regions& regions, size_t points) const;

 private:
  DerivedPart<Data> data_;
};

// What readers of a finished store derive from it and keep with it (a rule's per-store facts, which a
// query per event would otherwise derive again), one value per key (the address of something the reader
// owns): made by `make` on first use, and made again when the store has changed in size since. A copy of
// the store starts with none. Thread-safe: readers on several threads share one value; `make` may ask for
// another key's facts of the same store.
class ReaderFacts {
 public:
  struct Stamp {
    size_t objects = 0, events = 0, points = 0, regions = 0;
    bool operator==(const Stamp& o) const {
      return objects == o.objects && events == o.events && points == o.points && regions == o.regions;
    }
  };
  std::shared_ptr<const void> get(const void* key, const Stamp& stamp,
                                  const std::function<std::shared_ptr<const void>()>& make) const;

 private:
  struct Entry {
    Stamp stamp;
    std::shared_ptr<const void> value;
  };
  struct Data {
    std::recursive_mutex mu;  // a reader's `make` may ask for another key's facts
    std::map<const void*, Entry> entries;
  };
  DerivedPart<Data> data_;
};

// The fields most objects leave empty (containers, domain annotations, ownership edges),
// kept apart so a plain object stays small: summaries hold tens of thousands of objects.
struct ObjMore {
  std::string ownerEdge;
  std::vector<ValueSet> elements;  // Container elements (dict: values)
  std::vector<std::string> keys;   // Container dict keys (literal text, "" if not a literal)
  std::map<std::string, std::string, std::less<>> tags;
  std::vector<ValueSet> inputs;
  std::vector<Origin> inputOrigins;  // where each input expression appeared (same length as inputs)
};

struct Obj {
  ObjKind kind = ObjKind::Instance;
  char containerKind = 0;  // Container: 'l' list, 't' tuple, 's' set, 'd' dict
  int argIndex = -1;       // Arg only
  // Ref/Instance: qualified name of the callee; Function/Class: qualified name;
  // Derived: the edge (".name", "[0]", "['k']", "[*]", ".name()"); Literal: the value
  // (strings unquoted); Arg: the parameter name; Global: the variable name.
  std::string name;
  std::string label;      // the first name or attribute it was bound to ("model", "self.opt")
  ObjId parent = kNoObj;  // Derived only
  // Containment through attribute stores: `self.encoder = Encoder()` makes the
  // encoder owned by `self` under ".encoder" (first store wins; the edge is ownerEdge()).
  ObjId owner = kNoObj;
  PointId point = kNoPoint;
  const FunctionDef* function = nullptr;  // Function
  const ClassDef* cls = nullptr;          // Class, or Instance of a class defined in the file
  Origin origin;

  // Read: empty when never set. Written through more(), which makes the rare part.
  const std::string& ownerEdge() const { return rare().ownerEdge; }
  const std::vector<ValueSet>& elements() const { return rare().elements; }
  const std::vector<std::string>& keys() const { return rare().keys; }
  // Domain annotations (set by the CallModel).
  const std::map<std::string, std::string, std::less<>>& tags() const { return rare().tags; }
  const std::vector<ValueSet>& inputs() const { return rare().inputs; }
  const std::vector<Origin>& inputOrigins() const { return rare().inputOrigins; }
  ObjMore& more() { return more_.make(); }
  ObjMore* moreIfAny() { return more_.get(); }  // null when nothing rare was ever set
  // What a CallModel sets: a domain annotation; the inputs (and where each appeared, or none);
  // a container's elements.
  void setTag(std::string_view key, std::string value) { more().tags[std::string(key)] = std::move(value); }
  void setInputs(std::vector<ValueSet> values, std::vector<Origin> origins = {}) {
    more().inputs = std::move(values);
    more().inputOrigins = std::move(origins);
  }
  void setElements(std::vector<ValueSet> values) { more().elements = std::move(values); }

  bool hasTag(std::string_view t) const { return tags().find(t) != tags().end(); }
  std::string_view tag(std::string_view t) const {
    auto it = tags().find(t);
    return it == tags().end() ? std::string_view() : std::string_view(it->second);
  }

 private:
  const ObjMore& rare() const {
    static const ObjMore kNone;
    return more_.get() ? *more_.get() : kNone;
  }
  HeapPart<ObjMore> more_;
};

enum class EventKind : uint8_t {
  Call,        // a call of a qualified name or of a function defined in the file
  MethodCall,  // obj.method(...)
  SetAttr,     // obj.attr = value
  Domain,      // an event a CallModel recorded (e.g. "wrap")
  Return,      // `return value` (args[0] is the value)
};

struct Event {
  EventKind kind = EventKind::Call;
  std::string name;  // callee qualname / method name / attribute name / domain kind
  ObjId target = kNoObj;
  std::vector<ValueSet> args;
  std::vector<std::pair<std::string, ValueSet>> kwargs;
  Origin origin;
  PointId point = kNoPoint;

  // A domain event's attributes (set by the CallModel): kept apart, since most events have none and
  // summaries hold tens of thousands of events.
  using Attrs = std::map<std::string, std::string, std::less<>>;
  const Attrs& attrs() const {
    static const Attrs kNone;
    return attrs_.get() ? *attrs_.get() : kNone;
  }
  void setAttrs(Attrs a) {
    if (a.empty()) attrs_.reset();
    else attrs_.make() = std::move(a);
  }
  void setAttr(const std::string& k, std::string v) { attrs_.make()[k] = std::move(v); }
  std::string_view attr(std::string_view k) const {
    const Attrs& a = attrs();
    auto it = a.find(k);
    return it == a.end() ? std::string_view() : std::string_view(it->second);
  }
  // Every object mentioned by the event's arguments.
  ValueSet allArgs() const;
  // A call's argument given by `keyword`, else the positional one at `index`; null when neither is there.
  const ValueSet* arg(size_t index, std::string_view keyword) const {
    for (const auto& [k, v] : kwargs)
      if (k == keyword) return &v;
    return index < args.size() ? &args[index] : nullptr;
  }

 private:
  HeapPart<Attrs> attrs_;
};

// A branch arm: one arm of an if/elif/else, a case, an except handler, the body
// of a loop (which may run zero or many times) or of a try (which may stop part-way).
struct Arm {
  int construct = -1;
  int index = 0;
  bool loop = false;
  int parent = -1;
  bool terminates = false;  // the arm always ends in return/raise
  // Some path of the arm ends in a `return` of the function it is in; when that function is a call
  // (interpreted in place or instantiated from its summary), the caller resumes at `resumeAt`, the
  // first point after the call: leaving such an arm reaches the points from there on.
  bool returns = false;
  PointId resumeAt = -1;
  // An `if flag:` arm (or the `else` of one, `testNegated`): the flag's values. When they are all
  // constants of the arm's truth value, the arm is always taken (see Store::dominates).
  ValueSet test;
  bool testNegated = false;
  // The arm is taken on every path: an `if`/`else` arm whose flag is known to select it.
  bool alwaysTaken(const class Store& st) const;
};

struct Point {
  int ordinal = 0;
  int arm = -1;
};

// One part of a "truth" region's condition that is more than a plain flag (Region::terms): a flag
// (Truth: `left` are its values), a comparison of `left` with `right` (`==`, `!=`, `is`, `is not`,
// `in`, `not in`; for `in`, `right` are the containers), or `not`/`and`/`or` of other terms. Unknown
// stands for any part that is never known (a call, `a < b`).
struct Term {
  enum class Op : uint8_t { Unknown, Truth, Eq, NotEq, Is, IsNot, In, NotIn, Not, And, Or };
  Op op = Op::Unknown;
  bool display = false;  // In/NotIn: `right` was written as a tuple, list or set display
  ValueSet left, right;
  std::vector<int> operands;  // Not/And/Or: indexes into Region::terms
};

// A stretch of code that runs under a known condition: the arm of an
// `if isinstance(x, C)` / `if hasattr(x, "a")` (or under a name bound to such a
// test), the rest of a block after `if not <test>: return`, or the body of a
// `with <callee>(...)`, or the body of a loop or comprehension whose target binds a name to two or more
// objects, one per iteration ("iteration": subject is those objects, names the name). It covers the
// points [begin, end) created while that code ran (points are numbered in creation order, inlined calls
// included).
//
// A "truth" region is the arm of `if flag:` / `if self.flag:` (or, negated, its `else`), where the
// flag is a constant, a parameter or a module global: a call site may bind it to a constant
// (`flag=False` by default), and then the region's code never runs (Store::neverRuns). Its one name
// is the condition as written. A condition that is more than one flag (`mode == "fsdp2"`,
// `a or b`, `x is None`, `not (a and b)`) keeps its parts in `terms` (terms[0] is the whole
// condition); `subject` is then every object its parts read.
//
// A "condition" region is the code under one part of an `if` condition (an `and` is split in its
// parts; `not` flips `negated`), also the rest of a block after `if <cond>: return`, whatever
// the part reads (a call's result too): a comparison of an operand with a constant
// (`names` = {the part as written, the operator, the constant as written}; the constant always
// on the right: `0 == x` reads as `x == 0`, `0 < x` as `x > 0`), or an operand tested for truth
// (`names` = {the part as written, "truth"}); `subject` is what the operand may be. Rules decide
// what the operand means; the engine never decides such a condition.
struct Region {
  std::string kind;                // "isinstance", "hasattr", "with", "iteration", "truth" or "condition"
  ValueSet subject;                // the object tested (empty for "with")
  std::vector<std::string> names;  // class qualified names / the attribute / the context manager's callee
  bool negated = false;            // the code runs when the test is false
  std::vector<Term> terms;         // "truth" only: empty for a plain flag
  PointId begin = 0;
  PointId end = 0;
  bool covers(PointId p) const { return p >= begin && p < end; }
};

class Store {
 public:
  std::vector<Obj> objects;
  std::vector<Event> events;
  std::vector<Point> points;
  std::vector<Arm> arms;
  std::vector<Region> regions;
  int constructs = 0;
  // Interning tables of the interpreter, so every frame over this store agrees on
  // object identity (`model.layers` is one object however often it is read).
  // Made on first use and dropped when a summary is finished (dropMemo): a finished store
  // keeps only a null pointer.
  struct Memo {
    std::map<std::pair<ObjId, std::string>, ObjId> derived;
    std::map<std::string, ObjId, std::less<>> refs;
    std::map<std::string, ObjId, std::less<>> literals;
    std::map<const void*, ObjId> defs;
  };
  Memo& memo() { return memo_.make(); }
  void dropMemo() { memo_.reset(); }
  // Forgets the interning of the objects from `first` on (they stay in the store): what an exclusive arm
  // made is then not found again by the arms after it (FileAnalysis::run).
  void forgetInterned(ObjId first);
  // Objects the store limit (kMaxStoreObjects) does not count: those of the exclusive arms before the
  // current one (FileAnalysis::run). All of them count towards kMaxFileObjects.
  size_t uncounted = 0;

  const Obj& obj(ObjId id) const { return objects.at(static_cast<size_t>(id)); }
  Obj& obj(ObjId id) { return objects.at(static_cast<size_t>(id)); }

  // Ordering queries (flow-sensitive, not path-sensitive).
  // True when some path executes `a` and later `b` (loops allow b's earlier text to run after a).
  bool mayHappenBefore(PointId a, PointId b) const;
  // True when `a` runs before `b` on every path that reaches `b` (arms known to be always taken,
  // Arm::alwaysTaken, count as straight-line code).
  bool dominates(PointId a, PointId b) const;
  // True when `a` comes before `b` in the same iteration (not only through a loop back edge).
  bool precedes(PointId a, PointId b) const;
  // The innermost loop arm enclosing both points, or -1.
  int commonLoop(PointId a, PointId b) const;
  bool insideArm(PointId p, int arm) const;
  // The regions whose code contains point `p`, outermost first.
  std::vector<const Region*> regionsAt(PointId p) const;
  // True when every path that runs `a` runs `b` later, within a's enclosing arms up to b's.
  bool armChainPrefix(PointId outer, PointId inner) const;
  // True when the code at `p` never runs: it is in a "truth" region whose condition is known to
  // have the other truth value on every path (`if flag:` with `flag` bound to False at the call
  // site, `if mode == "a":` with `mode` bound to "b", `if x is None:` with `x` bound to an object).
  bool neverRuns(PointId p) const;
  // The conditions of the "truth" regions around `p` that are not known here, as clauses naming
  // the condition as written ("`ignore_head` is true", "`cfg.fsdp` is false",
  // "`mode == "fsdp2"`", "`a or b` is false"), outermost first.
  std::vector<std::string> conditionsAt(PointId p) const;
  // The truth value of a "truth" region's condition (not counting `negated`) when it is the same on
  // every path, or none.
  std::optional<bool> conditionOf(const Region& r) const;
  // The truth value of a constant object (True, 0, "", a non-empty string), or none.
  std::optional<bool> truthOf(ObjId o) const;
  // Whether objects `a` and `b` are equal (`==`) when both are constants whose equality is known
  // (strings without escapes, decimal integers, True/False, None), or none.
  std::optional<bool> equalityOf(ObjId a, ObjId b) const;
  // Whether `o` is None: true for the constant None; false for another constant, a display, a
  // function or class, or an object made by calling a class (defined in the analysed code, or a
  // name spelled like one: `AdamW(...)`); none otherwise.
  std::optional<bool> isNone(ObjId o) const;

  // Lineage queries.
  bool derivesFrom(ObjId o, ObjId ancestor) const;  // o == ancestor or o is derived from it
  ObjId rootOf(ObjId o) const;
  // Like derivesFrom, but also through ownership (attribute stores).
  bool contains(ObjId ancestor, ObjId o) const;
  // Records that `value` objects are stored as `attr` of `target` (containment).
  void noteOwnership(ObjId target, const std::string& attr, const ValueSet& value);
  // Containers expanded recursively into their leaf objects.
  void flatten(const ValueSet& vs, ValueSet& out) const;
  // A readable object key: "model.layers[*]", "AdamW(...)".
  std::string describe(ObjId o) const;
  // The edge names from `ancestor` down to `o` ("" when o == ancestor); false if unrelated.
  bool pathFrom(ObjId o, ObjId ancestor, std::vector<std::string_view>& edges) const;
  // A readable dump of objects and events (for debugging and tests).
  std::string dump() const;
  // The facts a reader keeps with this store under `key` (ReaderFacts), made by `make()` (returning a
  // std::shared_ptr<T>) when there are none or the store has changed in size since they were made.
  template <class T, class Make>
  std::shared_ptr<const T> readerFacts(const void* key, Make&& make) const {
    ReaderFacts::Stamp stamp{objects.size(), events.size(), points.size(), regions.size()};
    return std::static_pointer_cast<const T>(
        readerFacts_.get(key, stamp, [&]() -> std::shared_ptr<const void> { return make(); }));
  }

 private:
  std::vector<int> armChain(int arm) const;  // root first
  // Calls f(region) for each region covering `p`, in the store's order, until f returns true.
  template <class F>
  bool anyRegionAt(PointId p, F&& f) const;
  HeapPart<Memo> memo_;
  RegionIndex regionIndex_;
  ReaderFacts readerFacts_;
};

template <class Regions>
const RegionIndex::Data* RegionIndex::get(const Regions& regions, size_t points) const {
  Data* d = data_.get();
  if (d && d->regions == regions.size() && d->points == points) return d->tooLarge ? nullptr : d;
  constexpr size_t kMaxEntries = size_t{1} << 23;  // 32 MiB of ids: beyond, the queries walk the regions
  auto fresh = std::make_unique<Data>();
  fresh->regions = regions.size();
  fresh->points = points;
  // The points [b, e) region `r` covers, clamped to the store's points (b >= e when none).
  auto span = [points](const auto& r, size_t& b, size_t& e) {
    b = r.begin < 0 ? 0 : static_cast<size_t>(r.begin);
    e = r.begin < 0 || r.end <= r.begin ? b : std::min(static_cast<size_t>(r.end), points);
  };
  size_t total = 0, b = 0, e = 0;
  for (const auto& r : regions) {
    span(r, b, e);
    if (b < e) total += e - b;
  }
  // Too large is remembered too: finding it out again on every query would cost as much as the walk.
  fresh->tooLarge = total > kMaxEntries;
  if (!fresh->tooLarge) {
    fresh->start.assign(points + 1, 0);
    for (const auto& r : regions) {
      span(r, b, e);
      for (size_t q = b; q < e; ++q) ++fresh->start[q + 1];
    }
    for (size_t q = 0; q < points; ++q) fresh->start[q + 1] += fresh->start[q];
    fresh->ids.resize(total);
    std::vector<uint32_t> fill(fresh->start.begin(), fresh->start.end() - 1);
    for (size_t i = 0; i < regions.size(); ++i) {
      span(regions[i], b, e);
      for (size_t q = b; q < e; ++q) fresh->ids[fill[q]++] = static_cast<uint32_t>(i);
    }
  }
  // Stale: replaced, only while the one writer of the store queries it (see above); else the first one
  // built (another thread's may have won).
  Data* mine = d ? data_.replace(std::move(fresh)) : data_.install(std::move(fresh));
  return mine->tooLarge ? nullptr : mine;
}

template <class F>
bool Store::anyRegionAt(PointId p, F&& f) const {
  if (p == kNoPoint || p < 0 || regions.empty()) return false;
  if (const RegionIndex::Data* d = regionIndex_.get(regions, points.size());
      d && static_cast<size_t>(p) < points.size()) {
    for (uint32_t k = d->start[static_cast<size_t>(p)]; k < d->start[static_cast<size_t>(p) + 1]; ++k)
      if (f(regions[d->ids[k]])) return true;
    return false;
  }
  for (const Region& r : regions)
    if (r.covers(p) && f(r)) return true;
  return false;
}

}  // namespace shardlint::semantic
