// Optimizers that hold parameters a wrap replaced and are used afterwards: the
// core of SL101 (raw FSDP, accelerate with use_orig_params=False in code, Fabric)
// and SL402 (accelerate FSDP1 whose use_orig_params comes from a config or default).
#pragma once
#include <functional>
#include <vector>

#include "driver/Rule.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules::fsdp {

struct StaleOptimizer {
  ObjId optimizer;
  const Event* wrap;
  const Event* use;
  Lineage module;  // the module whose parameters it was built from
};

// For each optimizer, the first wrap accepted by `wrapFilter` (and replacing
// parameters) that makes it stale before a use.
std::vector<StaleOptimizer> staleOptimizers(const Store& st, const std::function<bool(const Event&)>& wrapFilter);

// Does one of an optimizer's parameter sources lie in the module of lineage `target` (or the module
// a source belongs to contain it)?
bool sourcesRelatedTo(const Store& st, const ValueSet& sources, const Lineage& target);

// The use of optimizer `opt` that `wrap` is followed by: the wrapping call itself when it is handed the
// optimizer (`accelerator.prepare(model, opt)`), else a use after it (a method call on it, passing it
// on) not preceded by the user's own rebuild of its param groups, preferring one that runs whatever
// the flags are. A rebuild counts from `since` on (the wrap, or an earlier event that made the optimizer
// stale); a framework's re-pointing does not count as one here. Null when none.
const Event* useFromWrap(const Store& st, ObjId opt, const Event& wrap, const Event& since);

// The parameters' source as the user wrote it in the argument of `opt`'s construction, when a finding
// about it and `wrap` points at that construction: `X` of `Optimizer(X.parameters())` (a loop variable
// `block`, a variable `module` bound to `self.build()`), or a comprehension as written. Empty otherwise
// (param-group dicts, a list bound to a name, an optimizer built in a helper): the caller then names the
// module from the lineage.
std::string writtenSource(RuleContext& cx, const Store& st, ObjId opt, const Event& wrap);
// `X` of the optimizer `o`'s first argument written `X.parameters()` (`self.model` inside a method), on
// one line; empty for any other argument.
std::string writtenParamsOwner(RuleContext& cx, const semantic::Obj& o);

// Controls (RuleContext::control) for the optimizers of `st` that a wrap accepted by `wrapFilter`
// concerns and that `stale` does not hold, where the runtime probe can replay why they are fine:
// built after the wrap from the wrapped model ("optimizer-after-wrap"), or built before a wrap that
// keeps or re-points the parameters (FSDP1 / accelerate FSDP1 with use_orig_params=True, accelerate
// FSDP2, Fabric's joint `setup`: "optimizer-before-wrap"). Nothing when the context wants none.
void emitControls(RuleContext& cx, const RuleInfo& info, const Store& st,
                  const std::function<bool(const Event&)>& wrapFilter, const std::vector<StaleOptimizer>& stale);

// Reports at the construction (or the call that builds it, next to the wrap; or in
// the class when a class both builds and wraps), with notes at the wrap and the use.
void reportStale(RuleContext& cx, const RuleInfo& info, const Store& st, const StaleOptimizer& s, std::string message,
                 std::vector<Note> extraNotes = {}, std::optional<Fix> fix = std::nullopt);

}  // namespace shardlint::rules::fsdp
