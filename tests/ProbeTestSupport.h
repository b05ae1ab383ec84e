// Helpers shared by the probe's test files (test_probe*.cpp): fixtures linted, synthetic rank
// reports and run outcomes, waiting for killed processes, running the shardlint binary, and a
// stand-in `python` for the command's tests.
//
// The RankReport values these tests build are SYNTHETIC unit inputs written for the tests; they are
// not recorded from real runs (recorded reports live under fixtures/probe/, written by
// runtime_probe/gpu_check.sh).
#pragma once
#include <signal.h>
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
#include "TestSupport.h"

namespace shardlint::testing::probe_tests {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint;
using namespace shardlint::probe;
using shardlint::testing::shellQuote;

struct ProbeTempDir : shardlint::testing::TempDir {
  ProbeTempDir() : TempDir("shardlint-probe-test-") {}
};

inline std::string fixture(const std::string& name) { return std::string(SHARDLINT_SOURCE_DIR) + "/fixtures/python/" + name; }

inline std::vector<Diagnostic> lint(const std::string& path) {
  static Linter linter(rules::catalog(), {});
  return linter.lintPath(path);
}

// A project fixture (fixtures/projects/NAME), linted as `shardlint check` lints a folder.
inline std::string project(const std::string& name) { return std::string(SHARDLINT_SOURCE_DIR) + "/fixtures/projects/" + name; }
inline std::vector<Diagnostic> lintProject(const std::string& dir, LintOptions options = {}) {
  Linter linter(rules::catalog(), std::move(options));
  return linter.lintFiles(discover({dir}).files);
}

// The one finding of `code` in a fixture.
inline Diagnostic findingOf(const std::string& file, const std::string& code) {
  auto diags = lint(fixture(file));
  std::vector<Diagnostic> hits;
  for (auto& d : diags)
    if (d.code == code) hits.push_back(d);
  INFO(file);
  REQUIRE(hits.size() >= 1);
  return hits.front();
}

// A synthetic rank report (unit input, not a recording).
inline RankReport synthetic(int rank, int world, bool reached) {
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

inline RunOutcome outcome(int ranks, const std::string& backend = "gloo") {
  RunOutcome o;
  o.expectedRanks = ranks;
  o.worldSize = ranks;
  o.backend = backend;
  o.seconds = 4.25;
  o.timeoutSeconds = 60;
  o.torchVersion = "2.11.0";
  return o;
}

inline bool processGoneNow(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  // A zombie nobody reaped yet (PID 1 in a container may not reap) is gone too.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] == 'Z';
}

inline bool groupGoneNow(pid_t pgid) {
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
inline bool gone(const std::function<bool()>& now) {
  for (int i = 0; i < 500; ++i) {
    if (now()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return now();
}
inline bool processGone(pid_t pid) { return gone([&] { return processGoneNow(pid); }); }
inline bool groupGone(pid_t pgid) { return gone([&] { return groupGoneNow(pgid); }); }

struct CliResult {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

inline CliResult runShardlint(const std::string& args, const fs::path& errFile, const std::string& env = "") {
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
inline const char* const kFakePython = R"SH(#!/bin/sh
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

// The controls of `code` a path gives (a file or a project folder).
inline std::vector<Diagnostic> controlsOf(const std::string& path, const std::string& code) {
  LintOptions o;
  o.controls = std::make_shared<ControlSink>();
  CHECK(lintProject(path, o).empty());  // only _ok inputs here
  std::vector<Diagnostic> out;
  for (auto& c : o.controls->take())
    if (c.code == code) out.push_back(std::move(c));
  return out;
}

}  // namespace shardlint::testing::probe_tests
