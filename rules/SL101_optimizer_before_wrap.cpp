// SL101 optimizer-before-wrap: an optimizer built from a module's parameters
// before FSDP replaces or flattens them, and still used after the wrap.
#include <algorithm>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/Staleness.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;

class OptimizerBeforeWrap final : public Rule {
 public:
  const RuleInfo& info() const override { return *info_; }
  explicit OptimizerBeforeWrap(const RuleInfo* info) : info_(info) {}

  std::vector<std::vector<std::string_view>> prescanTokens() const override { return optimizerAndWrapTokens(); }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  static std::string whatHappens(const Event& wrap) {
    std::string_view api = wrap.attr("api");
    if (api == "fully_shard")
      return "`fully_shard` replaces every parameter with a new sharded DTensor parameter, so the optimizer keeps "
             "stepping the old full-size tensors, which never receive gradients: training silently does nothing";
    if (api == "fsdp1")
      return "FSDP1 without `use_orig_params=True` flattens the parameters into a FlatParameter, so the optimizer "
             "keeps stale tensors that never receive gradients: training silently does nothing";
    if (api == "accelerate")
      return "accelerate FSDP1 with `use_orig_params=False` wraps the model without re-pointing the optimizer, so it "
             "keeps stale tensors: training silently does nothing";
    return "Fabric's FSDP `setup_module` replaces the parameters while the pre-built optimizer keeps the old ones: "
           "training silently does nothing";
  }

  static std::string fix(const Event& wrap) {
    std::string_view api = wrap.attr("api");
    if (api == "accelerate")
      return "set `use_orig_params=True` in the plugin, or build the optimizer from the prepared model";
    if (api == "fabric") return "pass model and optimizer together to `fabric.setup(model, optimizer)`";
    return "build the optimizer after wrapping, from the wrapped model's parameters";
  }

  void check(RuleContext& cx, const Store& st) {
    // accelerate FSDP1 counts here only when `use_orig_params=False` is written in code;
    // defaults and linked configs are SL402's.
    auto mine = [](const Event& w) { return w.attr("api") != "accelerate" || w.attr("orig_from") == "code"; };
    for (const auto& s : staleOptimizers(st, mine)) {
      std::string msg = "optimizer is built from the parameters of `" + render(st, s.module) + "` before " +
                        std::string(wrapApiName(*s.wrap)) + " wraps it; " + whatHappens(*s.wrap) + "; " +
                        fix(*s.wrap);
      reportStale(cx, info(), st, s, std::move(msg));
    }
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL101(const RuleInfo* info) { return std::make_unique<OptimizerBeforeWrap>(info); }

}  // namespace shardlint::rules
