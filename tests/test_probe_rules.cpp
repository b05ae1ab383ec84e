// The probe for SL207 (tied-params-split), SL205 (forward-bypasses-fsdp) and SL203 (local-grad-norm),
// rule by rule: specs, verdicts and controls. No torch and no GPU needed.
#include "ProbeTestSupport.h"
#include "orchestrator/Replay.h"

using namespace shardlint;
using namespace shardlint::probe;
using namespace shardlint::testing::probe_tests;

// ---- SL207 tied-params-split ----

TEST_CASE("probe spec: SL207 shapes from how the finding splits the tied modules", "[probe]") {
  std::map<std::string, int> shapes;
  for (const char* file : {"SL207_fsdp2_tied_split.py", "SL207_fsdp2_tied_helper.py", "SL207_fsdp1_tied_split.py"}) {
    for (const auto& d : lint(fixture(file))) {
      if (d.code != "SL207") continue;
      INFO(file << ": " << d.message);
      auto s = replaySpecFor(d);
      REQUIRE(s);
      CHECK_FALSE(s->control);
      CHECK(replaySupported(*s));
      ++shapes[s->wrapApi + "/" + s->shape + (s->useOrigParams ? "/orig" : "")];
      std::string program = replayProgram(*s);
      CHECK(program.find("model.head.weight = model.embed.weight") != std::string::npos);
      CHECK(program.find("s.check_tie(model, embed, head") != std::string::npos);
      if (s->shape == "tied-split-roots") {
        CHECK(program.find("fully_shard(model.head, mesh=env.mesh)") != std::string::npos);
        CHECK(program.find("fully_shard(model, mesh=env.mesh)") == std::string::npos);  // no root unit
      }
      if (s->wrapApi == "fsdp1")
        CHECK(program.find("model.embed = FSDP(model.embed, use_orig_params=" +
                           std::string(s->useOrigParams ? "True" : "False")) != std::string::npos);
    }
  }
  CHECK(shapes["fully_shard/tied-split-root"] == 5);  // 4 in the file (one root over both), 1 through the helper
  CHECK(shapes["fully_shard/tied-split-roots"] == 1);
  CHECK(shapes["fsdp1/tied-split-root"] == 1);
  CHECK(shapes["fsdp1/tied-split-root/orig"] == 1);
  // A message that does not say how the modules are split gives no spec.
  Diagnostic odd = findingOf("SL207_fsdp1_tied_split.py", "SL207");
  odd.message = "`model.head.weight` is tied to `model.embed.weight`";
  std::string why;
  CHECK_FALSE(replaySpecFor(odd, "", &why));
  CHECK(why.find("SL207") != std::string::npos);
}

TEST_CASE("probe decide: SL207 is confirmed by torch's refusal, a failed forward or tied weights apart", "[probe]") {
  RunOutcome run = outcome(2);
  RankReport r0 = synthetic(0, 2, false), r1 = synthetic(1, 2, false);
  r0.exceptionType = r1.exceptionType = "ValueError";
  r0.exceptionMessage = r1.exceptionMessage =
      "Parameter 'embed.weight' is shared with a parameter already managed by another FSDP group. For shared/tied "
      "parameters, use fully_shard([module_a, module_b]) to place them in the same FSDP group.";
  r0.phase = r1.phase = "forward";
  CHECK(decide("SL207", {r0, r1}, run).verdict == Verdict::Confirmed);
  CHECK(decide("SL201", {r0, r1}, run).verdict != Verdict::Confirmed);
  // Another ValueError is no confirmation.
  r0.exceptionMessage = r1.exceptionMessage = "fully_shard doesn't support scalar parameters.";
  r0.phase = r1.phase = "wrap";
  CHECK(decide("SL207", {r0, r1}, run).verdict != Verdict::Confirmed);
  // FSDP1 use_orig_params=True: a RuntimeError in the forward.
  r0.exceptionType = r1.exceptionType = "RuntimeError";
  r0.exceptionMessage = r1.exceptionMessage = "size mismatch, got input (64), mat (64x64), vec (8192)";
  r0.phase = r1.phase = "forward";
  CHECK(decide("SL207", {r0, r1}, run).verdict == Verdict::Confirmed);
  r0.phase = r1.phase = "step";
  CHECK(decide("SL207", {r0, r1}, run).verdict != Verdict::Confirmed);
  // The step ran: the tie read off after it decides.
  RankReport a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  a.tiedApart = b.tiedApart = true;
  a.tiedMaxDiff = b.tiedMaxDiff = 0.02;
  ProbeResult apart = decide("SL207", {a, b}, run);
  CHECK(apart.verdict == Verdict::Confirmed);
  CHECK(apart.evidence.find("tied embedding and head weights differ (largest difference 0.02)") != std::string::npos);
  a.tiedApart = b.tiedApart = false;
  a.tiedMaxDiff = b.tiedMaxDiff = 0.0;
  ProbeResult kept = decide("SL207", {a, b}, run);
  CHECK(kept.verdict == Verdict::NotReproduced);
  CHECK(kept.evidence.find("still one value") != std::string::npos);
}

TEST_CASE("probe controls: SL207 records tied modules kept in one unit", "[probe]") {
  auto controls = controlsOf(fixture("SL207_tied_params_ok.py"), "SL207");
  std::map<std::string, int> shapes;
  for (const auto& c : controls) {
    INFO(c.message);
    auto s = replaySpecFor(c);
    REQUIRE(s);
    CHECK(s->control);
    CHECK(replaySupported(*s));
    ++shapes[c.facts.at("wrap_api") + "/" + c.facts.at("shape")];
    if (c.facts.at("shape") == "tied-group")
      CHECK(replayProgram(*s).find("fully_shard([model.embed, model.head], mesh=env.mesh)") != std::string::npos);
  }
  // blocks then root, tied outside the class then root, the common parent's unit, the dead flag's root; one group
  // call; FSDP1's root.
  CHECK(shapes["fully_shard/tied-one-unit"] == 4);
  CHECK(shapes["fully_shard/tied-group"] == 1);
  CHECK(shapes["fsdp1/tied-one-unit"] == 1);
  // Untied modules in separate units: nothing to control.
  for (const auto& c : controls) CHECK(c.message.find("UntiedLM") == std::string::npos);
}

TEST_CASE("probe: SL207 is a probed rule", "[probe]") {
  CHECK(probedCode("SL207"));
  ReplaySpec s;
  s.code = "SL207";
  s.shape = "tied-group";
  s.wrapApi = "fully_shard";
  CHECK(replaySupported(s));
  s.wrapApi = "fsdp1";  // FSDP1 has no group call
  CHECK_FALSE(replaySupported(s));
}

// ---- SL205 forward-bypasses-fsdp ----

TEST_CASE("probe spec: SL205 shapes, root or a part of the model's own forward", "[probe]") {
  struct Expect {
    const char* file;
    const char* shape;
  };
  for (const Expect& e : {Expect{"SL205_root_forward.py", "bypass-root"},
                          Expect{"SL205_accelerate_fsdp2_prepare.py", "bypass-root"},
                          Expect{"SL205_block_forward.py", "bypass-block"}}) {
    INFO(e.file);
    auto s = replaySpecFor(findingOf(e.file, "SL205"));
    REQUIRE(s);
    CHECK(s->wrapApi == "fully_shard");
    CHECK(s->shape == e.shape);
    CHECK_FALSE(s->control);
    REQUIRE(replaySupported(*s));
    std::string program = replayProgram(*s);
    if (s->shape == "bypass-root") CHECK(program.find("forward=model.forward") != std::string::npos);
    else CHECK(program.find("h = block.forward(h)") != std::string::npos);
  }
  ReplaySpec other;
  other.code = "SL205";
  other.shape = "bypass-root";
  other.wrapApi = "fsdp1";
  CHECK_FALSE(replaySupported(other));
}

TEST_CASE("probe verdict: SL205", "[probe]") {
  // The direct forward computed with the sharded DTensor parameters: torch's mixed Tensor/DTensor error.
  auto a = synthetic(0, 2, false), b = synthetic(1, 2, false);
  a.exceptionType = b.exceptionType = "RuntimeError";
  a.exceptionMessage = b.exceptionMessage =
      "aten.embedding.default got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor before "
      "calling distributed operators!";
  ProbeResult r = decide("SL205", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("the forward called as `.forward(...)` raised RuntimeError: aten.embedding.default got mixed") !=
        std::string::npos);
  CHECK(r.evidence.find("(rank 0)") != std::string::npos);

  // A clean step: not reproduced, with what was seen.
  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  r = decide("SL205", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::NotReproduced);
  CHECK(r.evidence.find("no rank raised the mixed torch.Tensor / DTensor error") != std::string::npos);

  // Another error before the step: not reached, never confirmed.
  a = synthetic(0, 2, false), b = synthetic(1, 2, false);
  a.exceptionType = b.exceptionType = "RuntimeError";
  a.exceptionMessage = b.exceptionMessage = "FSDP requires running forward through the root module first";
  r = decide("SL205", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::NotReached);
}

TEST_CASE("probe controls: SL205's controls name why the forward runs FSDP's hooks", "[probe]") {
  LintOptions o;
  o.controls = std::make_shared<ControlSink>();
  Linter l(rules::catalog(), o);
  CHECK(l.lintPath(fixture("SL205_root_forward_ok.py")).empty());
  std::set<std::string> shapes;
  for (auto& c : o.controls->take()) {
    if (c.code != "SL205") continue;
    shapes.insert(c.facts.at("shape"));
    auto s = replaySpecFor(c);
    REQUIRE(s);
    CHECK(s->control);
    CHECK(replaySupported(*s));
  }
  CHECK(shapes == std::set<std::string>{"bypass-registered", "bypass-unshard", "bypass-call"});
  // A file with an SL205 finding gives no `__call__` control.
  LintOptions o2;
  o2.controls = std::make_shared<ControlSink>();
  Linter l2(rules::catalog(), o2);
  CHECK_FALSE(l2.lintPath(fixture("SL205_root_forward.py")).empty());
  for (const auto& c : o2.controls->take()) CHECK((c.code != "SL205" || c.facts.at("shape") != "bypass-call"));
}

// ---- SL203 local-grad-norm ----

TEST_CASE("probe spec: SL203 shapes, torch's clip on FSDP1 or accelerate's with a subset", "[probe]") {
  struct Expect {
    const char* file;
    const char* shape;
    const char* api;
  };
  for (const Expect& e : {Expect{"SL203_torch_clip.py", "clip-torch", "fsdp1"},
                          Expect{"SL203_wrapped_module.py", "clip-torch", "fsdp1"},
                          Expect{"SL203_accelerate_subset.py", "clip-accelerate-subset", "accelerate"}}) {
    INFO(e.file);
    auto s = replaySpecFor(findingOf(e.file, "SL203"));
    REQUIRE(s);
    CHECK(s->shape == e.shape);
    CHECK(s->wrapApi == e.api);
    CHECK(s->fsdpVersion == 1);
    CHECK_FALSE(s->control);
    REQUIRE(replaySupported(*s));
    std::string program = replayProgram(*s);
    CHECK(program.find("s.clip_step(model, optimizer, clip, reference") != std::string::npos);
    if (s->wrapApi == "fsdp1") {
      CHECK(program.find("return torch.nn.utils.clip_grad_norm_(model.parameters(), rt.CLIP_MAX_NORM)") !=
            std::string::npos);
      CHECK(program.find("ShardingStrategy") == std::string::npos);  // FULL_SHARD, the default
    } else {
      CHECK(s->useOrigParams);  // the original parameters, so the subset holds gradients
      CHECK(program.find("accelerator.clip_grad_norm_(list(model.parameters())[1:]") != std::string::npos);
    }
  }
  // The fixture's SHARD_GRAD_OP wrap (`encoder`) replays with that strategy; the FULL_SHARD ones with none given.
  {
    auto diags = lint(fixture("SL203_torch_clip.py"));
    int grad = 0, full = 0;
    for (const auto& d : diags) {
      if (d.code != "SL203") continue;
      auto s = replaySpecFor(d);
      REQUIRE(s);
      std::string program = replayProgram(*s);
      if (d.message.find(", SHARD_GRAD_OP): ") != std::string::npos) {
        ++grad;
        CHECK(s->shardingStrategy == "SHARD_GRAD_OP");
        CHECK(program.find("sharding_strategy=ShardingStrategy.SHARD_GRAD_OP") != std::string::npos);
        CHECK(program.find("# Pattern: FSDP1 (SHARD_GRAD_OP)") != std::string::npos);
      } else {
        ++full;
        CHECK(s->shardingStrategy.empty());
        CHECK(program.find("ShardingStrategy") == std::string::npos);
      }
    }
    CHECK(grad == 2);  // the clip with a norm type, and the one under a rank check
    CHECK(full >= 4);
  }
  ReplaySpec other;
  other.code = "SL203";
  other.shape = "clip-torch";
  other.wrapApi = "fully_shard";
  CHECK_FALSE(replaySupported(other));
  other.shape = "clip-accelerate-subset";
  other.wrapApi = "accelerate";
  other.fsdpVersion = 2;
  CHECK_FALSE(replaySupported(other));
}

namespace {
RankReport clipReport(int rank, const std::string& norm, const std::string& global) {
  RankReport r = synthetic(rank, 2, true);
  r.notes.push_back("rank " + std::to_string(rank) + " clip norm " + norm + "; global norm " + global);
  return r;
}
}  // namespace

TEST_CASE("probe verdict: SL203 compares the clip's norm across ranks", "[probe]") {
  // Each rank's own shard: different norms (measured on torch 2.15, FULL_SHARD, 2 gloo ranks).
  ProbeResult r = decide("SL203", {clipReport(0, "0.221555", "0.85488"), clipReport(1, "0.825672", "0.85488")}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("the clip returned 0.221555 on rank 0 and 0.825672 on rank 1, where the global norm is 0.85488") !=
        std::string::npos);
  CHECK(r.evidence.find("clip norm") == std::string::npos);  // the notes are read, not repeated

  // The global norm on every rank (a control): not reproduced, saying so.
  r = decide("SL203", {clipReport(0, "0.85488", "0.85488"), clipReport(1, "0.854881", "0.85488")}, outcome(2));
  CHECK(r.verdict == Verdict::NotReproduced);
  CHECK(r.evidence.find("the clip returned 0.85488 on every rank, the global norm") != std::string::npos);

  // One rank cannot show a difference.
  r = decide("SL203", {clipReport(0, "0.3", "0.85")}, outcome(1));
  CHECK(r.verdict != Verdict::Confirmed);

  // A rank's note about another rank counts for nothing; a crash before the step is not reached.
  RankReport odd = synthetic(1, 2, true);
  odd.notes.push_back("rank 0 clip norm 0.5; global norm 0.85");
  r = decide("SL203", {clipReport(0, "0.2", "0.85"), odd}, outcome(2));
  CHECK(r.verdict != Verdict::Confirmed);
  RankReport a = synthetic(0, 2, false), b = synthetic(1, 2, false);
  a.exceptionType = b.exceptionType = "RuntimeError";
  a.exceptionMessage = b.exceptionMessage = "something else";
  CHECK(decide("SL203", {a, b}, outcome(2)).verdict == Verdict::NotReached);
}

TEST_CASE("probe controls: SL203's controls are replayed clips the rule found right", "[probe]") {
  std::set<std::string> shapes;
  for (const char* file : {"SL203_torch_clip_ok.py", "SL203_accelerate_subset_ok.py"}) {
    LintOptions o;
    o.controls = std::make_shared<ControlSink>();
    Linter l(rules::catalog(), o);
    INFO(file);
    CHECK(l.lintPath(fixture(file)).empty());
    for (auto& c : o.controls->take()) {
      if (c.code != "SL203") continue;
      shapes.insert(c.facts.at("shape"));
      auto s = replaySpecFor(c);
      REQUIRE(s);
      CHECK(s->control);
      CHECK(replaySupported(*s));
    }
  }
  CHECK(shapes == std::set<std::string>{"clip-fsdp1-method", "clip-no-shard", "clip-fsdp2", "clip-accelerate-full"});
}
