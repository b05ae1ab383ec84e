// The replay catalogue: the shapes a replay can take, each in words, the wrap APIs, and which
// combinations replayProgram supports (the table in Replay.h); SL204's guarded collectives.
#include "orchestrator/Replay.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ReplayImpl.h"

namespace shardlint::probe {

namespace {

const GuardedCollective kGuardedCollectives[] = {
    {"state-dict", "fsdp1", "model.state_dict", "state_dict()", "the FSDP1 model's state_dict()", false},
    {"optim-state-dict", "fsdp1", "lambda: FSDP.optim_state_dict(model, optimizer, group=group)",
     "FSDP.optim_state_dict()", "FSDP.optim_state_dict(model, optimizer) of the FSDP1 model", false},
    {"full-optim-state-dict", "fsdp1", "lambda: FSDP.full_optim_state_dict(model, optimizer, group=group)",
     "FSDP.full_optim_state_dict()", "FSDP.full_optim_state_dict(model, optimizer) of the FSDP1 model", false},
    {"accelerate-state-dict", "accelerate", "lambda: accelerator.get_state_dict(model)", "accelerator.get_state_dict()",
     "accelerator.get_state_dict(model) of the accelerate FSDP2 model", true},
    {"accelerate-save-model", "accelerate", "lambda: accelerator.save_model(model, s.scratch_dir(\"saved-model\"))",
     "accelerator.save_model()", "accelerator.save_model(model, path) of the accelerate FSDP2 model", true},
};

}  // namespace

const GuardedCollective* guardedCollective(std::string_view shape) {
  for (std::string_view suffix : {"-rank0-only", "-all-ranks"}) {
    if (!shape.ends_with(suffix)) continue;
    std::string_view name = shape.substr(0, shape.size() - suffix.size());
    for (const auto& g : kGuardedCollectives)
      if (name == g.name) return &g;
  }
  return nullptr;
}

std::string shapeText(const ReplaySpec& spec) {
  const std::string& shape = spec.shape;
  if (shape == "optimizer-before-wrap")
    return "the optimizer is built from the model's parameters before the model is wrapped";
  if (shape == "optimizer-after-wrap")
    return "the model is wrapped first; the optimizer is then built from the wrapped model's parameters (a control: "
           "the rules found this correct)";
  if (shape == "stray-param-after-wrap")
    return "a free nn.Parameter joins the optimizer (add_param_group) after the model is wrapped";
  if (shape == "stray-param-before-prepare")
    return "a free nn.Parameter sits in the optimizer's param groups when model and optimizer are prepared together";
  if (shape == "separate-prepare")
    return "the model is prepared alone, then an optimizer built from it is prepared in a second call";
  if (shape == "prepare-model") return "with accelerate FSDP2 the model is prepared with Accelerator.prepare_model";
  if (shape == "trainer-prebuilt-optimizer")
    return "transformers' Trainer is given a pre-built optimizer (optimizers=(opt, None))";
  if (shape == "trainer-builds-optimizer")
    return "transformers' Trainer builds its own optimizer (no optimizers=) and trains one step (a control: the rules "
           "found this correct)";
  if (shape == "params-replaced-after-optimizer")
    return "the optimizer is built from the model's parameters, then the parameters are replaced, then the model is "
           "wrapped";
  if (shape == "params-replaced-before-optimizer")
    return "the parameters are replaced first, then the optimizer is built from the model and the model is wrapped "
           "(a control: the rules found this correct)";
  if (shape == "forward-before-optimizer")
    return "fully_shard on the blocks and the root (reshard_after_forward not given), a forward pass, then the "
           "optimizer is built from the model's parameters";
  if (shape == "forward-before-optimizer-blocks-kept")
    return "fully_shard on the blocks with reshard_after_forward=False and the root with True, a forward pass, then "
           "the optimizer is built from the model's parameters";
  if (shape == "forward-before-optimizer-all-kept")
    return "fully_shard on the blocks with reshard_after_forward=False and the root with the default, a forward pass, "
           "then the optimizer is built from the model's parameters";
  if (shape == "optimizer-then-forward")
    return "fully_shard on the blocks and the root, the optimizer built right after, then a forward pass (a control: "
           "the rules found this correct)";
  if (shape == "forward-backward-before-optimizer")
    return "fully_shard on the blocks and the root, a forward and a backward pass, then the optimizer is built (a "
           "control: the rules found this correct)";
  if (shape == "forward-reshard-before-optimizer")
    return "fully_shard on the blocks and the root, a forward pass and model.reshard(), then the optimizer is built (a "
           "control: the rules found this correct)";
  if (shape == "forward-before-optimizer-resharded")
    return "fully_shard on the blocks and on the root with reshard_after_forward=True, a forward pass, then the "
           "optimizer is built (a control: the rules found this correct)";
  if (shape == "bypass-root")
    return "fully_shard on the blocks and the root, then the training step calls model.forward(inputs) instead of "
           "model(inputs) (SL205)";
  if (shape == "bypass-block")
    return "fully_shard on the blocks and the root; the model's forward calls block.forward(h) instead of block(h) "
           "(SL205)";
  if (shape == "bypass-registered")
    return "fully_shard on the blocks and the root, register_fsdp_forward_method(model, \"forward\"), then "
           "model.forward(inputs) (a control: the rules found this correct)";
  if (shape == "bypass-unshard")
    return "fully_shard on the root only, model.unshard(), a no_grad model.forward(inputs), then a training step (a "
           "control: the rules found this correct)";
  if (shape == "bypass-call")
    return "fully_shard on the blocks and the root, then the training step calls model(inputs) (a control: the rules "
           "found this correct)";
  // SL203: a clip between the backward and the step; the norm it returns on each rank is compared.
  if (shape == "clip-torch")
    return "FSDP1 (" + (spec.shardingStrategy.empty() ? std::string("FULL_SHARD") : spec.shardingStrategy) +
           ") on the blocks and the root; after the backward, torch.nn.utils.clip_grad_norm_ over the model's "
           "parameters (SL203)";
  if (shape == "clip-accelerate-subset")
    return "accelerate FSDP1 (FULL_SHARD) prepare; after the backward, accelerator.clip_grad_norm_ over all but the "
           "first of the prepared model's parameters (SL203)";
  if (shape == "clip-fsdp1-method")
    return "FSDP1 (FULL_SHARD) on the blocks and the root; after the backward, the model's own clip_grad_norm_ (a "
           "control: the rules found this correct)";
  if (shape == "clip-no-shard")
    return "FSDP1 with NO_SHARD on the blocks and the root; after the backward, torch.nn.utils.clip_grad_norm_ over "
           "the model's parameters (a control: the rules found this correct)";
  if (shape == "clip-fsdp2")
    return "fully_shard on the blocks and the root; after the backward, torch.nn.utils.clip_grad_norm_ over the "
           "model's parameters (a control: the rules found this correct)";
  if (shape == "clip-accelerate-full")
    return "accelerate FSDP1 (FULL_SHARD) prepare; after the backward, accelerator.clip_grad_norm_ over the prepared "
           "model's parameters (a control: the rules found this correct)";
  // SL207: the stand-in's head tied to its embedding (`model.head.weight = model.embed.weight`).
  if (shape == "tied-split-root")
    return "the head's weight is tied to the embedding's; the embedding gets an FSDP unit of its own while the head "
           "stays in the root's unit";
  if (shape == "tied-split-roots")
    return "the head's weight is tied to the embedding's; the embedding and the head get an FSDP2 unit each and the "
           "root none";
  if (shape == "tied-one-unit")
    return "the head's weight is tied to the embedding's; the blocks get units of their own, the embedding and the "
           "head stay in the root's unit (a control: the rules found this correct)";
  if (shape == "tied-group")
    return "the head's weight is tied to the embedding's; fully_shard([model.embed, model.head]) puts both in one "
           "unit, then the root is sharded (a control: the rules found this correct)";
  if (shape == "blocks-without-root")
    return "fully_shard is applied to the blocks but not to the root; the optimizer takes the whole model's parameters";
  if (const GuardedCollective* g = guardedCollective(shape)) {
    if (rankZeroOnly(shape)) return std::string("only rank 0 calls ") + g->what + " (a collective), under a rank guard";
    return std::string("every rank calls ") + g->what + "; only rank 0 would save it (a control: the rules found this "
                                                          "correct)";
  }
  return "a trainable parameter the optimizer holds is excluded from FSDP (ignored)";
}

std::string wrapApiText(const ReplaySpec& spec) {
  if (spec.wrapApi == "fully_shard") return "FSDP2 fully_shard";
  if (spec.wrapApi == "fsdp1")
    return std::string("FSDP1 FullyShardedDataParallel(use_orig_params=") + pyBool(spec.useOrigParams) + ")";
  if (spec.wrapApi == "trainer") {
    if (spec.fsdpFrom == "launcher")
      return "transformers Trainer, FSDP from the launcher's accelerate config (fsdp_version " +
             std::to_string(spec.fsdpVersion) + ")";
    if (spec.fsdpFrom == "off") return "transformers Trainer, TrainingArguments(fsdp=\"\") (no FSDP)";
    return "transformers Trainer, TrainingArguments(fsdp=\"full_shard\")";
  }
  if (spec.wrapApi == "fabric")
    return std::string("Lightning Fabric FSDPStrategy(use_orig_params=") + pyBool(spec.useOrigParams) +
           (spec.joint ? "), setup(model, optimizer)" : "), setup_module then setup_optimizers");
  if (spec.fsdpVersion == 2)
    return std::string("accelerate FullyShardedDataParallelPlugin(fsdp_version=2), Accelerator.") +
           (spec.shape == "prepare-model" ? "prepare_model" : "prepare");
  return std::string("accelerate FullyShardedDataParallelPlugin(fsdp_version=1, use_orig_params=") +
         pyBool(spec.useOrigParams) + "), Accelerator.prepare";
}

const std::vector<std::string>& replayShapes() {
  static const std::vector<std::string> shapes = {"optimizer-before-wrap", "optimizer-after-wrap", "stray-param-after-wrap",
                                                  "stray-param-before-prepare", "blocks-without-root",
                                                  "ignored-trainable", "separate-prepare", "prepare-model",
                                                  "trainer-prebuilt-optimizer", "trainer-builds-optimizer",
                                                  "params-replaced-after-optimizer",
                                                  "params-replaced-before-optimizer", "forward-before-optimizer",
                                                  "forward-before-optimizer-blocks-kept",
                                                  "forward-before-optimizer-all-kept", "optimizer-then-forward",
                                                  "forward-backward-before-optimizer",
                                                  "forward-reshard-before-optimizer",
                                                  "forward-before-optimizer-resharded", "bypass-root",
                                                  "bypass-block", "bypass-registered", "bypass-unshard",
                                                  "bypass-call",
                                                   "tied-split-root",
                                                  "tied-split-roots", "tied-one-unit", "tied-group",
                                                  "state-dict-rank0-only", "state-dict-all-ranks",
                                                  "optim-state-dict-rank0-only", "optim-state-dict-all-ranks",
                                                  "full-optim-state-dict-rank0-only", "full-optim-state-dict-all-ranks",
                                                  "accelerate-state-dict-rank0-only", "accelerate-state-dict-all-ranks",
                                                  "accelerate-save-model-rank0-only", "accelerate-save-model-all-ranks",
                                                  "clip-torch", "clip-accelerate-subset", "clip-fsdp1-method",
                                                  "clip-no-shard", "clip-fsdp2", "clip-accelerate-full"};
  return shapes;
}

const std::vector<std::string>& replayWrapApis() {
  static const std::vector<std::string> apis = {"fully_shard", "fsdp1", "accelerate", "fabric", "trainer"};
  return apis;
}

bool replaySupported(const ReplaySpec& spec, std::string* whyNot) {
  auto no = [&](std::string why) {
    if (whyNot) *whyNot = std::move(why);
    return false;
  };
  const std::string& shape = spec.shape;
  const std::string& api = spec.wrapApi;
  auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  if (!listed(replayShapes(), shape)) return no("unknown replay shape '" + shape + "'");
  if (!listed(replayWrapApis(), api))
    return no("unknown wrap API '" + api + "' (fully_shard, fsdp1, accelerate, fabric or trainer)");
  if (api == "accelerate" && spec.fsdpVersion != 1 && spec.fsdpVersion != 2)
    return no("accelerate fsdp_version must be 1 or 2, not " + std::to_string(spec.fsdpVersion));
  bool ok = false;
  if (shape == "optimizer-before-wrap") ok = !spec.joint || api == "fabric";
  else if (shape == "optimizer-after-wrap") ok = true;
  else if (shape == "stray-param-after-wrap") ok = api == "fully_shard" || api == "fsdp1";
  else if (shape == "stray-param-before-prepare") ok = api == "accelerate";
  else if (shape == "blocks-without-root") ok = api == "fully_shard";
  else if (shape == "ignored-trainable") ok = api == "fully_shard" || api == "fsdp1";
  else if (shape == "separate-prepare") ok = api == "accelerate";  // FSDP2 refuses it (SL201); FSDP1 allows it
  else if (shape == "prepare-model") ok = api == "accelerate" && spec.fsdpVersion == 2;
  else if (shape == "trainer-prebuilt-optimizer" || shape == "trainer-builds-optimizer")
    ok = api == "trainer" && (spec.fsdpFrom == "args" || spec.fsdpFrom == "launcher" ||
                              (spec.fsdpFrom == "off" && shape == "trainer-prebuilt-optimizer"));
  else if (shape == "params-replaced-after-optimizer" || shape == "params-replaced-before-optimizer")
    ok = api != "trainer" && (spec.replacement == "get_peft_model" || spec.replacement == "peft_from_pretrained" ||
                              spec.replacement == "to_empty" || spec.replacement == "load_state_dict_assign");
  else if (shape.rfind("forward-", 0) == 0 || shape == "optimizer-then-forward") ok = api == "fully_shard";
  else if (shape.rfind("bypass-", 0) == 0) ok = api == "fully_shard";  // SL205
  else if (shape == "tied-split-root" || shape == "tied-one-unit") ok = api == "fully_shard" || api == "fsdp1";
  else if (shape == "tied-split-roots" || shape == "tied-group") ok = api == "fully_shard";
  else if (const GuardedCollective* g = guardedCollective(shape))  // SL204 (accelerate: FSDP2)
    ok = api == g->wrapApi && (api != "accelerate" || spec.fsdpVersion == 2);
  else if (shape == "clip-torch" || shape == "clip-fsdp1-method" || shape == "clip-no-shard") ok = api == "fsdp1";
  else if (shape == "clip-fsdp2") ok = api == "fully_shard";
  else if (shape == "clip-accelerate-subset" || shape == "clip-accelerate-full")
    ok = api == "accelerate" && spec.fsdpVersion == 1;
  if (api == "trainer" && shape.rfind("trainer-", 0) != 0) ok = false;  // the Trainer replays SL202 only
  if (!ok) return no("no replay of '" + shape + "' with wrap API '" + api + "'");
  return true;
}

}  // namespace shardlint::probe
