// FSDP domain knowledge: which calls build optimizers, which wrap models, and
// how accelerate / Fabric behave. Implements the engine's CallModel, plus the
// queries the SL1xx rules share.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/Diagnostic.h"
#include "semantic/CallModel.h"
#include "semantic/Model.h"

namespace shardlint::rules::fsdp {

using semantic::Event;
using semantic::ObjId;
using semantic::Store;
using semantic::ValueSet;

class FsdpCallModel final : public semantic::CallModel {
 public:
  bool onCall(semantic::CallSite& site) override;
  bool receiverSensitive(std::string_view method) const override;
  bool frameworkApi(std::string_view qualname) const override;
  std::vector<std::string> frameworkOrder(const std::vector<std::string>& bases) const override;
  void setFacts(const std::map<std::string, std::string>& facts) override { facts_ = facts; }
  // What a trainer class's later methods may use stale: an optimizer or scheduler, an FSDP wrapper.
  bool lifecycleAnchor(const semantic::Obj& o) const override {
    return o.hasTag("optimizer") || o.hasTag("scheduler") || o.hasTag("fsdp_wrapper") || o.hasTag("accelerator") ||
           o.hasTag("fabric");
  }

 private:
  // SL202's fact: a Trainer given `optimizers=` while FSDP is on (a "trainer_optimizers" event); `pair` null when
  // the call has no `optimizers=`. Its controls: FSDP on and no optimizer passed, or an optimizer passed with
  // FSDP written off in the arguments (a "trainer_control" event, kind "own" or "off").
  void noteTrainerOptimizers(semantic::CallSite& site, const ValueSet* pair);
  // A call of transformers' or trl's Trainer (or a project subclass the caller vouches for): its `optimizers=`
  // (SL202's fact, and an optimizer use) or its own optimizer (a control).
  void noteTrainerCall(semantic::CallSite& site);
  std::string trainerFsdpFrom(semantic::CallSite& site, std::map<std::string, std::string, std::less<>>& attrs,
                              std::string& setting, bool callerValues);
  std::map<std::string, std::string> facts_;  // from a linked accelerate config
};

bool isOptimizerQualname(std::string_view q);
// Pre-scan words: something that builds an optimizer and something that wraps with
// FSDP (every SL1xx rule needs both, in the file or in the modules it imports).
std::vector<std::vector<std::string_view>> optimizerAndWrapTokens();
bool isFullyShard(std::string_view q);
bool isFsdp1Class(std::string_view q);

// An object's lineage with FSDP wrappers looked through: `FSDP(model).module.x`
// and `model.x` share a root.
struct Lineage {
  ObjId root = semantic::kNoObj;
  // Attribute (".layers"), index ("[0]", "[*]") and call (".build()") edges. The result of a call that
  // makes a new object is one object per call site (Interp::deriveAt): its edge carries the site
  // after kCallSiteMark, so `a = self.build(); b = self.build()` are two lineages. Views of a module
  // (`.parameters()`, `.modules()`, `.to()`, ...) carry no site: any call of them is the same.
  std::vector<std::string> edges;
};
inline constexpr char kCallSiteMark = '\x1f';
// An edge as written: without the call site it may carry.
std::string_view edgeName(std::string_view edge);
// A call edge whose result is a view of the receiver or the receiver itself (`.parameters()`, `.to()`).
bool isViewCall(std::string_view edge);
Lineage lineageOf(const Store& st, ObjId o, int depth = 0);
// The lineage as the user wrote it, for messages: wrappers and unknown functions of
// an object are not looked through (`model = get_model(config)` stays `model`).
Lineage writtenLineage(const Store& st, ObjId o);
// The object a lineage of attribute stores leads to (`model.layers` -> the ModuleList
// stored there), or kNoObj.
ObjId objectAt(const Store& st, const Lineage& l);
// A class of the project with no base but `object` (or ABC, Generic, NamedTuple): a plain
// class, which is not an nn.Module (a dataclass, a holder of references). A class with any other
// base, known or not, may be one.
bool isPlainClass(const semantic::ClassDef& cls);
// a is b or lies inside b (an attribute, element or parameter of it). "[*]" matches any index.
bool within(const Lineage& a, const Lineage& b);
// a and b stand for the same object: each lies within the other ("[*]" matching any index); never for no root.
bool sameLineage(const Lineage& a, const Lineage& b);
// The module a parameter source belongs to: `m.layers[0].parameters()[*]` -> `m.layers[0]`.
Lineage moduleOfSource(const Lineage& src);
// True when the source is all the parameters of its module (`m.parameters()`).
bool isWholeParams(const Lineage& src);
std::string render(const Store& st, const Lineage& l);

// Parameter sources held by an optimizer's constructor argument (containers and
// param-group dicts expanded; literals dropped).
ValueSet paramSources(const Store& st, const ValueSet& arg, int depth = 0);
// Source text on one line, for messages: runs of whitespace (line breaks, indentation) become one space.
std::string oneLine(std::string_view text);
// The parameter sources of each optimizer an optimizer object stands for. One built in a loop or
// comprehension that binds a name to several objects in turn (`[AdamW(m.parameters()) for m in
// (model, probe)]`, `{p: AdamW([p]) for p in params}`) is one optimizer per iteration: a group per
// object the sources stem from, each with the sources common to every iteration. Otherwise one
// group, `sources` itself.
std::vector<ValueSet> sourcesPerOptimizer(const Store& st, ObjId opt, const ValueSet& sources);
// Optimizers and domain events, less those in code a test expects to fail or that never runs.
std::vector<ObjId> optimizers(const Store& st);
std::vector<const Event*> domainEvents(const Store& st, std::string_view kind);
// Code that never runs where it is analysed: under `if flag:` with the flag a constant of the other
// truth value (Store::neverRuns), or under a test that the model is not yet sharded
// (`if not isinstance(m, FSDPModule)`, after `if isinstance(m, FSDP): return m`) when every value of
// `m` is already sharded there: an FSDP1 wrapper object (isinstance FullyShardedDataParallel / FSDP,
// hasattr `_fsdp_wrapped_module`), or a module that `fully_shard` wrapped on every path before the
// test (isinstance FSDPModule, hasattr `reshard` / `unshard`).
bool neverRuns(const Store& st, semantic::PointId p);
// The conditions (Store::conditionsAt) under which the code at any of `points` runs, as a clause for
// a message ("only when `ignore_head` is true"); empty when none is unknown.
std::string onlyWhen(const Store& st, std::initializer_list<semantic::PointId> points);
// The wrap runs before `p` on every path, counting a loop over a model's parts (`for b in model.blocks:
// fully_shard(b)`) as run: `dominates`, or only loop arms (and arms known to be taken) lie between the wrap
// and the code around `p`, and the wrap comes first (SL205, SL203).
bool wrappedBefore(const Store& st, const Event& wrap, semantic::PointId p);
// The rank guard the code at `p` runs under, or null: a condition that lets one rank through and keeps the
// others out (`if rank == 0:`, `if not dist.get_rank():`, `if accelerator.is_main_process:`, after
// `if rank != 0: return`), the rank read as `torch.distributed.get_rank()`, `int(os.environ["RANK"])` (or
// LOCAL_RANK) or an attribute the frameworks name a rank (`process_index`, `global_rank`, `local_rank`).
const semantic::Region* rankGuard(const Store& st, semantic::PointId p);
// When the code under `guard` runs, for a message: "`rank == 0`", "`rank != 0` is false".
std::string rankGuardText(const semantic::Region& guard);
// Code that a test expects to fail: the body of `with pytest.raises(...)` or
// `with self.assertRaises(...)`. Nothing in it is a finding or evidence for one.
bool expectedToFail(const Store& st, semantic::PointId p);
// A wrap in code that runs only when the object it shards into is already sharded
// (`if isinstance(m, FSDPModule)`, `if hasattr(m, "reshard")`, after
// `if not isinstance(m, FullyShardedDataParallel): return`): re-sharding a part of a
// sharded model. Returns the lineage of that already-sharded object, or a lineage
// with no root.
Lineage alreadyShardedBy(const Store& st, const Event& wrap);
// Is `o` (or anything in its lineage) frozen by requires_grad_(False) / requires_grad = False?
bool frozen(const Store& st, const Lineage& l);
// Is `root` an object created in the analysed code as a free tensor / parameter /
// separate module (as opposed to an unknown argument or a transformed model)?
bool isCreatedHere(const Store& st, ObjId root);
std::string_view wrapApiName(const Event& wrap);
// The setting in the linked accelerate config (or `accelerate launch` flag) that decided an event's FSDP
// setting (its "config", "config_line", "config_col" attributes), as a note saying `message`; none when
// the setting comes from the code.
std::optional<Note> linkedConfigNote(const Event& e, std::string message);

}  // namespace shardlint::rules::fsdp
