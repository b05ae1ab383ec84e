// Function summaries: what a function does (its events, what it returns, the
// attributes it sets), relative to its parameters, computed once and instantiated at
// each call site. A summary that depends only on the function's own code and the
// modules it reaches is *pure*: the same in every analysis task of a run, so a
// SummaryCache shares it between tasks and threads. One that the depth limit or a call back
// into a function further up the chain cut short depends on where it was first reached and
// stays in its task; a function's call of itself is cut wherever it is computed and keeps it pure.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "semantic/CallModel.h"
#include "semantic/Model.h"
#include "semantic/ModuleIndex.h"

namespace shardlint::semantic {

struct Summary {
  const FunctionDef* def = nullptr;
  Store store;
  std::vector<ObjId> params;  // the Arg object of each parameter
  ValueSet returns;
  std::vector<std::pair<std::string, ValueSet>> attrWrites;  // object key ("#3.opt") -> value at exit
  bool truncated = false;  // a recursive call or a size or work limit cut it short
  // The body's meaning depends on what its parameters or module globals are at the
  // call site (a framework method called on them, a call of a parameter). Callers
  // then interpret the body in their own context instead of instantiating this.
  bool contextDependent = false;
  // A method that called others on its own `self` (`self.build_mesh()`) and took them from this class: it holds
  // for a receiver of exactly this class (a subclass may override them), and is interpreted in the caller's
  // context for any other.
  const ClassDef* receiverClass = nullptr;
  // The receiver is not the first parameter but the `self` of the method the function is nested in (a closure:
  // the caller's `self`).
  bool receiverByClosure = false;
  // The body produced something a call model gave meaning to (a tagged object or a
  // domain event). A summary without that, and not context-dependent, cannot matter to
  // any rule, so a function never called is not analysed in place.
  bool hasDomainFacts = false;
  // The same wherever it is computed (see the file comment). Only pure summaries are shared.
  bool pure = true;
  // Functions it calls, directly or through its callees' summaries.
  std::set<const FunctionDef*> calls;
  // Readable facts, one per line, relative to the parameters ("arg0" ...).
  std::string describe() const;
};

// Nesting of summary computations (a callee's summary is computed inside its caller's).
// Past it the callee is treated like a recursive call, and the cut is reported.
constexpr int kMaxSummaryDepth = 48;

// Objects per store: bounds pathological summary fan-out. A linted file's store counts its module body's
// with one exclusive arm's at a time (Store::uncounted), and holds at most kMaxFileObjects in all.
constexpr size_t kMaxStoreObjects = 10000;
constexpr size_t kMaxFileObjects = kMaxStoreObjects * 3 / 2;

// Work limits. The task's own interpretation (a linted file's module body and the
// functions it inlines) has one Budget; each summary computation has a fresh one, so a
// summary does not depend on the work done before it. Past kInlineBudget statements
// calls use summaries only; past kWorkBudget they are not followed; past kCopyBudget
// summaries are no longer instantiated. Keeps pathological inputs bounded and results
// deterministic.
struct Budget {
  size_t work = 0;
  size_t copied = 0;
  static constexpr size_t kInlineBudget = 50000;
  static constexpr size_t kWorkBudget = 150000;
  static constexpr size_t kCopyBudget = 400000;
  static constexpr size_t kMaxInstantiated = 8000;
};

// The file's limit checks (kMaxFileObjects, Budget::kCopyBudget) one run of the task's own interpretation made,
// for the instantiations the store's own limits let through (Interp::fileAllows): the most objects and copies
// one let in asked for, the fewest objects one refused for its objects asked for, the fewest copies one refused
// for its copies alone asked for. With them an arm is taken where the store or the copy count stands elsewhere
// (FileAnalysis::replayArm).
struct FileLimitChecks {
  size_t keptObjects = 0, keptCopies = 0;  // 0: none let in
  size_t refusedObjects = SIZE_MAX, refusedCopies = SIZE_MAX;  // SIZE_MAX: none refused so
  void note(size_t objects, size_t copies) {
    if (objects > kMaxFileObjects) {
      refusedObjects = std::min(refusedObjects, objects);
    } else if (copies > Budget::kCopyBudget) {
      refusedCopies = std::min(refusedCopies, copies);
    } else {
      keptObjects = std::max(keptObjects, objects);
      keptCopies = std::max(keptCopies, copies);
    }
  }
  // The same checks made from a store of `objects` and a copy count of `copies` instead of `objectsWere` and
  // `copiesWere` (what each asked for includes where the run started).
  FileLimitChecks moved(size_t objectsWere, size_t objects, size_t copiesWere, size_t copies) const {
    auto move = [](size_t x, size_t none, size_t was, size_t now) { return x == none ? none : x - was + now; };
    return {move(keptObjects, 0, objectsWere, objects), move(keptCopies, 0, copiesWere, copies),
            move(refusedObjects, SIZE_MAX, objectsWere, objects), move(refusedCopies, SIZE_MAX, copiesWere, copies)};
  }
  // Whether each check answers as it did: every one let in fits, every one refused does not.
  bool answerAsMade() const {
    return keptObjects <= kMaxFileObjects && keptCopies <= Budget::kCopyBudget &&
           (refusedObjects == SIZE_MAX || refusedObjects > kMaxFileObjects) &&
           (refusedCopies == SIZE_MAX || refusedCopies > Budget::kCopyBudget);
  }
};

// Finds definitions in other modules of the project (cross-file analysis).
// Qualified names are absolute dotted names ("utils.optim.build_optimizer"), as
// written in `from`. The answer must depend only on (qualname, from).
class ModuleProvider {
 public:
  virtual ~ModuleProvider() = default;
  struct Found {
    const FunctionDef* function = nullptr;
    const ClassDef* cls = nullptr;
  };
  virtual Found resolve(std::string_view qualname, const Module& from) = 0;
  // The interpretation is about to read `module`'s syntax tree (its nodes must be valid
  // until the task ends).
  virtual void use(const Module& module) { (void)module; }
  // The text of a data file (a YAML config) that `from`'s code opens by the relative path `spelled`:
  // looked for beside `from`'s file and at the root of its project (where a run is usually started);
  // nullopt when neither holds it, both hold different files, or the path leaves the project. Records
  // that `from` depends on those places (an edit, a creation or a removal there changes its results).
  // The answer must depend only on (spelled, from).
  virtual std::optional<std::string> dataFile(std::string_view spelled, const Module& from) {
    (void)spelled;
    (void)from;
    return std::nullopt;
  }
};

// Pure summaries shared by the tasks of a run that have the same call-model facts.
// Thread-safe; a summary never changes once inserted.
class SummaryCache {
 public:
  // At most `maxItems` objects and events are kept: past it the least recently used summaries
  // are dropped (a pure summary computed again is the same, so this costs time, never results).
  explicit SummaryCache(size_t maxItems = kMaxItems) : maxItems_(maxItems) {}
  // The summary of `def`, or null; a summary found counts as used.
  std::shared_ptr<const Summary> find(const FunctionDef* def) const;
  // Keeps the first summary inserted for `def` and returns it.
  std::shared_ptr<const Summary> insert(std::shared_ptr<const Summary> s);
  // Drops the summaries of `module`'s functions (the module is about to be freed); with `dropped`, hands
  // them over instead of freeing them here (the caller frees them later, off the latency path).
  void forget(const Module* module, std::vector<std::shared_ptr<const Summary>>* dropped = nullptr);
  // A language server's session, which keeps its summaries between edits.
  static constexpr size_t kMaxItems = 150000;
  // A one-shot run, where the memory goal rules (scripts/bench/README.md, "Where the memory goes").
  static constexpr size_t kOneShotItems = 60000;
  size_t items() const;

 private:
  static size_t itemsOf(const Summary& s) { return s.store.objects.size() + s.store.events.size(); }
  struct Kept {
    std::shared_ptr<const Summary> summary;
    std::list<const FunctionDef*>::iterator used;  // its place in used_
  };
  const size_t maxItems_;
  mutable std::mutex mu_;
  size_t items_ = 0;
  mutable std::list<const FunctionDef*> used_;  // least recently used first, for eviction
  // By module, so that forgetting a module does not scan every summary.
  std::unordered_map<const Module*, std::unordered_map<const FunctionDef*, Kept>> map_;
};

// Moves a summary onto a new text of its module: a language server's edit left the function, and
// everything its summary was made from, as it was (driver/ModuleTableCarry.cpp decides that). A
// definition of the old module goes through `defs` (old -> new; mapped to null: it changed, and the
// summary cannot move), a place in `fromFile` through `place` (nullopt: the text there changed), a
// definition or place of another module stays as it is unless that module was dropped too (`deadDefs`,
// `deadFiles`). Nothing is dereferenced through the old pointers: their modules may be gone.
// `firstMoved`: the first byte the edit changed (places from there on moved or gone). A call model's
// annotation (an object's tag, a domain event's attribute) may spell a place as text ("3:1200-1240"), which
// cannot be moved: one holding a number that large does not move (spellsPlaceFrom).
struct SummaryMove {
  uint32_t fromFile = 0, toFile = 0;
  std::unordered_map<const void*, const void*> defs;
  // The edit: the old text's bytes [editBegin, oldEnd) are [editBegin, newEnd) in the new one (the defaults:
  // the same text, every place stays).
  uint32_t editBegin = UINT32_MAX, oldEnd = UINT32_MAX, newEnd = UINT32_MAX;
  // A place in `fromFile` where it is after the edit; none for a range in the changed bytes.
  std::optional<ByteRange> place(ByteRange r) const {
    if (r.end <= editBegin) return r;
    if (r.begin < oldEnd) return std::nullopt;
    return ByteRange{r.begin - oldEnd + newEnd, r.end - oldEnd + newEnd};
  }
  const std::unordered_set<const void*>* deadDefs = nullptr;
  std::vector<bool> deadFiles;  // by file id
  uint32_t firstMoved = UINT32_MAX;
  // `d` on the new text (itself for another module's); clears `ok` when it changed or its module was dropped.
  const void* def(const void* d, bool& ok) const;
  // Moves a place (when `write`); clears `ok` when its text changed or its module was dropped.
  void site(uint32_t& file, ByteRange& range, bool& ok, bool write = true) const;
};
// Whether `text` holds a decimal number of at least `first` (SummaryMove::firstMoved).
bool spellsPlaceFrom(std::string_view text, uint32_t first);
// `s` moved, or null when something in it cannot move. Moved in place when nothing else holds it, else
// copied.
// A summary that cannot move is given to `dropped` when there is one (the caller frees it later, off the
// latency path), else freed here.
std::shared_ptr<const Summary> moveSummary(std::shared_ptr<const Summary> s, const SummaryMove& move,
                                           std::vector<std::shared_ptr<const Summary>>* dropped = nullptr);

// Where an analysis limit cut the interpretation short (reported as SL002 notes).
struct Cut {
  Site site;           // the call (or the too-deep expression / statement) that was not followed
  std::string callee;  // its qualified name; empty for a cut by nesting depth
  std::string why;
};

// The state of one analysis task: the call model (with the task's facts), the module
// provider, the budgets, and the summaries computed here that are not shared.
class Session {
 public:
  explicit Session(CallModel& model, ModuleProvider* provider = nullptr, SummaryCache* shared = nullptr)
      : model_(model), provider_(provider), shared_(shared) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The summary of `def` (computed on first use), or null for a recursive call or one
  // past kMaxSummaryDepth. Marks the functions it calls as called.
  const Summary* summary(const FunctionDef* def);
  CallModel& model() { return model_; }
  ModuleProvider* provider() { return provider_; }
  Budget& budget() { return *budget_; }
  // A framework API the call model gives meaning to: its implementation is never interpreted.
  bool opaque(std::string_view qualname) const { return model_.frameworkApi(qualname); }
  bool called(const FunctionDef* def) const { return called_.count(def) > 0; }
  void markCalled(const FunctionDef* def) {
    called_.insert(def);
    if (recording_) recording_->called.push_back(def);
  }
  // Calls cut by the depth limit, first one per callee.
  const std::vector<Cut>& cuts() const { return cuts_; }
  void noteCut(Cut cut);
  // What the analysis used and did while a recording is on (FileAnalysis records its module body and each
  // exclusive arm, for a later analysis of the edited file to take an arm's results instead of running it).
  struct Recording {
    std::vector<const void*> reads;          // the functions whose summaries or bodies it used
    std::vector<const FunctionDef*> called;  // the functions it marked called
    std::vector<Cut> cuts;                   // every cut it noted (also one a first cut of the callee hid)
    // The task's own interpretation: how often a work budget or a file limit refused something, and the
    // file limit checks it made.
    size_t limitHits = 0;
    FileLimitChecks fileChecks;
  };
  // Starts recording into `r` (null: stops).
  void record(Recording* r) { recording_ = r; }
  Recording* recording() { return recording_; }
  // True while computing a summary kMaxSummaryDepth deep (summary() then returns null).
  bool atDepthLimit() const;
  size_t sharedHits() const { return sharedHits_; }
  // Summaries of `module`'s functions stay in this task (a linted file nothing imports:
  // no other task can use them, and they can then be released).
  void keepLocal(const Module* module) { keepLocal_ = module; }
  // Whether release() frees the summary of `def` (it is not shared with other tasks).
  bool mayRelease(const FunctionDef* def) const { return def->owner == keepLocal_ && keepLocal_; }
  // Functions a call from the task's own interpretation (the module body, an arm) interprets at once, without
  // computing their summary first (an earlier analysis found it depends on its callers, so such a call
  // interprets the body anyway): FileAnalysis::run.
  void runDirectly(std::unordered_set<const FunctionDef*> defs) { runDirectly_ = std::move(defs); }
  bool runsDirectly(const FunctionDef* def) const {
    return runDirectly_.count(def) > 0 && !local_.count(def) && !seeded_.count(def);
  }
  void noteDirectRun() { ++directRuns_; }
  // Whether this task has the summary of `def` without computing it (computed already, or carried over).
  bool atHand(const FunctionDef* def) const { return local_.count(def) > 0 || seeded_.count(def) > 0; }
  size_t directRuns() const { return directRuns_; }
  // The summary of `def` this task has at hand, without computing one.
  const Summary* known(const FunctionDef* def) const {
    auto it = local_.find(def);
    return it == local_.end() ? nullptr : it->second.get();
  }
  // Forgets the summary of `def` in this task (computed again if it is needed again).
  void release(const FunctionDef* def) { local_.erase(def); }
  // A summary carried over from an earlier analysis of its module (a language server's edit, or a second
  // pass over the same text): used as a computed one would be, when first asked for.
  void seed(std::shared_ptr<const Summary> s) { seeded_[s->def] = std::move(s); }
  size_t seededHits() const { return seededHits_; }
  // The pure summaries this task used of `module`'s functions (what a later analysis may carry over).
  std::vector<std::shared_ptr<const Summary>> pureSummariesOf(const Module* module) const;

 private:
  std::unique_ptr<Summary> compute(const FunctionDef* def);
  void note(const Summary& s);  // a recording: what using `s` reads and marks called
  CallModel& model_;
  ModuleProvider* provider_;
  SummaryCache* shared_;
  Budget taskBudget_;
  Budget* budget_ = &taskBudget_;
  int depth_ = 0;
  std::map<const FunctionDef*, std::shared_ptr<const Summary>> local_;  // everything this task used
  std::set<const FunctionDef*> inProgress_;
  std::set<const FunctionDef*> called_;
  std::vector<Cut> cuts_;
  std::set<std::string> cutCallees_;
  size_t sharedHits_ = 0;
  size_t seededHits_ = 0;
  size_t directRuns_ = 0;
  std::unordered_map<const FunctionDef*, std::shared_ptr<const Summary>> seeded_;
  const Module* keepLocal_ = nullptr;
  std::unordered_set<const FunctionDef*> runDirectly_;
  Recording* recording_ = nullptr;
};

}  // namespace shardlint::semantic
