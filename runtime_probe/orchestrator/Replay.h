// Replay programs: for one static finding, a small self-contained Python training program that
// reproduces the finding's pattern on a stand-in model of the same shape (an embedding and a head
// at the root, blocks in a ModuleList, a final norm), with the finding's wrap API and options,
// its optimizer class (when importable; else torch.optim.AdamW, noted in the report) and the
// same order of events. The program imports shardlint_probe.replay_runtime
// (runtime_probe/python), runs one forward/backward/optimizer.step() under
// torch.distributed.run and writes $SHARDLINT_PROBE_OUT/rank<R>.json (schema:
// runtime_probe/python/README.md).
//
// Shapes (ReplaySpec::shape) and the wrap APIs (ReplaySpec::wrapApi) each supports:
//
// | shape                        | what the program does                                        | fully_shard | fsdp1 | accelerate   |
// |------------------------------|--------------------------------------------------------------|-------------|-------|--------------|
// | "optimizer-before-wrap"      | optimizer over model.parameters(), then the wrap / prepare   | yes         | yes   | FSDP1, FSDP2 |
// | "stray-param-after-wrap"     | wrap, optimizer, then add_param_group({free nn.Parameter})   | yes         | yes   | -            |
// | "stray-param-before-prepare" | free nn.Parameter in the constructor's groups, joint prepare | -           | -     | FSDP1, FSDP2 |
// | "blocks-without-root"        | fully_shard on each block only, optimizer over the model     | yes         | -     | -            |
// | "ignored-trainable"          | the head's weight ignored (ignored_params / ignored_modules) | yes         | yes   | -            |
// | "separate-prepare"           | prepare(model), then an optimizer from it, prepare(optimizer) | -          | -     | FSDP1, FSDP2 |
// | "prepare-model"              | prepare_model(model), then prepare_optimizer(optimizer)      | -           | -     | FSDP2        |
// | "params-replaced-after-optimizer"  | optimizer, then `replacement`, then the wrap (Fabric too) | yes       | yes   | FSDP1, FSDP2 |
// | "params-replaced-before-optimizer" | `replacement`, then the optimizer, then the wrap (control) | yes      | yes   | FSDP1, FSDP2 |
// | "trainer-prebuilt-optimizer" | Trainer(..., optimizers=(opt, None)), FSDP from `fsdpFrom`   | wrap API "trainer" (needs transformers) |
// | "trainer-builds-optimizer"   | Trainer(...) with FSDP on, no optimizers= (control)          | wrap API "trainer" (needs transformers) |
// | "forward-before-optimizer"   | blocks and root (defaults), a no_grad forward, then the optimizer (SL104) | yes | -  | -            |
// | "forward-before-optimizer-blocks-kept" | the same, blocks reshard_after_forward=False, root True (SL104) | yes | - | -           |
// | "forward-before-optimizer-all-kept"    | the same, blocks reshard_after_forward=False, root default (SL104) | yes | - | -         |
// | "optimizer-then-forward"     | blocks and root, the optimizer, then a forward (SL104 control) | yes     | -     | -            |
// | "forward-backward-before-optimizer" | a forward and a backward before the optimizer (SL104 control) | yes | - | -          |
// | "forward-reshard-before-optimizer"  | a forward, model.reshard(), then the optimizer (SL104 control) | yes | -  | -          |
// | "forward-before-optimizer-resharded" | root reshard_after_forward=True, a forward, then the optimizer (SL104 control) | yes | - | - |
// | "bypass-root"                | blocks and root, the step calls model.forward(inputs) (SL205) | yes        | -     | -            |
// | "bypass-block"               | blocks and root, the root's forward calls block.forward(h) (SL205) | yes   | -     | -            |
// | "bypass-registered"          | register_fsdp_forward_method(model, "forward"), then model.forward (SL205 control) | yes | - | - |
// | "bypass-unshard"             | root only: model.unshard(), a no_grad model.forward, a step (SL205 control) | yes | - | -          |
// | "bypass-call"                | blocks and root, the step calls model(inputs) (SL205 control) | yes         | -     | -            |
// | "tied-split-root" / "tied-split-roots" / "tied-one-unit" / "tied-group" | the head tied to the embedding, split or kept together (SL207; controls: the last two) | yes | root, one-unit | - |
// | "<call>-rank0-only"          | a step, then only rank 0 makes a collective state-dict call (SL204)  | -    | yes   | FSDP2        |
// | "<call>-all-ranks"           | a step, then every rank makes it (SL204 control)              | -           | yes   | FSDP2        |
// | "clip-torch"                 | FSDP1 FULL_SHARD, torch's clip_grad_norm_ after the backward (SL203) | -  | yes   | -            |
// | "clip-accelerate-subset"     | prepare, accelerator.clip_grad_norm_(all but one parameter) (SL203) | -   | -     | FSDP1        |
// | "clip-fsdp1-method"          | FSDP1 FULL_SHARD, model.clip_grad_norm_ (SL203 control)       | -           | yes   | -            |
// | "clip-no-shard"              | FSDP1 NO_SHARD, torch's clip_grad_norm_ (SL203 control)       | -           | yes   | -            |
// | "clip-fsdp2"                 | blocks and root, torch's clip_grad_norm_ (SL203 control)      | yes         | -     | -            |
// | "clip-accelerate-full"       | prepare, accelerator.clip_grad_norm_(model.parameters()) (SL203 control) | - | -  | FSDP1        |
//
// SL204's <call>: "state-dict" (model.state_dict()), "optim-state-dict" / "full-optim-state-dict"
// (FSDP.optim_state_dict / full_optim_state_dict(model, optimizer)) on FSDP1 over a group whose collectives time
// out after 5 s; "accelerate-state-dict" / "accelerate-save-model" (accelerator.get_state_dict(model) /
// save_model(model, path)) on accelerate FSDP2, where the probe's watchdog ends rank 0's wait after 5 s.
//
// The free parameter multiplies the logits, so it gets a gradient (and diverges when unreduced).
//
// ReplaySpec fields each program uses:
// - code, path, line: every shape; recorded as the report's "finding" (never interpreted).
// - optimizer: every shape; a qualified class name ("torch.optim.AdamW", "bitsandbytes.optim.AdamW8bit"),
//   resolved with importlib on the rank; empty means torch.optim.AdamW.
// - shape, wrapApi ("fully_shard" | "fsdp1" | "accelerate" | "fabric" | "trainer"): choose the program (table above).
// - useOrigParams: wrapApi "fsdp1" (FullyShardedDataParallel(use_orig_params=...)), and "accelerate"
//   with fsdpVersion 1 (FullyShardedDataParallelPlugin(use_orig_params=...)).
// - fsdpVersion: wrapApi "accelerate" (1 or 2), and the Trainer's FSDP_VERSION with fsdpFrom "launcher".
// - replacement (the "params-replaced-*" shapes, SL105): "get_peft_model" | "peft_from_pretrained" | "to_empty"
//   | "load_state_dict_assign" (needs peft for the first two); joint: Fabric's setup(model, optimizer).
// - fsdpFrom (the Trainer shapes, SL202): "args" (TrainingArguments(fsdp="full_shard")), "launcher"
//   (ACCELERATE_USE_FSDP=true as `accelerate launch` sets it) or "off" (fsdp="", trainer-prebuilt-optimizer only).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "probe/Types.h"

namespace shardlint::probe {

// The wrap API of a spec in words ("FSDP1 FullyShardedDataParallel(use_orig_params=False)", ...).
std::string wrapApiText(const ReplaySpec& spec);
// The shapes, in the order of the table above.
const std::vector<std::string>& replayShapes();
// The wrap APIs: "fully_shard", "fsdp1", "accelerate", "fabric", "trainer".
const std::vector<std::string>& replayWrapApis();

// Whether replayProgram supports `spec` (shape x wrap API x fsdpVersion); `whyNot` says why not.
bool replaySupported(const ReplaySpec& spec, std::string* whyNot = nullptr);

// The complete Python program (UTF-8 text, ASCII only) for `spec`.
// Throws std::invalid_argument when !replaySupported(spec).
std::string replayProgram(const ReplaySpec& spec);

// A Python string literal (double-quoted, ASCII only) holding `text`; invalid UTF-8 becomes U+FFFD.
std::string pythonStringLiteral(std::string_view text);

}  // namespace shardlint::probe
