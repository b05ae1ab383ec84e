// The runtime probe's orchestrator (runtime_probe/orchestrator/Probe.*): launch commands,
// replay specs derived from real findings, backend choice, the process runner (timeouts kill
// the whole process group), report parsing and merging, verdicts, JSON output, and the
// `shardlint probe` command's error paths. No torch and no GPU needed.
//
// The RankReport values below are SYNTHETIC unit inputs written for these tests; they are not
// recorded from real runs (recorded reports live under fixtures/probe/, written by
// runtime_probe/gpu_check.sh).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "Registry.h"
#include "driver/Discovery.h"
#include "driver/Linter.h"
#include "orchestrator/Probe.h"
#include "orchestrator/Replay.h"
#include "output/Emitters.h"
#include "TestSupport.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint;
using namespace shardlint::probe;
using shardlint::testing::shellQuote;

namespace {

struct ProbeTempDir : shardlint::testing::TempDir {
  ProbeTempDir() : TempDir("shardlint-probe-test-") {}
};

std::string fixture(const std::string& name) { return std::string(SHARDLINT_SOURCE_DIR) + "/fixtures/python/" + name; }

std::vector<Diagnostic> lint(const std::string& path) {
  static Linter linter(rules::catalog(), {});
  return linter.lintPath(path);
}

// A project fixture (fixtures/projects/NAME), linted as `shardlint check` lints a folder.
std::string project(const std::string& name) { return std::string(SHARDLINT_SOURCE_DIR) + "/fixtures/projects/" + name; }
std::vector<Diagnostic> lintProject(const std::string& dir, LintOptions options = {}) {
  Linter linter(rules::catalog(), std::move(options));
  return linter.lintFiles(discover({dir}).files);
}

// The one finding of `code` in a fixture.
Diagnostic findingOf(const std::string& file, const std::string& code) {
  auto diags = lint(fixture(file));
  std::vector<Diagnostic> hits;
  for (auto& d : diags)
    if (d.code == code) hits.push_back(d);
  INFO(file);
  REQUIRE(hits.size() >= 1);
  return hits.front();
}

// A synthetic rank report (unit input, not a recording).
RankReport synthetic(int rank, int world, bool reached) {
  RankReport r;
  r.rank = rank;
  r.worldSize = world;
  r.backend = "gloo";
  r.torchVersion = "2.11.0";
  r.accelerateVersion = "1.15.0";
  r.reachedStep = reached;
  r.paramsChanged = reached ? std::optional<bool>(true) : std::nullopt;
  r.elapsedSeconds = 1.5;
  return r;
}

RunOutcome outcome(int ranks, const std::string& backend = "gloo") {
  RunOutcome o;
  o.expectedRanks = ranks;
  o.worldSize = ranks;
  o.backend = backend;
  o.seconds = 4.25;
  o.timeoutSeconds = 60;
  o.torchVersion = "2.11.0";
  return o;
}

bool processGoneNow(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  // A zombie nobody reaped yet (PID 1 in a container may not reap) is gone too.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] == 'Z';
}

bool groupGoneNow(pid_t pgid) {
  if (kill(-pgid, 0) != 0) return errno == ESRCH;
  // Only zombies left in the group?
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close = s.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(s.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != "Z") return false;
  }
  return true;
}

// A killed process still has to be scheduled to die: on a loaded machine that can take a while.
// These wait for it (up to 10 s; they return as soon as it is gone).
bool gone(const std::function<bool()>& now) {
  for (int i = 0; i < 500; ++i) {
    if (now()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return now();
}
bool processGone(pid_t pid) { return gone([&] { return processGoneNow(pid); }); }
bool groupGone(pid_t pgid) { return gone([&] { return groupGoneNow(pgid); }); }

struct CliResult {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

CliResult runShardlint(const std::string& args, const fs::path& errFile, const std::string& env = "") {
  std::string cmd = "cd " + shellQuote(SHARDLINT_SOURCE_DIR) + " && env " + env + " " + shellQuote(SHARDLINT_BINARY) + " " +
                    args + " 2>" + shellQuote(errFile.string());
  auto start = std::chrono::steady_clock::now();
  shardlint::testing::ShellResult sh = shardlint::testing::runShell(cmd);
  CliResult r;
  r.code = sh.code;
  r.out = std::move(sh.out);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.err = shardlint::testing::readFile(errFile);
  return r;
}

// A stand-in for `python` (a shell script): answers the torch check with a synthetic torch, passes
// the CPU self-test, and "launches" according to FAKE_LAUNCH: hang, crash, or write synthetic
// reports (reports=stale|clean). Unit scaffolding only: nothing here ran torch.
const char* const kFakePython = R"SH(#!/bin/sh
case "$1" in
  -c)
    echo '{"python": "3.11.2", "torch": "2.11.0+synthetic", "cuda_devices": 0, "distributed": true, "nccl": false, "gloo": true, "fully_shard": "torch.distributed.fsdp", "fsdp1": true, "accelerate": "1.15.0"}'
    exit 0 ;;
  -m)
    case "$FAKE_LAUNCH" in
      hang) echo "$$" > "$FAKE_PIDFILE"; sleep 30 & echo "$!" >> "$FAKE_PIDFILE"; wait; exit 0 ;;
      crash) echo "Traceback (most recent call last):" >&2
             echo "RuntimeError: synthetic crash before the first step" >&2; exit 1 ;;
      node1)  # one node of two: only this node's rank (1) reports here
        echo "$*" > "$FAKE_ARGS"
        printf '{"rank": 1, "world_size": 2, "backend": "gloo", "torch_version": "2.11.0+synthetic", "accelerate_version": "1.15.0", "reached_step": true, "stale_optimizer_entries": %s, "unmanaged_entries": 0, "params_changed": %s, "diverged": null, "exception_type": "", "exception_message": "", "elapsed_seconds": 0.5}\n' "$FAKE_STALE" "$FAKE_CHANGED" > "$SHARDLINT_PROBE_OUT/rank1.json"
        exit 0 ;;
      rdzv-timeout)
        echo "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError" >&2; exit 1 ;;
      rdzv-unreachable)
        echo "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (10.9.9.9, 29400). The client socket has failed to connect to 10.9.9.9:29400 (errno: 113 - No route to host)." >&2
        echo "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details." >&2
        exit 1 ;;
      stale)
        for r in 0 1; do
          printf '{"rank": %s, "world_size": 2, "backend": "gloo", "torch_version": "2.11.0+synthetic", "accelerate_version": "1.15.0", "reached_step": true, "stale_optimizer_entries": 4, "unmanaged_entries": 0, "params_changed": false, "diverged": null, "exception_type": "", "exception_message": "", "elapsed_seconds": 0.5}\n' $r > "$SHARDLINT_PROBE_OUT/rank$r.json"
        done
        exit 0 ;;
    esac
    exit 0 ;;
  *)
    echo '{"fsdp2": true, "fsdp1": true}'
    exit 0 ;;
esac
)SH";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Launch commands
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe launch: single node", "[probe]") {
  LaunchSpec s;
  s.python = "/opt/venv/bin/python";
  s.nprocPerNode = 2;
  s.masterPort = 29555;
  s.program = {"/tmp/x/replay.py"};
  std::vector<std::string> want = {
      "/opt/venv/bin/python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29555",
      "--max_restarts",       "0",  "/tmp/x/replay.py"};
  CHECK(launchCommand(s) == want);
}

TEST_CASE("probe launch: --nnodes and --rdzv-endpoint are passed through", "[probe]") {
  LaunchSpec s;
  s.nprocPerNode = 8;
  s.masterPort = 29555;  // ignored: the rendezvous endpoint carries the port
  s.nnodes = "2";
  s.rdzvEndpoint = "node0:29400";
  s.program = {"-m", "shardlint_probe", "train.py", "--lr", "1e-4"};
  // c10d: torchrun's default (static) rendezvous would make every node node 0 without a --node-rank.
  std::vector<std::string> want = {
      "python3", "-m", "torch.distributed.run", "--nproc_per_node", "8", "--nnodes", "2", "--rdzv-endpoint",
      "node0:29400", "--rdzv-backend", "c10d", "--max_restarts", "0", "-m", "shardlint_probe", "train.py", "--lr",
      "1e-4"};
  CHECK(launchCommand(s) == want);
}

TEST_CASE("probe launch: an srun line is put in front", "[probe]") {
  LaunchSpec s;
  s.nprocPerNode = 4;
  s.masterPort = 0;
  s.nnodes = "2";
  s.rdzvEndpoint = "$(hostname):29400";
  s.srun = "srun -N2 --ntasks-per-node=1 --export='ALL,NCCL_DEBUG=INFO' \"--job-name=shard probe\"";
  s.program = {"replay.py"};
  auto cmd = launchCommand(s);
  std::vector<std::string> head = {
      "srun",    "-N2", "--ntasks-per-node=1",  "--export=ALL,NCCL_DEBUG=INFO", "--job-name=shard probe",
      "python3", "-m",  "torch.distributed.run"};
  REQUIRE(cmd.size() > head.size());
  CHECK(std::vector<std::string>(cmd.begin(), cmd.begin() + static_cast<long>(head.size())) == head);
  CHECK(std::find(cmd.begin(), cmd.end(), "--master_port") == cmd.end());
  auto backend = std::find(cmd.begin(), cmd.end(), "--rdzv-backend");
  REQUIRE(backend + 1 < cmd.end());
  CHECK(backend[1] == "c10d");
  CHECK(cmd.back() == "replay.py");
}

TEST_CASE("probe launch: words split and join like a shell", "[probe]") {
  CHECK(splitWords("  a 'b c'  \"d \\\" e\" f\\ g ") == std::vector<std::string>{"a", "b c", "d \" e", "f g"});
  CHECK(splitWords("").empty());
  std::vector<std::string> words = {"python3", "-c", "print('hi')", "a b", ""};
  CHECK(splitWords(shellJoin(words)) == words);
  CHECK(shellJoin({"--nproc_per_node", "2"}) == "--nproc_per_node 2");
}

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

// ---------------------------------------------------------------------------------------------
// Environment and backend choice
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe env: CUDA_VISIBLE_DEVICES limits the GPUs", "[probe]") {
  CHECK(applyCudaVisibleDevices(4, nullptr) == 4);
  CHECK(applyCudaVisibleDevices(4, "") == 0);
  CHECK(applyCudaVisibleDevices(4, "0,1") == 2);
  CHECK(applyCudaVisibleDevices(1, "0,1,2") == 1);
  CHECK(applyCudaVisibleDevices(4, "-1") == 0);
  CHECK(applyCudaVisibleDevices(4, "0,-1,2") == 1);
  CHECK(applyCudaVisibleDevices(8, "GPU-1234,GPU-5678") == 2);
  CHECK(countVisibleGpus("", false) == 0);
}

TEST_CASE("probe env: the torch check's answer", "[probe]") {
  TorchInfo t = parseTorchInfo(
      "some warning\n{\"python\": \"3.11.2\", \"torch\": \"2.11.0\", \"cuda_devices\": 1, \"distributed\": true, "
      "\"nccl\": true, \"gloo\": true, \"fully_shard\": \"torch.distributed.fsdp\", \"fsdp1\": true, "
      "\"accelerate\": \"1.15.0\"}\n");
  CHECK(t.ok);
  CHECK(t.torchVersion == "2.11.0");
  CHECK(t.accelerateVersion == "1.15.0");
  CHECK(t.cudaDevices == 1);
  CHECK(t.nccl);
  CHECK(t.fullyShardModule == "torch.distributed.fsdp");
  TorchInfo none =
      parseTorchInfo("{\"python\": \"3.11.2\", \"error\": \"ModuleNotFoundError: No module named 'torch'\"}\n");
  CHECK_FALSE(none.ok);
  CHECK(none.error.find("No module named 'torch'") != std::string::npos);
  CHECK_FALSE(parseTorchInfo("").ok);
}

TEST_CASE("probe env: the torch check never hangs", "[probe]") {
  ProbeTempDir dir;
  auto hang = dir.write("hang-python", "#!/bin/sh\nsleep 30\n", true);
  auto start = std::chrono::steady_clock::now();
  TorchInfo t = probeTorch(hang.string(), 1);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK_FALSE(t.ok);
  CHECK(t.error.find("did not answer") != std::string::npos);
  CHECK(secs < 8);
  TorchInfo f = probeTorch("/bin/false", 10);
  CHECK_FALSE(f.ok);
  TorchInfo missing = probeTorch("/nonexistent/python3", 10);
  CHECK_FALSE(missing.ok);
  CHECK(missing.error.find("cannot run") != std::string::npos);
}

TEST_CASE("probe backend: auto, nccl and gloo", "[probe]") {
  TorchInfo t;
  t.ok = true;
  t.torchVersion = "2.11.0";
  t.distributed = t.nccl = t.gloo = true;
  t.fullyShardModule = "torch.distributed.fsdp";
  t.cpuFsdp2 = true;
  t.cpuFsdp1 = true;

  BackendChoice c = chooseBackend("auto", 2, 2, t, true);
  CHECK(c.ok);
  CHECK(c.backend == "nccl");
  CHECK(c.worldSize == 2);

  c = chooseBackend("auto", 2, 1, t, true);  // one GPU, two ranks: gloo on CPU
  CHECK(c.backend == "gloo");
  CHECK(c.device == "cpu");
  CHECK(c.worldSize == 2);
  CHECK(c.reason.find("only 1 GPU visible") != std::string::npos);

  c = chooseBackend("nccl", 2, 1, t, true);  // NCCL refuses two ranks on one device
  CHECK(c.ok);
  CHECK(c.worldSize == 1);
  CHECK(c.divergenceOnGloo);
  CHECK(c.reason.find("NCCL refuses two ranks on one device") != std::string::npos);

  c = chooseBackend("nccl", 1, 1, t, true);
  CHECK(c.worldSize == 1);
  CHECK_FALSE(c.divergenceOnGloo);

  TorchInfo noCpu = t;
  noCpu.cpuFsdp2 = false;
  noCpu.cpuFsdpError = "FSDP2 on CPU: RuntimeError: synthetic";
  c = chooseBackend("auto", 2, 1, noCpu, true);  // gloo cannot: one rank on the GPU
  CHECK(c.backend == "nccl");
  CHECK(c.worldSize == 1);
  CHECK(c.reason.find("not checked") != std::string::npos);
  c = chooseBackend("gloo", 2, 0, noCpu, true);
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("self-test") != std::string::npos);
  c = chooseBackend("auto", 2, 0, noCpu, true);
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("no usable backend") != std::string::npos);
  c = chooseBackend("auto", 2, 0, noCpu, false);  // FSDP1 findings only: the FSDP1 self-test counts
  CHECK(c.ok);
  CHECK(c.backend == "gloo");

  TorchInfo cpuOnly = t;
  cpuOnly.nccl = false;
  c = chooseBackend("nccl", 1, 0, cpuOnly, true);
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("NCCL") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The process runner
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe runner: output, exit code and environment", "[probe]") {
  RunOptions o;
  o.timeoutSeconds = 20;
  o.env["SHARDLINT_TEST_VALUE"] = "forty two";
  RunResult r = runProcess({"sh", "-c", "echo out; echo err >&2; echo \"$SHARDLINT_TEST_VALUE\"; exit 3"}, o);
  CHECK(r.started);
  CHECK(r.exitCode == 3);
  CHECK_FALSE(r.timedOut);
  CHECK(r.output.find("out") != std::string::npos);
  CHECK(r.output.find("err") != std::string::npos);
  CHECK(r.output.find("forty two") != std::string::npos);

  RunResult missing = runProcess({"/nonexistent/binary"}, o);
  CHECK_FALSE(missing.started);
  CHECK(missing.startError.find("No such file") != std::string::npos);
}

TEST_CASE("probe runner: a timeout kills the whole process group promptly", "[probe]") {
  RunOptions o;
  o.timeoutSeconds = 1;
  o.killGraceSeconds = 1;
  auto start = std::chrono::steady_clock::now();
  RunResult r = runProcess({"sleep", "30"}, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.started);
  CHECK(r.timedOut);
  CHECK(secs < 5);
  CHECK(r.pgid > 0);
  CHECK(groupGone(r.pgid));
}

TEST_CASE("probe runner: children in the group and in their own sessions die too", "[probe]") {
  ProbeTempDir dir;
  fs::path pids = dir.path() / "pids";
  RunOptions o;
  o.timeoutSeconds = 1;
  o.killGraceSeconds = 1;
  // A child that ignores SIGTERM, and one that escapes the group (like torchrun's workers).
  std::string script = "trap '' TERM; sleep 30 & echo $! > " + pids.string() + "; setsid sleep 31 & echo $! >> " +
                       pids.string() + "; wait";
  auto start = std::chrono::steady_clock::now();
  RunResult r = runProcess({"sh", "-c", script}, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.timedOut);
  CHECK(secs < 6);
  std::ifstream in(pids);
  pid_t pid;
  int n = 0;
  while (in >> pid) {
    ++n;
    INFO("pid " << pid);
    CHECK(processGone(pid));
  }
  CHECK(n == 2);
  CHECK(groupGone(r.pgid));
}

TEST_CASE("probe runner: stragglers left after a clean exit are killed", "[probe]") {
  ProbeTempDir dir;
  fs::path pids = dir.path() / "pids";
  RunOptions o;
  o.timeoutSeconds = 20;
  std::string script = "setsid sleep 30 >/dev/null 2>&1 & echo $! > " + pids.string() + "; exit 0";
  auto start = std::chrono::steady_clock::now();
  RunResult r = runProcess({"sh", "-c", script}, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.exitCode == 0);
  CHECK(secs < 5);
  std::ifstream in(pids);
  pid_t pid = 0;
  REQUIRE(in >> pid);
  CHECK(processGone(pid));
}

TEST_CASE("probe ports: a free port, and one in use", "[probe]") {
  int port = freePort();
  REQUIRE(port > 0);
  CHECK_FALSE(portInUse(port));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  int busy = ntohs(addr.sin_port);
  CHECK(portInUse(busy));
  close(fd);
  CHECK_FALSE(portInUse(busy));
  CHECK(portInUse(0));
  CHECK(portInUse(70000));
}

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

// ---------------------------------------------------------------------------------------------
// The `shardlint probe` command: bad input gives clear errors, never a hang
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe cli: no torch means exit 2 with a clear message", "[probe]") {
  ProbeTempDir dir;
  auto silent = dir.write("silent-python", "#!/bin/sh\nexit 0\n", true);
  for (const std::string& python : {std::string("/bin/false"), silent.string()}) {
    CliResult r =
        runShardlint("probe --python " + shellQuote(python) + " fixtures/python/SL101_alias.py", dir.path() / "err.txt");
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("the probe needs PyTorch") != std::string::npos);
    CHECK(r.seconds < 30);
  }
  auto notorch = dir.write("notorch-python",
                           "#!/bin/sh\necho '{\"python\": \"3.11.2\", \"error\": \"ModuleNotFoundError: No module "
                           "named '\"'\"'torch'\"'\"'\"}'\n",
                           true);
  CliResult r = runShardlint("probe --python " + shellQuote(notorch.string()) + " fixtures/python/SL101_alias.py",
                             dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("No module named 'torch'") != std::string::npos);
}

TEST_CASE("probe cli: nothing to probe needs no torch", "[probe]") {
  ProbeTempDir dir;
  CliResult r = runShardlint("probe --python /bin/false fixtures/python/SL101_alias_ok.py", dir.path() / "err.txt");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("no SL101, SL102, SL103, SL104, SL105, SL201, SL202, SL203, SL204, SL205, SL207 or SL402 finding") != std::string::npos);
}

TEST_CASE("probe cli: usage errors", "[probe]") {
  ProbeTempDir dir;
  CliResult r =
      runShardlint("probe --python /bin/false fixtures/python/SL101_alias.py -- --epochs 1", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("--mode script") != std::string::npos);
  r = runShardlint("probe --backend mpi fixtures/python/SL101_alias.py", dir.path() / "err.txt");
  CHECK(r.code == 2);
  r = runShardlint("probe --mode script --python /bin/false fixtures/python", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("must be a Python file") != std::string::npos);
  for (const char* bad : {"-1", "0", "abc", "1e9"}) {
    r = runShardlint(std::string("probe --timeout ") + bad + " fixtures/python/SL101_alias.py", dir.path() / "err.txt");
    CHECK(r.code == 2);
    CHECK(r.err.find("must be a number of seconds above 0") != std::string::npos);
  }
  // Several nodes need one rendezvous endpoint (without it each node's torchrun waits for itself).
  r = runShardlint("probe --nnodes 2 --python /bin/false fixtures/python/SL101_alias.py", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("--nnodes 2 needs --rdzv-endpoint HOST:PORT") != std::string::npos);
}

TEST_CASE("probe cli: a --master-port in use is refused", "[probe]") {
  ProbeTempDir dir;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  int port = ntohs(addr.sin_port);
  CliResult r = runShardlint("probe --master-port " + std::to_string(port) + " fixtures/python/SL101_alias.py",
                             dir.path() / "err.txt");
  close(fd);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("--master-port " + std::to_string(port) + " is already in use") != std::string::npos);
}

TEST_CASE("probe cli: --preflight finds the built native preflight and passes on its exit code", "[probe]") {
  if (std::string(SHARDLINT_PREFLIGHT_PATH).empty()) {
    WARN("shardlint-preflight was not built (no CUDA compiler or NCCL): see the next test");
    return;
  }
  REQUIRE(preflightPath() == SHARDLINT_PREFLIGHT_PATH);  // found without $SHARDLINT_PREFLIGHT or a --flag
  REQUIRE(fs::exists(preflightPath()));
  ProbeTempDir dir;
  // Every device hidden: the no-GPU path on any machine (exit 3, the preflight's own message).
  CliResult r = runShardlint("probe --preflight", dir.path() / "err.txt", "CUDA_VISIBLE_DEVICES=-1");
  INFO(r.err);
  CHECK(r.code == 3);
  CHECK(r.err.find("shardlint-preflight: no CUDA device: ") != std::string::npos);
  // Arguments after `--` reach it: --json gives its report on stdout.
  r = runShardlint("probe --preflight -- --json", dir.path() / "err.txt", "CUDA_VISIBLE_DEVICES=-1");
  INFO(r.out);
  CHECK(r.code == 3);
  CHECK(nlohmann::json::parse(r.out)["status"] == "no_gpu");
}

TEST_CASE("probe cli: --preflight without the native preflight", "[probe]") {
  if (!preflightPath().empty() && fs::exists(preflightPath())) {
    SUCCEED("the preflight is built here: the test above covers it");
    return;
  }
  ProbeTempDir dir;
  CliResult r = runShardlint("probe --preflight", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("preflight was not built") != std::string::npos);
}

TEST_CASE("probe cli: a hanging launch times out, is killed, and is not reached", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  fs::path pidfile = dir.path() / "pids";
  CliResult r = runShardlint(
      "probe --format json --timeout 1 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py",
      dir.path() / "err.txt", "FAKE_LAUNCH=hang FAKE_PIDFILE=" + shellQuote(pidfile.string()));
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.seconds < 30);
  CHECK(r.err.find("gloo on CPU, 2 ranks") != std::string::npos);
  json doc = json::parse(r.out);
  REQUIRE(doc["findings"].size() >= 1);
  json p = doc["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reached");
  CHECK(p["evidence"].get<std::string>().find("timed out after 1.0 s") != std::string::npos);
  CHECK(p["torch_version"] == "2.11.0+synthetic");
  std::ifstream in(pidfile);
  pid_t pid;
  int n = 0;
  while (in >> pid) {
    ++n;
    CHECK(processGone(pid));
  }
  CHECK(n == 2);
}

TEST_CASE("probe cli: a crash before the first step is not reached, with its output", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  CliResult r =
      runShardlint("probe --timeout 20 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py",
                   dir.path() / "err.txt", "FAKE_LAUNCH=crash");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("note: probe: not-reached \u2014") != std::string::npos);
  CHECK(r.out.find("synthetic crash before the first step") != std::string::npos);
}

TEST_CASE("probe cli: reports are collected and merged into every format", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  std::string base = "probe --timeout 20 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py";
  CliResult text = runShardlint(base, dir.path() / "err.txt", "FAKE_LAUNCH=stale");
  INFO(text.err);
  CHECK(text.code == 1);
  CHECK(text.out.find("probe: confirmed \u2014 after the wrap the optimizer still held 4 tensors") !=
        std::string::npos);
  CHECK(text.out.find("[gloo, world size 2, torch 2.11.0+synthetic, accelerate 1.15.0") != std::string::npos);
  CliResult concise = runShardlint(base + " --format concise", dir.path() / "err.txt", "FAKE_LAUNCH=stale");
  CHECK(concise.out.find("SL101") != std::string::npos);
  CHECK(concise.out.find("[probe: confirmed") != std::string::npos);
  for (const std::string f : {"sarif", "github", "lsp"}) {
    CliResult o = runShardlint(base + " --format " + f, dir.path() / "err.txt", "FAKE_LAUNCH=stale");
    INFO(f);
    CHECK(o.out.find("probe: confirmed") != std::string::npos);
  }
  CliResult js = runShardlint(base + " --format json", dir.path() / "err.txt", "FAKE_LAUNCH=stale");
  json doc = json::parse(js.out);
  CHECK(doc["findings"][0]["probe"]["verdict"] == "confirmed");
  CHECK(doc["findings"][0]["probe"]["world_size"] == 2);
  // The replay that ran, for tools that check verdicts against shapes (tests/probe_real.py).
  json replay = doc["findings"][0]["probe"]["replay"];
  CHECK(replay["shape"] == "optimizer-before-wrap");
  CHECK(replay["wrap_api"] == "fully_shard");
  CHECK(replay["use_orig_params"].is_null());
  CHECK(replay["shared_with"].is_null());
  CHECK(replay["replacement"].is_null());  // SL105's only
  CHECK(replay["fsdp_from"].is_null());    // the Trainer's only
  CHECK(replay["joint"].is_null());        // Fabric's only
}

TEST_CASE("probe reports: the ranks' notes travel with the evidence, each once", "[probe]") {
  RunOutcome run;
  run.expectedRanks = 2;
  run.backend = "gloo";
  std::vector<RankReport> reports(2);
  for (int r = 0; r < 2; ++r) {
    reports[r].rank = r;
    reports[r].worldSize = 2;
    reports[r].reachedStep = true;
    reports[r].staleOptimizerEntries = 2;
    reports[r].notes = {"accelerate switched to FSDP on CPU"};
  }
  reports[1].notes.push_back("second note");
  ProbeResult res = decide("SL402", reports, run);
  CHECK(res.verdict == Verdict::Confirmed);
  CHECK(res.evidence.find("(note: accelerate switched to FSDP on CPU)") != std::string::npos);
  CHECK(res.evidence.find("(note: accelerate switched to FSDP on CPU)", res.evidence.find("(note: accelerate") + 1) ==
        std::string::npos);
  CHECK(res.evidence.find("(note: second note)") != std::string::npos);
  // Parsed from a rank report; a note list of the wrong type is refused like any other field.
  std::string why;
  auto parsed = parseRankReport(R"({"rank": 0, "notes": ["a", "b"]})", &why);
  REQUIRE(parsed);
  CHECK(parsed->notes == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(parseRankReport(R"({"rank": 0, "notes": "a"})", &why));
  CHECK(why.find("notes") != std::string::npos);
}

TEST_CASE("probe self-test: the summary names each API and its error", "[probe]") {
  TorchInfo t;
  t.cpuChecks = {{"fsdp2", ""}, {"fsdp1_flat", "RuntimeError: FSDP needs a non-CPU accelerator device"},
                 {"fabric", "not installed: ModuleNotFoundError: No module named 'lightning'"}};
  std::string s = cpuSelfTestSummary(t);
  CHECK(s == "FSDP2 fully_shard: ok; FSDP1 use_orig_params=False: RuntimeError: FSDP needs a non-CPU accelerator "
             "device; Lightning Fabric FSDPStrategy: not installed: ModuleNotFoundError: No module named 'lightning'");
}

// One `shardlint probe` per node (tests/probe_two_nodes.sh runs two across network namespaces with
// real torch): the launch is a c10d rendezvous with bounded waits, and the node judges from its own
// ranks' reports, the only ones in its folder.
TEST_CASE("probe cli: one node of a multi-node probe judges from its own ranks", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  fs::path args = dir.path() / "args";
  std::string base = "probe --format json --nproc 1 --nnodes 2 --rdzv-endpoint 10.9.9.1:29400 --timeout 20 --python " +
                     shellQuote(python.string()) + " fixtures/python/SL101_alias.py";
  std::string env = "-u PET_RDZV_CONF FAKE_LAUNCH=node1 FAKE_ARGS=" + shellQuote(args.string());
  CliResult r = runShardlint(base, dir.path() / "err.txt", env + " FAKE_STALE=4 FAKE_CHANGED=false");
  INFO(r.err);
  CHECK(r.code == 1);
  std::string argv = shardlint::testing::readFile(args);
  CHECK(argv.find("--nnodes 2 --rdzv-endpoint 10.9.9.1:29400 --rdzv-backend c10d "
                  "--rdzv-conf join_timeout=10,read_timeout=10 --max_restarts 0") != std::string::npos);
  json p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "confirmed");
  CHECK(p["world_size"] == 2);
  std::string evidence = p["evidence"];
  CHECK(evidence.find("(rank 1)") != std::string::npos);
  CHECK(evidence.find("multi-node: judged from this node's rank 1 of world size 2") != std::string::npos);
  CHECK(evidence.find("wrote no report") == std::string::npos);  // rank 0 reports on the other node

  // Refuted on this node: not-reproduced from its one rank, not not-reached for the other node's.
  r = runShardlint(base, dir.path() / "err.txt", env + " FAKE_STALE=0 FAKE_CHANGED=true");
  p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reproduced");
  CHECK(p["evidence"].get<std::string>().find("ran on this node's rank with no sign of the bug") != std::string::npos);

  // $PET_RDZV_CONF (torchrun's environment form of --rdzv-conf) is kept; its waits win.
  r = runShardlint(base, dir.path() / "err.txt",
                   "PET_RDZV_CONF=is_host=1,join_timeout=3 FAKE_LAUNCH=node1 FAKE_STALE=4 FAKE_CHANGED=false FAKE_ARGS=" +
                       shellQuote(args.string()));
  CHECK(shardlint::testing::readFile(args).find("--rdzv-conf is_host=1,join_timeout=3,read_timeout=10 ") !=
        std::string::npos);
}

TEST_CASE("probe cli: a rendezvous that fails is not reached, and says so", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  std::string base = "probe --format json --nproc 1 --nnodes 2 --timeout 30 --python " + shellQuote(python.string());
  CliResult r = runShardlint(base + " --rdzv-endpoint 10.9.9.1:29401 fixtures/python/SL101_alias.py",
                             dir.path() / "err.txt", "-u PET_RDZV_CONF FAKE_LAUNCH=rdzv-timeout");
  INFO(r.err);
  CHECK(r.code == 1);
  json p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reached");
  CHECK(p["evidence"].get<std::string>().find("the rendezvous at 10.9.9.1:29401 timed out: not every node joined "
                                              "(--nnodes 2) [--rdzv-conf join_timeout=15,read_timeout=15]") !=
        std::string::npos);
  r = runShardlint(base + " --rdzv-endpoint 10.9.9.9:29400 fixtures/python/SL101_alias.py", dir.path() / "err.txt",
                   "-u PET_RDZV_CONF FAKE_LAUNCH=rdzv-unreachable");
  p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reached");
  CHECK(p["evidence"].get<std::string>().find(
            "cannot reach the rendezvous store at 10.9.9.9:29400 (No route to host, errno 113)") != std::string::npos);
}

TEST_CASE("probe cli: the instrumentation's own report without torch is a probe-error", "[probe]") {
  // The real replay generator and the real Python package, run by a python3 without torch
  // (skipped where python3 is missing or has torch: then this would run a real replay).
  if (std::system("command -v python3 >/dev/null 2>&1 && ! python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    SUCCEED("no python3 without torch here");
    return;
  }
  ProbeTempDir dir;
  // Answers the torch check with a synthetic torch; "launches" the program as rank 0 of 1 with python3.
  auto shim = dir.write("python",
                        "#!/bin/sh\n"
                        "case \"$1\" in\n"
                        "  -c) echo '{\"python\": \"3\", \"torch\": \"2.11.0+synthetic\", \"cuda_devices\": 0, "
                        "\"distributed\": true, \"nccl\": false, \"gloo\": true, \"fully_shard\": "
                        "\"torch.distributed.fsdp\", \"fsdp1\": true, \"accelerate\": \"1.15.0\"}' ;;\n"
                        "  -m) while [ \"$1\" != \"--max_restarts\" ]; do shift; done; shift 2\n"
                        "      RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 exec python3 \"$@\" ;;\n"
                        "  *) echo '{\"fsdp2\": true, \"fsdp1\": true}' ;;\n"
                        "esac\n",
                        true);
  CliResult r = runShardlint("probe --format json --timeout 60 --python " + shellQuote(shim.string()) +
                                 " fixtures/python/SL101_fsdp1_orig_params_false.py",
                             dir.path() / "err.txt");
  INFO(r.err);
  CHECK(r.code == 1);
  json doc = json::parse(r.out);
  json p = doc["findings"][0]["probe"];
  CHECK(p["verdict"] == "probe-error");
  CHECK(p["evidence"].get<std::string>().find("torch") != std::string::npos);
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

TEST_CASE("probe python: $SHARDLINT_PROBE_PYTHON, then build/probe-venv beside shardlint, then python3", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  // The CLI uses the variable without --python: the fake answers the torch check with its synthetic torch.
  CliResult r = runShardlint("probe --format json fixtures/python/SL101_alias.py", dir.path() / "err.txt",
                             "SHARDLINT_PROBE_PYTHON=" + shellQuote(python.string()) + " FAKE_LAUNCH=stale");
  INFO(r.err);
  CHECK(r.err.find("shardlint probe: " + python.string() + ": python ") != std::string::npos);
  // In this process: the variable, else the probe environment next to the test binary's folder, else python3.
  ::setenv("SHARDLINT_PROBE_PYTHON", "/opt/py/bin/python", 1);
  CHECK(shardlint::probe::defaultPython() == "/opt/py/bin/python");
  ::unsetenv("SHARDLINT_PROBE_PYTHON");
  fs::path beside = fs::read_symlink("/proc/self/exe").parent_path() / "probe-venv" / "bin" / "python";
  CHECK(shardlint::probe::defaultPython() == (fs::exists(beside) ? beside.string() : std::string("python3")));
}

TEST_CASE("probe preflight: $SHARDLINT_PREFLIGHT overrides where the preflight is looked for", "[probe]") {
  const char* old = std::getenv("SHARDLINT_PREFLIGHT");
  std::string saved = old ? old : "";
  ::setenv("SHARDLINT_PREFLIGHT", "/opt/elsewhere/shardlint-preflight", 1);
  CHECK(preflightPath() == "/opt/elsewhere/shardlint-preflight");
  if (old)
    ::setenv("SHARDLINT_PREFLIGHT", saved.c_str(), 1);
  else
    ::unsetenv("SHARDLINT_PREFLIGHT");
  CHECK(preflightPath() != "/opt/elsewhere/shardlint-preflight");
}

// `--mode cxx`: the verdict from the report the preloaded library writes (runtime_probe/cxx).
TEST_CASE("probe: C++ verdicts from the probe library's report", "[probe][cxx]") {
  using shardlint::probe::cxxVerdict;
  using shardlint::probe::Verdict;
  auto param = [](const char* name, bool after, bool optimized, bool grad, bool moved) {
    return std::string("{\"name\": \"") + name + "\", \"module\": \"Net\", \"after_optimizer\": " +
           (after ? "true" : "false") + ", \"optimized\": " + (optimized ? "true" : "false") +
           ", \"requires_grad\": true, \"has_grad\": " + (grad ? "true" : "false") + ", \"moved\": " +
           (moved ? "true" : "false") + "}";
  };
  auto report = [](int groups, const std::vector<std::string>& params) {
    std::string out = "{\"param_groups\": " + std::to_string(groups) + ", \"parameters\": [";
    for (size_t i = 0; i < params.size(); ++i) out += (i ? "," : "") + params[i];
    return out + "]}";
  };
  auto late = cxxVerdict(report(1, {param("w", false, true, true, true), param("head", true, false, true, false)}));
  CHECK(late.verdict == Verdict::Confirmed);
  CHECK(late.evidence.find("Net.head") != std::string::npos);
  CHECK(late.evidence.find("1 of 1 optimized parameters moved") != std::string::npos);
  // Everything registered late was added to the optimizer (add_param_group, or a new optimizer).
  CHECK(cxxVerdict(report(2, {param("w", false, true, true, true), param("head", true, true, true, true)})).verdict ==
        Verdict::NotReproduced);
  // No optimizer at all; late parameters that never got a gradient; a gradient but no step.
  CHECK(cxxVerdict(report(0, {param("w", false, false, true, false)})).verdict == Verdict::NotReached);
  CHECK(cxxVerdict(report(1, {param("w", false, true, true, true), param("head", true, false, false, false)})).verdict ==
        Verdict::NotReached);
  CHECK(cxxVerdict(report(1, {param("w", false, true, true, false), param("head", true, false, true, false)})).verdict ==
        Verdict::NotReached);
  // An optimizer built before any parameter existed (a constructor's initialiser list).
  CHECK(cxxVerdict(report(1, {param("fc", true, false, true, false)})).verdict == Verdict::Confirmed);
  CHECK(cxxVerdict("not json").verdict == Verdict::ProbeError);
}

TEST_CASE("probe self-test: an answer is applied whole; a cached one is reused", "[probe]") {
  TorchInfo t;
  // One JSON line, as the self-test prints it (after whatever torch printed first).
  applyCpuSelfTest("a warning first\n"
                   R"({"fsdp2": true, "fsdp1": true, "fsdp1_orig": true, "fsdp1_flat": "RuntimeError: x", )"
                   R"("accelerate_fsdp2": true, "notes": ["switched"]})",
                   t);
  CHECK(t.cpuFsdp2.value_or(false));
  CHECK(t.cpuFsdp1.value_or(false));
  CHECK(t.cpuChecks["fsdp1_flat"] == "RuntimeError: x");
  CHECK(t.cpuChecks["accelerate_fsdp2"].empty());
  CHECK(t.cpuNotes == std::vector<std::string>{"switched"});
  TorchInfo none;
  applyCpuSelfTest("no json here", none);
  CHECK_FALSE(none.cpuFsdp2.value_or(true));
  CHECK_FALSE(none.cpuFsdpError.empty());

  // The stand-in python answers the self-test once; the second command reads the cache and says so.
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  fs::path cache = dir.path() / "cache";
  std::string base = "probe --timeout 20 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py";
  std::string env = "FAKE_LAUNCH=stale SHARDLINT_CACHE_DIR=" + shellQuote(cache.string());
  CliResult first = runShardlint(base, dir.path() / "err.txt", env);
  INFO(first.err);
  CHECK(first.err.find("is cached") == std::string::npos);
  CliResult second = runShardlint(base, dir.path() / "err.txt", env);
  INFO(second.err);
  CHECK(second.err.find("the CPU self-test's answer for this interpreter is cached") != std::string::npos);
  CHECK(second.code == first.code);
  CliResult fresh = runShardlint(base + " --no-cache", dir.path() / "err.txt", env);
  CHECK(fresh.err.find("is cached") == std::string::npos);
}

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

namespace {
// The controls of `code` a path gives (a file or a project folder).
std::vector<Diagnostic> controlsOf(const std::string& path, const std::string& code) {
  LintOptions o;
  o.controls = std::make_shared<ControlSink>();
  CHECK(lintProject(path, o).empty());  // only _ok inputs here
  std::vector<Diagnostic> out;
  for (auto& c : o.controls->take())
    if (c.code == code) out.push_back(std::move(c));
  return out;
}
}  // namespace

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
  // no_fsdp (fsdp="") and fsdp_trainer_builds_its_own (no optimizers=); the arguments from the command line
  // and the test expecting the error are not controls, nor is the subclass (SL202 does not follow Trainer
  // subclasses' constructions).
  CHECK(kinds == std::set<std::string>{"trainer-prebuilt-optimizer/off", "trainer-builds-optimizer/args"});
  CHECK(trainer.size() == 2);
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
