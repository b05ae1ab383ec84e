#include "Registry.h"

#include "config/Links.h"
#include "config/ModelFamilies.h"
#include "cxx/LibTorchFlags.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

// One entry per code, sorted by code. tests/test_registry.cpp checks the order,
// uniqueness, docs and fixtures of every entry.
struct Entry {
  RuleInfo info;
  std::unique_ptr<Rule> (*make)(const RuleInfo*);
};

std::vector<Entry> makeEntries() {
  return {
      {{"SL001", "syntax-error", Severity::Error, "a file could not be parsed completely", ruleDoc("SL001")},
       nullptr},
      {{"SL002", "file-skipped", Severity::Error, "a file was not analysed (too large, not UTF-8, unreadable)",
        ruleDoc("SL002")},
       nullptr},
      {{"SL003", "unused-suppression", Severity::Warning,
        "a suppression comment names an unknown rule, or suppresses nothing", ruleDoc("SL003")},
       nullptr},
      {{"SL101", "optimizer-before-wrap", Severity::Error,
        "optimizer built from parameters that FSDP later replaces or flattens", ruleDoc("SL101")},
       makeSL101},
      {{"SL102", "stray-param-group", Severity::Error,
        "optimizer of an FSDP model holds parameters no FSDP unit manages", ruleDoc("SL102")},
       makeSL102},
      {{"SL103", "unsharded-params", Severity::Error,
        "optimized trainable parameters left outside every FSDP unit", ruleDoc("SL103")},
       makeSL103},
      {{"SL104", "forward-before-optimizer", Severity::Error,
        "optimizer built from an FSDP2 model's parameters after a forward pass left some of them unsharded",
        ruleDoc("SL104")},
       makeSL104},
      {{"SL105", "params-replaced-after-optimizer", Severity::Error,
        "optimizer built before the model's parameters are replaced (PEFT, to_empty, assign=True) and the wrap",
        ruleDoc("SL105")},
       makeSL105},
      {{"SL106", "optimizer-state-before-prepare", Severity::Error,
        "optimizer state loaded (`load_state_dict`) or made by the constructor (`Adagrad`) before accelerate "
        "FSDP2 `prepare`: a KeyError in `optimizer.state_dict()`",
        ruleDoc("SL106")},
       makeSL106},
      {{"SL201", "fsdp2-separate-prepare", Severity::Error,
        "accelerate FSDP2 with the model and the optimizer prepared in separate calls, or `prepare_model` (a "
        "ValueError in `Accelerator.prepare`)",
        ruleDoc("SL201")},
       makeSL201},
      {{"SL202", "trainer-prebuilt-optimizer", Severity::Error,
        "HF `Trainer(..., optimizers=(opt, sched))` while FSDP is enabled (a RuntimeError in `Trainer.__init__`)",
        ruleDoc("SL202")},
       makeSL202},
      {{"SL203", "local-grad-norm", Severity::Error,
        "`torch.nn.utils.clip_grad_norm_` on an FSDP1 sharded model, or accelerate's `clip_grad_norm_` with FSDP1 and "
        "not the prepared model's parameters: each rank clips by its own shard's norm and the ranks diverge",
        ruleDoc("SL203")},
       makeSL203},
      {{"SL204", "rank-guarded-state-dict", Severity::Error,
        "a collective state-dict gather (FSDP1 `state_dict()`, accelerate `get_state_dict` / `save_model`) run only "
        "under a rank guard: the other ranks never join and the job hangs",
        ruleDoc("SL204")},
       makeSL204},
      {{"SL205", "forward-bypasses-fsdp", Severity::Error,
        "`model.forward(x)` on a module that FSDP2 made an FSDP unit: the hook that all-gathers its parameters "
        "does not run",
        ruleDoc("SL205")},
       makeSL205},
      {{"SL206", "compile-needs-orig-params", Severity::Error,
        "`torch.compile` of an FSDP1 model without `use_orig_params=True` (code, or an accelerate config with a "
        "dynamo backend)",
        ruleDoc("SL206")},
       makeSL206},
      {{"SL207", "tied-params-split", Severity::Error,
        "modules that share a parameter (a tied embedding and head) placed in different FSDP units",
        ruleDoc("SL207")},
       makeSL207},
      {{"SL301", "unknown-fsdp-key", Severity::Error,
        "a key inside `fsdp_config` that the consumer ignores silently (typo, deprecated name)", ruleDoc("SL301")},
       makeSL301},
      {{"SL302", "key-not-for-fsdp-version", Severity::Error,
        "an FSDP1-only key or value with `fsdp_version: 2`, or the reverse", ruleDoc("SL302")},
       makeSL302},
      {{"SL303", "layer-class-list-format", Severity::Error,
        "`fsdp_transformer_layer_cls_to_wrap` with spaces after commas or empty entries", ruleDoc("SL303")},
       makeSL303},
      {{"SL304", "checkpointing-without-wrap-policy", Severity::Error,
        "activation checkpointing with no wrap policy on accelerate FSDP2", ruleDoc("SL304")},
       makeSL304},
      {{"SL305", "min-num-params-invalid", Severity::Error,
        "`fsdp_min_num_params` not an integer after YAML 1.1 resolution, or 0 with SIZE_BASED_WRAP",
        ruleDoc("SL305")},
       makeSL305},
      {{"SL306", "ram-efficient-loading-without-sync", Severity::Error,
        "`cpu_ram_efficient_loading: true` with `sync_module_states: false`", ruleDoc("SL306")},
       makeSL306},
      {{"SL307", "local-state-dict-fsdp2", Severity::Error, "`LOCAL_STATE_DICT` with FSDP2", ruleDoc("SL307")},
       makeSL307},
      {{"SL308", "deepspeed-and-fsdp", Severity::Error, "DeepSpeed and FSDP configured together", ruleDoc("SL308")},
       makeSL308},
      {{"SL309", "exclusive-wrap-options", Severity::Error,
        "`min_num_params` together with `transformer_layer_cls_to_wrap` in a Trainer `fsdp_config`",
        ruleDoc("SL309")},
       makeSL309},
      {{"SL310", "duplicate-key", Severity::Error, "a key given twice in one mapping; the later silently wins",
        ruleDoc("SL310")},
       makeSL310},
      {{"SL311", "invalid-fsdp-value", Severity::Error,
        "an enumerated FSDP setting (wrap policy, sharding strategy, backward prefetch, state-dict type) with a "
        "value the consumer rejects",
        ruleDoc("SL311")},
       makeSL311},
      {{"SL401", "wrap-class-not-found", Severity::Error,
        "a wrap class named in a config exists neither in the project nor in the model family it loads",
        ruleDoc("SL401")},
       makeSL401},
      {{"SL402", "orig-params-false-with-prebuilt-optimizer", Severity::Error,
        "accelerate FSDP1 with use_orig_params false (config or plugin default) and an optimizer built before "
        "prepare",
        ruleDoc("SL402")},
       makeSL402},
      {{"SL403", "plugin-field-not-read", Severity::Error,
        "an attribute set on, or a keyword passed to, accelerate's FSDP plugin that it does not have",
        ruleDoc("SL403")},
       makeSL403},
      {{"SL501", "cxx-params-registered-after-optimizer", Severity::Error,
        "LibTorch optimizer built from a module's parameters before more parameters are registered on it",
        ruleDoc("SL501")},
       makeSL501},
  };
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = makeEntries();
  return e;
}

std::vector<std::unique_ptr<Rule>> makeRules() {
  std::vector<std::unique_ptr<Rule>> out;
  for (const auto& e : entries())
    if (e.make) out.push_back(e.make(&e.info));
  return out;
}

std::unique_ptr<semantic::CallModel> makeCallModel() { return std::make_unique<fsdp::FsdpCallModel>(); }

}  // namespace

const RuleCatalog& catalog() {
  static const RuleCatalog c = [] {
    RuleCatalog cat;
    for (const auto& e : entries()) cat.infos.push_back(e.info);
    cat.makeRules = makeRules;
    cat.makeCallModel = makeCallModel;
    cat.configFacts = config::accelerateConfigFacts;
    cat.launchLinks = config::accelerateLaunchLinks;
    cat.projectFacts = config::projectModelFacts;
    cat.projectFactsWant = config::projectModelFactsWant;
    cat.projectOutline = config::projectModelOutline();
    cat.factWords = config::factWords;
    cat.cxxDefaultFlags = cxx::libtorchFlags;
    // Lightning's FSDPStrategy defaulted to use_orig_params=False before 2.1 (SL101 on Fabric);
    // accelerate's launcher read renamed config keys until a release dropped them (SL301).
    cat.requirementPackages = {"accelerate", "lightning", "lightning-fabric", "pytorch-lightning"};
    // Config files worth parsing mention FSDP (a Trainer fsdp_config JSON may spell keys without fsdp_).
    cat.configWords = {"fsdp", "min_num_params", "transformer_layer_cls_to_wrap"};
    return cat;
  }();
  return c;
}

}  // namespace shardlint::rules
