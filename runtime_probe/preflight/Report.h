// The verdict of `shardlint-preflight`: checking the device's results against the
// float64 reference, the exit code, and the text and JSON reports. Plain C++.
#pragma once
#include <string>
#include <vector>

#include "preflight/Device.h"
#include "preflight/Reference.h"

namespace shardlint::probe::preflight {

enum class Status { Ok, Mismatch, DeviceError, NoDevice, Usage };

// 0 ok, 1 numerical mismatch, 2 CUDA/NCCL error (or the watchdog fired), 3 no CUDA device, 4 usage error.
int exitCodeFor(Status s);
// "ok" | "mismatch" | "error" | "no_gpu" | "usage"
const char* statusName(Status s);

struct CheckResult {
  std::string name;  // "all_gather" | "gradient" | "adam_m" | "adam_v" | "params"
  Tolerance tol;
  Comparison cmp;
};

struct BandwidthResult {
  std::string collective;
  double bytes = 0;
  int iters = 0;
  double seconds = 0;  // per collective
  double algbwGBs = 0, busbwGBs = 0;
};

struct Report {
  Status status = Status::DeviceError;
  std::string message;  // one line; empty when ok
  DeviceQuery query;
  int ncclVersion = 0;
  std::vector<DeviceInfo> devices;
  int worldSize = 0;
  ShardLayout layout;
  std::uint64_t seed = 0;
  AdamParams adam;
  std::vector<CheckResult> checks;
  std::vector<BandwidthResult> bandwidth;
  double elapsedSeconds = 0;
};

// The checks of one run: every rank's all-gathered vector equals the parameters (and
// zero padding) exactly; the averaged gradient, m, v and the updated parameters are
// within `tol` of the reference.
std::vector<CheckResult> checkRun(const Problem& p, const ShardLayout& layout, const ReferenceStep& ref,
                                  const DeviceRunResult& run, Tolerance tol = {});
BandwidthResult bandwidthOf(const CollectiveTiming& t, int worldSize);
// Ok when every check passed (and there is at least one), Mismatch otherwise.
Status statusOf(const std::vector<CheckResult>& checks);

// "2.28.9" from ncclGetVersion's code (major*10000 + minor*100 + patch since 2.9,
// major*1000 + minor*100 + patch before); "13.0" from a CUDA version code.
std::string ncclVersionString(int code);
std::string cudaVersionString(int code);

std::string formatText(const Report& r);
std::string formatJson(const Report& r);  // one JSON object, pretty-printed, trailing newline

}  // namespace shardlint::probe::preflight
