// Replay program generator (see Replay.h): writes the Python program of a spec. The shapes and
// which wrap APIs each supports are in ReplayShapes.cpp; ReplayImpl.h holds what both use.
#include "orchestrator/Replay.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ReplayImpl.h"

namespace shardlint::probe {

namespace {

constexpr const char* kDefaultOptimizer = "torch.optim.AdamW";

// Decodes one UTF-8 sequence at `i`; returns the code point (U+FFFD for an invalid one) and
// advances `i` past it.
char32_t decodeUtf8(std::string_view s, size_t& i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b0 = byte(i);
  int len = 0;
  char32_t cp = 0;
  if (b0 < 0x80) {
    ++i;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid.
  static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += len;
  return cp;
}

// `text` made safe for a one-line Python comment: control characters become '?'.
std::string commentText(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    char32_t cp = decodeUtf8(text, i);
    if (cp < 0x20 || cp == 0x7F || cp == 0xFFFD || cp > 0x7E) {
      out += '?';
    } else {
      out += static_cast<char>(cp);
    }
  }
  return out;
}



// Lines of the program body (inside `def replay(s):`), without indentation.
using Lines = std::vector<std::string>;

void fullyShardPrelude(Lines& b, bool ignoredParams) {
  if (ignoredParams)
    b.push_back("torch = s.require_torch(rt.compat.TORCH_MIN_IGNORED_PARAMS, \"fully_shard(ignored_params=...)\")");
  else
    b.push_back("torch = s.require_torch(rt.compat.TORCH_MIN_FSDP2, \"FSDP2 fully_shard\")");
  b.push_back("env = s.init_distributed()");
  b.push_back("fully_shard = rt.compat.fully_shard_function()");
  b.push_back("model = rt.build_standin().to(env.device)");
}

void fsdp1Prelude(Lines& b) {
  b.push_back("torch = s.require_torch(rt.compat.TORCH_MIN, \"FSDP1 FullyShardedDataParallel\")");
  b.push_back("env = s.init_distributed()");
  b.push_back("from torch.distributed.fsdp import FullyShardedDataParallel as FSDP");
  b.push_back("from torch.distributed.fsdp.wrap import ModuleWrapPolicy");
  b.push_back("model = rt.build_standin().to(env.device)");
}

void acceleratePrelude(Lines& b, const ReplaySpec& spec) {
  b.push_back("torch = s.require_torch(rt.compat.TORCH_MIN, \"accelerate FSDP\")");
  if (spec.fsdpVersion == 2)
    b.push_back("s.require_accelerate(rt.compat.ACCELERATE_MIN_FSDP2, \"FullyShardedDataParallelPlugin(fsdp_version=2)\")");
  else
    b.push_back("s.require_accelerate(rt.compat.ACCELERATE_MIN, \"accelerate FSDP1\")");
  b.push_back("env = s.init_distributed()  # the process group accelerate then uses");
  b.push_back("from accelerate import Accelerator");
  b.push_back("from accelerate.utils import FullyShardedDataParallelPlugin");
  if (spec.fsdpVersion == 2) {
    b.push_back("plugin = FullyShardedDataParallelPlugin(fsdp_version=2)");
  } else {
    b.push_back("# fsdp_version=1 is passed only to accelerate versions that know the argument (1.6+).");
    b.push_back("plugin = FullyShardedDataParallelPlugin(use_orig_params=" + pyBool(spec.useOrigParams) +
                ", **rt.fsdp_version_kwargs(1))");
  }
  b.push_back("accelerator = Accelerator(fsdp_plugin=plugin, cpu=env.device.type == \"cpu\")");
  b.push_back("s.check_accelerator(accelerator, plugin)");
  b.push_back("model = rt.build_standin()");
}

void fabricPrelude(Lines& b, const ReplaySpec& spec) {
  b.push_back("s.require_torch(rt.compat.TORCH_MIN, \"Lightning Fabric FSDP\")");
  b.push_back("env = s.init_distributed()  # the process group Fabric then uses");
  b.push_back("fabric_cls = s.require_fabric()");
  b.push_back("fabric = fabric_cls(strategy=rt.fabric_fsdp_strategy(env, use_orig_params=" + pyBool(spec.useOrigParams) +
              "), **rt.fabric_device_kwargs(env))");
  b.push_back("fabric.launch()");
  b.push_back("model = rt.build_standin()");
}

void shardBlocks(Lines& b) {
  b.push_back("for block in model.blocks:");
  b.push_back("    fully_shard(block, mesh=env.mesh)");
}

std::string fsdp1Wrap(const ReplaySpec& spec, bool ignoreHead) {
  std::string call = "model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({rt.standin_block_class()}), ";
  if (ignoreHead) call += "ignored_modules=[model.head], ";
  call += "use_orig_params=" + pyBool(spec.useOrigParams) + ", device_id=env.device_id)";
  return call;
}

const char* kAccelerateStep =
    "s.run_first_step(model, optimizer, device=accelerator.device, backward=accelerator.backward)";

// The prelude of `spec`'s wrap API (builds `model`; `env`, and `accelerator` or `fabric` where they apply).
void preludeFor(Lines& b, const ReplaySpec& spec) {
  if (spec.wrapApi == "fully_shard") fullyShardPrelude(b, false);
  else if (spec.wrapApi == "fsdp1") fsdp1Prelude(b);
  else if (spec.wrapApi == "fabric") fabricPrelude(b, spec);
  else acceleratePrelude(b, spec);
}

// Wraps `model` with `spec`'s API, handing it `optimizer` where the API takes both, and runs the first step.
void wrapAndStep(Lines& b, const ReplaySpec& spec) {
  const std::string& api = spec.wrapApi;
  if (api == "fully_shard") {
    b.push_back("s.phase(\"wrap\")");
    shardBlocks(b);
    b.push_back("fully_shard(model, mesh=env.mesh)");
    b.push_back("s.run_first_step(model, optimizer)");
  } else if (api == "fsdp1") {
    b.push_back("s.phase(\"wrap\")");
    b.push_back(fsdp1Wrap(spec, false));
    b.push_back("s.run_first_step(model, optimizer)");
  } else if (api == "fabric" && spec.joint) {
    b.push_back("s.phase(\"wrap\")");
    b.push_back("model, optimizer = fabric.setup(model, optimizer)");
    b.push_back("s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)");
  } else if (api == "fabric") {
    b.push_back("s.phase(\"wrap\")");
    b.push_back("model = fabric.setup_module(model)");
    b.push_back("optimizer = fabric.setup_optimizers(optimizer)");
    b.push_back("s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)");
  } else {
    b.push_back("s.phase(\"prepare\")");
    b.push_back("model, optimizer = accelerator.prepare(model, optimizer)");
    b.push_back(kAccelerateStep);
  }
}

// SL105: the replacement's call, as a comment and the program line.
void replaceParams(Lines& b, const ReplaySpec& spec) {
  const std::string& how = spec.replacement;
  if (how == "get_peft_model")
    b.push_back("# get_peft_model: PEFT freezes the base weights and adds LoRA adapters (new parameters).");
  else if (how == "peft_from_pretrained")
    b.push_back("# PeftModel.from_pretrained(..., is_trainable=True): frozen base weights, the saved adapters added.");
  else if (how == "to_empty")
    b.push_back("# to_empty: every parameter becomes a new tensor (the stand-in's weights are then copied in).");
  else
    b.push_back("# load_state_dict(..., assign=True): the loaded tensors become the parameters.");
  b.push_back("model = s.replace_parameters(model, " + pythonStringLiteral(how) +
              (how == "peft_from_pretrained" ? ", adapter=adapter)" : ")"));
}

// SL105's prelude: the API's, plus PEFT where the replacement needs it, a saved adapter, and for to_empty a
// model built on the meta device.
void replacedPrelude(Lines& b, const ReplaySpec& spec) {
  preludeFor(b, spec);
  bool peft = spec.replacement == "get_peft_model" || spec.replacement == "peft_from_pretrained";
  if (peft)
    b.insert(b.begin() + 1, "s.require_peft(rt.compat.PEFT_MIN, " +
                                pythonStringLiteral(spec.replacement == "get_peft_model"
                                                        ? "get_peft_model on a custom nn.Module"
                                                        : "PeftModel.from_pretrained(..., is_trainable=True)") +
                                ")");
  if (spec.replacement == "to_empty")
    for (auto& line : b)
      if (line.rfind("model = rt.build_standin()", 0) == 0)
        line = "model = rt.build_standin_on_meta()  # no storage until to_empty";
  if (spec.replacement == "peft_from_pretrained")
    b.push_back("adapter = s.save_adapter()  # a LoRA adapter of the stand-in, saved by PEFT for from_pretrained");
}

// The Trainer shapes (SL202): the process group, FSDP from where the spec says, the Trainer's model.
void trainerPrelude(Lines& b, const ReplaySpec& spec) {
  b.push_back("s.require_torch(rt.compat.TORCH_MIN, \"transformers Trainer with FSDP\")");
  b.push_back("s.require_transformers(rt.compat.TRANSFORMERS_MIN, \"Trainer(optimizers=...) with fsdp\")");
  b.push_back("env = s.init_distributed()  # the process group the Trainer's accelerator then uses");
  if (spec.fsdpFrom == "launcher")
    b.push_back("s.launched_with_fsdp(" + std::to_string(spec.fsdpVersion) + ")");
  b.push_back("s.trainer_fsdp_on_cpu()  # gloo only: the Trainer's Accelerator enables FSDP as it does on GPUs");
  b.push_back("from transformers import Trainer");
  b.push_back("model = rt.trainer_standin()");
}

std::string trainerArguments(const ReplaySpec& spec) {
  if (spec.fsdpFrom == "args") return "args = rt.trainer_arguments(env, fsdp=\"full_shard\")";
  if (spec.fsdpFrom == "off") return "args = rt.trainer_arguments(env, fsdp=\"\")  # FSDP off";
  return "args = rt.trainer_arguments(env, fsdp=None)  # FSDP comes from the launcher's environment";
}

Lines body(const ReplaySpec& spec) {
  Lines b;
  const std::string& shape = spec.shape;
  const std::string& api = spec.wrapApi;
  if (shape == "optimizer-before-wrap") {
    if (api == "fully_shard") {
      fullyShardPrelude(b, false);
      b.push_back("# The optimizer is built from the model's parameters first ...");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("# ... then fully_shard replaces them with new DTensor parameters, bottom-up.");
      b.push_back("s.phase(\"wrap\")");
      shardBlocks(b);
      b.push_back("fully_shard(model, mesh=env.mesh)");
      b.push_back("s.run_first_step(model, optimizer)");
    } else if (api == "fsdp1") {
      fsdp1Prelude(b);
      b.push_back("# The optimizer is built from the model's parameters first ...");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back(spec.useOrigParams
                      ? "# ... then FSDP1 wraps the model, keeping the original parameters (use_orig_params=True)."
                      : "# ... then FSDP1 wraps the model and flattens its parameters into FlatParameters.");
      b.push_back("s.phase(\"wrap\")");
      b.push_back(fsdp1Wrap(spec, false));
      b.push_back("s.run_first_step(model, optimizer)");
    } else if (api == "fabric" && spec.joint) {
      fabricPrelude(b, spec);
      b.push_back("# The optimizer is built from the model's parameters first, then handed to Fabric with the");
      b.push_back("# model in one call, which wraps the model and re-points the optimizer.");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("s.phase(\"wrap\")");
      b.push_back("model, optimizer = fabric.setup(model, optimizer)");
      b.push_back("s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)");
    } else if (api == "fabric") {
      fabricPrelude(b, spec);
      b.push_back("# The optimizer is built from the model's parameters first ...");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("# ... then Fabric wraps the model (FSDP1) and is handed the pre-built optimizer.");
      b.push_back("s.phase(\"wrap\")");
      b.push_back("model = fabric.setup_module(model)");
      b.push_back("optimizer = fabric.setup_optimizers(optimizer)");
      b.push_back("s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)");
    } else {
      acceleratePrelude(b, spec);
      b.push_back("# The optimizer is built from the model's parameters first ...");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("# ... then the model and the optimizer are prepared together.");
      b.push_back("s.phase(\"prepare\")");
      b.push_back("model, optimizer = accelerator.prepare(model, optimizer)");
      b.push_back(kAccelerateStep);
    }
  } else if (shape == "optimizer-after-wrap") {
    const char* first = "# A control: the order the rules expect. The model is wrapped first ...";
    if (api == "fully_shard") {
      fullyShardPrelude(b, false);
      b.push_back(first);
      b.push_back("s.phase(\"wrap\")");
      shardBlocks(b);
      b.push_back("fully_shard(model, mesh=env.mesh)");
      b.push_back("# ... then the optimizer is built from the wrapped model's parameters.");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("s.run_first_step(model, optimizer)");
    } else if (api == "fsdp1") {
      fsdp1Prelude(b);
      b.push_back(first);
      b.push_back("s.phase(\"wrap\")");
      b.push_back(fsdp1Wrap(spec, false));
      b.push_back("# ... then the optimizer is built from the wrapped model's parameters.");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("s.run_first_step(model, optimizer)");
    } else if (api == "fabric") {
      fabricPrelude(b, spec);
      b.push_back(first);
      b.push_back("s.phase(\"wrap\")");
      b.push_back("model = fabric.setup_module(model)");
      b.push_back("# ... then the optimizer is built from the wrapped model's parameters.");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("optimizer = fabric.setup_optimizers(optimizer)");
      b.push_back("s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)");
    } else {
      acceleratePrelude(b, spec);
      b.push_back(first);
      b.push_back("s.phase(\"prepare\")");
      b.push_back("model = accelerator.prepare(model)");
      b.push_back("# ... then the optimizer is built from the prepared model's parameters and prepared.");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("optimizer = accelerator.prepare(optimizer)");
      b.push_back(kAccelerateStep);
    }
  } else if (shape == "stray-param-after-wrap") {
    if (api == "fully_shard") {
      fullyShardPrelude(b, false);
      b.push_back("s.phase(\"wrap\")");
      shardBlocks(b);
      b.push_back("fully_shard(model, mesh=env.mesh)");
    } else {
      fsdp1Prelude(b);
      b.push_back("s.phase(\"wrap\")");
      b.push_back(fsdp1Wrap(spec, false));
    }
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back("# A free parameter no module registers (a learnable logit scale) joins the optimizer");
    b.push_back("# after the wrap: no FSDP unit manages it.");
    b.push_back("scale = torch.nn.Parameter(torch.ones((), device=env.device))");
    b.push_back("s.phase(\"add_param_group\")");
    b.push_back("optimizer.add_param_group({\"params\": [scale]})");
    b.push_back("s.run_first_step(model, optimizer, scale=scale)");
  } else if (shape == "stray-param-before-prepare") {
    acceleratePrelude(b, spec);
    b.push_back("# A free parameter no module registers (a learnable logit scale) sits in the");
    b.push_back("# optimizer's constructor param groups, next to the model's parameters ...");
    b.push_back("scale = torch.nn.Parameter(torch.ones((), device=accelerator.device))");
    b.push_back("optimizer = s.make_optimizer([{\"params\": list(model.parameters())}, {\"params\": [scale]}])");
    b.push_back("# ... and the model and the optimizer are prepared together.");
    b.push_back("s.phase(\"prepare\")");
    b.push_back("model, optimizer = accelerator.prepare(model, optimizer)");
    b.push_back("s.run_first_step(model, optimizer, scale=scale, device=accelerator.device, "
                "backward=accelerator.backward)");
  } else if (shape == "separate-prepare") {
    acceleratePrelude(b, spec);
    b.push_back("# The model is prepared alone ...");
    b.push_back("s.phase(\"prepare\")");
    b.push_back("model = accelerator.prepare(model)");
    b.push_back("# ... then an optimizer is built from the prepared model and prepared in a call of its own.");
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back("optimizer = accelerator.prepare(optimizer)");
    b.push_back(kAccelerateStep);
  } else if (shape == "prepare-model") {
    acceleratePrelude(b, spec);
    b.push_back("# The model is prepared with prepare_model (not prepare(model, optimizer)) ...");
    b.push_back("s.phase(\"prepare\")");
    b.push_back("model = accelerator.prepare_model(model)");
    b.push_back("# ... then an optimizer is built from it and prepared.");
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back("optimizer = accelerator.prepare_optimizer(optimizer)");
    b.push_back(kAccelerateStep);
  } else if (shape == "trainer-prebuilt-optimizer") {
    trainerPrelude(b, spec);
    b.push_back("# The optimizer is built before the Trainer, from the model FSDP has not wrapped yet ...");
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back(trainerArguments(spec));
    b.push_back("# ... and handed to the Trainer.");
    b.push_back("s.phase(\"trainer\")");
    b.push_back("trainer = Trainer(model=model, args=args, train_dataset=rt.trainer_dataset(), optimizers=(optimizer, None))");
    b.push_back("s.run_trainer_first_step(trainer)");
  } else if (shape == "trainer-builds-optimizer") {
    trainerPrelude(b, spec);
    b.push_back(trainerArguments(spec));
    b.push_back("# A control: the Trainer builds its optimizer itself, after FSDP wraps the model.");
    b.push_back("s.phase(\"trainer\")");
    b.push_back("trainer = Trainer(model=model, args=args, train_dataset=rt.trainer_dataset())");
    b.push_back("s.run_trainer_first_step(trainer)");
  } else if (shape == "params-replaced-after-optimizer") {
    replacedPrelude(b, spec);
    b.push_back("# The optimizer is built from the model's parameters first ...");
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back("# ... then the parameters are replaced ...");
    replaceParams(b, spec);
    b.push_back("# ... and only then is the model wrapped.");
    wrapAndStep(b, spec);
  } else if (shape == "params-replaced-before-optimizer") {
    replacedPrelude(b, spec);
    b.push_back("# A control: the order the rules expect. The parameters are replaced first ...");
    replaceParams(b, spec);
    b.push_back("# ... then the optimizer is built from the model's current parameters, then the model is wrapped.");
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    wrapAndStep(b, spec);
  } else if (shape.rfind("forward-", 0) == 0 || shape == "optimizer-then-forward") {
    // SL104: a forward pass between fully_shard and the optimizer's construction (or a control).
    fullyShardPrelude(b, false);
    bool blocksKept = shape == "forward-before-optimizer-blocks-kept" || shape == "forward-before-optimizer-all-kept";
    bool rootResharded = shape == "forward-before-optimizer-blocks-kept" || shape == "forward-before-optimizer-resharded";
    b.push_back("s.phase(\"wrap\")");
    b.push_back("for block in model.blocks:");
    b.push_back(blocksKept ? "    fully_shard(block, mesh=env.mesh, reshard_after_forward=False)"
                           : "    fully_shard(block, mesh=env.mesh)");
    b.push_back(rootResharded ? "fully_shard(model, mesh=env.mesh, reshard_after_forward=True)"
                              : "fully_shard(model, mesh=env.mesh)  # the root: reshard_after_forward not given");
    b.push_back("inputs, _ = rt.batch(env.rank, env.device)");
    if (shape == "optimizer-then-forward") {
      b.push_back("# The optimizer is built right after the wrap, from the sharded parameters ...");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("# ... then a forward pass (a shape check).");
      b.push_back("s.phase(\"forward\")");
      b.push_back("with torch.no_grad():");
      b.push_back("    model(inputs)");
    } else {
      b.push_back("# A forward pass (a shape check) before the optimizer exists ...");
      b.push_back("s.phase(\"forward\")");
      if (shape == "forward-backward-before-optimizer") {
        b.push_back("model(inputs).float().mean().backward()  # ... with a backward, which reshards the root");
        b.push_back("model.zero_grad(set_to_none=True)");
      } else {
        b.push_back("with torch.no_grad():");
        b.push_back("    model(inputs)");
        if (shape == "forward-reshard-before-optimizer") b.push_back("model.reshard()  # ... then an explicit reshard");
      }
      b.push_back("# ... then the optimizer takes the parameters registered on the model now.");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
    }
    b.push_back("s.run_first_step(model, optimizer)");
  } else if (shape.rfind("bypass-", 0) == 0) {
    // SL205: a unit's forward called directly, or a control.
    fullyShardPrelude(b, false);
    if (shape == "bypass-block") {
      b.push_back("import types");
      b.push_back("def bypassing_forward(self, ids):");
      b.push_back("    h = self.embed(ids)");
      b.push_back("    for block in self.blocks:");
      b.push_back("        h = block.forward(h)  # the block's FSDP hooks do not run");
      b.push_back("    return self.head(self.norm(h))");
      b.push_back("model.forward = types.MethodType(bypassing_forward, model)");
    }
    b.push_back("s.phase(\"wrap\")");
    // `bypass-unshard` shards the root only, as the rule's control requires: with the blocks sharded too,
    // `model.unshard(); model.forward(x)` lets each block initialise as its own root, and the next
    // `model(x)` raises "FSDP state has already been lazily initialized" (measured on torch 2.15).
    if (shape != "bypass-unshard") shardBlocks(b);
    b.push_back("fully_shard(model, mesh=env.mesh)");
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    if (shape == "bypass-root") {
      b.push_back("# The training step calls the root's forward directly: its all-gather hook does not run.");
      b.push_back("s.run_first_step(model, optimizer, forward=model.forward)");
    } else if (shape == "bypass-registered") {
      b.push_back("rt.compat.register_fsdp_forward_method_function()(model, \"forward\")");
      b.push_back("# FSDP runs its hooks around the registered method.");
      b.push_back("s.run_first_step(model, optimizer, forward=model.forward)");
    } else if (shape == "bypass-unshard") {
      b.push_back("inputs, _ = rt.batch(env.rank, env.device)");
      b.push_back("s.phase(\"forward\")");
      b.push_back("model.unshard()  # the root's parameters gathered explicitly");
      b.push_back("with torch.no_grad():");
      b.push_back("    model.forward(inputs)");
      b.push_back("s.run_first_step(model, optimizer)");
    } else {
      b.push_back("s.run_first_step(model, optimizer)");
    }
  } else if (shape.rfind("clip-", 0) == 0) {
    // SL203: the finding's clip (or a control's) between the backward and the step; s.clip_step notes the norm
    // it returns and the global norm on each rank.
    const std::string max = "rt.CLIP_MAX_NORM";
    std::string why = "# torch's clip over the parameters: on FSDP1 each rank's own shards";
    std::string clip = "return torch.nn.utils.clip_grad_norm_(model.parameters(), " + max + ")";
    std::string reference = "return model.clip_grad_norm_(" + max + ")";
    std::string refWhy = "# FSDP1's own clip_grad_norm_ all-reduces the norm: the global norm";
    if (api == "accelerate") {
      acceleratePrelude(b, spec);
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("s.phase(\"prepare\")");
      b.push_back("model, optimizer = accelerator.prepare(model, optimizer)");
      if (shape == "clip-accelerate-subset") {
        why = "# not the prepared model's whole list: accelerate falls through to torch's clip";
        clip = "return accelerator.clip_grad_norm_(list(model.parameters())[1:], " + max + ")";
      } else {
        why = "# the prepared model's own parameters: accelerate calls the FSDP1 model's clip_grad_norm_";
        clip = "return accelerator.clip_grad_norm_(model.parameters(), " + max + ")";
      }
    } else if (api == "fully_shard") {
      fullyShardPrelude(b, false);
      b.push_back("s.phase(\"wrap\")");
      shardBlocks(b);
      b.push_back("fully_shard(model, mesh=env.mesh)");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      why = "# torch's clip over FSDP2's DTensor gradients";
      refWhy = "# the norm of the gathered (full) gradients";
      reference = "return rt.full_gradient_norm(model)";
    } else {
      fsdp1Prelude(b);
      b.push_back("s.phase(\"wrap\")");
      std::string wrap = fsdp1Wrap(spec, false);
      const std::string strategy = shape == "clip-no-shard" ? "NO_SHARD" : spec.shardingStrategy;
      if (!strategy.empty()) {
        b.push_back("from torch.distributed.fsdp import ShardingStrategy");
        wrap.insert(wrap.size() - 1, ", sharding_strategy=ShardingStrategy." + strategy);
      }
      if (shape == "clip-no-shard")
        why = "# torch's clip over the parameters: NO_SHARD keeps whole, all-reduced gradients";
      else if (!strategy.empty())
        b.push_back("# the finding's sharding strategy: " + strategy + " shards the gradients too");
      else
        b.push_back("# sharding_strategy not given: FULL_SHARD");
      b.push_back(wrap);
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      if (shape == "clip-fsdp1-method") {
        why = "# FSDP1's own clip_grad_norm_";
        clip = "return model.clip_grad_norm_(" + max + ")";
      }
    }
    b.push_back("def clip():");
    b.push_back("    " + why);
    b.push_back("    " + clip);
    b.push_back("def reference():");
    b.push_back("    " + refWhy);
    b.push_back("    " + reference);
    b.push_back(api == "accelerate"
                    ? "s.clip_step(model, optimizer, clip, reference, backward=accelerator.backward, device=accelerator.device)"
                    : "s.clip_step(model, optimizer, clip, reference)");
  } else if (shape.rfind("tied-", 0) == 0) {
    // SL207: a tied stand-in, wrapped as the finding (or the control) says; one step, then the tie is read off.
    bool fsdp2 = api == "fully_shard";
    if (fsdp2) fullyShardPrelude(b, false);
    else fsdp1Prelude(b);
    b.push_back("# Weight tying, as the finding's model does it.");
    b.push_back("model.head.weight = model.embed.weight");
    b.push_back("embed, head = model.embed, model.head  # the tied modules (FSDP1 wraps them in place)");
    b.push_back("s.phase(\"wrap\")");
    if (fsdp2) {
      if (shape != "tied-split-roots") shardBlocks(b);
      if (shape == "tied-split-root") {
        b.push_back("fully_shard(model.embed, mesh=env.mesh)  # the embedding alone; the head is left to the root");
      } else if (shape == "tied-split-roots") {
        b.push_back("fully_shard(model.embed, mesh=env.mesh)  # a unit each, and no root unit");
        b.push_back("fully_shard(model.head, mesh=env.mesh)");
      } else if (shape == "tied-group") {
        b.push_back("fully_shard([model.embed, model.head], mesh=env.mesh)  # one unit for both");
      }
      if (shape != "tied-split-roots") b.push_back("fully_shard(model, mesh=env.mesh)");
    } else {
      std::string kw = "use_orig_params=" + pyBool(spec.useOrigParams) + ", device_id=env.device_id";
      if (shape == "tied-split-root")
        b.push_back("model.embed = FSDP(model.embed, " + kw + ")  # the embedding alone; the head is left to the root");
      b.push_back("model = FSDP(model, " + kw + ")");
    }
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back("s.run_first_step(model, optimizer)");
    b.push_back(std::string("s.check_tie(model, embed, head, fsdp1=") + pyBool(!fsdp2) + ")");
  } else if (shape == "blocks-without-root") {
    fullyShardPrelude(b, false);
    b.push_back("# Only the blocks are sharded: the root's embedding, final norm and head stay");
    b.push_back("# outside every FSDP unit.");
    b.push_back("s.phase(\"wrap\")");
    shardBlocks(b);
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back("s.run_first_step(model, optimizer)");
  } else if (const GuardedCollective* g = guardedCollective(shape)) {
    // SL204: the state-dict gather on rank 0 only (the finding's rank guard) or on every rank (a control).
    const std::string seconds = std::to_string(kCollectiveSeconds);
    if (std::string_view(g->wrapApi) == "fsdp1") {
      fsdp1Prelude(b);
      b.push_back("group = s.short_timeout_group(" + seconds + ")  # every rank; its collectives time out after seconds");
      b.push_back("s.phase(\"wrap\")");
      b.push_back("model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({rt.standin_block_class()}), "
                  "process_group=group, device_id=env.device_id)");
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("s.run_first_step(model, optimizer)");
    } else {
      acceleratePrelude(b, spec);
      b.push_back("optimizer = s.make_optimizer(model.parameters())");
      b.push_back("s.phase(\"prepare\")");
      b.push_back("model, optimizer = accelerator.prepare(model, optimizer)");
      b.push_back(kAccelerateStep);
    }
    std::string ranks = rankZeroOnly(shape) ? "[0]" : "None";
    b.push_back(rankZeroOnly(shape) ? "# The finding's rank guard: only rank 0 makes the call; the others go on."
                                    : "# Every rank makes the call (only rank 0 would save what it returns).");
    b.push_back(std::string("s.collective_on(") + pythonStringLiteral(g->label) + ", " + g->call + ", " + ranks + ", " +
                seconds + ", watchdog=" + pyBool(g->watchdog) + ")");
  } else {  // ignored-trainable
    if (api == "fully_shard") {
      fullyShardPrelude(b, true);
      b.push_back("s.phase(\"wrap\")");
      shardBlocks(b);
      b.push_back("# The head's weight is trainable but ignored: FSDP neither shards it nor reduces its gradient.");
      b.push_back("fully_shard(model, mesh=env.mesh, ignored_params={model.head.weight})");
    } else {
      fsdp1Prelude(b);
      b.push_back("# The head is trainable but ignored: FSDP neither shards it nor reduces its gradient.");
      b.push_back("s.phase(\"wrap\")");
      b.push_back(fsdp1Wrap(spec, true));
    }
    b.push_back("optimizer = s.make_optimizer(model.parameters())");
    b.push_back("s.run_first_step(model, optimizer)");
  }
  return b;
}

}  // namespace

std::string pythonStringLiteral(std::string_view text) {
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < text.size();) {
    char32_t cp = decodeUtf8(text, i);
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '"') {
      out += "\\\"";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp <= 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out += '"';
  return out;
}

std::string replayProgram(const ReplaySpec& spec) {
  std::string why;
  if (!replaySupported(spec, &why)) throw std::invalid_argument("replayProgram: " + why);
  const std::string optimizer = spec.optimizer.empty() ? kDefaultOptimizer : spec.optimizer;
  const std::string where = commentText(spec.path) + ":" + std::to_string(spec.line);

  Lines lines = body(spec);
  // `torch = s.require_torch(...)`: keep the name only when the body uses it (no unused local).
  auto usesTorchName = [](const std::string& line) {
    if (line.rfind("from ", 0) == 0 || line.rfind("import ", 0) == 0 || line.rfind("#", 0) == 0) return false;
    for (size_t at = line.find("torch."); at != std::string::npos; at = line.find("torch.", at + 1)) {
      char before = at == 0 ? ' ' : line[at - 1];
      if (!(std::isalnum(static_cast<unsigned char>(before)) || before == '_' || before == '.')) return true;
    }
    return false;
  };
  bool usesTorch = false;
  for (size_t i = 1; i < lines.size(); ++i) usesTorch = usesTorch || usesTorchName(lines[i]);
  if (!usesTorch && !lines.empty() && lines[0].rfind("torch = ", 0) == 0) lines[0].erase(0, 8);

  std::string p;
  p += "#!/usr/bin/env python3\n";
  p += std::string(spec.control ? "# Control replay of " : "# Replay of ") + commentText(spec.code) + " (" +
       spec.shape + ") " + (spec.control ? "found correct at " : "reported at ") + where +
       ", generated by `shardlint probe`.\n";
  p += "# Pattern: " + shapeText(spec) + ".\n";
  p += "# Wrap API: " + wrapApiText(spec) + ". Optimizer: " + commentText(optimizer) + ".\n";
  p += "#\n";
  p += "# Run every rank under torch.distributed.run, with shardlint's runtime_probe/python on PYTHONPATH:\n";
  p += "#   SHARDLINT_PROBE_OUT=DIR PYTHONPATH=.../runtime_probe/python \\\n";
  p += "#     python3 -m torch.distributed.run --nproc_per_node N THIS_FILE\n";
  p += "# Each rank writes DIR/rank<R>.json (schema: runtime_probe/python/README.md).\n";
  p += "import sys\n";
  p += "\n";
  p += "from shardlint_probe import replay_runtime as rt\n";
  p += "\n";
  p += "FINDING = {\"code\": " + pythonStringLiteral(spec.code) + ", \"path\": " + pythonStringLiteral(spec.path) +
       ", \"line\": " + std::to_string(spec.line) + "}\n";
  p += "SHAPE = " + pythonStringLiteral(spec.shape) + "\n";
  p += "WRAP_API = " + pythonStringLiteral(spec.wrapApi) + "\n";
  p += "OPTIMIZER = " + pythonStringLiteral(optimizer) + "\n";
  p += "\n";
  p += "\n";
  p += "def replay(s):\n";
  for (const auto& line : lines) p += "    " + line + "\n";
  p += "\n";
  p += "\n";
  p += "if __name__ == \"__main__\":\n";
  p += "    sys.exit(rt.main(replay, finding=FINDING, shape=SHAPE, wrap_api=WRAP_API, optimizer=OPTIMIZER))\n";
  return p;
}

}  // namespace shardlint::probe
