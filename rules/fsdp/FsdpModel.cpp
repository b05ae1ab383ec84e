// The FSDP call model: which calls build optimizers and which wrap models (FsdpCallModel::onCall tags
// objects and records domain events), the frameworks modelled rather than interpreted, and the names of
// the optimizer and FSDP APIs. The helpers it calls live beside it (FsdpModelImpl.h); the queries the
// rules share are in Lineage.cpp, Queries.cpp, WhereCodeRuns.cpp and Messages.cpp.
#include "fsdp/FsdpModel.h"

#include <algorithm>
#include <cctype>

#include "fsdp/FsdpModelImpl.h"
#include "fsdp/Versions.h"

namespace shardlint::rules::fsdp {

using semantic::CallSite;
using semantic::kNoObj;
using semantic::Obj;
using semantic::ObjKind;

bool isOptimizerQualname(std::string_view q) {
  std::string_view last = lastComponent(q);
  if (last == "_AdamW" && (startsWith(q, "torchao.optim.") || startsWith(q, "torchao.prototype.low_bit_optim.")))
    return true;  // torchao's plain AdamW with its options (bf16 stochastic rounding)
  if (last.empty() || !std::isupper(static_cast<unsigned char>(last[0]))) return false;
  if (startsWith(q, "torch.optim.lr_scheduler") || startsWith(q, "torch.optim.swa_utils")) return false;
  if (last == "Optimizer" || last == "LRScheduler") return false;
  if (startsWith(q, "torch.optim.")) return true;
  if (startsWith(q, "bitsandbytes.optim.") || startsWith(q, "apex.optimizers.") ||
      startsWith(q, "deepspeed.ops.adam.") || startsWith(q, "timm.optim.") || startsWith(q, "torch_optimizer."))
    return true;
  if (q == "transformers.AdamW" || q == "transformers.Adafactor" || q == "transformers.optimization.AdamW" ||
      q == "transformers.optimization.Adafactor" || q == "lion_pytorch.Lion" ||
      q == "lion_pytorch.lion_pytorch.Lion" || q == "torch.distributed.optim.ZeroRedundancyOptimizer")
    return true;
  // Third-party optimizer packages, by their import paths: DeepSpeed's CPU / fused ops (FusedAdam,
  // DeepSpeedCPUAdam, FusedLamb, FusedLion, DeepSpeedCPULion, DeepSpeedCPUAdagrad), torchdistx's
  // AnyPrecisionAdamW, Prodigy, Muon (Muon, MuonWithAuxAdam, SingleDeviceMuon...), torchao's low-bit
  // optimizers (AdamW8bit, AdamW4bit, AdamWFp8, _AdamW, CPUOffloadOptimizer; also under their
  // prototype path), schedule-free optimizers (AdamWScheduleFree, SGDScheduleFree, RAdamScheduleFree;
  // not ScheduleFreeWrapper, which wraps an optimizer).
  if (startsWith(q, "deepspeed.ops.lamb.") || startsWith(q, "deepspeed.ops.lion.") ||
      startsWith(q, "deepspeed.ops.adagrad.") || startsWith(q, "torchdistx.optimizers.") || startsWith(q, "prodigyopt.") ||
      startsWith(q, "muon.") || startsWith(q, "torchao.optim.") || startsWith(q, "torchao.prototype.low_bit_optim."))
    return true;
  if (startsWith(q, "schedulefree.") && last.find("ScheduleFree") != std::string_view::npos &&
      last.find("Wrapper") == std::string_view::npos)
    return true;
  return false;
}

std::vector<std::vector<std::string_view>> optimizerAndWrapTokens() {
  // Optimizers come from modules named *optim* (torch.optim, bitsandbytes.optim, apex.optimizers,
  // timm.optim, torch_optimizer), from transformers (AdamW, Adafactor), Lion, or subclasses of Optimizer.
  // Optimizers recognised by use (built from parameters, then stepped and zeroed, or handed to a
  // scheduler) are called `step` and `zero_grad`, or given to a scheduler.
  return {{"optim", "AdamW", "Adafactor", "Lion", "Optimizer", "Prodigy", "Muon", "ScheduleFree", "zero_grad",
           "schedule"},
          {"fsdp", "FSDP", "fully_shard", "FullyShardedDataParallel", "Fabric"}};
}

bool isFullyShard(std::string_view q) {
  return startsWith(q, "torch.distributed.") && endsWith(q, ".fully_shard") &&
         q.find("fsdp") != std::string_view::npos;
}

bool isFsdp1Class(std::string_view q) {
  return startsWith(q, "torch.distributed.fsdp") && endsWith(q, ".FullyShardedDataParallel");
}

bool FsdpCallModel::frameworkApi(std::string_view q) const {
  // Frameworks whose wrapping and optimizer handling the model describes (accelerate,
  // Lightning and Fabric, transformers' Trainer, composer): their implementation is
  // library code, modelled rather than interpreted, even inside a checkout of them.
  std::string_view top = q.substr(0, q.find('.'));
  return top == "accelerate" || top == "lightning" || top == "lightning_fabric" || top == "pytorch_lightning" ||
         top == "transformers" || top == "composer";
}

bool FsdpCallModel::receiverSensitive(std::string_view method) const {
  return method == "prepare" || method == "prepare_model" || method == "setup" || method == "setup_module" ||
         method == "setup_optimizers";
}

std::vector<std::string> FsdpCallModel::frameworkOrder(const std::vector<std::string>& bases) const {
  for (const auto& b : bases) {
    if (b == "pytorch_lightning.LightningModule" || b == "lightning.LightningModule" ||
        b == "lightning.pytorch.LightningModule" || b == "pytorch_lightning.core.LightningModule" ||
        b == "lightning.pytorch.core.LightningModule") {
      // Trainer.fit: setup, then the strategy wraps (configure_model / configure_sharded_model),
      // then configure_optimizers, then the loop.
      return {"setup", "configure_sharded_model", "configure_model", "configure_optimizers", "on_train_start",
              "training_step", "on_train_epoch_end"};
    }
  }
  return {};
}

bool FsdpCallModel::onCall(CallSite& site) {
  Store& st = site.in.store();
  if (site.receiver != kNoObj) {
    const Obj recv = st.obj(site.receiver);
    if (recv.hasTag("accelerator") && site.method == "prepare") return handlePrepare(site, recv);
    if (recv.hasTag("accelerator") && site.method == "prepare_model") noteFsdp2PrepareModel(site, recv);
    if (recv.hasTag("fabric")) return handleFabric(site, recv, facts_);
    std::string_view m = site.method;  // compared with many names below: a size test first, no call
    // SL206's fact: `model.compile(...)` (nn.Module.compile compiles the module in place).
    if (m == "compile" && recv.hasTag("fsdp_wrapper"))
      site.in.domainEvent("compile", site.receiver, site.origin, {{"call", calleeText(site)}});
    if (m == "requires_grad_") {
      auto lit = literalOf(st, site.arg(0, "requires_grad"));
      if (!lit || *lit == "True") st.obj(site.receiver).setTag("requires_grad", "1");
      site.result = {site.receiver};
      return true;
    }
    // SL105's facts: calls that put new Parameter objects in place of a module's parameters.
    // `to_empty` materialises every parameter anew; `load_state_dict(sd, assign=True)` assigns the
    // loaded tensors as the parameters (a plain `load_state_dict` copies in place: not a replacement).
    if (m == "to_empty") site.in.domainEvent("replace_params", site.receiver, site.origin, {{"how", "to_empty"}});
    if (m == "load_state_dict" && literalOf(st, site.arg(2, "assign")) == std::optional<std::string>("True"))
      site.in.domainEvent("replace_params", site.receiver, site.origin, {{"how", "load_state_dict"}});
    if (m == "to" || m == "cuda" || m == "cpu" || m == "half" || m == "bfloat16" || m == "float" || m == "train" ||
        m == "eval" || m == "to_empty" || m == "apply") {
      site.result = {site.receiver};
      return true;
    }
    if (m == "zero_grad" || (m == "step" && recv.name.find("optim") != std::string::npos))
      markMethodOptimizer(site.in, site.receiver);
    if (m == "step" || m == "zero_grad")
      noteOptimizerUse(st, {site.receiver}, m == "step" ? kStepped : kZeroed, false, calleeText(site));
    if (m != "zero_grad" && m != "__call__") noteOptimizerUses(site);
    return false;
  }

  const std::string& q = site.qualname;
  auto listed = [&](const char* fact) {
    auto it = facts_.find(fact);
    if (it == facts_.end() || q.empty()) return false;
    std::string_view list = it->second;
    for (size_t start = 0; start <= list.size();) {
      size_t comma = list.find(',', start);
      std::string_view item = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (item == q || (endsWith(q, item) && q.size() > item.size() && q[q.size() - item.size() - 1] == '.')) return true;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return false;
  };
  bool localOptimizer = listed("optimizers");  // configured in-house optimizer builders (setting)
  if (site.cls) {
    for (const auto& b : site.cls->allBases())
      if (b == "torch.optim.Optimizer" || b == "torch.optim.optimizer.Optimizer" || isOptimizerQualname(b))
        localOptimizer = true;
  }
  if (localOptimizer || (!site.cls && isOptimizerQualname(q))) {
    ObjId o = site.cls ? site.result.at(0) : site.in.newObject(ObjKind::Instance, q, site.origin);
    Obj& obj = st.obj(o);
    obj.setTag("optimizer", std::string(lastComponent(q)));
    if (const ValueSet* params = site.arg(0, "params")) {
      obj.setInputs({*params}, {site.argOrigin(0, "params").value_or(site.origin)});
    }
    site.result = {o};
    return true;
  }
  if (site.cls) {
    // A project subclass of transformers' or trl's Trainer (`class MyTrainer(Trainer)`, through project
    // classes) whose `__init__`s, if any, pass `**kwargs` on: the call's arguments reach the Trainer's
    // `__init__` as written. One that may keep `optimizers` from it is not judged.
    if (passesToHfTrainer(site.in, site.cls)) noteTrainerCall(site);
    return false;
  }
  // PEFT: `get_peft_model(model, cfg)` freezes the model's parameters and adds new adapter ones (SL105).
  // The result stays an unknown function's result, which stands for the model.
  // `PeftModel.from_pretrained(model, path, is_trainable=True)` does the same with a saved adapter (without
  // `is_trainable=True` nothing is trainable: an inference model).
  bool loadsAdapter = startsWith(q, "peft.") && endsWith(q, "PeftModel.from_pretrained") &&
                      literalOf(st, site.kwarg("is_trainable")) == std::optional<std::string>("True");
  if ((startsWith(q, "peft.") && lastComponent(q) == "get_peft_model") || loadsAdapter) {
    if (const ValueSet* model = site.arg(0, "model"))
      for (ObjId m : *model)
        site.in.domainEvent("replace_params", m, site.origin,
                            {{"how", loadsAdapter ? "PeftModel.from_pretrained" : "get_peft_model"}});
    return false;
  }
  if (q == "torch.nn.Parameter" || q == "torch.nn.parameter.Parameter") {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("free_param", "1");
    site.result = {o};
    return true;
  }
  if (startsWith(q, "torch.") && q.find('.', 6) == std::string::npos) {
    std::string_view f = lastComponent(q);
    if (f == "randn" || f == "rand" || f == "zeros" || f == "ones" || f == "empty" || f == "full" ||
        f == "tensor" || f == "zeros_like" || f == "ones_like" || f == "randn_like" || f == "empty_like") {
      ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
      st.obj(o).setTag("tensor", "1");
      if (literalOf(st, site.kwarg("requires_grad")) == std::optional<std::string>("True"))
        st.obj(o).setTag("requires_grad", "1");
      site.result = {o};
      return true;
    }
  }
  // SL206's fact: `torch.compile(model)`; the call stays an unknown function's result, which stands for the model.
  if (q == "torch.compile") {
    if (const ValueSet* model = site.arg(0, "model"))
      for (ObjId m : *model) site.in.domainEvent("compile", m, site.origin, {{"call", calleeText(site)}});
    return false;
  }
  if (q == "torch.distributed.fsdp.wrap.enable_wrap") {
    // FSDP1's wrapping context: `wrap(m)` inside it calls wrapper_cls(m, **kwargs).
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    const ValueSet* cls = site.kwarg("wrapper_cls");
    bool fsdp1 = cls && std::any_of(cls->begin(), cls->end(), [&](ObjId c) { return isFsdp1Class(st.obj(c).name); });
    if (fsdp1) {
      st.obj(o).setTag("fsdp1_wrap_context", "1");
      const ValueSet* orig = site.kwarg("use_orig_params");
      auto lit = literalOf(st, orig);
      const char* replaces = !orig ? "1" : lit == std::optional<std::string>("True") ? "0"
                           : lit == std::optional<std::string>("False") ? "1" : "?";
      st.obj(o).setTag("replaces", replaces);
    }
    site.result = {o};
    return true;
  }
  if (q == "torch.distributed.fsdp.wrap.wrap") {
    const ValueSet* modArg = site.arg(0, "module");
    const Obj* context = nullptr;
    for (const ValueSet& c : site.in.contexts())
      for (ObjId id : c)
        if (st.obj(id).hasTag("fsdp1_wrap_context")) context = &st.obj(id);
    if (!modArg) return false;
    if (!context) {  // outside enable_wrap, wrap() returns the module unchanged
      site.result = *modArg;
      return true;
    }
    std::map<std::string, std::string, std::less<>> attrs{{"api", "fsdp1"}, {"fsdp_version", "1"},
                                                          {"call", calleeText(site)},
                                                          {"replaces", std::string(context->tag("replaces"))}};
    for (ObjId m : flattenModules(st, *modArg)) site.in.domainEvent("wrap", m, site.origin, attrs);
    ObjId w = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(w).setTag("fsdp_wrapper", "fsdp1");
    st.obj(w).setInputs({*modArg});
    site.result = {w};
    return true;
  }
  if (isFullyShard(q) || isFsdp1Class(q) || listed("wraps")) {
    const ValueSet* modArg = site.arg(0, "module");
    if (!modArg) return false;
    bool fsdp1 = isFsdp1Class(q);
    std::map<std::string, std::string, std::less<>> attrs{{"api", fsdp1 ? "fsdp1" : "fully_shard"},
                                                          {"fsdp_version", fsdp1 ? "1" : "2"},
                                                          {"call", calleeText(site)}};
    ValueSet ignored;
    if (fsdp1) {
      const ValueSet* orig = site.kwarg("use_orig_params");
      auto lit = literalOf(st, orig);
      if (orig && !lit) site.in.needsCallerValue(*orig);  // a caller may bind it (a config's default)
      // Not written as a constant but bound to one (an argparse or dataclass default, a parameter's
      // default): the message names the expression as written and its value.
      if (orig && lit)
        if (auto [written, at] = keywordText(site, "use_orig_params"); !at.empty() && written != *lit)
          attrs["orig_params_as"] = written;
      // Joined with an option a config file named on the command line may give (`argparse.Namespace(**config)`).
      if (orig && lit && attrs.count("orig_params_as") && anyTagged(st, *orig, "option_value"))
        attrs["orig_params_or_config"] = "1";
      // Read from a YAML file the script loads (semantic "config_file"): the message names it.
      if (orig && lit && attrs.count("orig_params_as")) {
        std::string_view file = st.obj(orig->front()).tag("config_file");
        if (!file.empty() && std::all_of(orig->begin(), orig->end(),
                                         [&](ObjId v) { return st.obj(v).tag("config_file") == file; }))
          attrs["orig_params_in"] = std::string(file);
      }
      attrs["replaces"] = !orig ? "1" : lit == std::optional<std::string>("True") ? "0"
                                     : lit == std::optional<std::string>("False") ? "1" : "?";
      if (!orig && site.splat) attrs["orig_params_splat"] = "1";  // `**kwargs` may set it
      // SL206's fact: the module wrapped is `torch.compile(...)`'s result (compile before the wrap).
      for (ObjId m : *modArg)
        if (st.obj(m).kind == ObjKind::Instance && st.obj(m).name == "torch.compile") attrs["wraps_compiled"] = "1";
      if (site.kwarg("auto_wrap_policy")) attrs["auto_wrap"] = "1";
      // SL203: "FULL_SHARD" (also when not given: FSDP1's default), another strategy, or "?" (not known here).
      const ValueSet* strategy = site.kwarg("sharding_strategy");
      attrs["sharding"] = strategy ? shardingOf(st, strategy) : site.splat ? "?" : "FULL_SHARD";
      for (const char* k : {"ignored_modules", "ignored_states"})
        if (const ValueSet* v = site.kwarg(k)) semantic::addValues(ignored, flattenModules(st, *v));
    } else {
      attrs["replaces"] = "1";
      if (const ValueSet* v = site.kwarg("ignored_params")) semantic::addValues(ignored, flattenModules(st, *v));
      // SL104's fact: `reshard_after_forward` as given to `fully_shard` itself ("default" when not
      // given, the constant when it is one, "?" otherwise). A project's own wrap helper listed in the
      // settings gets none: what it passes on is unknown.
      if (isFullyShard(q)) {
        const ValueSet* raf = site.kwarg("reshard_after_forward");
        auto lit = literalOf(st, raf);
        if (raf && !lit) site.in.needsCallerValue(*raf);  // a caller may bind it (a helper's parameter)
        attrs["reshard_after_forward"] = raf ? lit.value_or("?") : site.splat ? "?" : "default";
      }
    }
    if (!ignored.empty()) attrs["ignored"] = "1";
    for (ObjId m : flattenModules(st, *modArg)) site.in.domainEvent("wrap", m, site.origin, attrs, {ignored});
    if (fsdp1) {
      ObjId w = site.in.newObject(ObjKind::Instance, q, site.origin);
      st.obj(w).setTag("fsdp_wrapper", "fsdp1");
      // SL206: how `use_orig_params` was given, for a compile of the wrapper ("replaces" as on the wrap event).
      for (const char* k : {"replaces", "orig_params_as", "orig_params_in", "orig_params_or_config", "orig_params_splat"})
        if (auto it = attrs.find(k); it != attrs.end()) st.obj(w).setTag(k, it->second);
      st.obj(w).setTag("wrap_call", std::string(attrs["call"]));
      st.obj(w).setInputs({*modArg});
      site.result = {w};
    } else {
      site.result = *modArg;
    }
    return true;
  }
  if (startsWith(q, "accelerate") && endsWith(q, "FullyShardedDataParallelPlugin")) {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    Obj& obj = st.obj(o);
    obj.setTag("fsdp_plugin", "1");
    obj.setTag("fsdp_version", literalOf(st, site.kwarg("fsdp_version")).value_or("1"));
    obj.setTag("use_orig_params", literalOf(st, site.kwarg("use_orig_params")).value_or(""));
    // SL203: FSDP1's strategy: the keyword, else the launcher's FSDP_SHARDING_STRATEGY (a linked config), else
    // FULL_SHARD (accelerate's FullyShardedDataParallelPlugin.__post_init__); "?" for `**kwargs` without it.
    if (const ValueSet* strategy = site.kwarg("sharding_strategy")) obj.setTag("sharding", shardingOf(st, strategy));
    else if (site.splat) obj.setTag("sharding", "?");
    // Where the call ends (a fix adds `use_orig_params=True` there): "file:end", and whether it has arguments.
    obj.setTag("plugin_call", std::to_string(site.origin.file) + ":" + std::to_string(site.origin.range.end));
    obj.setTag("plugin_args", site.args.empty() && site.kwargs.empty() ? "0" : "1");
    // Keywords that come from a `**dict` with constant keys (SL403 checks them at the splat): "name@begin-end;...".
    std::string splatted;
    for (size_t i = 0; i < site.kwargs.size(); ++i) {
      if (!startsWith(writtenKeyword(site, i), "**")) continue;
      const semantic::Origin& at = site.kwargOrigins[i];
      splatted += site.kwargs[i].first + "@" + std::to_string(at.range.begin) + "-" + std::to_string(at.range.end) + ";";
    }
    if (!splatted.empty()) obj.setTag("plugin_splat_kwargs", splatted);
    // The accelerate the project declares (SL403 judges the plugin's names with its releases).
    if (auto pin = facts_.find("requires:accelerate"); pin != facts_.end()) obj.setTag("requires_accelerate", pin->second);
    site.result = {o};
    return true;
  }
  if (q == "accelerate.Accelerator" || q == "accelerate.accelerator.Accelerator") {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("accelerator", "1");
    if (auto pin = facts_.find("requires:accelerate"); pin != facts_.end())
      st.obj(o).setTag("requires_accelerate", pin->second);
    auto fact = [&](const char* k) {
      auto it = facts_.find(k);
      return it == facts_.end() ? std::string() : it->second;
    };
    bool fromPlugin = false;
    if (const ValueSet* plugin = site.kwarg("fsdp_plugin")) {
      for (ObjId p : *plugin) {
        const Obj& po = st.obj(p);
        if (!po.hasTag("fsdp_plugin")) {  // `plugin if use_fsdp else None`: FSDP on one path only
          st.obj(o).setTag("fsdp_conditional", "1");
          continue;
        }
        fromPlugin = true;
        if (po.hasTag("sharding")) st.obj(o).setTag("sharding", std::string(po.tag("sharding")));
        else if (!fact("sharding_strategy").empty()) st.obj(o).setTag("sharding", shardingName(fact("sharding_strategy")));
        else st.obj(o).setTag("sharding", "FULL_SHARD");
        std::string version(po.tag("fsdp_version")), orig(po.tag("use_orig_params"));
        st.obj(o).setTag("fsdp", version);
        if (orig == "True" || orig == "False") {
          st.obj(o).setTag("use_orig_params", orig);
          st.obj(o).setTag("orig_from", "code");
        } else if (!fact("use_orig_params").empty()) {  // unset in code: the launcher's setting applies
          st.obj(o).setTag("use_orig_params", fact("use_orig_params") == "true" ? "True" : "False");
          st.obj(o).setTag("orig_from", "config");
        } else {
          st.obj(o).setTag("use_orig_params", "False");  // FullyShardedDataParallelPlugin() defaults to false
          st.obj(o).setTag("orig_from", "code-default");
          for (const char* k : {"plugin_call", "plugin_args"})
            if (po.hasTag(k)) st.obj(o).setTag(k, std::string(po.tag(k)));
        }
      }
    }
    if (!fromPlugin && fact("accelerate_fsdp").empty() && !fact("fsdp-version").empty()) {
      // The `fsdp-version` setting: assumed for accelerate scripts nothing else describes.
      st.obj(o).setTag("fsdp", fact("fsdp-version"));
      st.obj(o).setTag("use_orig_params", "True");  // the launcher's default
      st.obj(o).setTag("orig_from", "config");
    }
    if (!fromPlugin && !fact("accelerate_fsdp").empty()) {  // FSDP comes from a linked config
      st.obj(o).setTag("fsdp", fact("accelerate_fsdp"));
      st.obj(o).setTag("sharding", fact("sharding_strategy").empty() ? "FULL_SHARD" : shardingName(fact("sharding_strategy")));
      std::string orig = fact("use_orig_params");
      st.obj(o).setTag("use_orig_params", orig == "false" ? "False" : "True");  // launcher default: true
      st.obj(o).setTag("orig_from", "config");
    }
    for (const char* k : {"config", "config_line", "config_col", "config_value"})
      if (!fact(k).empty()) st.obj(o).setTag(k, fact(k));
    // accelerate before 1.6 has no FSDP2 (`fsdp_version` is not read): nothing SL201 judges applies.
    if (auto pin = pinnedBelow(facts_, {"accelerate"}, "1.6")) st.obj(o).setTag("accelerate_before_fsdp2", *pin);
    if (site.kwarg("parallelism_config")) st.obj(o).setTag("parallelism_config", "1");
    site.result = {o};
    return true;
  }
  if (endsWith(q, ".FSDPStrategy") && (startsWith(q, "lightning") || startsWith(q, "pytorch_lightning"))) {
    // use_orig_params: "True"/"False" as written, "?" when not a literal, absent when not passed.
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    if (const ValueSet* orig = site.kwarg("use_orig_params")) {
      auto lit = literalOf(st, orig);
      st.obj(o).setTag("use_orig_params", lit == std::optional<std::string>("True")    ? "True"
                                          : lit == std::optional<std::string>("False") ? "False"
                                                                                       : "?");
    }
    site.result = {o};
    return true;
  }
  if (endsWith(q, ".ModelParallelStrategy") && (startsWith(q, "lightning") || startsWith(q, "pytorch_lightning"))) {
    // Fabric's takes `parallelize_fn(module, device_mesh)`, which its `setup_module` runs (the Trainer's
    // takes none: the LightningModule's `configure_model` does the sharding, in the order frameworkOrder gives).
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("model_parallel", "1");
    if (const ValueSet* fn = site.arg(0, "parallelize_fn")) st.obj(o).setInputs({*fn});
    site.result = {o};
    return true;
  }
  if (q == "lightning.Fabric" || q == "lightning.fabric.Fabric" || q == "lightning_fabric.Fabric" ||
      q == "lightning.fabric.fabric.Fabric") {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("fabric", "1");
    if (const ValueSet* strat = site.kwarg("strategy")) {
      ValueSet parallelize;
      for (ObjId s : *strat) {
        const Obj& so = st.obj(s);
        if (so.hasTag("model_parallel") && !so.inputs().empty()) {
          st.obj(o).setTag("model_parallel", "1");
          semantic::addValues(parallelize, so.inputs()[0]);
          continue;
        }
        std::string name = so.name;
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        if (so.kind == ObjKind::Literal && name.find("fsdp") != std::string::npos) {
          st.obj(o).setTag("fsdp", "1");
        } else if (so.kind == ObjKind::Instance && endsWith(so.name, "FSDPStrategy")) {
          st.obj(o).setTag("fsdp", "1");
          if (so.hasTag("use_orig_params")) st.obj(o).setTag("use_orig_params", std::string(so.tag("use_orig_params")));
        }
      }
      if (!parallelize.empty()) st.obj(o).setInputs({parallelize});
    }
    site.result = {o};
    return true;
  }
  if (endsWith(q, ".DataLoader")) {
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("dataloader", "1");
    site.result = {o};
    return true;
  }
  if (startsWith(q, "torch.optim.lr_scheduler") || q == "torch.optim.swa_utils.SWALR" ||
      (startsWith(q, "diffusers.") && q.find("get_scheduler") != std::string::npos) ||
      (startsWith(q, "transformers.") && q.find("schedule") != std::string::npos)) {
    if (const ValueSet* opt = site.arg(0, "optimizer")) noteOptimizerUse(st, *opt, 0, true);
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("scheduler", "1");
    site.result = {o};
    return true;
  }
  if (isTrainingArguments(q)) {
    // Whether the arguments enable FSDP (`fsdp="full_shard auto_wrap"`): the Trainer then refuses
    // optimizers built outside it (SL202).
    ObjId o = site.in.newObject(ObjKind::Instance, q, site.origin);
    st.obj(o).setTag("training_args", "1");
    const ValueSet* fsdp = site.kwarg("fsdp");
    st.obj(o).setTag("trainer_fsdp", site.splat && !fsdp ? "?" : trainerFsdpSetting(st, fsdp));
    auto [text, at] = keywordText(site, "fsdp");
    if (!at.empty()) {
      st.obj(o).setTag("trainer_fsdp_text", "fsdp=" + text);
      st.obj(o).setTag("trainer_fsdp_at", at);
    }
    site.result = {o};
    return true;
  }
  if (isHfTrainer(q)) noteTrainerCall(site);
  noteOptimizerUses(site);
  return false;
}

void FsdpCallModel::noteTrainerCall(CallSite& site) {
  Store& st = site.in.store();
  if (const ValueSet* pair = site.kwarg("optimizers")) {  // Trainer(optimizers=(opt, sched))
    for (ObjId c : *pair)
      if (st.obj(c).kind == ObjKind::Container && !st.obj(c).elements().empty())
        noteOptimizerUse(st, st.obj(c).elements()[0], 0, true);
    noteTrainerOptimizers(site, pair);
  } else if (!site.splat) {
    noteTrainerOptimizers(site, nullptr);  // the Trainer builds its own optimizer (SL202's controls only)
  }
}

}  // namespace shardlint::rules::fsdp
