// Shared types of the runtime probe: what a replay reproduces, what each rank
// reports, and the verdict attached to a static finding.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace shardlint::probe {

// What a replay program reproduces, derived from one static finding.
struct ReplaySpec {
  std::string code;        // "SL101", "SL102", "SL103", "SL105", "SL201", "SL202", "SL402"
  std::string path;        // the finding's file (as reported)
  int line = 0;            // 1-based
  std::string wrapApi;     // "fully_shard" | "fsdp1" | "accelerate" | "fabric" (Lightning Fabric FSDPStrategy)
                           // | "trainer" (transformers' Trainer)
  bool useOrigParams = false;              // FSDP1 / accelerate FSDP1 / Fabric
  int fsdpVersion = 2;                     // accelerate: 1 or 2
  std::string optimizer = "torch.optim.AdamW";  // qualified optimizer class (falls back to AdamW)
  // SL101: optimizer built before the wrap; SL102: a free parameter added (after the wrap,
  // or before an accelerate FSDP2 prepare); SL103: blocks sharded but not the root, or ignored params.
  bool joint = false;      // Fabric: the optimizer goes to `fabric.setup(model, optimizer)` with the model
  bool control = false;    // a control (a pattern the rules found correct), not a finding
  std::string shape;       // "optimizer-before-wrap" | "optimizer-after-wrap" | "stray-param-after-wrap"
                           // | "stray-param-before-prepare"
                           // | "blocks-without-root" | "ignored-trainable" | "separate-prepare" | "prepare-model"
                           // | "params-replaced-after-optimizer" | "params-replaced-before-optimizer"
                           // | "trainer-prebuilt-optimizer" | "trainer-builds-optimizer"
                           // | SL207: "tied-split-root" | "tied-split-roots" | "tied-one-unit" | "tied-group"
  // SL105: how the parameters are replaced: "get_peft_model" | "peft_from_pretrained" | "to_empty"
  // | "load_state_dict_assign"; empty for the other shapes.
  std::string replacement;
  // The Trainer shapes (SL202): what enables FSDP: "args" (TrainingArguments(fsdp="full_shard")), "launcher"
  // (`accelerate launch` with an FSDP config: ACCELERATE_USE_FSDP=true, FSDP_VERSION=fsdpVersion) or "off"
  // (TrainingArguments(fsdp=""): no FSDP).
  std::string fsdpFrom = "args";
  // SL203's torch clip on FSDP1: the sharding strategy the finding names when the replay can use it
  // ("SHARD_GRAD_OP"); empty: FULL_SHARD, the default (also for HYBRID_*, which needs a 2-D mesh).
  std::string shardingStrategy;
};

// One rank's report (JSON written by runtime_probe/python/shardlint_probe).
struct RankReport {
  int rank = 0;
  int worldSize = 1;
  std::string backend;     // "nccl" | "gloo"
  std::string torchVersion, accelerateVersion;
  bool reachedStep = false;           // the first optimizer.step() completed
  int staleOptimizerEntries = 0;      // optimizer tensors not among the wrapped model's parameters
  int unmanagedEntries = 0;           // optimizer tensors no FSDP unit manages
  std::optional<bool> paramsChanged;  // did the step change the (managed) parameters at all
  std::optional<bool> diverged;       // ranks disagree on parameters outside FSDP after a step
  std::optional<bool> tiedApart;      // SL207: the tied embedding and head differ after the step
  std::optional<double> tiedMaxDiff;  // SL207: their largest difference
  std::optional<int> trainableParams;        // the model's parameters with requires_grad (not measured: none)
  std::optional<int> trainableNotOptimized;  // ... that are in no param group of the optimizer (SL105)
  std::vector<std::string> trainableNotOptimizedNames;  // their names (at most 32)
  std::string exceptionType, exceptionMessage;  // empty when none
  std::string phase;                  // the phase the exception was raised in (or the last one reached)
  double elapsedSeconds = 0;
  std::vector<std::string> notes;     // what the rank adapted or noticed (e.g. accelerate FSDP on CPU)
};

enum class Verdict { Confirmed, NotReproduced, NotReached, ProbeError };

struct ProbeResult {
  Verdict verdict = Verdict::ProbeError;
  std::string evidence;    // one line a user can read
  std::string backend;
  int worldSize = 0;
  std::string torchVersion, accelerateVersion;
  double elapsedSeconds = 0;
  std::optional<ReplaySpec> replay;  // the replay that ran (replay mode)
  std::string sharedWith;            // "path:line" of the finding whose identical replay gave this verdict
};

}  // namespace shardlint::probe
