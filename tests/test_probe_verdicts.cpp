// The probe's reports and verdicts (runtime_probe/orchestrator/ProbeVerdicts.cpp, ProbeOutput.cpp):
// report parsing, verdicts from synthetic reports, the JSON output, and the recorded reports of real
// runs. No torch and no GPU needed.
#include "ProbeTestSupport.h"
#include "output/Emitters.h"

using namespace shardlint;
using namespace shardlint::probe;
using namespace shardlint::testing::probe_tests;

// ---------------------------------------------------------------------------------------------
// Reports
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe reports: parsing a report file", "[probe]") {
  ProbeTempDir dir;
  // Written by this test (synthetic), with the extras the Python package adds.
  dir.write("out/rank0.json", R"({
  "schema": 1, "rank": 0, "world_size": 2, "backend": "gloo", "torch_version": "2.11.0",
  "accelerate_version": "1.15.0", "reached_step": true, "stale_optimizer_entries": 3,
  "unmanaged_entries": 1, "params_changed": false, "diverged": null, "exception_type": "",
  "exception_message": "", "elapsed_seconds": 2.5, "events": [{"kind": "optimizer_init", "file": "x.py", "line": 3}],
  "finding": {"code": "SL101", "path": "x.py", "line": 3}, "mode": "replay", "probe_error": ""
})");
  dir.write("out/rank1.json", R"({"rank": 1, "world_size": 2, "reached_step": false, "params_changed": null,
  "exception_type": "KeyError", "exception_message": "A parameter in the optimizer couldn't be switched to its sharded version"})");
  dir.write("out/rank2.json", "{not json");
  dir.write("out/notes.txt", "ignored");
  dir.write("out/rank3.json.tmp", "{}");

  std::vector<std::string> errors;
  auto reports = readReports((dir.path() / "out").string(), &errors);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].rank == 0);
  CHECK(reports[0].worldSize == 2);
  CHECK(reports[0].backend == "gloo");
  CHECK(reports[0].torchVersion == "2.11.0");
  CHECK(reports[0].reachedStep);
  CHECK(reports[0].staleOptimizerEntries == 3);
  CHECK(reports[0].unmanagedEntries == 1);
  REQUIRE(reports[0].paramsChanged.has_value());
  CHECK_FALSE(*reports[0].paramsChanged);
  CHECK_FALSE(reports[0].diverged.has_value());
  CHECK(reports[0].elapsedSeconds == Approx(2.5));
  CHECK(reports[1].exceptionType == "KeyError");
  CHECK_FALSE(reports[1].paramsChanged.has_value());
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("rank2.json") != std::string::npos);

  std::string why;
  CHECK_FALSE(parseRankReport("[]", &why));
  CHECK_FALSE(parseRankReport(R"({"world_size": 2})", &why));
  CHECK(why.find("rank") != std::string::npos);
  CHECK_FALSE(parseRankReport(R"({"rank": 0, "reached_step": "yes"})", &why));
  CHECK(why.find("reached_step") != std::string::npos);
  auto pe = parseRankReport(R"({"rank": 0, "probe_error": "PyTorch 2.3.0 is too old"})", &why);
  REQUIRE(pe);
  CHECK(pe->exceptionType == "ProbeError");
  // The trainable parameters the optimizer does not hold (SL105): absent or null means not measured.
  auto tr = parseRankReport(R"({"rank": 0, "trainable_params": 8, "trainable_not_optimized": 8,
                                "trainable_not_optimized_names": ["a.lora_A", "a.lora_B"]})", &why);
  REQUIRE(tr);
  CHECK(tr->trainableParams == 8);
  CHECK(tr->trainableNotOptimized == 8);
  CHECK(tr->trainableNotOptimizedNames == std::vector<std::string>{"a.lora_A", "a.lora_B"});
  auto none = parseRankReport(R"({"rank": 0, "trainable_params": null})", &why);
  REQUIRE(none);
  CHECK_FALSE(none->trainableParams.has_value());
  CHECK_FALSE(none->trainableNotOptimized.has_value());
  CHECK_FALSE(parseRankReport(R"({"rank": 0, "trainable_not_optimized": "8"})", &why));
  CHECK(why.find("trainable_not_optimized") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Verdicts (synthetic reports)
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe verdict: SL101", "[probe]") {
  auto a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  a.staleOptimizerEntries = b.staleOptimizerEntries = 4;
  ProbeResult r = decide("SL101", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("4 tensors") != std::string::npos);
  CHECK(r.backend == "gloo");
  CHECK(r.worldSize == 2);
  CHECK(r.torchVersion == "2.11.0");
  CHECK(r.accelerateVersion == "1.15.0");
  CHECK(r.elapsedSeconds == Approx(4.25));

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  b.paramsChanged = false;
  r = decide("SL101", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("unchanged") != std::string::npos);

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  r = decide("SL101", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::NotReproduced);
  CHECK(r.evidence.find("all 2 ranks") != std::string::npos);
  CHECK(r.evidence.find("0 stale") != std::string::npos);

  a = synthetic(0, 1, false);
  a.exceptionType = "RuntimeError";
  a.exceptionMessage = "cannot step a FlatParameter that was replaced";
  r = decide("SL101", {a}, outcome(1));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("FlatParameter") != std::string::npos);
}

TEST_CASE("probe verdict: SL104", "[probe]") {
  // The optimizer held the unsharded tensors the forward left registered: after the first step they
  // are not among the model's (sharded) parameters.
  auto a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  a.unmanagedEntries = b.unmanagedEntries = 4;
  ProbeResult r = decide("SL104", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("held 4 tensors that are not among the model's sharded parameters") != std::string::npos);

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  b.paramsChanged = false;
  r = decide("SL104", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("left the model's parameters unchanged (rank 1)") != std::string::npos);

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  r = decide("SL104", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::NotReproduced);
  CHECK(r.evidence.find("0 optimizer entries outside the model's sharded parameters") != std::string::npos);
  CHECK(r.evidence.find("the step changed the parameters") != std::string::npos);

  a = synthetic(0, 2, false), b = synthetic(1, 2, false);
  a.exceptionType = b.exceptionType = "RuntimeError";
  a.exceptionMessage = b.exceptionMessage = "Inference tensors cannot be saved for backward";
  r = decide("SL104", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::NotReached);
}

TEST_CASE("probe verdict: SL102", "[probe]") {
  auto a = synthetic(0, 2, false), b = synthetic(1, 2, false);
  a.exceptionType = b.exceptionType = "KeyError";
  a.exceptionMessage = b.exceptionMessage =
      "A parameter in the optimizer couldn't be switched to its sharded version. This breaks the training.";
  ProbeResult r = decide("SL102", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("couldn't be switched to its sharded version") != std::string::npos);

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  a.unmanagedEntries = b.unmanagedEntries = 1;
  CHECK(decide("SL102", {a, b}, outcome(2)).verdict == Verdict::Confirmed);

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  a.diverged = b.diverged = true;
  r = decide("SL102", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("disagree") != std::string::npos);

  a = synthetic(0, 2, false);
  a.exceptionType = "RuntimeError";
  a.exceptionMessage =
      "aten._foreach_add_.List: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor";
  CHECK(decide("SL102", {a}, outcome(2)).verdict == Verdict::Confirmed);

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  a.diverged = b.diverged = false;
  r = decide("SL102", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::NotReproduced);
  CHECK(r.evidence.find("ranks agree") != std::string::npos);
}

TEST_CASE("probe verdict: SL103", "[probe]") {
  auto a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  a.unmanagedEntries = b.unmanagedEntries = 5;
  ProbeResult r = decide("SL103", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("5 tensors") != std::string::npos);

  a = synthetic(0, 2, true), b = synthetic(1, 2, true);
  b.diverged = true;
  CHECK(decide("SL103", {a, b}, outcome(2)).verdict == Verdict::Confirmed);

  // World size 1: structural checks only.
  a = synthetic(0, 1, true);
  a.backend = "nccl";
  r = decide("SL103", {a}, outcome(1, "nccl"));
  CHECK(r.verdict == Verdict::NotReproduced);
  CHECK(r.evidence.find("world size 1") != std::string::npos);
  CHECK(r.backend == "nccl");
}

TEST_CASE("probe verdict: not reached", "[probe]") {
  RunOutcome timeout = outcome(2);
  timeout.timedOut = true;
  timeout.timeoutSeconds = 30;
  timeout.outputTail = "[rank0]: waiting in all_gather\n[rank1]: waiting in all_gather\n";
  ProbeResult r = decide("SL101", {}, timeout);
  CHECK(r.verdict == Verdict::NotReached);
  CHECK(r.evidence.find("timed out after 30.0 s") != std::string::npos);
  CHECK(r.evidence.find("all_gather") != std::string::npos);

  RunOutcome crash = outcome(2);
  crash.exitCode = 1;
  crash.outputTail =
      "Traceback (most recent call last):\n  File \"train.py\", line 3\nNameError: name 'x' is not defined\n";
  r = decide("SL102", {}, crash);
  CHECK(r.verdict == Verdict::NotReached);
  CHECK(r.evidence.find("NameError") != std::string::npos);
  CHECK(r.evidence.find("exit code 1") != std::string::npos);

  auto a = synthetic(0, 2, false), b = synthetic(1, 2, false);
  a.exceptionType = "torch.OutOfMemoryError";
  a.exceptionMessage = "CUDA out of memory";
  r = decide("SL103", {a, b}, outcome(2));
  CHECK(r.verdict == Verdict::NotReached);
  CHECK(r.evidence.find("out of memory") != std::string::npos);

  // A clean rank 0 and no report from rank 1.
  a = synthetic(0, 2, true);
  RunOutcome half = outcome(2);
  half.outputTail = "[rank1]: Segmentation fault\n";
  r = decide("SL101", {a}, half);
  CHECK(r.verdict == Verdict::NotReached);
  CHECK(r.evidence.find("rank 1 wrote no report") != std::string::npos);
  CHECK(r.evidence.find("Segmentation fault") != std::string::npos);

  // ... but a confirmation on the ranks that did report stands.
  a.staleOptimizerEntries = 2;
  r = decide("SL101", {a}, half);
  CHECK(r.verdict == Verdict::Confirmed);
  CHECK(r.evidence.find("rank 1 wrote no report") != std::string::npos);
}

TEST_CASE("probe verdict: probe errors", "[probe]") {
  auto a = synthetic(0, 2, false);
  a.exceptionType = "ProbeError";
  a.exceptionMessage = "PyTorch 2.3.0 is too old: fully_shard needs torch >= 2.4";
  ProbeResult r = decide("SL101", {a}, outcome(2));
  CHECK(r.verdict == Verdict::ProbeError);
  CHECK(r.evidence.find("2.3.0") != std::string::npos);

  a = synthetic(0, 2, false);
  a.exceptionType = "ImportError";
  a.exceptionMessage = "cannot import name 'fully_shard' from 'torch.distributed.fsdp'";
  a.torchVersion = "2.3.1";
  r = decide("SL103", {a}, outcome(2));
  CHECK(r.verdict == Verdict::ProbeError);
  CHECK(r.evidence.find("torch 2.3.1 has no `fully_shard`") != std::string::npos);

  RunOutcome noPkg = outcome(2);
  noPkg.exitCode = 1;
  noPkg.outputTail = "ModuleNotFoundError: No module named 'shardlint_probe'\n";
  CHECK(decide("SL102", {}, noPkg).verdict == Verdict::ProbeError);

  // In script mode an ImportError is the user's script failing: not reached.
  a = synthetic(0, 2, false);
  a.exceptionType = "ModuleNotFoundError";
  a.exceptionMessage = "No module named 'data'";
  RunOutcome script = outcome(2);
  script.mode = "script";
  CHECK(decide("SL101", {a, synthetic(1, 2, false)}, script).verdict == Verdict::NotReached);
}

TEST_CASE("probe verdict: the gloo divergence pass", "[probe]") {
  ProbeResult first;
  first.verdict = Verdict::NotReproduced;
  first.evidence = "no unmanaged entries; divergence not checked (world size 1)";
  first.backend = "nccl";
  first.worldSize = 1;
  first.elapsedSeconds = 3;
  ProbeResult second = first;
  second.verdict = Verdict::Confirmed;
  second.evidence = "ranks disagree";
  second.backend = "gloo";
  second.worldSize = 2;
  second.elapsedSeconds = 5;
  ProbeResult m = mergeDivergencePass(first, second);
  CHECK(m.verdict == Verdict::Confirmed);
  CHECK(m.backend == "nccl+gloo");
  CHECK(m.worldSize == 2);
  CHECK(m.elapsedSeconds == Approx(8));
  CHECK(m.evidence.find("ranks disagree") != std::string::npos);
  second.verdict = Verdict::NotReached;
  m = mergeDivergencePass(first, second);
  CHECK(m.verdict == Verdict::NotReproduced);
  CHECK(m.evidence.find("divergence pass on gloo was not-reached") != std::string::npos);
}

TEST_CASE("probe output: the verdict note and the JSON probe object", "[probe]") {
  auto diags = lint(fixture("SL101_alias.py"));
  REQUIRE(!diags.empty());
  ProbeResult r;
  r.verdict = Verdict::Confirmed;
  r.evidence = "after the wrap the optimizer still held 2 tensors that are not parameters of the wrapped model";
  r.backend = "gloo";
  r.worldSize = 2;
  r.torchVersion = "2.11.0";
  r.accelerateVersion = "1.15.0";
  r.elapsedSeconds = 3.21;
  std::string text = verdictText(r);
  CHECK(text.rfind("probe: confirmed \u2014 after the wrap", 0) == 0);
  CHECK(text.find("[gloo, world size 2, torch 2.11.0, accelerate 1.15.0, 3.2 s]") != std::string::npos);
  CHECK(verdictName(Verdict::NotReached) == "not-reached");
  CHECK(verdictName(Verdict::ProbeError) == "probe-error");
  CHECK(verdictName(Verdict::NotReproduced) == "not-reproduced");

  size_t notes = diags[0].notes.size();
  attachVerdict(diags[0], r);
  REQUIRE(diags[0].notes.size() == notes + 1);
  CHECK(diags[0].notes.back().message == text);
  CHECK(diags[0].notes.back().location.start.line == diags[0].location.start.line);

  std::ostringstream plain;
  output::RunSummary summary;
  summary.filesChecked = 1;
  summary.filesWithFindings = 1;
  output::writeJson(plain, diags, summary, "0.1.0");
  std::map<size_t, ProbeResult> results{{0, r}};
  std::string decorated = addProbeToJson(plain.str(), diags, results);
  json doc = json::parse(decorated);
  json before = json::parse(plain.str());
  REQUIRE(doc["findings"].size() == before["findings"].size());
  json p = doc["findings"][0]["probe"];
  CHECK(p["verdict"] == "confirmed");
  CHECK(p["backend"] == "gloo");
  CHECK(p["world_size"] == 2);
  CHECK(p["torch_version"] == "2.11.0");
  CHECK(p["accelerate_version"] == "1.15.0");
  CHECK(p["elapsed_seconds"].get<double>() == Approx(3.21));
  CHECK(p["evidence"].get<std::string>().find("2 tensors") != std::string::npos);
  doc["findings"][0].erase("probe");
  CHECK(doc == before);  // nothing else changed
  CHECK(json::parse(verdictJson(r))["verdict"] == "confirmed");
}

// ---- Recorded reports ------------------------------------------------------------------------
// fixtures/probe/<date>/<run>/<finding>/<backend>-<ws>/rank<R>.json are unmodified reports from a
// real GPU run (runtime_probe/gpu_check.sh), next to that run's `shardlint probe --format json`
// output (<run>/shardlint.json). Every report must parse, and the verdict decide() computes from a
// single-pass folder's reports must be the one the real run printed.
TEST_CASE("probe recorded: real runs' reports parse and give the verdicts they gave", "[probe][recorded]") {
  fs::path root = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "probe";
  std::map<fs::path, int> folders;  // folder holding rank*.json -> count
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& p = it->path();
    if (it->is_regular_file() && p.extension() == ".json" && p.filename().string().rfind("rank", 0) == 0)
      folders[p.parent_path()]++;
  }
  if (folders.empty()) {
    WARN("no recorded probe reports under fixtures/probe yet: the GPU check has not run");
    return;
  }
  int compared = 0;
  for (const auto& [dir, count] : folders) {
    INFO("recorded folder " << dir.string());
    std::vector<std::string> errors;
    auto reports = readReports(dir.string(), &errors);
    CHECK(errors.empty());
    REQUIRE(reports.size() == static_cast<size_t>(count));
    // The finding the ranks were probing, from the raw report.
    fs::path firstReport;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json" && e.path().filename().string().rfind("rank", 0) == 0) {
        firstReport = e.path();
        break;
      }
    std::ifstream in(firstReport);
    json first = json::parse(in, nullptr, false);
    REQUIRE(first.is_object());
    REQUIRE(first.value("schema", 0) == 1);
    json finding = first.value("finding", json::object());
    std::string code = finding.value("code", "");
    long line = finding.value("line", 0L);
    std::string findingFile = fs::path(finding.value("path", "")).filename().string();
    RunOutcome run;
    run.expectedRanks = reports.front().worldSize;
    run.mode = first.value("mode", "replay");
    ProbeResult r = decide(code, reports, run);
    // The run's shardlint.json: the nearest ancestor folder that has one.
    fs::path runDir = dir.parent_path();
    while (runDir != root && !fs::exists(runDir / "shardlint.json")) runDir = runDir.parent_path();
    if (!fs::exists(runDir / "shardlint.json")) continue;
    std::ifstream out(runDir / "shardlint.json");
    json doc = json::parse(out, nullptr, false);
    if (!doc.is_object() || !doc.contains("findings")) continue;
    for (const auto& f : doc["findings"]) {
      if (!f.contains("probe") || f.value("code", "") != code || f.value("line", 0L) != line) continue;
      if (fs::path(f.value("path", "")).filename().string() != findingFile) continue;
      const json& p = f["probe"];
      // Only single-pass results can be recomputed from one folder (nccl+gloo merges two).
      if (!p["backend"].is_string() || p["backend"].get<std::string>() + "-" +
                                               std::to_string(p.value("world_size", 0)) != dir.filename().string())
        continue;
      CHECK(std::string(verdictName(r.verdict)) == p.value("verdict", ""));
      ++compared;
    }
  }
  INFO("compared " << compared << " recorded verdicts");
  SUCCEED();
}
