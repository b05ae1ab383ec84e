// The rules' controls (`shardlint probe --controls`): collected only when asked, the patterns each
// rule records as correct, and how they are replayed from their facts. No torch and no GPU needed.
#include "ProbeTestSupport.h"
#include "orchestrator/Replay.h"

using namespace shardlint;
using namespace shardlint::probe;
using namespace shardlint::testing::probe_tests;

TEST_CASE("probe controls: the rules' controls are collected only when asked, and replayed from their facts",
          "[probe]") {
  // Never in a plain lint: the fixture is clean.
  CHECK(lint(fixture("SL101_alias_ok.py")).empty());
  LintOptions options;
  options.controls = std::make_shared<ControlSink>();
  Linter linter(rules::catalog(), options);
  CHECK(linter.lintPath(fixture("SL101_alias_ok.py")).empty());  // still no finding
  std::vector<Diagnostic> controls = options.controls->take();
  REQUIRE(controls.size() == 1);
  const Diagnostic& c = controls[0];
  CHECK(c.code == "SL101");
  CHECK(c.severity == Severity::Hint);
  CHECK(c.facts.at("shape") == "optimizer-after-wrap");
  CHECK(c.facts.at("wrap_api") == "fully_shard");
  CHECK(c.message.find("after FSDP2 `fully_shard` wraps it") != std::string::npos);
  auto s = replaySpecFor(c);
  REQUIRE(s);
  CHECK(s->control);
  CHECK(s->shape == "optimizer-after-wrap");
  CHECK(s->wrapApi == "fully_shard");
  CHECK(s->optimizer == "torch.optim.SGD");
  CHECK(replaySupported(*s));
  CHECK(replayProgram(*s).find("# Control replay of SL101 (optimizer-after-wrap) found correct at") != std::string::npos);

  // The framework keeps or re-points the parameters: built before the wrap, replayed that way.
  auto one = [](const std::string& file) {
    LintOptions o;
    o.controls = std::make_shared<ControlSink>();
    Linter l(rules::catalog(), o);
    l.lintPath(fixture(file));
    auto found = o.controls->take();
    INFO(file);
    REQUIRE(found.size() == 1);
    return found[0];
  };
  Diagnostic orig = one("SL101_fsdp1_use_orig_params_ok.py");
  CHECK(orig.facts.at("shape") == "optimizer-before-wrap");
  CHECK(orig.facts.at("wrap_api") == "fsdp1");
  CHECK(orig.facts.at("use_orig_params") == "1");
  Diagnostic joint = one("SL101_fabric_setup_ok.py");
  CHECK(joint.facts.at("joint") == "1");
  auto js = replaySpecFor(joint);
  REQUIRE(js);
  CHECK(js->joint);
  CHECK(js->useOrigParams);  // Lightning's default: the source does not say False
  // A file with a finding gives no control for the optimizer it reports.
  LintOptions o;
  o.controls = std::make_shared<ControlSink>();
  Linter l(rules::catalog(), o);
  CHECK_FALSE(l.lintPath(fixture("SL101_alias.py")).empty());
  CHECK(o.controls->take().empty());
}

TEST_CASE("probe controls: SL105, SL201 and SL202 record the patterns they found correct", "[probe]") {
  // SL105: the replacement first, then the optimizer, then a wrap that keeps or re-points the parameters.
  struct Want {
    const char* file;
    const char* replacement;
    const char* api;
    const char* joint;
  };
  for (const Want& w : {Want{"SL105_peft_after_optimizer_ok.py", "get_peft_model", "accelerate", ""},
                        Want{"SL105_peft_from_pretrained_trainable_ok.py", "peft_from_pretrained", "accelerate", ""},
                        Want{"SL105_assign_before_optimizer_ok.py", "load_state_dict_assign", "fsdp1", ""},
                        Want{"SL105_to_empty_before_optimizer_ok.py", "to_empty", "fsdp1", ""},
                        Want{"SL105_peft_fabric_ok.py", "get_peft_model", "fabric", "1"},
                        Want{"SL105_class_init_peft_in_setup_ok.py", "get_peft_model", "fsdp1", ""}}) {
    INFO(w.file);
    auto controls = controlsOf(fixture(w.file), "SL105");
    REQUIRE(controls.size() == 1);
    const Diagnostic& c = controls[0];
    CHECK(c.facts.at("shape") == "params-replaced-before-optimizer");
    CHECK(c.facts.at("replacement") == w.replacement);
    CHECK(c.facts.at("wrap_api") == w.api);
    CHECK(c.facts.at("use_orig_params") == "1");
    CHECK((c.facts.count("joint") ? c.facts.at("joint") : std::string()) == w.joint);
    CHECK(c.message.find("after `") != std::string::npos);
    auto s = replaySpecFor(c);
    REQUIRE(s);
    CHECK(s->control);
    CHECK(s->replacement == w.replacement);
    CHECK(replaySupported(*s));
  }
  // Fine for a reason the replay does not model (the optimizer's groups refreshed, another model's adapters):
  // no control.
  CHECK(controlsOf(fixture("SL105_param_groups_refreshed_ok.py"), "SL105").empty());
  CHECK(controlsOf(fixture("SL105_peft_other_model_ok.py"), "SL105").empty());
  CHECK(controlsOf(fixture("SL105_resize_token_embeddings_ok.py"), "SL105").empty());

  // SL201: one FSDP2 `prepare(model, optimizer)`; with FSDP1, the model prepared alone and the optimizer after.
  auto fsdp2 = controlsOf(fixture("SL201_accelerate_fsdp2_separate_prepare_ok.py"), "SL201");
  REQUIRE(fsdp2.size() == 1);
  CHECK(fsdp2[0].facts.at("shape") == "optimizer-before-wrap");
  CHECK(fsdp2[0].facts.at("wrap_api") == "accelerate");
  CHECK(fsdp2[0].facts.at("fsdp_version") == "2");
  CHECK(fsdp2[0].location.start.line + 1 == 14);  // policy, optimizer = accelerator.prepare(policy, optimizer)
  auto fsdp1 = controlsOf(fixture("SL201_accelerate_fsdp1_separate_prepare_ok.py"), "SL201");
  REQUIRE(fsdp1.size() == 1);
  CHECK(fsdp1[0].facts.at("shape") == "separate-prepare");
  CHECK(fsdp1[0].facts.at("fsdp_version") == "1");
  CHECK(fsdp1[0].facts.at("use_orig_params") == "1");
  auto s1 = replaySpecFor(fsdp1[0]);
  REQUIRE(s1);
  CHECK(replaySupported(*s1));
  CHECK(replayProgram(*s1).find("model = accelerator.prepare(model)") != std::string::npos);

  // SL202: FSDP on and the Trainer building its own optimizer; an optimizer with FSDP written off.
  auto trainer = controlsOf(fixture("SL202_trainer_optimizers_fsdp_ok.py"), "SL202");
  std::set<std::string> kinds;
  for (const auto& c : trainer) {
    auto s = replaySpecFor(c);
    REQUIRE(s);
    CHECK(replaySupported(*s));
    kinds.insert(s->shape + "/" + s->fsdpFrom);
  }
  // no_fsdp (fsdp=""), fsdp_trainer_builds_its_own (no optimizers=) and fsdp_built_inside (the subclass
  // MuonTrainer, which has no __init__ of its own, given optimizers=(None, None)); the arguments from the
  // command line, the test expecting the error and the subclass with its own __init__ (KeepsOptimizers) are not
  // controls.
  CHECK(kinds == std::set<std::string>{"trainer-prebuilt-optimizer/off", "trainer-builds-optimizer/args"});
  CHECK(trainer.size() == 3);
  auto launched = controlsOf(project("trainer_launched_fsdp_ok"), "SL202");
  REQUIRE(launched.size() == 1);
  CHECK(launched[0].facts.at("shape") == "trainer-builds-optimizer");
  CHECK(launched[0].facts.at("fsdp_from") == "launcher");
  CHECK(launched[0].facts.at("fsdp_version") == "2");  // the config's fsdp_version
  CHECK(launched[0].message.find("the accelerate config the script is launched with enables FSDP") !=
        std::string::npos);
}

TEST_CASE("probe controls: SL104's controls name why the forward before the optimizer is fine", "[probe]") {
  auto controlsOf = [](const std::string& file) {
    LintOptions o;
    o.controls = std::make_shared<ControlSink>();
    Linter l(rules::catalog(), o);
    INFO(file);
    CHECK(l.lintPath(fixture(file)).empty());
    std::vector<Diagnostic> mine;
    for (auto& c : o.controls->take())
      if (c.code == "SL104") mine.push_back(std::move(c));
    return mine;
  };
  struct Expect {
    const char* file;
    const char* shape;
  };
  for (const Expect& e : {Expect{"SL104_dummy_forward_root_ok.py", "optimizer-then-forward"},
                          Expect{"SL104_warmup_step_with_backward_ok.py", "forward-backward-before-optimizer"},
                          Expect{"SL104_explicit_reshard_ok.py", "forward-reshard-before-optimizer"},
                          Expect{"SL104_reshard_after_forward_true_ok.py", "forward-before-optimizer-resharded"}}) {
    INFO(e.file);
    auto found = controlsOf(e.file);
    REQUIRE(found.size() == 1);
    CHECK(found[0].facts.at("shape") == e.shape);
    CHECK(found[0].facts.at("wrap_api") == "fully_shard");
    auto s = replaySpecFor(found[0]);
    REQUIRE(s);
    CHECK(s->control);
    CHECK(replaySupported(*s));
  }
  // Silent for reasons the replay does not model: no control.
  for (const char* file : {"SL104_root_without_own_params_ok.py", "SL104_unresolved_reshard_flag_ok.py",
                           "SL104_inference_mode_warmup_ok.py", "SL104_fsdp1_forward_ok.py"}) {
    INFO(file);
    CHECK(controlsOf(file).empty());
  }
  // A file with an SL104 finding gives no SL104 control for that optimizer.
  LintOptions o;
  o.controls = std::make_shared<ControlSink>();
  Linter l(rules::catalog(), o);
  CHECK_FALSE(l.lintPath(fixture("SL104_dummy_forward_root.py")).empty());
  for (const auto& c : o.controls->take()) CHECK(c.code != "SL104");
}

TEST_CASE("probe cli: --controls needs replay mode", "[probe]") {
  ProbeTempDir dir;
  CliResult r = runShardlint("probe --controls --mode script fixtures/python/SL101_alias_ok.py", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("--controls replays the rules' controls: it needs --mode replay") != std::string::npos);
}
