// The probe's replay specs (runtime_probe/orchestrator/ProbeSpecs.cpp), derived from real findings
// (the fixtures, linted here), and the verdicts of the rules whose specs are tested beside them.
// No torch and no GPU needed.
#include "ProbeTestSupport.h"
#include "orchestrator/Replay.h"

using namespace shardlint;
using namespace shardlint::probe;
using namespace shardlint::testing::probe_tests;

// ---------------------------------------------------------------------------------------------
// Replay specs from real findings (the fixtures, linted here)
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe spec: SL101 with each wrap API", "[probe]") {
  {
    Diagnostic d = findingOf("SL101_fsdp1_orig_params_false.py", "SL101");
    std::string why;
    auto s = replaySpecFor(d, &why);
    REQUIRE(s);
    CHECK(s->code == "SL101");
    CHECK(s->shape == "optimizer-before-wrap");
    CHECK(s->wrapApi == "fsdp1");
    CHECK(s->fsdpVersion == 1);
    CHECK_FALSE(s->useOrigParams);
    CHECK(s->line == static_cast<int>(d.location.start.line) + 1);
    CHECK(s->path == d.location.path);
  }
  {
    auto s = replaySpecFor(findingOf("SL101_alias.py", "SL101"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fully_shard");
    CHECK(s->fsdpVersion == 2);
    CHECK(s->optimizer.rfind("torch.optim.", 0) == 0);
  }
  {
    auto s = replaySpecFor(findingOf("SL101_accelerate_fsdp1_plugin.py", "SL101"));
    REQUIRE(s);
    CHECK(s->wrapApi == "accelerate");
    CHECK(s->fsdpVersion == 1);
    CHECK_FALSE(s->useOrigParams);
    CHECK(s->optimizer == "torch.optim.AdamW");
  }
  {
    // Lightning Fabric: SL101 reports it only with use_orig_params=False, which the replay passes.
    auto f = replaySpecFor(findingOf("SL101_fabric_orig_params_false.py", "SL101"));
    REQUIRE(f);
    CHECK(f->wrapApi == "fabric");
    CHECK_FALSE(f->useOrigParams);
    CHECK(f->optimizer == "torch.optim.SGD");
  }
  {
    // SL402: accelerate FSDP1 with use_orig_params false, the optimizer built before prepare.
    auto s = replaySpecFor(findingOf("SL402_plugin_default_use_orig_params.py", "SL402"));
    REQUIRE(s);
    CHECK(s->code == "SL402");
    CHECK(s->shape == "optimizer-before-wrap");
    CHECK(s->wrapApi == "accelerate");
    CHECK(s->fsdpVersion == 1);
    CHECK_FALSE(s->useOrigParams);
  }
}

TEST_CASE("probe spec: SL102 shapes", "[probe]") {
  {
    auto s = replaySpecFor(findingOf("SL102_accelerate_ctor_free_param.py", "SL102"));
    REQUIRE(s);
    CHECK(s->wrapApi == "accelerate");
    CHECK(s->fsdpVersion == 2);
    CHECK(s->shape == "stray-param-before-prepare");
  }
  {
    auto s = replaySpecFor(findingOf("SL102_accelerate_add_param_group_before_prepare.py", "SL102"));
    REQUIRE(s);
    CHECK(s->shape == "stray-param-before-prepare");
  }
  {
    auto s = replaySpecFor(findingOf("SL102_free_logit_scale.py", "SL102"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fully_shard");
    CHECK(s->shape == "stray-param-after-wrap");
  }
  {
    auto s = replaySpecFor(findingOf("SL102_unwrapped_value_head_fsdp1.py", "SL102"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fsdp1");
    CHECK(s->fsdpVersion == 1);
    CHECK(s->shape == "stray-param-after-wrap");
  }
  {
    auto s = replaySpecFor(findingOf("SL102_ctor_after_wrap_chain_fsdp1.py", "SL102"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fsdp1");
    CHECK(s->optimizer == "torch.optim.SGD");  // the fixture's own optimizer
  }
}

TEST_CASE("probe spec: SL103 shapes", "[probe]") {
  {
    auto s = replaySpecFor(findingOf("SL103_blocks_without_root.py", "SL103"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fully_shard");
    CHECK(s->shape == "blocks-without-root");
  }
  {
    auto s = replaySpecFor(findingOf("SL103_ignored_states_fsdp1.py", "SL103"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fsdp1");
    CHECK(s->shape == "ignored-trainable");
  }
  {
    auto s = replaySpecFor(findingOf("SL103_ignored_modules_other_module_frozen.py", "SL103"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fsdp1");
    CHECK(s->useOrigParams);
  }
  {
    auto s = replaySpecFor(findingOf("SL103_ignored_params_lm_head.py", "SL103"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fully_shard");
    CHECK(s->shape == "ignored-trainable");
  }
}

TEST_CASE("probe spec: every SL101-SL104, SL201, SL202 and SL402 fixture finding gets a spec", "[probe]") {
  size_t specs = 0, reasons = 0;
  for (const auto& e : fs::directory_iterator(std::string(SHARDLINT_SOURCE_DIR) + "/fixtures/python")) {
    std::string name = e.path().filename().string();
    if ((name.rfind("SL10", 0) != 0 && name.rfind("SL20", 0) != 0 && name.rfind("SL402", 0) != 0) ||
        name.find("_ok") != std::string::npos)
      continue;
    for (const auto& d : lint(e.path().string())) {
      if (!probedCode(d.code)) continue;
      std::string why;
      auto s = replaySpecFor(d, &why);
      INFO(name << ": " << d.message);
      if (s) {
        ++specs;
        CHECK((s->wrapApi == "fully_shard" || s->wrapApi == "fsdp1" || s->wrapApi == "accelerate" ||
               s->wrapApi == "fabric" || s->wrapApi == "trainer"));
        CHECK(replaySupported(*s));
        CHECK(!s->shape.empty());
        CHECK(s->code == d.code);
      } else {
        ++reasons;
        FAIL_CHECK("no replay: " << why);  // every positive fixture's shape is replayed
      }
    }
  }
  CHECK(specs > 50);
  CHECK(reasons == 0);
}

TEST_CASE("probe spec: SL104 shapes from which modules stay unsharded", "[probe]") {
  struct Expect {
    const char* file;
    const char* shape;
  };
  for (const Expect& e : {Expect{"SL104_dummy_forward_root.py", "forward-before-optimizer"},
                          Expect{"SL104_root_reshard_false.py", "forward-before-optimizer"},
                          Expect{"SL104_blocks_and_root_no_grad.py", "forward-before-optimizer"},
                          Expect{"SL104_reshard_after_forward_false.py", "forward-before-optimizer-blocks-kept"},
                          Expect{"SL104_blocks_no_reshard_root_default.py", "forward-before-optimizer-all-kept"}}) {
    INFO(e.file);
    auto s = replaySpecFor(findingOf(e.file, "SL104"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fully_shard");
    CHECK(s->shape == e.shape);
    CHECK_FALSE(s->control);
    CHECK(replaySupported(*s));
  }
  // The fixture's own optimizer class.
  auto sgd = replaySpecFor(findingOf("SL104_initial_loss_logged.py", "SL104"));
  REQUIRE(sgd);
  CHECK(sgd->optimizer == "torch.optim.SGD");
  // A message that names no module staying unsharded gives no spec.
  Diagnostic odd = findingOf("SL104_dummy_forward_root.py", "SL104");
  odd.message = "optimizer is built after a forward pass";
  std::string why;
  CHECK_FALSE(replaySpecFor(odd, "", &why));
  CHECK(why.find("SL104") != std::string::npos);
}

TEST_CASE("probe spec: SL201 accelerate FSDP2 separate prepare and prepare_model", "[probe]") {
  {
    auto s = replaySpecFor(findingOf("SL201_accelerate_fsdp2_separate_prepare.py", "SL201"));
    REQUIRE(s);
    CHECK(s->code == "SL201");
    CHECK(s->shape == "separate-prepare");
    CHECK(s->wrapApi == "accelerate");
    CHECK(s->fsdpVersion == 2);
    CHECK(replaySupported(*s));
  }
  {
    auto s = replaySpecFor(findingOf("SL201_accelerate_fsdp2_prepare_in_helper.py", "SL201"));
    REQUIRE(s);
    CHECK(s->shape == "separate-prepare");
    CHECK(s->optimizer == "torch.optim.SGD");  // the fixture's own optimizer
  }
  {
    auto s = replaySpecFor(findingOf("SL201_accelerate_fsdp2_prepare_model.py", "SL201"));
    REQUIRE(s);
    CHECK(s->shape == "prepare-model");
    CHECK(s->fsdpVersion == 2);
    CHECK(replayProgram(*s).find("accelerator.prepare_model(model)") != std::string::npos);
  }
}

TEST_CASE("probe spec: SL202 Trainer with a pre-built optimizer", "[probe]") {
  auto s = replaySpecFor(findingOf("SL202_trainer_optimizers_fsdp.py", "SL202"));
  REQUIRE(s);
  CHECK(s->code == "SL202");
  CHECK(s->shape == "trainer-prebuilt-optimizer");
  CHECK(s->wrapApi == "trainer");
  CHECK(replaySupported(*s));
  std::string program = replayProgram(*s);
  CHECK(program.find("s.require_transformers(") != std::string::npos);
  CHECK(program.find("optimizers=(optimizer, None)") != std::string::npos);
}

TEST_CASE("probe spec: SL204 FSDP1 state_dict() on rank 0 only", "[probe]") {
  size_t stateDicts = 0, optimStates = 0;
  for (const auto& d : lint(fixture("SL204_rank_guarded_state_dict.py"))) {
    if (d.code != "SL204") continue;
    std::string why;
    auto s = replaySpecFor(d, &why);
    INFO(d.message << " " << why);
    REQUIRE(s);
    CHECK(s->wrapApi == "fsdp1");
    CHECK(s->fsdpVersion == 1);
    std::string program = replayProgram(*s);
    CHECK(program.find("group = s.short_timeout_group(5)") != std::string::npos);
    CHECK(program.find("process_group=group") != std::string::npos);
    if (d.message.find(".state_dict()` on an FSDP1 model") != std::string::npos) {
      ++stateDicts;
      CHECK(s->shape == "state-dict-rank0-only");
      CHECK(program.find("s.collective_on(\"state_dict()\", model.state_dict, [0], 5, watchdog=False)") !=
            std::string::npos);
    } else {
      ++optimStates;
      CHECK(s->shape == "full-optim-state-dict-rank0-only");
      CHECK(program.find("FSDP.full_optim_state_dict(model, optimizer, group=group), [0], 5, watchdog=False)") !=
            std::string::npos);
    }
  }
  CHECK(stateDicts >= 2);
  CHECK(optimStates >= 1);
  ReplaySpec control;
  control.code = "SL204";
  control.shape = "state-dict-all-ranks";
  control.wrapApi = "fsdp1";
  control.fsdpVersion = 1;
  control.control = true;
  REQUIRE(replaySupported(control));
  CHECK(replayProgram(control).find("model.state_dict, None, 5, watchdog=False)") != std::string::npos);
  control.wrapApi = "fully_shard";
  CHECK_FALSE(replaySupported(control));
}

TEST_CASE("probe spec: SL204 accelerate FSDP2 get_state_dict and save_model with the watchdog", "[probe]") {
  std::set<std::string> shapes;
  for (const auto& d : lint(fixture("SL204_helper_is_main_process.py"))) {
    if (d.code != "SL204") continue;
    std::string why;
    auto s = replaySpecFor(d, &why);
    INFO(d.message << " " << why);
    REQUIRE(s);
    shapes.insert(s->shape);
    CHECK(s->wrapApi == "accelerate");
    CHECK(s->fsdpVersion == 2);
    std::string program = replayProgram(*s);
    CHECK(program.find("model, optimizer = accelerator.prepare(model, optimizer)") != std::string::npos);
    CHECK(program.find(", [0], 5, watchdog=True)") != std::string::npos);
  }
  CHECK(shapes == std::set<std::string>{"accelerate-state-dict-rank0-only", "accelerate-save-model-rank0-only"});
  // accelerate FSDP1 is not replayed for this rule (said so, never a guessed shape).
  Diagnostic d;
  d.code = "SL204";
  d.message = "`accelerator.get_state_dict(...)` of an accelerate FSDP1 model is a collective ...";
  std::string why;
  CHECK_FALSE(replaySpecFor(d, &why));
  CHECK(why.find("accelerate FSDP1 and save_state are not replayed") != std::string::npos);
}

TEST_CASE("probe decide: SL204 is confirmed by rank 0's collective timeout while the others skipped", "[probe]") {
  RunOutcome run = outcome(2);
  RankReport r0 = synthetic(0, 2, true), r1 = synthetic(1, 2, true);
  r0.exceptionType = "RuntimeError";
  r0.exceptionMessage = "[gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 5000ms for recv operation to complete";
  r0.notes = {"rank 0 waited 5.0 s in state_dict() (collective timeout 5 s)"};
  r1.notes = {"rank 1 skipped state_dict()"};
  ProbeResult res = decide("SL204", {r0, r1}, run);
  CHECK(res.verdict == Verdict::Confirmed);
  CHECK(res.evidence.find("rank 0 waited 5.0 s in state_dict()'s collective that rank 1 never joined") !=
        std::string::npos);
  CHECK(res.evidence.find("Timed out waiting 5000ms") != std::string::npos);
  // A crash that is not a timeout confirms nothing.
  RankReport crash = r0;
  crash.exceptionMessage = "CUDA error: invalid device ordinal";
  CHECK(decide("SL204", {crash, r1}, run).verdict != Verdict::Confirmed);
  // A timeout with no rank saying it skipped the call (e.g. both called it) confirms nothing.
  RankReport both = r1;
  both.notes = {"rank 1 state_dict() returned 9 entries after 0.1 s"};
  CHECK(decide("SL204", {r0, both}, run).verdict != Verdict::Confirmed);
  // The skipping rank raised too: not this bug's signature.
  RankReport r1err = r1;
  r1err.exceptionType = "RuntimeError";
  r1err.exceptionMessage = "Connection closed by peer";
  CHECK(decide("SL204", {r0, r1err}, run).verdict != Verdict::Confirmed);
  // The control: every rank's state_dict() returned.
  RankReport c0 = synthetic(0, 2, true), c1 = synthetic(1, 2, true);
  c0.notes = {"rank 0 state_dict() returned 9 entries after 0.1 s"};
  c1.notes = {"rank 1 state_dict() returned 9 entries after 0.1 s"};
  ProbeResult ok = decide("SL204", {c0, c1}, run);
  CHECK(ok.verdict == Verdict::NotReproduced);
  CHECK(ok.evidence.find("state_dict() returned on every rank") != std::string::npos);
  // accelerate's call, ended by the probe's watchdog (no exception: the call was still blocked).
  RankReport w0 = synthetic(0, 2, true), w1 = synthetic(1, 2, true);
  w0.notes = {"rank 0 was still waiting in accelerator.get_state_dict() after 5.0 s (the probe's watchdog, 5 s)"};
  w1.notes = {"rank 1 skipped accelerator.get_state_dict()"};
  ProbeResult watched = decide("SL204", {w0, w1}, run);
  CHECK(watched.verdict == Verdict::Confirmed);
  CHECK(watched.evidence.find("rank 0 was still waiting in accelerator.get_state_dict()'s collective after 5.0 s, "
                              "which rank 1 never joined") != std::string::npos);
  // The watchdog note on both ranks (nobody skipped): not this bug's signature.
  RankReport w1b = w1;
  w1b.notes = {"rank 1 was still waiting in accelerator.get_state_dict() after 5.0 s (the probe's watchdog, 5 s)"};
  CHECK(decide("SL204", {w0, w1b}, run).verdict != Verdict::Confirmed);
}

TEST_CASE("probe decide: SL201 and SL202 are confirmed by the framework's refusal only", "[probe]") {
  RunOutcome run = outcome(1);
  RankReport r = synthetic(0, 1, false);
  r.exceptionType = "ValueError";
  r.exceptionMessage = "When using FSDP2, a model and optimizer must be passed together to `Accelerator.prepare()` "
                       "as the optimizer needs to have its parameters modified after the model is converted.";
  CHECK(decide("SL201", {r}, run).verdict == Verdict::Confirmed);
  CHECK(decide("SL202", {r}, run).verdict != Verdict::Confirmed);
  r.exceptionType = "RuntimeError";
  r.exceptionMessage = "Passing `optimizers` is not allowed if PyTorch FSDP is enabled. You should subclass `Trainer`";
  CHECK(decide("SL202", {r}, run).verdict == Verdict::Confirmed);
  CHECK(decide("SL201", {r}, run).verdict != Verdict::Confirmed);
  // transformers missing on the rank: the replay's environment check, never a verdict on the finding.
  r.exceptionType = "ShardlintProbeError";
  r.exceptionMessage = "transformers is not importable in this Python (python): ModuleNotFoundError";
  CHECK(decide("SL202", {r}, run).verdict == Verdict::ProbeError);
}

TEST_CASE("probe spec: SL202 with FSDP from the launcher's accelerate config", "[probe]") {
  auto diags = lintProject(project("trainer_launched_fsdp"));
  std::set<std::string> from;
  for (const auto& d : diags) {
    if (d.code != "SL202") continue;
    auto s = replaySpecFor(d);
    REQUIRE(s);
    CHECK(s->shape == "trainer-prebuilt-optimizer");
    from.insert(s->fsdpFrom);
    if (s->fsdpFrom == "launcher") {
      CHECK(d.message.find("the accelerate config the script is launched with") != std::string::npos);
      CHECK(replayProgram(*s).find("s.launched_with_fsdp(2)") != std::string::npos);
    }
  }
  // sft.py's own Trainer (the launcher's config) and the helper's (its TrainingArguments).
  CHECK(from == std::set<std::string>{"args", "launcher"});
  auto args = replaySpecFor(findingOf("SL202_trainer_optimizers_fsdp.py", "SL202"));
  REQUIRE(args);
  CHECK(args->fsdpFrom == "args");
  CHECK(replayProgram(*args).find("launched_with_fsdp") == std::string::npos);
}

TEST_CASE("probe spec: SL105 names the replacement and the wrap from the finding", "[probe]") {
  struct Want {
    const char* file;
    const char* replacement;
    const char* api;
    int version;
    bool joint;
  };
  for (const Want& w : {Want{"SL105_peft_after_optimizer.py", "get_peft_model", "accelerate", 2, false},
                        Want{"SL105_peft_from_pretrained_trainable.py", "peft_from_pretrained", "accelerate", 2, false},
                        Want{"SL105_load_state_dict_assign.py", "load_state_dict_assign", "accelerate", 2, false},
                        Want{"SL105_to_empty_accelerate_fsdp2.py", "to_empty", "accelerate", 2, false},
                        Want{"SL105_to_empty_fsdp1.py", "to_empty", "fsdp1", 1, false},
                        Want{"SL105_load_state_dict_positional_assign.py", "load_state_dict_assign", "fsdp1", 1, false},
                        Want{"SL105_peft_helper.py", "get_peft_model", "fsdp1", 1, false},
                        Want{"SL105_peft_fabric.py", "get_peft_model", "fabric", 1, true}}) {
    INFO(w.file);
    auto s = replaySpecFor(findingOf(w.file, "SL105"));
    REQUIRE(s);
    CHECK(s->code == "SL105");
    CHECK(s->shape == "params-replaced-after-optimizer");
    CHECK(s->replacement == w.replacement);
    CHECK(s->wrapApi == w.api);
    if (s->wrapApi != "fsdp1" && s->wrapApi != "fabric") CHECK(s->fsdpVersion == w.version);
    CHECK(s->useOrigParams);  // SL101 and SL402 report use_orig_params=False
    CHECK(s->joint == w.joint);
    CHECK_FALSE(s->control);
    CHECK(replaySupported(*s));
  }
  // The replacement named in the message decides; a message without one is not replayed.
  Diagnostic d = findingOf("SL105_peft_after_optimizer.py", "SL105");
  d.message = "optimizer is built from the parameters of `model` before something replaces them";
  std::string why;
  CHECK_FALSE(replaySpecFor(d, "", &why));
  CHECK(why.find("replaces the parameters") != std::string::npos);
}

TEST_CASE("probe decide: SL105 is confirmed by trainable parameters the optimizer does not hold", "[probe]") {
  RunOutcome run = outcome(2);
  // get_peft_model after the optimizer: it holds none of the 8 adapters, and the step changes nothing.
  std::vector<RankReport> reports;
  for (int rank : {0, 1}) {
    RankReport r = synthetic(rank, 2, true);
    r.trainableParams = 8;
    r.trainableNotOptimized = 8;
    r.paramsChanged = false;
    r.trainableNotOptimizedNames = {"base_model.model.blocks.0.up.lora_A.default.weight",
                                    "base_model.model.blocks.0.up.lora_B.default.weight", "x", "y"};
    reports.push_back(r);
  }
  ProbeResult res = decide("SL105", reports, run);
  CHECK(res.verdict == Verdict::Confirmed);
  CHECK(res.evidence.find("the optimizer held none of the model's 8 trainable parameters (rank 0: "
                          "base_model.model.blocks.0.up.lora_A.default.weight, "
                          "base_model.model.blocks.0.up.lora_B.default.weight, ...)") != std::string::npos);
  CHECK(res.evidence.find("optimizer.step() left the model's parameters unchanged (rank 0)") != std::string::npos);
  // Some of them: counted.
  reports[0].trainableNotOptimized = 3;
  reports[1].trainableNotOptimized = 3;
  reports[0].paramsChanged = reports[1].paramsChanged = true;
  res = decide("SL105", reports, run);
  CHECK(res.verdict == Verdict::Confirmed);
  CHECK(res.evidence.find("3 of the model's 8 trainable parameters are in no param group of the optimizer") !=
        std::string::npos);
  CHECK(res.evidence.find("unchanged") == std::string::npos);
  // The control's order: every trainable parameter in the optimizer, the step changed them.
  reports[0].trainableNotOptimized = reports[1].trainableNotOptimized = 0;
  res = decide("SL105", reports, run);
  CHECK(res.verdict == Verdict::NotReproduced);
  CHECK(res.evidence.find("the optimizer held all 8 trainable parameters of the model, the step changed the "
                          "parameters") != std::string::npos);
  // accelerate FSDP2's re-pointing fails on tensors the model no longer has; Fabric refuses meta tensors.
  RankReport key = synthetic(0, 2, false);
  key.exceptionType = "KeyError";
  key.exceptionMessage = "A parameter in the optimizer couldn't be switched to its sharded version. This breaks "
                         "the training.";
  RankReport key1 = key;
  key1.rank = 1;
  CHECK(decide("SL105", {key, key1}, run).verdict == Verdict::Confirmed);
  key.exceptionType = key1.exceptionType = "RuntimeError";
  key.exceptionMessage = key1.exceptionMessage =
      "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not "
      "supported";
  res = decide("SL105", {key, key1}, run);
  CHECK(res.verdict == Verdict::Confirmed);
  CHECK(res.evidence.find("Lightning Fabric raised RuntimeError: The optimizer has references") != std::string::npos);
  // Another rule's signal is not SL105's: stale entries alone confirm nothing here.
  RankReport stale = synthetic(0, 1, true);
  stale.staleOptimizerEntries = 4;
  stale.paramsChanged = false;
  CHECK(decide("SL105", {stale}, outcome(1)).verdict == Verdict::NotReproduced);
  // peft missing on the rank: the replay's environment, not a verdict.
  RankReport missing = synthetic(0, 1, false);
  missing.exceptionType = "ProbeError";
  missing.exceptionMessage = "peft is not importable in this Python (python): ModuleNotFoundError";
  CHECK(decide("SL105", {missing}, outcome(1)).verdict == Verdict::ProbeError);
}

TEST_CASE("probe spec: other rules are not probed", "[probe]") {
  Diagnostic d;
  d.code = "SL305";
  d.message = "whatever";
  std::string why;
  CHECK_FALSE(replaySpecFor(d, "", &why));
  CHECK(why.find("SL305") != std::string::npos);
  CHECK_FALSE(probedCode("SL305"));
  CHECK(probedCode("SL203"));
  CHECK_FALSE(probedCode("SL206"));
  CHECK_FALSE(probedCode("SL403"));
  CHECK(probedCode("SL102"));
  CHECK(probedCode("SL201"));
  CHECK(probedCode("SL202"));
  CHECK(probedCode("SL204"));
  CHECK(probedCode("SL105"));
  CHECK(probedCode("SL104"));
}
