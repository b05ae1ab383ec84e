// What to replay: the rules the probe tests, and the replay spec (shape, wrap API, options,
// optimizer) of one finding, read off its code, message, notes and source text (Probe.h).
#include "Probe.h"

#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "ProbeImpl.h"
#include "core/SourceFile.h"

namespace shardlint::probe {

const std::vector<std::string_view>& probedCodes() {
  static const std::vector<std::string_view> codes = {"SL101", "SL102", "SL103", "SL104", "SL105", "SL201",
                                                      "SL202", "SL203", "SL204", "SL205", "SL207", "SL402"};
  return codes;
}

bool probedCode(std::string_view code) {
  return std::find(probedCodes().begin(), probedCodes().end(), code) != probedCodes().end();
}

std::string probedCodesText(std::string_view conjunction) {
  std::string out;
  const auto& codes = probedCodes();
  for (size_t i = 0; i < codes.size(); ++i) {
    if (i) out += i + 1 == codes.size() ? " " + std::string(conjunction) + " " : ", ";
    out += codes[i];
  }
  return out;
}

// ============================================================================================
// Replay specs
// ============================================================================================

namespace {

// Optimizers a replay can build from `params` alone (no closure, no sparse gradients).
const std::set<std::string>& replayableOptimizers() {
  static const std::set<std::string> s = {"SGD",     "Adam",  "AdamW", "Adagrad", "Adadelta", "Adamax",
                                          "RMSprop", "NAdam", "RAdam", "ASGD",    "Rprop"};
  return s;
}

// `torch.optim.X` or `optim.X` in `text`, if X is replayable.
std::optional<std::string> optimizerIn(const std::string& text) {
  static const std::regex re(R"((?:^|[^\w.])(?:torch\.)?optim\.([A-Z]\w*)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    std::string cls = (*it)[1].str();
    if (replayableOptimizers().count(cls)) return "torch.optim." + cls;
  }
  return std::nullopt;
}

std::string allText(const Diagnostic& d) {
  std::string t = d.message;
  for (const auto& n : d.notes) t += "\n" + n.message;
  return t;
}

}  // namespace

std::optional<ReplaySpec> replaySpecFor(const Diagnostic& d, const std::string& source, std::string* whyNot) {
  auto fail = [&](std::string why) -> std::optional<ReplaySpec> {
    if (whyNot) *whyNot = std::move(why);
    return std::nullopt;
  };
  if (!probedCode(d.code))
    return fail(d.code + " is not a rule the probe tests (" + probedCodesText("and") + ")");
  ReplaySpec s;
  s.code = d.code;
  s.path = d.location.path;
  s.line = static_cast<int>(d.location.start.line) + 1;
  const std::string text = allText(d);
  std::string at;  // the source text of the finding's range
  if (d.location.range.end > d.location.range.begin && d.location.range.end <= source.size())
    at = source.substr(d.location.range.begin, d.location.range.end - d.location.range.begin);

  if (!d.facts.empty()) {
    // A control (RuleContext::control): the rule's facts say what it saw.
    auto fact = [&](const char* k) {
      auto it = d.facts.find(k);
      return it == d.facts.end() ? std::string() : it->second;
    };
    s.shape = fact("shape");
    s.wrapApi = fact("wrap_api");
    s.fsdpVersion = fact("fsdp_version") == "1" ? 1 : 2;
    s.useOrigParams = fact("use_orig_params") == "1";
    s.joint = fact("joint") == "1";
    s.replacement = fact("replacement");
    if (!fact("fsdp_from").empty()) s.fsdpFrom = fact("fsdp_from");
    s.control = true;
    if (s.shape.empty() || s.wrapApi.empty()) return fail("the control names no shape or wrap API");
  } else if (d.code == "SL104") {
    // FSDP2: a forward between fully_shard and the optimizer. Which modules stay unsharded, from the message:
    // the root (its reshard_after_forward not True), blocks with reshard_after_forward=False, or both.
    s.wrapApi = "fully_shard";
    bool root = contains(text, "FSDP2 leaves the root `") || contains(text, "FSDP2 leaves the parameters that the root `");
    bool parts = contains(text, "FSDP2 leaves the parameters of `") || contains(text, " and the parameters of `");
    if (root && parts) s.shape = "forward-before-optimizer-all-kept";
    else if (parts) s.shape = "forward-before-optimizer-blocks-kept";
    else if (root) s.shape = "forward-before-optimizer";
    else return fail("cannot tell which modules stay unsharded from this SL104 finding's message");
  } else if (d.code == "SL205") {
    // FSDP2: `.forward(...)` of a unit instead of a call. A part of `self` inside a class's forward (the
    // message says "in every `Class` made here") replays as the blocks' forward bypassed inside the
    // root's; anything else as the root's own forward called directly. accelerate FSDP2's prepare applies
    // the same `fully_shard` to the root, so its findings replay with fully_shard too.
    s.wrapApi = "fully_shard";
    s.shape = contains(d.message, "` made here (`") ? "bypass-block" : "bypass-root";
  } else if (d.code == "SL203") {
    // A clip by each rank's shard norm: torch's clip on an FSDP1 model (replayed with SHARD_GRAD_OP when the
    // finding names it, else as FULL_SHARD: HYBRID_* needs a 2-D mesh), or accelerate's clip given less than the
    // prepared model's parameters.
    s.fsdpVersion = 1;
    if (contains(d.message, "with FSDP1 accelerate uses the model's own `clip_grad_norm_`")) {
      s.wrapApi = "accelerate";
      s.shape = "clip-accelerate-subset";
      s.useOrigParams = true;  // the original parameters, so that the subset holds gradients
    } else if (contains(d.message, "sharded by FSDP1 (")) {
      s.wrapApi = "fsdp1";
      s.shape = "clip-torch";
      if (contains(d.message, ", SHARD_GRAD_OP): ")) s.shardingStrategy = "SHARD_GRAD_OP";
    } else {
      return fail("cannot tell the shape of this SL203 finding from its message");
    }
  } else if (d.code == "SL201") {
    // accelerate FSDP2 refuses a model and an optimizer prepared apart, and prepare_model: the replay
    // makes the same calls and expects accelerate's ValueError.
    s.wrapApi = "accelerate";
    s.fsdpVersion = 2;
    if (contains(text, "prepare_model")) s.shape = "prepare-model";
    else if (contains(text, "prepared in a call of its own")) s.shape = "separate-prepare";
    else return fail("cannot tell the shape of this SL201 finding from its message");
  } else if (d.code == "SL207") {
    // Tied modules in different FSDP units: the stand-in's embedding and head, tied, split as the message says.
    s.fsdpVersion = contains(text, "is sharded by `fully_shard(") ? 2 : 1;
    s.wrapApi = s.fsdpVersion == 2 ? "fully_shard" : "fsdp1";
    if (s.fsdpVersion == 2 && contains(text, "already managed by another FSDP group")) s.shape = "tied-split-root";
    else if (s.fsdpVersion == 2 && contains(text, "each unit shards and updates its own copy")) s.shape = "tied-split-roots";
    else if (s.fsdpVersion == 1 && contains(text, "each unit flattens its own copy") &&
             !contains(text, "use_orig_params=True`, the first forward fails"))
      s.shape = "tied-split-root";
    else if (s.fsdpVersion == 1 && contains(text, "with `use_orig_params=True` the first forward fails")) {
      s.shape = "tied-split-root";
      s.useOrigParams = true;
    } else {
      return fail("cannot tell how this SL207 finding splits the tied modules from its message");
    }
  } else if (d.code == "SL204") {
    // A collective state dict under a rank guard, on rank 0 only: the call the message names. FSDP1's over a
    // group with a collective timeout of seconds; accelerate's on an FSDP2 model, with the probe's watchdog.
    s.wrapApi = "fsdp1";
    s.fsdpVersion = 1;
    if (contains(d.message, ".state_dict()` on an FSDP1 model")) s.shape = "state-dict-rank0-only";
    else if (d.message.rfind("`FSDP.full_optim_state_dict(", 0) == 0) s.shape = "full-optim-state-dict-rank0-only";
    else if (d.message.rfind("`FSDP.optim_state_dict(", 0) == 0) s.shape = "optim-state-dict-rank0-only";
    else if (contains(d.message, ".get_state_dict(...)` of an accelerate FSDP2 model")) s.shape = "accelerate-state-dict-rank0-only";
    else if (contains(d.message, ".save_model(...)` of an accelerate FSDP2 model")) s.shape = "accelerate-save-model-rank0-only";
    else
      return fail("the probe replays SL204 for FSDP1 state_dict() and optimizer state dicts and accelerate FSDP2's "
                  "get_state_dict and save_model, not this call (accelerate FSDP1 and save_state are not replayed)");
    if (s.shape.rfind("accelerate-", 0) == 0) s.wrapApi = "accelerate", s.fsdpVersion = 2;
  } else if (d.code == "SL202") {
    // transformers' Trainer refuses `optimizers=` when FSDP is on (needs transformers on the rank): FSDP from
    // the TrainingArguments, or from the accelerate config the script is launched with.
    s.wrapApi = "trainer";
    s.shape = "trainer-prebuilt-optimizer";
    s.fsdpFrom = contains(text, "the accelerate config the script is launched with") ? "launcher" : "args";
  } else if (d.code == "SL105") {
    // The parameters are replaced after the optimizer was built, then the model is wrapped in a way that
    // keeps (or re-points) the parameters it is given: the message names the replacement and the wrap.
    s.shape = "params-replaced-after-optimizer";
    if (contains(text, "`PeftModel.from_pretrained")) s.replacement = "peft_from_pretrained";
    else if (contains(text, "`get_peft_model`")) s.replacement = "get_peft_model";
    else if (contains(text, "`to_empty`")) s.replacement = "to_empty";
    else if (contains(text, "`load_state_dict(..., assign=True)`")) s.replacement = "load_state_dict_assign";
    else return fail("cannot tell how this SL105 finding replaces the parameters from its message");
    // SL105 leaves the wraps that make the optimizer stale by themselves (use_orig_params=False) to SL101 and
    // SL402: FSDP1 and accelerate FSDP1 are replayed with use_orig_params=True, as are Fabric (Lightning 2.1+'s
    // default) and a use_orig_params the analysis could not read.
    s.useOrigParams = true;
    if (contains(text, "accelerate FSDP2 `prepare`")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 2;
    } else if (contains(text, "after accelerate FSDP1 `prepare` wraps")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 1;
    } else if (contains(text, "after FSDP1 `FullyShardedDataParallel` wraps")) {
      s.wrapApi = "fsdp1";
      s.fsdpVersion = 1;
    } else if (contains(text, "after FSDP2 `fully_shard` wraps")) {
      s.wrapApi = "fully_shard";
    } else if (contains(text, "after Fabric FSDP `setup_module` wraps")) {
      s.wrapApi = "fabric";
      s.fsdpVersion = 1;
      // `fabric.setup(model, optimizer)` (joint) or `setup_module`: the note at the wrap says which.
      for (const auto& n : d.notes) {
        if (n.message != "the model is wrapped here" || n.location.path != d.location.path) continue;
        size_t b = n.location.range.begin, e = n.location.range.end;
        if (e <= b || e > source.size()) continue;
        std::string call = source.substr(b, e - b);
        s.joint = contains(call, ".setup(");
      }
    } else {
      return fail("cannot tell which FSDP API the finding is about from its message");
    }
  } else if (d.code == "SL402") {
    // accelerate FSDP1 with use_orig_params false (the plugin's default or the config's) and an
    // optimizer built before prepare: SL101's accelerate FSDP1 replay, judged like SL101.
    s.shape = "optimizer-before-wrap";
    s.wrapApi = "accelerate";
    s.fsdpVersion = 1;
    s.useOrigParams = false;
  } else if (d.code == "SL101") {
    s.shape = "optimizer-before-wrap";
    if (contains(text, "FSDP2 `fully_shard`")) {
      s.wrapApi = "fully_shard";
    } else if (contains(text, "FSDP1 `FullyShardedDataParallel`")) {
      s.wrapApi = "fsdp1";
      s.fsdpVersion = 1;
      s.useOrigParams = false;
    } else if (contains(text, "accelerate FSDP1")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 1;
      s.useOrigParams = false;
    } else if (contains(text, "accelerate FSDP2")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 2;
    } else if (contains(text, "Fabric")) {
      // SL101 reports Fabric only with use_orig_params=False (written in FSDPStrategy, or the default of a
      // Lightning before 2.1 that the project pins): the replay passes it explicitly.
      s.wrapApi = "fabric";
      s.fsdpVersion = 1;
      s.useOrigParams = false;
    } else {
      return fail("cannot tell which FSDP API the finding is about from its message");
    }
  } else if (d.code == "SL102") {
    if (contains(text, "accelerate's FSDP2 `prepare`") || contains(text, "accelerate FSDP2")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 2;
      s.shape = "stray-param-before-prepare";
    } else if (contains(text, "FSDP2 mixes plain tensors") || contains(text, "FSDP2 `fully_shard`")) {
      s.wrapApi = "fully_shard";
      s.shape = "stray-param-after-wrap";
    } else if (contains(text, "FSDP1 `FullyShardedDataParallel`") || contains(text, "FSDP never reduces")) {
      s.wrapApi = "fsdp1";
      s.fsdpVersion = 1;
      // A later optimizer over FSDP1 parameters only works with use_orig_params=True or the
      // flat parameters; the replay wraps with use_orig_params=True unless the source says False.
      s.useOrigParams = !contains(source, "use_orig_params=False");
      s.shape = "stray-param-after-wrap";
    } else {
      return fail("cannot tell which FSDP API the finding is about from its message");
    }
  } else {  // SL103
    if (contains(text, "excluded from FSDP (`ignored_*`)")) {
      s.shape = "ignored-trainable";
      // The finding's range is the wrap call that ignores them.
      std::string call = at.empty() ? source : at;
      bool fsdp1 = contains(call, "FullyShardedDataParallel") || std::regex_search(call, std::regex(R"(\bFSDP\s*\()"));
      bool fsdp2 = contains(call, "fully_shard");
      if (fsdp1 && !fsdp2) {
        s.wrapApi = "fsdp1";
        s.fsdpVersion = 1;
        s.useOrigParams = contains(call, "use_orig_params=True");
      } else {
        s.wrapApi = "fully_shard";
      }
    } else if (contains(text, "`fully_shard` is applied to submodules")) {
      s.shape = "blocks-without-root";
      s.wrapApi = "fully_shard";
    } else {
      return fail("cannot tell the shape of this SL103 finding from its message");
    }
  }
  // The optimizer class: at the finding (SL101's range is the constructor), else the first
  // replayable optimizer built in the file; AdamW otherwise.
  if (auto o = optimizerIn(at + "("))
    s.optimizer = *o;
  else if (auto o2 = optimizerIn(source))
    s.optimizer = *o2;
  return s;
}

std::optional<ReplaySpec> replaySpecFor(const Diagnostic& d, std::string* whyNot) {
  std::string source;
  readFileBytes(d.location.path, source);
  return replaySpecFor(d, source, whyNot);
}

}  // namespace shardlint::probe
