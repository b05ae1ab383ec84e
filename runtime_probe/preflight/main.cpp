// shardlint-preflight: checks that the visible GPUs and NCCL can carry one real
// sharded training step before any Python is launched. See README.md here.
//
// Exit codes: 0 ok, 1 numerical mismatch, 2 CUDA/NCCL error or timeout, 3 no CUDA
// device, 4 usage error.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "preflight/Device.h"
#include "preflight/Reference.h"
#include "preflight/Report.h"

using namespace shardlint::probe::preflight;

namespace {

const char* const kUsage =
    "usage: shardlint-preflight [--json] [--devices N] [--numel N] [--bench-mib N] [--iters N]\n"
    "                           [--seed N] [--timeout SECONDS]\n"
    "\n"
    "Runs one sharded training step (all-gather, gradient, reduce-scatter, Adam) on every\n"
    "visible GPU, one rank each, over NCCL; compares it with a float64 CPU reference and\n"
    "reports all-gather and reduce-scatter bus bandwidth.\n"
    "\n"
    "  --json            print one JSON object on stdout instead of the text report\n"
    "  --devices N       use only the first N visible devices (default: all)\n"
    "  --numel N         parameters in the checked step (default 1000003, a prime: uneven shards)\n"
    "  --bench-mib N     vector size of the timed collectives in MiB (default 64; 0 skips timing)\n"
    "  --iters N         timed iterations per collective (default 5, after 2 warm-up ones)\n"
    "  --seed N          seed of the deterministic data (default fixed)\n"
    "  --timeout S       give up with exit code 2 after S seconds (default 120; 0: never)\n"
    "\n"
    "exit codes: 0 ok, 1 numerical mismatch, 2 CUDA/NCCL error or timeout, 3 no CUDA device,\n"
    "4 usage error\n";

char gTimeoutText[256];
std::size_t gTimeoutLen = 0;
char gTimeoutJson[256];
std::size_t gTimeoutJsonLen = 0;
bool gJson = false;

extern "C" void onAlarm(int) {
  // async-signal-safe: write() and _exit() only.
  if (gJson && gTimeoutJsonLen) (void)!write(STDOUT_FILENO, gTimeoutJson, gTimeoutJsonLen);
  if (gTimeoutLen) (void)!write(STDERR_FILENO, gTimeoutText, gTimeoutLen);
  _exit(2);
}

bool parseCount(const char* s, unsigned long long& out) {
  if (!s || !*s || *s == '-') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(s, &end, 10);
  return errno == 0 && end && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  const auto t0 = std::chrono::steady_clock::now();
  bool json = false;
  long long devicesWanted = -1;
  unsigned long long numel = 1000003, benchMiB = 64, iters = 5, timeoutS = 120;
  unsigned long long seed = 0x5eed5a4d11a7ULL;

  Report report;
  report.seed = seed;
  auto usageError = [&](const std::string& msg) {
    std::fprintf(stderr, "shardlint-preflight: %s\n%s", msg.c_str(), kUsage);
    if (json) {
      report.status = Status::Usage;
      report.message = msg;
      std::fputs(formatJson(report).c_str(), stdout);
    }
    return exitCodeFor(Status::Usage);
  };
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) json = true;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](unsigned long long& out) {
      if (i + 1 >= argc || !parseCount(argv[i + 1], out)) return false;
      ++i;
      return true;
    };
    unsigned long long v = 0;
    if (a == "--json") continue;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--devices") {
      if (!value(v) || v < 1) return usageError("--devices takes a positive integer");
      devicesWanted = static_cast<long long>(std::min<unsigned long long>(v, 1u << 20));
    } else if (a == "--numel") {
      if (!value(numel) || numel < 1 || numel > (1ull << 28)) return usageError("--numel takes an integer in [1, 2^28]");
    } else if (a == "--bench-mib") {
      if (!value(benchMiB) || benchMiB > 16384) return usageError("--bench-mib takes an integer in [0, 16384]");
    } else if (a == "--iters") {
      if (!value(iters) || iters < 1 || iters > 10000) return usageError("--iters takes an integer in [1, 10000]");
    } else if (a == "--seed") {
      if (!value(seed)) return usageError("--seed takes a non-negative integer");
    } else if (a == "--timeout") {
      if (!value(timeoutS) || timeoutS > 86400) return usageError("--timeout takes seconds in [0, 86400]");
    } else {
      return usageError("unknown argument: " + a);
    }
  }
  report.seed = seed;

  // The watchdog: a wedged driver or NCCL transport must not hang the caller.
  gJson = json;
  if (timeoutS > 0) {
    const std::string text =
        "shardlint-preflight: ERROR: timed out after " + std::to_string(timeoutS) + " s (a CUDA/NCCL call hung)\n";
    const std::string js = "{\"tool\": \"shardlint-preflight\", \"status\": \"error\", \"exit_code\": 2, "
                           "\"message\": \"timed out after " +
                           std::to_string(timeoutS) + " s\"}\n";
    gTimeoutLen = std::min(text.size(), sizeof gTimeoutText);
    std::memcpy(gTimeoutText, text.data(), gTimeoutLen);
    gTimeoutJsonLen = std::min(js.size(), sizeof gTimeoutJson);
    std::memcpy(gTimeoutJson, js.data(), gTimeoutJsonLen);
    std::signal(SIGALRM, onAlarm);
    alarm(static_cast<unsigned>(timeoutS));
  }

  auto finish = [&](Status s, const std::string& msg) {
    report.status = s;
    report.message = msg;
    report.elapsedSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool failed = s == Status::NoDevice || s == Status::DeviceError;
    if (json) {
      if (failed) std::fprintf(stderr, "shardlint-preflight: %s\n", msg.c_str());
      std::fputs(formatJson(report).c_str(), stdout);
    } else {
      std::fputs(formatText(report).c_str(), failed ? stderr : stdout);  // the first line carries the message
    }
    std::fflush(stdout);
    return exitCodeFor(s);
  };

  try {
    report.query = queryDevices();
    if (!report.query.error.empty()) return finish(Status::NoDevice, "no CUDA device: " + report.query.error);
    if (report.query.count <= 0) return finish(Status::NoDevice, "no CUDA device: cudaGetDeviceCount found 0 devices");
    const int world = devicesWanted > 0 ? static_cast<int>(std::min<long long>(devicesWanted, report.query.count))
                                        : report.query.count;

    const AdamParams adam;
    report.adam = adam;
    report.worldSize = world;
    const Problem problem = makeProblem(numel, world, seed);
    report.layout = shardLayout(numel, world);

    DeviceRunConfig cfg;
    cfg.worldSize = world;
    cfg.adam = adamScalars(adam, 1);
    cfg.benchBytes = static_cast<std::size_t>(benchMiB) << 20;
    cfg.benchIters = static_cast<int>(iters);
    DeviceRunResult run;
    try {
      run = runDeviceStep(problem, report.layout, cfg);
    } catch (const DeviceError& e) {
      return finish(Status::DeviceError, e.what());
    }
    report.devices = run.devices;
    report.ncclVersion = run.ncclVersion;

    const ReferenceStep ref = referenceStep(problem, adam);
    report.checks = checkRun(problem, report.layout, ref, run);
    for (const auto& t : run.timings) report.bandwidth.push_back(bandwidthOf(t, world));
    const Status s = statusOf(report.checks);
    return finish(s, s == Status::Ok ? "" : "the sharded step does not match the float64 reference");
  } catch (const std::exception& e) {
    return finish(Status::DeviceError, std::string("internal error: ") + e.what());
  }
}
