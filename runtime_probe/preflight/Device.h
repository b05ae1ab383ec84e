// The interface between the host side of `shardlint-preflight` (plain C++) and its
// CUDA/NCCL part (preflight.cu). No CUDA types cross it, so the report code and the
// unit tests build without a CUDA compiler.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "preflight/Reference.h"

namespace shardlint::probe::preflight {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int ccMajor = 0, ccMinor = 0;
  std::size_t memoryBytes = 0;
  std::string pciBusId;
};

// cudaGetDeviceCount and the versions. `error` is set when the call failed (no
// driver, no device, a broken installation); then count is 0.
struct DeviceQuery {
  int count = 0;
  std::string error;
  int runtimeVersion = 0;  // cudaRuntimeGetVersion, e.g. 13000
  int driverVersion = 0;   // cudaDriverGetVersion (0 without a driver)
};

struct DeviceRunConfig {
  int worldSize = 1;                        // devices 0..worldSize-1, one rank each
  AdamScalars adam{};                       // the step's constants (rounded to float on the device)
  std::size_t benchBytes = 64u << 20;       // the full vector of the timed collectives
  int warmupIters = 2;
  int benchIters = 5;
};

// Seconds per collective: the slowest rank's cudaEvent time over `iters` launches, divided by iters.
struct CollectiveTiming {
  std::string collective;  // "all_gather" | "reduce_scatter"
  double bytes = 0;        // the full vector (all-gather output, reduce-scatter input)
  int iters = 0;
  double seconds = 0;
};

struct DeviceRunResult {
  std::vector<DeviceInfo> devices;           // one per rank
  int ncclVersion = 0;                        // ncclGetVersion, e.g. 22809
  std::vector<std::vector<float>> gathered;  // [rank]: the all-gathered vector, paddedNumel each
  std::vector<float> grad, m, v, params;     // numel each, assembled from the ranks' shards after the step
  std::vector<CollectiveTiming> timings;
};

// A CUDA or NCCL call failed; what() names the call and the error.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

DeviceQuery queryDevices();
// Runs the sharded step of `p` (p.worldSize ranks, laid out by `layout`) and times the
// collectives. Throws DeviceError.
DeviceRunResult runDeviceStep(const Problem& p, const ShardLayout& layout, const DeviceRunConfig& cfg);

}  // namespace shardlint::probe::preflight
