// Builds the semantic model of one Python file in a single pass over its tree:
// scopes and bindings (an environment per frame, keyed by object keys such as
// `model`, `#12.layers`), import resolution to qualified names, abstract objects
// and ordered events with their branch structure. Functions and methods defined in
// the file get summaries (their events and return values relative to their
// parameters) that callers instantiate at each call site.
#pragma once
#include <tree_sitter/api.h>

#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/SourceFile.h"
#include "semantic/CallModel.h"
#include "semantic/Model.h"

namespace shardlint::semantic {

struct ClassDef;
class FileAnalysis;

struct FunctionDef {
  FileAnalysis* owner = nullptr;  // the module that defines it
  TSNode node{};
  std::string name;
  std::string qualname;
  std::vector<std::string> params;  // positional-or-keyword names, `self` included for methods
  const ClassDef* cls = nullptr;
  bool isStatic = false;
  bool nested = false;  // defined inside another function's body
};

struct ClassDef {
  FileAnalysis* owner = nullptr;
  TSNode node{};
  std::string name;
  std::string qualname;
  std::vector<std::string> bases;  // resolved qualified names of the bases
  std::vector<const ClassDef*> localBases;
  std::map<std::string, const FunctionDef*, std::less<>> methods;
  const FunctionDef* findMethod(std::string_view name) const;
  // Qualified names of all bases, transitively through local classes.
  std::vector<std::string> allBases() const;
};

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
  // The body produced something a call model gave meaning to (a tagged object or a
  // domain event). A summary without that, and not context-dependent, cannot matter to
  // any rule, so a function never called is not analysed in place.
  bool hasDomainFacts = false;
  // Readable facts, one per line, relative to the parameters ("arg0" ...).
  std::string describe() const;
};

struct Frame;

// Work done for one analysis task (a linted file and the modules it pulls in).
// Past kInlineBudget statements calls use summaries only; past kWorkBudget they
// are not followed; past kCopyBudget summaries are no longer instantiated. Keeps
// pathological inputs bounded and results deterministic.
// Nesting of summary computations (a callee's summary is computed inside its caller's).
constexpr int kMaxSummaryDepth = 48;

struct Budget {
  size_t work = 0;
  size_t copied = 0;
  static constexpr size_t kInlineBudget = 50000;
  static constexpr size_t kWorkBudget = 150000;
  static constexpr size_t kCopyBudget = 400000;
  static constexpr size_t kMaxInstantiated = 8000;
};

// Finds definitions in other modules of the project (cross-file analysis).
// Qualified names are absolute dotted names ("utils.optim.build_optimizer").
class ModuleProvider {
 public:
  virtual ~ModuleProvider() = default;
  struct Found {
    const FunctionDef* function = nullptr;
    const ClassDef* cls = nullptr;
  };
  virtual Found resolve(std::string_view qualname) = 0;
};

class FileAnalysis {
 public:
  // `moduleName` is the dotted module name ("pkg.train"); `isPackage` for an __init__.py
  // (relative imports resolve against it).
  FileAnalysis(const SourceFile& file, TSNode root, CallModel& model, std::string moduleName, uint32_t fileId = 0,
               bool isPackage = false);
  ~FileAnalysis();
  FileAnalysis(const FileAnalysis&) = delete;
  FileAnalysis& operator=(const FileAnalysis&) = delete;

  // Collects definitions and imports (idempotent). Enough for other modules to use
  // this one's functions and classes.
  void prepare();
  // prepare(), then analyses the module body and its uncalled functions.
  void run();
  void setProvider(ModuleProvider* provider) { provider_ = provider; }
  void setBudget(Budget* budget) { budget_ = budget; }
  const FunctionDef* topFunction(std::string_view name) const;
  const ClassDef* topClass(std::string_view name) const;
  std::optional<std::string> importOf(std::string_view name) const;
  // Modules imported with `from m import *`.
  std::vector<std::string> starImports() const;
  // The innermost function whose body contains `range`.
  const FunctionDef* enclosingFunction(ByteRange range) const;

  const SourceFile& file() const { return file_; }
  const Store& moduleStore() const { return moduleStore_; }
  struct Root {
    std::string name;  // "<module>" or the function's qualified name
    const Store* store;
  };
  // The stores rules check. Functions never called from the analysed code are
  // analysed in the module store (after its body, each in its own exclusive arm,
  // parameters unknown, module globals as they stand at the end of the module).
  std::vector<Root> roots() const;
  const Summary* summary(const FunctionDef* def);
  const FunctionDef* findFunction(std::string_view qualname) const;
  const ClassDef* findClass(std::string_view qualname) const;
  // Module-level name -> qualified name for imports ("FSDP" -> "torch...FullyShardedDataParallel").
  const std::map<std::string, std::string, std::less<>>& imports() const { return imports_; }
  const std::string& moduleName() const { return moduleName_; }
  // A framework API the call model gives meaning to: its implementation (in the
  // project being linted, or vendored) is never interpreted from another module, not
  // even from the framework's own modules (they are analysed, each on its own).
  bool opaque(std::string_view qualname) const;
  uint32_t fileId() const { return fileId_; }

 private:
  friend class Interp;
  void collectDefinitions(TSNode body, const ClassDef* cls, const std::string& prefix, bool topLevel);
  void collectImport(TSNode stmt, std::map<std::string, std::string, std::less<>>& into) const;

  const SourceFile& file_;
  TSNode root_;
  CallModel& model_;
  std::string moduleName_;
  uint32_t fileId_ = 0;
  std::vector<std::unique_ptr<FunctionDef>> functions_;
  std::vector<std::unique_ptr<ClassDef>> classes_;
  std::map<std::string, const FunctionDef*, std::less<>> topFunctions_;  // by simple name
  std::map<std::string, const ClassDef*, std::less<>> topClasses_;
  std::map<std::string, std::string, std::less<>> imports_;
  std::map<const FunctionDef*, std::unique_ptr<Summary>> summaries_;
  std::set<const FunctionDef*> inProgress_;
  std::set<const FunctionDef*> called_;
  bool isPackage_ = false;
  bool prepared_ = false;
  ModuleProvider* provider_ = nullptr;
  Budget ownBudget_;
  Budget* budget_ = &ownBudget_;
  Store moduleStore_;
};

// The interpreter over one Store. Public so that a CallModel can create objects
// and record domain events while it handles a call.
class Interp {
 public:
  Interp(FileAnalysis& fa, Store& store, Frame& frame, Summary* summary = nullptr);

  Store& store() { return st_; }
  const SourceFile& file() const { return fa_.file_; }
  PointId newPoint();
  ObjId newObject(ObjKind kind, std::string name, const Origin& origin);
  ObjId derive(ObjId parent, std::string edge);
  ObjId ref(const std::string& qualname);
  void domainEvent(std::string kind, ObjId target, const Origin& origin,
                   std::map<std::string, std::string, std::less<>> attrs = {}, std::vector<ValueSet> args = {});
  // The literal text when `vs` is exactly one literal ("True", "2", "fsdp"), else empty.
  std::optional<std::string> literal(const ValueSet& vs) const;

  void execBlock(TSNode block);
  void execStatement(TSNode stmt);
  ValueSet eval(TSNode expr);
  ValueSet lookupName(std::string_view name);
  ValueSet getAttr(ObjId obj, std::string_view attr);
  void assign(TSNode target, const ValueSet& value, const Origin& origin);
  // Puts a summary's objects and events into this store as if the function ran
  // here. `recordVia` false: no call site is added to origins (used for functions
  // never called from the analysed code, which are analysed in place).
  void instantiate(const Summary& s, const std::vector<ValueSet>& args, const Origin& callsite, ValueSet& result,
                   bool recordVia = true);
  int openArm(int construct, int index, bool loop);
  // Interprets a function's body here, parameters bound to `args`, without a call
  // site (functions never called from the analysed code are checked this way).
  ValueSet analyzeInPlace(const FunctionDef& def, const std::vector<ValueSet>& args);
  Origin originOf(TSNode n) const;
  Frame& frame() { return frame_; }
  // The values of the `with` items whose bodies are running, innermost last.
  const std::vector<ValueSet>& contexts() const { return contexts_; }

 private:
  ValueSet evalCall(TSNode call);
  ValueSet callValue(ObjId callee, CallSite& site, TSNode node);
  ValueSet evalComprehension(TSNode n);
  bool superCall(TSNode object, const std::string& method, CallSite& site, ValueSet& result);
  void execIf(TSNode n);
  void execLoop(TSNode n, bool isFor);
  void execTry(TSNode n);
  void execWith(TSNode n);
  void execMatch(TSNode n);
  void execImport(TSNode n);
  void execDefinition(TSNode n);
  std::string text(TSNode n) const;
  std::string subscriptEdge(TSNode sub);
  std::string envKeyFor(ObjId obj, std::string_view attr) const;
  std::vector<ValueSet> bindArgs(const FunctionDef& def, const CallSite& site, ObjId self);
  // Regions for the tests a condition establishes (isinstance / hasattr, directly or
  // through a name bound to one; `not`, `and`, `or` followed), `negated` for its false arm.
  void guardsOf(TSNode cond, bool negated, std::vector<Region>& out);
  void addTest(const std::string& kind, const ValueSet& subject, const ValueSet& what, bool negated,
               std::vector<Region>& out);
  // Ends `regions` (their begin already set) at the current point and stores the non-empty ones.
  void closeRegions(std::vector<Region>& regions);

  ValueSet callFunction(const FunctionDef& def, const std::vector<ValueSet>& args, const Origin& callsite,
                        bool inPlace = false);
  ObjId defObject(ObjKind kind, const void* def);

  FileAnalysis& fa_;
  Store& st_;
  Frame& frame_;
  std::vector<Site> via_;                    // call sites of the functions being inlined, outermost first
  std::set<const FunctionDef*> inlining_;    // recursion guard for inlining
  Summary* summary_ = nullptr;               // set while computing a summary
  std::vector<ValueSet> contexts_;
  std::vector<Region> pendingRest_;           // set by execIf for the rest of the enclosing block
  int evalDepth_ = 0;
  static constexpr int kMaxEvalDepth = 400;
};

struct Frame {
  std::unordered_map<std::string, ValueSet> env;
  bool reachable = true;
  int arm = -1;
  ValueSet returns;
  bool isModule = false;
  std::unordered_map<std::string, ObjId> globals;  // Global objects created for free names
  Frame* globalsFrame = nullptr;  // the module frame, for functions interpreted in a caller's context
};

}  // namespace shardlint::semantic
