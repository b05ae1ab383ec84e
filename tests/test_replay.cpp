// Replay programs (runtime_probe/orchestrator/Replay.*) and the Python side of the runtime probe
// (runtime_probe/python): every shape x wrap API program is generated, checked for its calls in
// order and byte-compiled; the package compiles; the report writer, a replay without torch and the
// script-mode start-up hook run with the system python3. None of this needs torch or a GPU: the
// runs that could reach an installed torch use `python3 -S` (no site-packages), and the script-mode
// test puts a stand-in `torch` package first on PYTHONPATH.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "TestSupport.h"
#include "orchestrator/Replay.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint::probe;
using shardlint::testing::readFile;
using shardlint::testing::shellQuote;

namespace {

using Run = shardlint::testing::ShellResult;

// Runs `cmd` with stdout and stderr captured together.
Run sh(const std::string& cmd) { return shardlint::testing::runShell(cmd + " 2>&1"); }

struct ReplayTempDir : shardlint::testing::TempDir {
  ReplayTempDir() : TempDir("shardlint-replay-test-") {}
};

fs::path pythonDir() { return fs::path(SHARDLINT_SOURCE_DIR) / "runtime_probe" / "python"; }

ReplaySpec spec(const std::string& code, const std::string& shape, const std::string& api, bool origParams = false,
                int fsdpVersion = 2) {
  ReplaySpec s;
  s.code = code;
  s.path = "train.py";
  s.line = 42;
  s.shape = shape;
  s.wrapApi = api;
  s.useOrigParams = origParams;
  s.fsdpVersion = fsdpVersion;
  return s;
}

// `text` contains every needle, in this order (each after the previous one).
void requireInOrder(const std::string& text, const std::vector<std::string>& needles) {
  size_t at = 0;
  for (const auto& needle : needles) {
    INFO("looking for `" << needle << "` after offset " << at);
    size_t found = text.find(needle, at);
    REQUIRE(found != std::string::npos);
    at = found + needle.size();
  }
}

struct Case {
  ReplaySpec spec;
  std::vector<std::string> inOrder;
  std::vector<std::string> absent;
};

std::vector<Case> supportedCases() {
  const std::string fsPrelude = "s.require_torch(rt.compat.TORCH_MIN_FSDP2";
  const std::string run = "s.run_first_step(model, optimizer)";
  const std::string accelRun = "s.run_first_step(model, optimizer, device=accelerator.device, backward=accelerator.backward)";
  const std::string fsdp1Wrap = "model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({rt.standin_block_class()}), ";
  std::vector<Case> cases;
  // SL101 optimizer-before-wrap: the optimizer is built before the wrap / prepare.
  cases.push_back({spec("SL101", "optimizer-before-wrap", "fully_shard"),
                   {fsPrelude, "env = s.init_distributed()", "fully_shard = rt.compat.fully_shard_function()",
                    "model = rt.build_standin().to(env.device)", "optimizer = s.make_optimizer(model.parameters())",
                    "s.phase(\"wrap\")", "for block in model.blocks:", "fully_shard(block, mesh=env.mesh)",
                    "fully_shard(model, mesh=env.mesh)", run},
                   {"add_param_group", "ignored"}});
  for (bool orig : {false, true}) {
    cases.push_back({spec("SL101", "optimizer-before-wrap", "fsdp1", orig),
                     {"s.require_torch(rt.compat.TORCH_MIN, \"FSDP1", "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP",
                      "model = rt.build_standin().to(env.device)", "optimizer = s.make_optimizer(model.parameters())",
                      fsdp1Wrap + "use_orig_params=" + (orig ? "True" : "False") + ", device_id=env.device_id)", run},
                     {"fully_shard(", "ignored_modules"}});
  }
  for (bool orig : {false, true}) {
    cases.push_back({spec("SL101", "optimizer-before-wrap", "accelerate", orig, 1),
                     {"s.require_accelerate(rt.compat.ACCELERATE_MIN,", "    env = s.init_distributed()  #",
                      "from accelerate import Accelerator",
                      std::string("plugin = FullyShardedDataParallelPlugin(use_orig_params=") + (orig ? "True" : "False") +
                          ", **rt.fsdp_version_kwargs(1))",
                      "accelerator = Accelerator(fsdp_plugin=plugin, cpu=env.device.type == \"cpu\")", "s.check_accelerator(accelerator, plugin)",
                      "model = rt.build_standin()\n", "optimizer = s.make_optimizer(model.parameters())",
                      "model, optimizer = accelerator.prepare(model, optimizer)", accelRun},
                     {"fsdp_version=2", "fully_shard(", "scale"}});
  }
  cases.push_back({spec("SL101", "optimizer-before-wrap", "accelerate", false, 2),
                   {"s.require_accelerate(rt.compat.ACCELERATE_MIN_FSDP2,", "plugin = FullyShardedDataParallelPlugin(fsdp_version=2)",
                    "accelerator = Accelerator(fsdp_plugin=plugin, cpu=env.device.type == \"cpu\")", "optimizer = s.make_optimizer(model.parameters())",
                    "model, optimizer = accelerator.prepare(model, optimizer)", accelRun},
                   {"use_orig_params", "scale"}});
  // Lightning Fabric: the optimizer is built first, then setup_module, then setup_optimizers.
  for (bool orig : {false, true}) {
    cases.push_back({spec("SL101", "optimizer-before-wrap", "fabric", orig, 1),
                     {"s.require_torch(rt.compat.TORCH_MIN, \"Lightning Fabric FSDP\")", "env = s.init_distributed()  #",
                      "fabric_cls = s.require_fabric()",
                      std::string("fabric = fabric_cls(strategy=rt.fabric_fsdp_strategy(env, use_orig_params=") +
                          (orig ? "True" : "False") + "), **rt.fabric_device_kwargs(env))",
                      "fabric.launch()", "model = rt.build_standin()\n", "optimizer = s.make_optimizer(model.parameters())",
                      "s.phase(\"wrap\")", "model = fabric.setup_module(model)",
                      "optimizer = fabric.setup_optimizers(optimizer)",
                      "s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)"},
                     {"fully_shard(", "accelerate", "scale"}});
  }
  // Controls: the order the rules expect (the wrap first, then the optimizer from the wrapped model).
  cases.push_back({spec("SL101", "optimizer-after-wrap", "fully_shard"),
                   {fsPrelude, "s.phase(\"wrap\")", "fully_shard(block, mesh=env.mesh)", "fully_shard(model, mesh=env.mesh)",
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"accelerate", "scale"}});
  cases.push_back({spec("SL101", "optimizer-after-wrap", "fsdp1", true, 1),
                   {"s.phase(\"wrap\")", fsdp1Wrap + "use_orig_params=True", "optimizer = s.make_optimizer(model.parameters())", run},
                   {"fully_shard(", "scale"}});
  cases.push_back({spec("SL101", "optimizer-after-wrap", "accelerate", false, 2),
                   {"plugin = FullyShardedDataParallelPlugin(fsdp_version=2)", "model = accelerator.prepare(model)",
                    "optimizer = s.make_optimizer(model.parameters())", "optimizer = accelerator.prepare(optimizer)",
                    accelRun},
                   {"scale", "model, optimizer = accelerator.prepare"}});
  cases.push_back({spec("SL101", "optimizer-after-wrap", "fabric", true, 1),
                   {"fabric.launch()", "model = fabric.setup_module(model)", "optimizer = s.make_optimizer(model.parameters())",
                    "optimizer = fabric.setup_optimizers(optimizer)"},
                   {"accelerate", "fully_shard("}});
  {
    ReplaySpec joint = spec("SL101", "optimizer-before-wrap", "fabric", true, 1);
    joint.joint = true;
    cases.push_back({joint,
                     {"optimizer = s.make_optimizer(model.parameters())", "s.phase(\"wrap\")",
                      "model, optimizer = fabric.setup(model, optimizer)",
                      "s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)"},
                     {"setup_module", "setup_optimizers"}});
  }
  // SL102 stray-param-after-wrap: wrap, optimizer, then add_param_group with a free parameter.
  cases.push_back({spec("SL102", "stray-param-after-wrap", "fully_shard"),
                   {fsPrelude, "fully_shard(block, mesh=env.mesh)", "fully_shard(model, mesh=env.mesh)",
                    "optimizer = s.make_optimizer(model.parameters())",
                    "scale = torch.nn.Parameter(torch.ones((), device=env.device))", "s.phase(\"add_param_group\")",
                    "optimizer.add_param_group({\"params\": [scale]})", "s.run_first_step(model, optimizer, scale=scale)"},
                   {"accelerator"}});
  for (bool orig : {false, true}) {
    cases.push_back({spec("SL102", "stray-param-after-wrap", "fsdp1", orig),
                     {fsdp1Wrap + "use_orig_params=" + (orig ? "True" : "False"), "optimizer = s.make_optimizer(model.parameters())",
                      "scale = torch.nn.Parameter(", "optimizer.add_param_group({\"params\": [scale]})",
                      "s.run_first_step(model, optimizer, scale=scale)"},
                     {"fully_shard("}});
  }
  // SL102 stray-param-before-prepare: the free parameter is in the constructor's groups, then one prepare.
  for (int version : {2, 1}) {
    cases.push_back({spec("SL102", "stray-param-before-prepare", "accelerate", false, version),
                     {version == 2 ? "plugin = FullyShardedDataParallelPlugin(fsdp_version=2)"
                                   : "plugin = FullyShardedDataParallelPlugin(use_orig_params=False, **rt.fsdp_version_kwargs(1))",
                      "accelerator = Accelerator(fsdp_plugin=plugin, cpu=env.device.type == \"cpu\")",
                      "scale = torch.nn.Parameter(torch.ones((), device=accelerator.device))",
                      "optimizer = s.make_optimizer([{\"params\": list(model.parameters())}, {\"params\": [scale]}])",
                      "s.phase(\"prepare\")", "model, optimizer = accelerator.prepare(model, optimizer)",
                      "s.run_first_step(model, optimizer, scale=scale, device=accelerator.device, backward=accelerator.backward)"},
                     {"add_param_group", "fully_shard("}});
  }
  // SL103 blocks-without-root: fully_shard on the blocks only, then the optimizer over the whole model.
  cases.push_back({spec("SL103", "blocks-without-root", "fully_shard"),
                   {fsPrelude, "for block in model.blocks:", "fully_shard(block, mesh=env.mesh)",
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"fully_shard(model", "ignored"}});
  // SL103 ignored-trainable: the head's weight is ignored, the optimizer holds it.
  cases.push_back({spec("SL103", "ignored-trainable", "fully_shard"),
                   {"s.require_torch(rt.compat.TORCH_MIN_IGNORED_PARAMS", "fully_shard(block, mesh=env.mesh)",
                    "fully_shard(model, mesh=env.mesh, ignored_params={model.head.weight})",
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"ignored_modules"}});
  cases.push_back({spec("SL103", "ignored-trainable", "fsdp1", true),
                   {fsdp1Wrap + "ignored_modules=[model.head], use_orig_params=True, device_id=env.device_id)",
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"fully_shard(", "ignored_params"}});
  // SL201 with accelerate FSDP1 (a control): the model prepared alone, then the optimizer in its own call.
  cases.push_back({spec("SL201", "separate-prepare", "accelerate", true, 1),
                   {"plugin = FullyShardedDataParallelPlugin(use_orig_params=True, **rt.fsdp_version_kwargs(1))",
                    "model = accelerator.prepare(model)", "optimizer = s.make_optimizer(model.parameters())",
                    "optimizer = accelerator.prepare(optimizer)", accelRun},
                   {"fsdp_version=2", "model, optimizer = accelerator.prepare"}});
  // SL105: the optimizer, then the replacement, then the wrap (and the control's order: the replacement first).
  auto replaced = [](const std::string& shape, const std::string& api, const std::string& how, bool joint = false,
                     int version = 1) {
    ReplaySpec s = spec("SL105", shape, api, true, version);
    s.replacement = how;
    s.joint = joint;
    return s;
  };
  const std::string after = "params-replaced-after-optimizer", before = "params-replaced-before-optimizer";
  cases.push_back({replaced(after, "accelerate", "get_peft_model", false, 2),
                   {"s.require_torch(rt.compat.TORCH_MIN, \"accelerate FSDP\")",
                    "s.require_peft(rt.compat.PEFT_MIN, \"get_peft_model on a custom nn.Module\")",
                    "s.require_accelerate(rt.compat.ACCELERATE_MIN_FSDP2,", "plugin = FullyShardedDataParallelPlugin(fsdp_version=2)",
                    "model = rt.build_standin()\n", "optimizer = s.make_optimizer(model.parameters())",
                    "model = s.replace_parameters(model, \"get_peft_model\")", "s.phase(\"prepare\")",
                    "model, optimizer = accelerator.prepare(model, optimizer)", accelRun},
                   {"save_adapter", "build_standin_on_meta", "use_orig_params"}});
  cases.push_back({replaced(after, "fsdp1", "peft_from_pretrained"),
                   {"s.require_peft(rt.compat.PEFT_MIN, \"PeftModel.from_pretrained(..., is_trainable=True)\")",
                    "model = rt.build_standin().to(env.device)", "adapter = s.save_adapter()",
                    "optimizer = s.make_optimizer(model.parameters())",
                    "model = s.replace_parameters(model, \"peft_from_pretrained\", adapter=adapter)",
                    fsdp1Wrap + "use_orig_params=True, device_id=env.device_id)", run},
                   {"build_standin_on_meta", "accelerate"}});
  cases.push_back({replaced(after, "fsdp1", "to_empty"),
                   {"model = rt.build_standin_on_meta()  # no storage until to_empty",
                    "optimizer = s.make_optimizer(model.parameters())", "model = s.replace_parameters(model, \"to_empty\")",
                    fsdp1Wrap + "use_orig_params=True", run},
                   {"require_peft", "save_adapter", "rt.build_standin()"}});
  cases.push_back({replaced(after, "fabric", "load_state_dict_assign", true),
                   {"fabric.launch()", "model = rt.build_standin()\n", "optimizer = s.make_optimizer(model.parameters())",
                    "model = s.replace_parameters(model, \"load_state_dict_assign\")", "s.phase(\"wrap\")",
                    "model, optimizer = fabric.setup(model, optimizer)",
                    "s.run_first_step(model, optimizer, device=fabric.device, backward=fabric.backward)"},
                   {"setup_module", "setup_optimizers", "require_peft"}});
  cases.push_back({replaced(after, "fully_shard", "get_peft_model"),
                   {fsPrelude, "s.require_peft(", "optimizer = s.make_optimizer(model.parameters())",
                    "model = s.replace_parameters(model, \"get_peft_model\")", "fully_shard(block, mesh=env.mesh)",
                    "fully_shard(model, mesh=env.mesh)", run},
                   {"accelerate"}});
  cases.push_back({replaced(before, "accelerate", "to_empty", false, 2),
                   {"model = rt.build_standin_on_meta()", "model = s.replace_parameters(model, \"to_empty\")",
                    "optimizer = s.make_optimizer(model.parameters())",
                    "model, optimizer = accelerator.prepare(model, optimizer)", accelRun},
                   {"require_peft"}});
  cases.push_back({replaced(before, "accelerate", "get_peft_model", false, 1),
                   {"s.require_peft(", "plugin = FullyShardedDataParallelPlugin(use_orig_params=True, **rt.fsdp_version_kwargs(1))",
                    "model = s.replace_parameters(model, \"get_peft_model\")",
                    "optimizer = s.make_optimizer(model.parameters())",
                    "model, optimizer = accelerator.prepare(model, optimizer)", accelRun},
                   {"fsdp_version=2"}});
  cases.push_back({replaced(before, "fabric", "get_peft_model"),
                   {"model = s.replace_parameters(model, \"get_peft_model\")", "optimizer = s.make_optimizer(model.parameters())",
                    "model = fabric.setup_module(model)", "optimizer = fabric.setup_optimizers(optimizer)"},
                   {"fabric.setup(model, optimizer)"}});
  // SL202: transformers' Trainer; FSDP from its arguments, from the launcher's environment, or off.
  auto trainer = [](const std::string& shape, const std::string& from, int version = 2) {
    ReplaySpec s = spec("SL202", shape, "trainer", false, version);
    s.fsdpFrom = from;
    return s;
  };
  const std::string prelude = "s.require_transformers(rt.compat.TRANSFORMERS_MIN,";
  const std::string given = "trainer = Trainer(model=model, args=args, train_dataset=rt.trainer_dataset(), "
                            "optimizers=(optimizer, None))";
  cases.push_back({trainer("trainer-prebuilt-optimizer", "args"),
                   {"s.require_torch(rt.compat.TORCH_MIN, \"transformers Trainer with FSDP\")", prelude,
                    "env = s.init_distributed()", "s.trainer_fsdp_on_cpu()", "from transformers import Trainer",
                    "model = rt.trainer_standin()", "optimizer = s.make_optimizer(model.parameters())",
                    "args = rt.trainer_arguments(env, fsdp=\"full_shard\")", "s.phase(\"trainer\")", given,
                    "s.run_trainer_first_step(trainer)"},
                   {"launched_with_fsdp", "Accelerator("}});
  cases.push_back({trainer("trainer-prebuilt-optimizer", "launcher"),
                   {prelude, "env = s.init_distributed()", "s.launched_with_fsdp(2)", "s.trainer_fsdp_on_cpu()",
                    "optimizer = s.make_optimizer(model.parameters())", "args = rt.trainer_arguments(env, fsdp=None)", given,
                    "s.run_trainer_first_step(trainer)"},
                   {"full_shard"}});
  cases.push_back({trainer("trainer-prebuilt-optimizer", "off"),
                   {prelude, "optimizer = s.make_optimizer(model.parameters())",
                    "args = rt.trainer_arguments(env, fsdp=\"\")  # FSDP off", given, "s.run_trainer_first_step(trainer)"},
                   {"launched_with_fsdp", "full_shard"}});
  cases.push_back({trainer("trainer-builds-optimizer", "args"),
                   {prelude, "model = rt.trainer_standin()", "args = rt.trainer_arguments(env, fsdp=\"full_shard\")",
                    "trainer = Trainer(model=model, args=args, train_dataset=rt.trainer_dataset())",
                    "s.run_trainer_first_step(trainer)"},
                   {"make_optimizer", "optimizers=("}});
  cases.push_back({trainer("trainer-builds-optimizer", "launcher", 1),
                   {prelude, "s.launched_with_fsdp(1)", "args = rt.trainer_arguments(env, fsdp=None)",
                    "trainer = Trainer(model=model, args=args, train_dataset=rt.trainer_dataset())"},
                   {"make_optimizer", "optimizers=("}});
  // SL104: a forward pass between fully_shard and the optimizer (which modules keep their unsharded
  // parameters: the root by default, blocks with reshard_after_forward=False), and its controls.
  const std::string forward = "with torch.no_grad():\n        model(inputs)";
  cases.push_back({spec("SL104", "forward-before-optimizer", "fully_shard"),
                   {fsPrelude, "fully_shard(block, mesh=env.mesh)\n",
                    "fully_shard(model, mesh=env.mesh)  # the root: reshard_after_forward not given",
                    "inputs, _ = rt.batch(env.rank, env.device)", forward,
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"reshard_after_forward=", "backward()", "reshard()"}});
  cases.push_back({spec("SL104", "forward-before-optimizer-blocks-kept", "fully_shard"),
                   {"fully_shard(block, mesh=env.mesh, reshard_after_forward=False)",
                    "fully_shard(model, mesh=env.mesh, reshard_after_forward=True)", forward,
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"reshard()"}});
  cases.push_back({spec("SL104", "forward-before-optimizer-all-kept", "fully_shard"),
                   {"fully_shard(block, mesh=env.mesh, reshard_after_forward=False)",
                    "fully_shard(model, mesh=env.mesh)  # the root", forward,
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"reshard_after_forward=True"}});
  cases.push_back({spec("SL104", "optimizer-then-forward", "fully_shard"),
                   {"fully_shard(model, mesh=env.mesh)", "optimizer = s.make_optimizer(model.parameters())", forward,
                    run},
                   {"reshard_after_forward=", "reshard()"}});
  cases.push_back({spec("SL104", "forward-backward-before-optimizer", "fully_shard"),
                   {"fully_shard(model, mesh=env.mesh)", "model(inputs).float().mean().backward()",
                    "model.zero_grad(set_to_none=True)", "optimizer = s.make_optimizer(model.parameters())", run},
                   {"reshard_after_forward=", "torch.no_grad()"}});
  cases.push_back({spec("SL104", "forward-reshard-before-optimizer", "fully_shard"),
                   {"fully_shard(model, mesh=env.mesh)", forward, "model.reshard()",
                    "optimizer = s.make_optimizer(model.parameters())", run},
                   {"reshard_after_forward="}});
  cases.push_back({spec("SL104", "forward-before-optimizer-resharded", "fully_shard"),
                   {"fully_shard(block, mesh=env.mesh)\n", "fully_shard(model, mesh=env.mesh, reshard_after_forward=True)",
                    forward, "optimizer = s.make_optimizer(model.parameters())", run},
                   {"reshard_after_forward=False", "reshard()"}});
  return cases;
}

bool isAscii(const std::string& text) {
  for (unsigned char ch : text)
    if (ch >= 0x80) return false;
  return true;
}

std::string caseName(const ReplaySpec& s) {
  return s.code + " " + s.shape + " " + s.wrapApi + " use_orig_params=" + (s.useOrigParams ? "1" : "0") +
         " fsdp_version=" + std::to_string(s.fsdpVersion);
}

void requirePython() {
  Run r = sh("python3 -c 'import sys; print(sys.version_info >= (3, 9))'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("True") != std::string::npos);
}

// The keys of a rank report (runtime_probe/python/README.md): the C++ RankReport fields in
// snake_case, then the extras.
const std::set<std::string> kReportKeys = {
    "schema", "rank", "world_size", "backend", "torch_version", "accelerate_version", "reached_step",
    "stale_optimizer_entries", "unmanaged_entries", "params_changed", "diverged", "trainable_params",
    "trainable_not_optimized", "tied_apart", "tied_max_diff", "exception_type", "exception_message", "elapsed_seconds", "events", "finding", "mode",
    "phase", "optimizer_class", "optimizer_entries", "unmanaged_names", "trainable_not_optimized_names", "probe_error",
    "notes"};

std::set<std::string> keysOf(const json& j) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

// Environment for the no-torch runs: the package on PYTHONPATH, no rank variables; with
// `python3 -S` (no site-packages) an installed torch cannot be imported.
std::string noTorchEnv(const fs::path& out) {
  return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u SHARDLINT_PROBE_MODE -u SHARDLINT_PROBE_ACTIVE_PID "
         "PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=" +
         shellQuote(pythonDir().string()) + " SHARDLINT_PROBE_OUT=" + shellQuote(out.string()) + " ";
}

}  // namespace

TEST_CASE("replay: supported shapes and wrap APIs", "[probe][replay]") {
  CHECK(replayShapes().size() == 44);
  CHECK(replayWrapApis().size() == 5);
  std::set<std::string> supported;
  for (const auto& shape : replayShapes()) {
    for (const auto& api : replayWrapApis()) {
      for (int version : {1, 2}) {
        ReplaySpec s = spec("SL101", shape, api, false, version);
        std::string why;
        bool ok = replaySupported(s, &why);
        if (ok) {
          supported.insert(shape + "/" + api);
          CHECK(why.empty());
          CHECK_NOTHROW(replayProgram(s));
        } else {
          INFO(shape << " " << api);
          CHECK_FALSE(why.empty());
          CHECK_THROWS_AS(replayProgram(s), std::invalid_argument);
        }
      }
    }
  }
  CHECK(supported == std::set<std::string>{"optimizer-before-wrap/fully_shard", "optimizer-before-wrap/fsdp1",
                                           "optimizer-before-wrap/accelerate", "optimizer-before-wrap/fabric",
                                           "optimizer-after-wrap/fully_shard", "optimizer-after-wrap/fsdp1",
                                           "optimizer-after-wrap/accelerate", "optimizer-after-wrap/fabric",
                                           "stray-param-after-wrap/fully_shard",
                                           "stray-param-after-wrap/fsdp1", "stray-param-before-prepare/accelerate",
                                           "blocks-without-root/fully_shard", "ignored-trainable/fully_shard",
                                           "ignored-trainable/fsdp1", "separate-prepare/accelerate",
                                           "prepare-model/accelerate", "trainer-prebuilt-optimizer/trainer",
                                           "trainer-builds-optimizer/trainer",
                                           "forward-before-optimizer/fully_shard",
                                           "forward-before-optimizer-blocks-kept/fully_shard",
                                           "forward-before-optimizer-all-kept/fully_shard",
                                           "optimizer-then-forward/fully_shard",
                                           "forward-backward-before-optimizer/fully_shard",
                                           "forward-reshard-before-optimizer/fully_shard",
                                           "forward-before-optimizer-resharded/fully_shard", "bypass-root/fully_shard",
                                           "bypass-block/fully_shard", "bypass-registered/fully_shard",
                                           "bypass-unshard/fully_shard", "bypass-call/fully_shard",
                                           "tied-split-root/fully_shard", "tied-split-root/fsdp1",
                                           "tied-split-roots/fully_shard", "tied-one-unit/fully_shard",
                                           "tied-one-unit/fsdp1", "tied-group/fully_shard",
                                           "state-dict-rank0-only/fsdp1", "state-dict-all-ranks/fsdp1",
                                           "optim-state-dict-rank0-only/fsdp1", "optim-state-dict-all-ranks/fsdp1",
                                           "full-optim-state-dict-rank0-only/fsdp1",
                                           "full-optim-state-dict-all-ranks/fsdp1",
                                           "accelerate-state-dict-rank0-only/accelerate",
                                           "accelerate-state-dict-all-ranks/accelerate",
                                           "accelerate-save-model-rank0-only/accelerate",
                                           "accelerate-save-model-all-ranks/accelerate",
                                           "clip-torch/fsdp1", "clip-accelerate-subset/accelerate",
                                           "clip-fsdp1-method/fsdp1", "clip-no-shard/fsdp1", "clip-fsdp2/fully_shard",
                                           "clip-accelerate-full/accelerate"});
  std::string why;
  CHECK_FALSE(replaySupported(spec("SL101", "optimizer-before-wrap", "deepspeed"), &why));
  CHECK(why.find("deepspeed") != std::string::npos);
  CHECK_FALSE(replaySupported(spec("SL101", "no-such-shape", "fully_shard"), &why));
  CHECK(why.find("no-such-shape") != std::string::npos);
  CHECK_FALSE(replaySupported(spec("SL101", "optimizer-before-wrap", "accelerate", false, 3), &why));
  CHECK(why.find("fsdp_version") != std::string::npos);
  // fsdpVersion matters only for accelerate.
  CHECK(replaySupported(spec("SL101", "optimizer-before-wrap", "fully_shard", false, 0)));
  // SL105's shapes need a known replacement, and replay it with every wrap API but the Trainer.
  for (const std::string shape : {"params-replaced-after-optimizer", "params-replaced-before-optimizer"}) {
    for (const std::string how : {"get_peft_model", "peft_from_pretrained", "to_empty", "load_state_dict_assign"}) {
      for (const auto& api : replayWrapApis()) {
        ReplaySpec s = spec("SL105", shape, api, true, 1);
        s.replacement = how;
        INFO(shape << " " << how << " " << api);
        CHECK(replaySupported(s) == (api != "trainer"));
      }
    }
    ReplaySpec none = spec("SL105", shape, "fsdp1", true, 1);
    CHECK_FALSE(replaySupported(none, &why));
    none.replacement = "resize_token_embeddings";
    CHECK_FALSE(replaySupported(none, &why));
  }
  // The Trainer's FSDP: from its arguments, the launcher, or off; a Trainer building its own optimizer
  // without FSDP is nothing SL202 is about.
  ReplaySpec t = spec("SL202", "trainer-builds-optimizer", "trainer");
  t.fsdpFrom = "off";
  CHECK_FALSE(replaySupported(t));
  t.shape = "trainer-prebuilt-optimizer";
  CHECK(replaySupported(t));
  t.fsdpFrom = "deepspeed";
  CHECK_FALSE(replaySupported(t));
}

TEST_CASE("replay: every program has its calls in order and compiles", "[probe][replay]") {
  requirePython();
  ReplayTempDir dir;
  int index = 0;
  for (const Case& c : supportedCases()) {
    INFO(caseName(c.spec));
    REQUIRE(replaySupported(c.spec));
    std::string program = replayProgram(c.spec);
    // Common frame: the finding, the runtime import, one replay function, rt.main at the end.
    requireInOrder(program, {"#!/usr/bin/env python3\n", "# Replay of " + c.spec.code + " (" + c.spec.shape + ")",
                             "train.py:42", "import sys\n", "from shardlint_probe import replay_runtime as rt\n",
                             "FINDING = {\"code\": \"" + c.spec.code + "\", \"path\": \"train.py\", \"line\": 42}\n",
                             "SHAPE = \"" + c.spec.shape + "\"\n", "WRAP_API = \"" + c.spec.wrapApi + "\"\n",
                             "OPTIMIZER = \"torch.optim.AdamW\"\n", "def replay(s):\n",
                             "if __name__ == \"__main__\":\n",
                             "sys.exit(rt.main(replay, finding=FINDING, shape=SHAPE, wrap_api=WRAP_API, optimizer=OPTIMIZER))\n"});
    requireInOrder(program, c.inOrder);
    for (const auto& needle : c.absent) {
      INFO("must not contain `" << needle << "`");
      CHECK(program.find(needle) == std::string::npos);
    }
    // `torch` is bound only where the body uses it (a free parameter), so no local is unused.
    bool bindsTorch = program.find("    torch = s.require_torch(") != std::string::npos;
    CHECK(bindsTorch == (program.find("torch.nn.Parameter(torch.ones(") != std::string::npos ||
                         program.find("torch.no_grad()") != std::string::npos));
    CHECK(program.find("s.require_torch(rt.compat.") != std::string::npos);
    // Exactly one optimizer, built by the session (the finding's class, with the AdamW fallback).
    CHECK(program.find("s.make_optimizer(") == program.rfind("s.make_optimizer("));
    CHECK(isAscii(program));

    fs::path file = dir.write("replay_" + std::to_string(index++) + ".py", program);
    Run r = sh("python3 -m py_compile " + shellQuote(file.string()));
    INFO(program << "\n" << r.out);
    CHECK(r.code == 0);
  }
  CHECK(index == 42);
}

TEST_CASE("replay: the finding and the optimizer are Python literals", "[probe][replay]") {
  requirePython();
  ReplayTempDir dir;
  ReplaySpec s = spec("SL102", "stray-param-after-wrap", "fully_shard");
  s.path = "dir with \"quotes\"/and\\back'slash\n\tcaf\xC3\xA9 \xF0\x9F\x99\x82 \xFF.py";
  s.line = 7;
  s.optimizer = "bitsandbytes.optim.AdamW8bit";
  std::string program = replayProgram(s);
  CHECK(isAscii(program));
  CHECK(program.find("OPTIMIZER = \"bitsandbytes.optim.AdamW8bit\"\n") != std::string::npos);
  // The comment at the top stays on one line.
  CHECK(program.find("# Replay of SL102 (stray-param-after-wrap) reported at dir with \"quotes\"/and\\back'slash??caf? ? ?.py:7")
        != std::string::npos);
  fs::path file = dir.write("replay.py", program);
  Run r = sh("python3 -c " +
             shellQuote("import ast, json, sys\n"
                   "tree = ast.parse(open(sys.argv[1], encoding='utf-8').read())\n"
                   "values = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)\n"
                   "          for t in n.targets if isinstance(t, ast.Name)}\n"
                   "print(json.dumps(values))\n") +
             " " + shellQuote(file.string()));
  INFO(r.out);
  REQUIRE(r.code == 0);
  json values = json::parse(r.out);
  CHECK(values["FINDING"]["code"] == "SL102");
  CHECK(values["FINDING"]["path"] == "dir with \"quotes\"/and\\back'slash\n\tcaf\xC3\xA9 \xF0\x9F\x99\x82 \xEF\xBF\xBD.py");
  CHECK(values["FINDING"]["line"] == 7);
  CHECK(values["OPTIMIZER"] == "bitsandbytes.optim.AdamW8bit");
  CHECK(values["SHAPE"] == "stray-param-after-wrap");

  CHECK(pythonStringLiteral("") == "\"\"");
  CHECK(pythonStringLiteral("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(pythonStringLiteral("\x01\x7f") == "\"\\x01\\x7f\"");
  CHECK(pythonStringLiteral("\xC3\xA9") == "\"\\u00e9\"");
  CHECK(pythonStringLiteral("\xF0\x9F\x99\x82") == "\"\\U0001f642\"");
  CHECK(pythonStringLiteral("\xC0\xAF") == "\"\\ufffd\\ufffd\"");       // overlong
  CHECK(pythonStringLiteral("\xED\xA0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
}

TEST_CASE("replay: every .py of the Python package compiles", "[probe][replay]") {
  requirePython();
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(pythonDir())) {
    if (e.is_regular_file() && e.path().extension() == ".py") files.push_back(e.path());
  }
  std::set<std::string> names;
  for (const auto& f : files) names.insert(fs::relative(f, pythonDir()).generic_string());
  for (const char* expected : {"sitecustomize.py", "shardlint_probe/__init__.py", "shardlint_probe/report.py",
                               "shardlint_probe/checks.py", "shardlint_probe/instrument.py",
                               "shardlint_probe/replay_runtime.py", "shardlint_probe/compat.py"}) {
    INFO(expected);
    CHECK(names.count(expected) == 1);
  }
  ReplayTempDir dir;
  for (const auto& f : files) {
    INFO(f.string());
    // Compile to a temporary file: the source tree gets no __pycache__.
    Run r = sh("python3 -c " +
               shellQuote("import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)") + " " +
               shellQuote(f.string()) + " " + shellQuote((dir.path() / "out.pyc").string()));
    INFO(r.out);
    CHECK(r.code == 0);
  }
}

TEST_CASE("replay: the report writer works without torch", "[probe][replay]") {
  requirePython();
  ReplayTempDir dir;
  fs::path out = dir.path() / "reports";
  std::string script =
      "import sys\n"
      "sys.path.insert(0, sys.argv[1])\n"
      "import shardlint_probe.report as r\n"
      "assert 'torch' not in sys.modules\n"
      "rep = r.RankReport(mode='replay')\n"
      "rep.rank, rep.world_size = 1, 2\n"
      "rep.set_finding('SL102', 'train.py', 12)\n"
      "rep.add_event('optimizer_init', '/abs/train.py', 10)\n"
      "rep.add_event('accelerate_prepare', '/abs/train.py', 12)\n"
      "try:\n"
      "    raise KeyError(\"A parameter in the optimizer couldn't be switched to its sharded version\")\n"
      "except KeyError as e:\n"
      "    rep.set_exception(e, 'prepare')\n"
      "rep.add_note('a note')\n"
      "print(rep.write(sys.argv[2]))\n"
      "assert 'torch' not in sys.modules\n";
  Run r = sh("PYTHONDONTWRITEBYTECODE=1 python3 -S -c " + shellQuote(script) + " " + shellQuote(pythonDir().string()) + " " +
             shellQuote(out.string()));
  INFO(r.out);
  REQUIRE(r.code == 0);
  fs::path file = out / "rank1.json";
  REQUIRE(fs::exists(file));
  CHECK(r.out.find(file.string()) != std::string::npos);
  json j = json::parse(readFile(file));
  CHECK(keysOf(j) == kReportKeys);
  CHECK(j["schema"] == 1);
  CHECK(j["rank"] == 1);
  CHECK(j["world_size"] == 2);
  CHECK(j["backend"] == "");
  CHECK(j["torch_version"].is_string());
  CHECK(j["reached_step"] == false);
  CHECK(j["stale_optimizer_entries"] == 0);
  CHECK(j["unmanaged_entries"] == 0);
  CHECK(j["params_changed"].is_null());
  CHECK(j["diverged"].is_null());
  CHECK(j["exception_type"] == "KeyError");
  CHECK(j["exception_message"] == "A parameter in the optimizer couldn't be switched to its sharded version");
  CHECK(j["elapsed_seconds"].is_number());
  CHECK(j["events"] == json::parse(R"([{"kind": "optimizer_init", "file": "/abs/train.py", "line": 10},
                                        {"kind": "accelerate_prepare", "file": "/abs/train.py", "line": 12}])"));
  CHECK(j["finding"] == json::parse(R"({"code": "SL102", "path": "train.py", "line": 12})"));
  CHECK(j["mode"] == "replay");
  CHECK(j["phase"] == "prepare");
  CHECK(j["probe_error"] == "");
  CHECK(j["notes"] == json::array({"a note"}));
  // No temp file is left next to the report.
  int files = 0;
  for (const auto& e : fs::directory_iterator(out)) files += e.is_regular_file() ? 1 : 0;
  CHECK(files == 1);
}

TEST_CASE("replay: without torch a replay writes a probe error and exits 3", "[probe][replay]") {
  requirePython();
  ReplayTempDir dir;
  ReplaySpec s = spec("SL101", "optimizer-before-wrap", "fully_shard");
  s.path = "src/train.py";
  s.line = 54;
  fs::path program = dir.write("replay.py", replayProgram(s));
  fs::path out = dir.path() / "out";
  Run r = sh(noTorchEnv(out) + "python3 -S " + shellQuote(program.string()));
  INFO(r.out);
  CHECK(r.code == 3);
  CHECK(r.out.find("PyTorch is not importable") != std::string::npos);
  REQUIRE(fs::exists(out / "rank0.json"));
  json j = json::parse(readFile(out / "rank0.json"));
  CHECK(keysOf(j) == kReportKeys);
  CHECK(j["finding"] == json::parse(R"({"code": "SL101", "path": "src/train.py", "line": 54})"));
  CHECK(j["mode"] == "replay");
  CHECK(j["reached_step"] == false);
  CHECK(j["exception_type"] == "");
  CHECK(j["phase"] == "setup");
  std::string error = j["probe_error"];
  CHECK(error.find("PyTorch is not importable") != std::string::npos);
  CHECK(error.find("torch >= 2.4") != std::string::npos);
  CHECK(j["events"].empty());
}

TEST_CASE("replay: script mode starts only in torch.distributed.run workers", "[probe][replay]") {
  requirePython();
  ReplayTempDir dir;
  fs::path out = dir.path() / "out";
  fs::path script = dir.write("train.py",
                              "import os, subprocess, sys\n"
                              "def on():\n"
                              "    m = sys.modules.get('shardlint_probe.instrument')\n"
                              "    return bool(m and m._script.active)\n"
                              "print('instrumented:', on())\n"
                              "if len(sys.argv) > 1 and sys.argv[1] == 'child':\n"
                              "    subprocess.run([sys.executable, '-c', 'import sys; "
                              "m = sys.modules.get(\"shardlint_probe.instrument\"); "
                              "print(\"child instrumented:\", bool(m and m._script.active))'], check=True)\n"
                              "if len(sys.argv) > 1 and sys.argv[1] == 'raise':\n"
                              "    raise ValueError('broken data path')\n");
  // The PYTHONPATH start-up hook without SHARDLINT_PROBE_MODE=script: nothing happens.
  Run plain = sh(noTorchEnv(out) + "python3 " + shellQuote(script.string()));
  INFO(plain.out);
  CHECK(plain.code == 0);
  CHECK(plain.out.find("instrumented: False") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // The sitecustomize it shadows (later on PYTHONPATH) still runs.
  dir.write("other/sitecustomize.py", "print('shadowed sitecustomize ran')\n");
  Run chained = sh(noTorchEnv(out) + "PYTHONPATH=" + shellQuote(pythonDir().string() + ":" + (dir.path() / "other").string()) +
                   " python3 -c " + shellQuote("import sitecustomize; print(sitecustomize.__file__)"));
  INFO(chained.out);
  CHECK(chained.code == 0);
  CHECK(chained.out.find("shadowed sitecustomize ran") != std::string::npos);
  CHECK(chained.out.find((pythonDir() / "sitecustomize.py").string()) != std::string::npos);
  // Script mode in the launcher (no RANK): nothing happens either.
  Run launcher = sh(noTorchEnv(out) + "SHARDLINT_PROBE_MODE=script python3 " + shellQuote(script.string()));
  CHECK(launcher.out.find("instrumented: False") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // A worker: instrumented; the script ends without a step, so the report says so at exit. A
  // process it starts is not instrumented (and writes no report of its own).
  std::string worker = noTorchEnv(out) + "SHARDLINT_PROBE_MODE=script RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 "
                       "SHARDLINT_PROBE_FINDING='{\"code\": \"SL101\", \"path\": \"train.py\", \"line\": 3}' ";
  Run ran = sh(worker + "python3 " + shellQuote(script.string()) + " child");
  INFO(ran.out);
  CHECK(ran.code == 0);
  CHECK(ran.out.find("instrumented: True") != std::string::npos);
  CHECK(ran.out.find("child instrumented: False") != std::string::npos);
  REQUIRE(fs::exists(out / "rank1.json"));
  CHECK_FALSE(fs::exists(out / "rank0.json"));
  json j = json::parse(readFile(out / "rank1.json"));
  CHECK(keysOf(j) == kReportKeys);
  CHECK(j["mode"] == "script");
  CHECK(j["rank"] == 1);
  CHECK(j["world_size"] == 2);
  CHECK(j["reached_step"] == false);
  CHECK(j["finding"] == json::parse(R"({"code": "SL101", "path": "train.py", "line": 3})"));
  CHECK(j["notes"].dump().find("ended before its first optimizer.step()") != std::string::npos);
  // A script that raises: the exception is recorded, its exit status kept.
  fs::remove_all(out);
  Run raised = sh(worker + "python3 " + shellQuote(script.string()) + " raise");
  INFO(raised.out);
  CHECK(raised.code == 1);
  CHECK(raised.out.find("ValueError: broken data path") != std::string::npos);
  REQUIRE(fs::exists(out / "rank1.json"));
  j = json::parse(readFile(out / "rank1.json"));
  CHECK(j["exception_type"] == "ValueError");
  CHECK(j["exception_message"] == "broken data path");
  CHECK(j["reached_step"] == false);
}

// A stand-in `torch` package (written by this test, not PyTorch): just enough API for the
// instrumentation's patches and the global step hooks to attach, so that the recording of events
// with their file:line, the start-up hook and the stop after the first step run without torch.
TEST_CASE("replay: script mode records events with file:line and stops after the first step", "[probe][replay]") {
  requirePython();
  ReplayTempDir dir;
  dir.write("fake/site-packages/torch/__init__.py",
            "__version__ = '0.0+fake'\n"
            "from . import nn, optim, distributed\n");
  dir.write("fake/site-packages/torch/nn/__init__.py",
            "class Module:\n"
            "    def __init__(self):\n"
            "        self._modules = {}\n"
            "    def parameters(self):\n"
            "        return iter(())\n");
  dir.write("fake/site-packages/torch/optim/__init__.py", "from .optimizer import Optimizer\n");
  dir.write("fake/site-packages/torch/optim/optimizer.py",
            "_pre, _post = [], []\n"
            "def register_optimizer_step_pre_hook(h):\n"
            "    _pre.append(h)\n"
            "def register_optimizer_step_post_hook(h):\n"
            "    _post.append(h)\n"
            "class Optimizer:\n"
            "    def __init__(self, params, defaults):\n"
            "        self.param_groups = []\n"
            "        for p in list(params):\n"
            "            self.add_param_group({'params': [p]})\n"
            "    def add_param_group(self, group):\n"
            "        self.param_groups.append(group)\n"
            "    def step(self):\n"
            "        for h in _pre: h(self, (), {})\n"
            "        for h in _post: h(self, (), {})\n");
  dir.write("fake/site-packages/torch/distributed/__init__.py",
            "def is_available():\n"
            "    return False\n");
  dir.write("fake/site-packages/torch/distributed/fsdp/__init__.py",
            "def fully_shard(module, **kwargs):\n"
            "    return module\n"
            "class FullyShardedDataParallel:\n"
            "    def __init__(self, module, **kwargs):\n"
            "        self.module = module\n");
  fs::path script = dir.write("train.py",
                              "import torch\n"
                              "from torch.distributed.fsdp import fully_shard\n"
                              "model = torch.nn.Module()\n"
                              "opt = torch.optim.Optimizer([1, 2], {})\n"
                              "fully_shard(model)\n"
                              "opt.add_param_group({'params': [3]})\n"
                              "print('before the step', flush=True)\n"
                              "opt.step()\n"
                              "print('after the step: never printed')\n");
  fs::path out = dir.path() / "out";
  std::string env = "env -u SHARDLINT_PROBE_ACTIVE_PID PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=" + shellQuote(pythonDir().string()) +
                    ":" + shellQuote((dir.path() / "fake" / "site-packages").string()) + " SHARDLINT_PROBE_OUT=" + shellQuote(out.string()) +
                    " SHARDLINT_PROBE_MODE=script RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 ";
  Run r = sh(env + "python3 " + shellQuote(script.string()));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("before the step") != std::string::npos);
  CHECK(r.out.find("never printed") == std::string::npos);
  REQUIRE(fs::exists(out / "rank0.json"));
  json j = json::parse(readFile(out / "rank0.json"));
  CHECK(keysOf(j) == kReportKeys);
  CHECK(j["reached_step"] == true);
  CHECK(j["torch_version"] == "0.0+fake");
  // The stand-in has no tensors: the checks themselves cannot run on it.
  CHECK(j["probe_error"].get<std::string>().find("checks before the first step failed") != std::string::npos);
  std::string file = script.string();
  json expected = json::array();
  for (auto [kind, line] : std::vector<std::pair<std::string, int>>{
           {"optimizer_init", 4}, {"fully_shard", 5}, {"add_param_group", 6}, {"optimizer_step", 8}})
    expected.push_back({{"kind", kind}, {"file", file}, {"line", line}});
  CHECK(j["events"] == expected);
}
