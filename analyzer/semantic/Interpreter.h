// The per-file interpretation: builds the semantic model of one Python file in a
// single pass over its tree: scopes and bindings (an environment per frame, keyed by
// object keys such as `model`, `#12.layers`), import resolution to qualified names,
// abstract objects and ordered events with their branch structure. Calls of
// functions defined in the project use their summaries (semantic/Summaries.h), or
// interpret the body in the caller's context. The module's index is
// semantic/ModuleIndex.h. Defined in FileAnalysis.cpp and Interpreter.cpp with the
// Interp*.cpp files beside it (Interpreter.cpp's first comment lists them).
#pragma once
#include <tree_sitter/api.h>

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/SourceFile.h"
#include "semantic/CallModel.h"
#include "semantic/Model.h"
#include "semantic/ModuleIndex.h"
#include "semantic/Summaries.h"

// Whether this is an AddressSanitizer build (GCC defines __SANITIZE_ADDRESS__; clang has the feature).
#if defined(__SANITIZE_ADDRESS__)
#define SHARDLINT_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDLINT_ASAN_BUILD 1
#endif
#endif
namespace shardlint::config {
struct YNode;
}

namespace shardlint::semantic {

#ifdef SHARDLINT_ASAN_BUILD
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

struct Frame;
class Interp;

// Names and attribute stores to their values (Frame::env, Frame::attrs), looked up by a string_view (a
// name read from the source, an attribute key built on the stack) without making a string for it.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using EnvMap = std::unordered_map<std::string, ValueSet, NameHash, std::equal_to<>>;

// The per-file interpretation: one linted file's module body, then the functions
// nothing in it called, each in its own exclusive arm. Built on the file's Module
// (its index) and the task's Session (summaries, budgets, the call model).
class FileAnalysis {
 public:
  FileAnalysis(const Module& module, Session& session) : module_(module), session_(session) {}
  FileAnalysis(const FileAnalysis&) = delete;
  FileAnalysis& operator=(const FileAnalysis&) = delete;

  // Analyses the module body and its uncalled functions.
  void run();
  const Module& module() const { return module_; }
  Session& session() { return session_; }
  const SourceFile& file() const { return module_.file(); }
  const Store& moduleStore() const { return moduleStore_; }
  struct Root {
    std::string name;  // "<module>" or the function's qualified name
    const Store* store;
  };
  // The stores rules check. Functions never called from the analysed code are
  // analysed in the module store (after its body, each in its own exclusive arm,
  // parameters unknown, module globals as they stand at the end of the module).
  std::vector<Root> roots() const;
  // ---- a language server's edits (semantic/ArmReplay.cpp): an arm taken from the analysis before the edit
  // The sizes of a store's parts.
  struct StoreMark {
    size_t objects = 0, events = 0, points = 0, arms = 0, regions = 0;
    int constructs = 0;
    bool operator==(const StoreMark& o) const {
      return objects == o.objects && events == o.events && points == o.points && arms == o.arms &&
             regions == o.regions && constructs == o.constructs;
    }
  };
  // What one exclusive arm after the module body made (run()), and what it depended on.
  struct ArmRecord {
    char kind = 0;               // 'f': a function nothing calls; 'd': a driven class; 'c': a constructor
    const void* key = nullptr;   // that function or class
    std::vector<const void*> members;  // 'd': the hooks it ran, in order
    StoreMark begin, end;        // its part of the store
    size_t workBefore = 0, workAfter = 0, copiedBefore = 0, copiedAfter = 0;  // the task's budget
    // It changed none of the module body's objects, and none was changed before it.
    bool reusable = false;
    // A limit (the task's work or copy budget, the file's object limit) refused something in it: taken only
    // where each limit check answers as it did (limitsAlike), so that each limit decides as it did.
    bool limited = false;
    FileLimitChecks fileChecks;  // the file limit checks it made
    std::vector<const void*> reads;          // sorted
    std::vector<const FunctionDef*> called;  // sorted
    std::vector<Cut> cuts;
  };
  // An earlier analysis of the file (before an edit, or of the same text) and how its places and
  // definitions move onto this one (semantic::SummaryMove). The table gives one only when the edit left the
  // module's own statements as they were (it lies in functions' texts or in a comment).
  struct ArmSeed {
    std::shared_ptr<const FileAnalysis> previous;
    SummaryMove move;
  };
  // Records what each arm made and read, for a later analysis to take (a language server's lints).
  void recordArms() { recordArms_ = true; }
  void seedArms(ArmSeed seed) { seed_ = std::move(seed); }
  // The earlier analysis, given up after run() (to be freed off the critical path).
  std::shared_ptr<const FileAnalysis> takePrevious() { return std::move(seed_.previous); }
  size_t armsReused() const { return armsReused_; }

  // What a method's body does with `self` (its first parameter), read from its syntax for a trainer class's
  // lifecycle (runLifecycle): the attributes it names (`self.X` anywhere) and those it assigns
  // (`self.X = ...`, also inside tuple targets).
  struct SelfSets {
    std::set<std::string> mentioned, assigned;
    std::string text;  // the method's text they were read from (their key in selfSets_)
  };

  const FunctionDef* enclosingFunction(ByteRange range) const { return module_.enclosingFunction(range); }
  const FunctionDef* findFunction(std::string_view qualname) const { return module_.findFunction(qualname); }
  const ClassDef* findClass(std::string_view qualname) const { return module_.findClass(qualname); }

 private:
  // After a constructor's arm ran `__init__` on `self` (a class nothing here instantiates): the class's
  // public methods, each in its own arm under that one, on the constructed instance (runLifecycle's comments).
  // `constructorActs`: that `__init__` recorded a domain event; else only methods whose own summary holds
  // domain facts run.
  void runLifecycle(Interp& in, Frame& frame, const ClassDef& cls, ObjId self, const Origin& origin,
                    bool constructorActs);

  // `def`'s SelfSets: read once per text of a method, in this analysis or the seed's (the same text parses
  // the same: the table seeds only analyses of error-free trees), walked in its body otherwise.
  std::shared_ptr<const SelfSets> selfSets(const FunctionDef& def);
  StoreMark markOf() const;
  // The arm recorded as `kind`/`key` in the seed's analysis, when it may be taken here.
  const ArmRecord* seededArm(char kind, const void* key) const;
  // Puts `old`'s part of the seed's store into this store (moved onto this text), as the arm would make it,
  // numbered `index` in its construct; false (nothing changed) when something in it cannot move or a limit
  // might decide differently here.
  bool replayArm(const ArmRecord& old, int index, ArmRecord& made);
  static bool limitsAlike(const ArmRecord& old, size_t objects, size_t work, size_t copied, size_t armWork);
  // After the module body: whether the seed's arms may be taken (its body made the same, from the same).
  void prepareSeed();
  // Whether an object the module body made was changed since (compared with `bodyObjects_`).
  bool bodyObjectsChanged() const;

  const Module& module_;
  Session& session_;
  Store moduleStore_;
  bool recordArms_ = false;
  StoreMark bodyMark_;
  std::vector<const void*> bodyReads_;
  std::vector<Obj> bodyObjects_;  // the module body's objects as it left them (recordArms_)
  bool bodyChanged_ = false;      // an arm changed one of them
  std::vector<ArmRecord> arms_;
  ArmSeed seed_;
  std::unordered_map<const void*, const ArmRecord*> seeded_;  // this text's function or class -> its record
  size_t armsReused_ = 0;
  // Plain functions of the module whose summary depended on the caller, or that the module body or an arm ran
  // directly (recordArms_), each with the qualified names of the functions its summary called (for one run
  // directly, those the analysis before recorded): the next edit's analysis runs them directly (run()).
  std::unordered_map<std::string, std::vector<std::string>> inContext_;
  // Classes whose constructor ran in its own arm (recordArms_): the next edit's analysis runs it again without
  // first computing the `__init__` summary that decided it (run()).
  std::unordered_set<std::string> constructed_;
  bool ownsPrevious_ = false;  // nothing else holds seed_.previous: replayArm may take its parts apart
  // A method's text -> its SelfSets (selfSets), those this analysis used.
  struct TextKey {
    size_t operator()(std::string_view text) const { return static_cast<size_t>(textHash(text)); }
  };
  std::unordered_map<std::string_view, std::shared_ptr<const SelfSets>, TextKey> selfSets_;  // keys: their texts
};

// The interpreter over one Store. Public so that a CallModel can create objects
// and record domain events while it handles a call.
class Interp {
 public:
  Interp(const Module& module, Session& session, Store& store, Frame& frame, Summary* summary = nullptr);

  Store& store() { return st_; }
  const SourceFile& file() const { return mod_.file(); }
  Session& session() { return ses_; }
  PointId newPoint();
  ObjId newObject(ObjKind kind, std::string name, const Origin& origin);
  ObjId derive(ObjId parent, std::string edge);
  // The result of a call (`x.build()`, `f()`) made at `at`: one object per receiver and call site
  // (the call's own site, whatever chain of calls reached it), so that two calls of a builder are two
  // objects. The same site evaluated again (a loop's next iteration) gives the same object.
  ObjId deriveAt(ObjId parent, std::string edge, const Origin& at);
  ObjId ref(const std::string& qualname);
  // The constant `True`, `False`, `None` or a number, as written (one object per store).
  ObjId constant(const std::string& value);
  // The literal for a string with this value (`exact`: read exactly, see Store::equalityOf).
  ObjId stringConstant(const std::string& value, bool exact, const Origin& origin);
  void domainEvent(std::string kind, ObjId target, const Origin& origin,
                   std::map<std::string, std::string, std::less<>> attrs = {}, std::vector<ValueSet> args = {});
  // The literal text when `vs` is exactly one literal ("True", "2", "fsdp"), else empty.
  std::optional<std::string> literal(const ValueSet& vs) const;
  // A call model needs the value of `vs` and it is not known here: when it comes from the function's
  // parameters or module globals, the function's summary depends on its callers (they may bind them to
  // constants: defaults, dataclass fields, argparse defaults), so it is interpreted at each call site.
  void needsCallerValue(const ValueSet& vs);
  // The class whose methods a call on `r` runs: an instance's, or, in the summary of a method, the method's own
  // class for its `self` (the summary then holds for that receiver class only: Summary::receiverClass).
  const ClassDef* receiverClassOf(ObjId r);
  // Whether every receiver in `self` is of exactly class `cls` (an instance, or the `self` of this summary's
  // method of that class).
  bool receiverIs(const ValueSet& self, const ClassDef& cls);
  // Calls each callable `callees` holds (a function of the project, one another module defines, a
  // `functools.partial` of one) with these positional arguments, at `origin`: a call the analysed code
  // makes through a framework (a callback it hands over, run when the framework is called there). Its
  // events and objects come after the current point, as for a call written at `origin`. A callable
  // that comes from the caller (a parameter) makes the function's summary caller-dependent; any
  // other value (an unknown object, a library function) is not called. Returns what the calls return.
  ValueSet callCallable(const ValueSet& callees, const std::vector<ValueSet>& args, const Origin& origin);

  void execBlock(TSNode block);
  // A function's body, as a call or a summary runs it, inside a "with" region for its decorators.
  void execBody(const FunctionDef& def);
  void execStatement(TSNode stmt);
  ValueSet eval(TSNode expr);
  ValueSet lookupName(std::string_view name);
  ValueSet getAttr(ObjId obj, std::string_view attr);
  void assign(TSNode target, const ValueSet& value, const Origin& origin);
  // `obj.attr = value` (an assignment, or `setattr(obj, "attr", value)`): binds it, notes what `obj` owns,
  // and records the SetAttr event at `origin`.
  void setAttribute(ObjId obj, const std::string& attr, const ValueSet& value, const Origin& origin);
  // The SetAttr event alone (also for an item, `obj["key"] = value`, whose `attr` is the edge `['key']`).
  void recordSetAttr(ObjId obj, const std::string& attr, const ValueSet& value, const Origin& origin);
  // Puts a summary's objects and events into this store as if the function ran
  // here. `recordVia` false: no call site is added to origins (used for functions
  // never called from the analysed code, which are analysed in place).
  void instantiate(const Summary& s, const std::vector<ValueSet>& args, const Origin& callsite, ValueSet& result,
                   bool recordVia = true);
  // Whether instantiate() would put all of `s` here now (no store or file limit refuses it). The file's
  // limits decide, so the check is recorded as instantiate()'s is.
  bool fits(const Summary& s) {
    Room r = roomFor(s);
    return !r.overStore && fileAllows(r);
  }
  int openArm(int construct, int index, bool loop);
  // Interprets a function's body here, parameters bound to `args`, without a call
  // site (functions never called from the analysed code are checked this way).
  ValueSet analyzeInPlace(const FunctionDef& def, const std::vector<ValueSet>& args);
  Origin originOf(TSNode n) const;
  Frame& frame() { return frame_; }
  // The values of the `with` items whose bodies are running, innermost last.
  const std::vector<ValueSet>& contexts() const { return contexts_; }

 private:
  // What instantiating a summary here would add (its objects and events), the store's objects after it, and
  // which limit refuses it.
  struct Room {
    size_t size = 0, objects = 0;
    bool overStore = false, overFile = false;
  };
  Room roomFor(const Summary& s) const;
  // !r.overFile, the check recorded (Session::Recording) in the task's own interpretation.
  bool fileAllows(const Room& r);
  ValueSet evalCall(TSNode call);
  ValueSet callValue(ObjId callee, CallSite& site, TSNode node);
  ValueSet evalComprehension(TSNode n);
  // The method `method` of `cls`: its own, a base's in this module, else a base's another module of the
  // project defines (resolved through the module provider, at most a few bases deep).
  const FunctionDef* methodOf(const ClassDef& cls, std::string_view method, int depth = 0);
  bool superCall(TSNode object, const std::string& method, CallSite& site, ValueSet& result);
  void execIf(TSNode n);
  void execLoop(TSNode n, bool isFor);
  void execTry(TSNode n);
  void execWith(TSNode n);
  // The callee of a context manager's call (`pytest.raises(...)`: its qualified name; `self.x(...)`:
  // ".x"), appended to `names`; nothing for any other expression.
  void contextNames(TSNode call, std::vector<std::string>& names);
  void execMatch(TSNode n);
  void execImport(TSNode n);
  void execDefinition(TSNode n);
  std::string text(TSNode n) const;
  std::string subscriptEdge(TSNode sub);
  std::string envKeyFor(ObjId obj, std::string_view attr) const;
  std::vector<ValueSet> bindArgs(const FunctionDef& def, const CallSite& site, ObjId self);
  // The object a constant default stands for (FunctionDef::defaults, ClassDef::fields).
  ObjId defaultConstant(const std::string& text);
  // A dataclass's generated __init__ (ClassDef::fields) on `inst`.
  // Literal values re-made with the "option_default" tag (a default the command line may change).
  ValueSet optionDefaults(const ValueSet& vs, const Origin& origin);
  void bindDataclassFields(const ClassDef& cls, const CallSite& site, ObjId inst);
  // A method of an `argparse.ArgumentParser`; false when it is none the engine reads.
  bool argparseCall(ObjId parser, const std::string& method, const CallSite& site, ValueSet& result);
  // `yaml.safe_load(open("cfg.yaml"))`, `OmegaConf.load("cfg.yaml")`, `OmegaConf.merge(...)` and
  // `OmegaConf.from_cli()`: the values of a YAML file the code loads by a literal path (found through
  // the module provider); false when the call is none of those or what it loads is unknown.
  bool configLoadCall(const std::string& q, const CallSite& site, ValueSet& result);
  // The value of a loaded YAML node: mappings become dicts (`omega`: their keys also read as
  // attributes), scalars literals tagged "option_default" and "config_file" (`source`, the path as
  // written); nullopt for anything else (sequences, floats, aliases, tags, interpolations).
  std::optional<ObjId> configValue(const config::YNode& node, bool omega, const std::string& source, const Origin& origin,
                                   size_t& budget);
  // A dict made from a YAML mapping (configValue), and `key`'s value in it when it has exactly one.
  bool isConfigMapping(ObjId o) const;
  std::optional<ValueSet> configKey(ObjId mapping, std::string_view key) const;
  ObjId mergeConfigs(ObjId a, ObjId b, const Origin& origin, int depth);
  // At most this many nodes of a loaded YAML file are read (the rest is unknown).
  static constexpr size_t kMaxConfigNodes = 1000;
  // Regions for the tests a condition establishes (isinstance / hasattr, directly or
  // through a name bound to one; `not`, `and`, `or` followed), `negated` for its false arm.
  // `conditions`: also "truth" regions for comparisons and disjunctions (addCondition).
  void guardsOf(TSNode cond, bool negated, std::vector<Region>& out, bool conditions = true);
  static constexpr size_t kConditionsPerArm = 16;
  // A "truth" region for `if flag:` (see Region) when the flag is a constant, a parameter or a global.
  void addTruthTest(TSNode cond, bool negated, std::vector<Region>& out);
  // A "truth" region whose condition is more than one flag (Region::terms): a comparison
  // (`mode == "a"`, `x is None`, `x in ("a", "b")`) or a combination that is not a conjunction
  // (`a or b`, `not (a and b)`), when some part of it reads a constant, a parameter or a global.
  void addCondition(TSNode cond, bool negated, std::vector<Region>& out);
  // Appends the terms of `n` to `terms` and returns the index of its own; `bindable` is set when a
  // part reads a constant, a parameter or a global.
  int conditionTerm(TSNode n, std::vector<Term>& terms, bool& bindable, int depth);
  void addTest(const std::string& kind, const ValueSet& subject, const ValueSet& what, bool negated,
               std::vector<Region>& out);
  // A "condition" region (see Region) for one part of an `if` condition: a comparison of an operand
  // with a constant, or an operand tested for truth (a name, an attribute, a call).
  void addUndecided(TSNode cond, bool negated, std::vector<Region>& out);
  // The values of a condition's operand: the ones recorded when the condition was evaluated for a
  // call (a call is never evaluated twice), else the operand read again (no calls in it).
  ValueSet conditionOperand(TSNode n);
  // Ends `regions` (their begin already set) at the current point and stores the non-empty ones.
  void closeRegions(std::vector<Region>& regions);
  // After a loop's or comprehension's target was bound: an "iteration" region (opened at the
  // current point) for each name the target binds to two or more objects, one per iteration.
  void openIterationRegions(TSNode target, std::vector<Region>& out);

  ValueSet callFunction(const FunctionDef& def, const std::vector<ValueSet>& args, const Origin& callsite,
                        bool inPlace = false);

  // The environment across branches. Every write to frame_.env (or .attrs) goes through setVar, which
  // records the key's value before the innermost open arm (beginArm) changed it; endArm undoes
  // the arm and returns its changes, so each arm of an `if` / loop / `try` / `match` starts from
  // the same environment without a copy of it, and where the arms meet (apply(merged(...))) only
  // the keys some arm changed are touched. A change is a key's value after the arm (nullopt: unbound).
  using Changes = std::vector<std::pair<std::string, std::optional<ValueSet>>>;
  void setVar(const std::string& key, std::optional<ValueSet> value);
  void beginArm();
  Changes endArm();
  // After a loop body ran (once): the "truth" regions and arm tests made in it (from index
  // regionsBefore / armsBefore on) that read a value the body replaced (`body`) may also see the
  // replacement, on a later pass; one the body unbinds becomes unknown.
  void widenLoopTests(const Changes& body, size_t regionsBefore, size_t armsBefore);
  // The environment where `arms` (the changes of the arms that reach the join) meet, as changes
  // to the current one: each changed key gets the union of its values over the arms (an arm that
  // did not change it contributes the current value); unbound where no arm binds it.
  Changes merged(const std::vector<Changes>& arms) const;
  void apply(const Changes& changes);
  void clearEnv();
  struct EnvLog {
    Changes before;  // each key's value before its first write in the arm
    std::unordered_set<std::string> keys;
  };
  std::vector<EnvLog> logs_;
  // The map of frame_ a key lives in: attribute stores (`#...`) or names.
  EnvMap& envOf(const std::string& key);
  const EnvMap& envOf(const std::string& key) const;
  // A call interpreted in place: the value each attribute store had in the caller before this
  // interpretation first wrote it (nullopt: unbound), for the write-back when the call returns.
  bool trackAttrWrites_ = false;
  std::unordered_map<std::string, std::optional<ValueSet>> attrsBefore_;
  // Back from such a call: the stores it changed (its attrsBefore_), written here through setVar.
  void writeBackAttrs(std::unordered_map<std::string, std::optional<ValueSet>>& before);
  ObjId defObject(ObjKind kind, const void* def);

  const Module& mod_;
  Session& ses_;
  Store& st_;
  Frame& frame_;
  std::vector<Site> via_;                    // call sites of the functions being inlined, outermost first
  std::set<const FunctionDef*> inlining_;    // recursion guard for inlining
  Summary* summary_ = nullptr;               // set while computing a summary
  std::vector<ValueSet> contexts_;
  std::vector<Region> pendingRest_;           // set by execIf for the rest of the enclosing block
  // The values of the calls an `if` condition made (by syntax node), for its "condition" regions.
  std::map<const void*, ValueSet> conditionCalls_;
  int recordConditionCalls_ = 0;              // > 0 while an `if` condition is evaluated
  int evalDepth_ = 0;
  // Expressions and statements are followed at most this deep (per function); deeper ones are
  // unknown, with an SL002 note (README "Limits").
  static constexpr int kMaxEvalDepth = 400;
  // The same frames counted over every interpreter on this thread (summaries are computed inside
  // their callers, kMaxSummaryDepth deep): at most this many, so the C++ stack stays a few MiB.
  // AddressSanitizer's frames are several times larger (red zones), so its builds stop earlier.
  static constexpr int kMaxThreadEvalDepth = kAddressSanitizer ? 500 : 2000;
  // True (and the cut noted) when `n` is past either limit.
  bool tooDeep(TSNode n);
  void cutByNesting(TSNode n, bool acrossCalls);
};

struct Frame {
  EnvMap env;  // names
  // Attribute stores, by envKeyFor (`#<object>.<attr>`, `#<object>[key]`): apart from the names, so
  // that a call interpreted in place takes its caller's by a swap (callFunction), not a copy.
  EnvMap attrs;
  bool reachable = true;
  int arm = -1;
  int baseArm = -1;  // the caller's arm when this frame is a call interpreted in place
  ValueSet returns;
  bool isModule = false;
  std::unordered_map<std::string, ObjId, NameHash, std::equal_to<>> globals;  // Global objects made for free names
  Frame* globalsFrame = nullptr;  // the module frame, for functions interpreted in a caller's context
};

inline EnvMap& Interp::envOf(const std::string& key) {
  return !key.empty() && key[0] == '#' ? frame_.attrs : frame_.env;
}
inline const EnvMap& Interp::envOf(const std::string& key) const {
  return !key.empty() && key[0] == '#' ? frame_.attrs : frame_.env;
}

}  // namespace shardlint::semantic
