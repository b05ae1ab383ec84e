// The CUDA/NCCL part of `shardlint-preflight`: one process drives every rank's GPU
// (ncclCommInitAll), runs one FSDP-style sharded step (all-gather, local gradient,
// reduce-scatter, sharded Adam) and times the two collectives. The host side
// (main.cpp, Report.cpp) checks the results against the float64 reference.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "preflight/Device.h"

namespace shardlint::probe::preflight {
namespace {

#define PF_CUDA(expr)                                                                                \
  do {                                                                                               \
    const cudaError_t pf_err = (expr);                                                               \
    if (pf_err != cudaSuccess)                                                                       \
      throw DeviceError(std::string(#expr) + ": " + cudaGetErrorName(pf_err) + ": " +               \
                        cudaGetErrorString(pf_err));                                                 \
  } while (0)

#define PF_NCCL(expr)                                                                                \
  do {                                                                                               \
    const ncclResult_t pf_res = (expr);                                                              \
    if (pf_res != ncclSuccess) {                                                                     \
      std::string pf_msg = std::string(#expr) + ": " + ncclGetErrorString(pf_res);                   \
      const char* pf_last = ncclGetLastError(nullptr);                                               \
      if (pf_last && *pf_last) pf_msg += std::string(" (") + pf_last + ")";                          \
      throw DeviceError(pf_msg);                                                                     \
    }                                                                                                \
  } while (0)

// g[i] = (w[i] * x[i] - y[i]) * x[i]: rank r's gradient on its own data; padding has x = y = 0.
__global__ void localGradientKernel(const float* __restrict__ w, const float* __restrict__ x,
                                    const float* __restrict__ y, float* __restrict__ g, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float xi = x[i];
    g[i] = (w[i] * xi - y[i]) * xi;
  }
}

struct AdamF {
  float lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, biasCorrection1, biasCorrection2, eps, worldSize;
};

// The sharded Adam step on one rank's shard: the reduce-scattered sum divided by the world
// size is the averaged gradient (written back for the check), then m, v and w as in Reference.h.
__global__ void adamKernel(float* __restrict__ w, float* __restrict__ g, float* __restrict__ m,
                           float* __restrict__ v, std::size_t n, AdamF s) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i] / s.worldSize;
    g[i] = gi;
    const float mi = s.beta1 * m[i] + s.oneMinusBeta1 * gi;
    const float vi = s.beta2 * v[i] + s.oneMinusBeta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float mHat = mi / s.biasCorrection1;
    const float vHat = vi / s.biasCorrection2;
    w[i] -= s.lr * mHat / (sqrtf(vHat) + s.eps);
  }
}

unsigned blocksFor(std::size_t n) {
  return static_cast<unsigned>(std::clamp<std::size_t>((n + 255) / 256, 1, 4096));
}

// Per-rank resources; the destructor releases them on every path (aborting the
// communicators when the run failed, so that teardown cannot hang).
struct Ranks {
  int n = 0;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<std::vector<void*>> buffers;
  std::vector<cudaEvent_t> startEvents, stopEvents;
  bool ok = false;

  float* alloc(int r, std::size_t count) {
    void* p = nullptr;
    PF_CUDA(cudaSetDevice(r));
    PF_CUDA(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(float)));
    buffers[r].push_back(p);
    PF_CUDA(cudaMemsetAsync(p, 0, std::max<std::size_t>(count, 1) * sizeof(float), streams[r]));
    return static_cast<float*>(p);
  }

  void synchronize() {
    for (int r = 0; r < n; ++r) {
      PF_CUDA(cudaSetDevice(r));
      PF_CUDA(cudaStreamSynchronize(streams[r]));
    }
    for (int r = 0; r < n; ++r) {
      ncclResult_t async = ncclSuccess;
      PF_NCCL(ncclCommGetAsyncError(comms[r], &async));
      PF_NCCL(async);
    }
  }

  ~Ranks() {
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(r);
      if (r < static_cast<int>(comms.size()) && comms[r]) {
        if (ok) ncclCommDestroy(comms[r]);
        else ncclCommAbort(comms[r]);
      }
      for (void* p : buffers[r]) cudaFree(p);
      if (r < static_cast<int>(startEvents.size()) && startEvents[r]) cudaEventDestroy(startEvents[r]);
      if (r < static_cast<int>(stopEvents.size()) && stopEvents[r]) cudaEventDestroy(stopEvents[r]);
      if (r < static_cast<int>(streams.size()) && streams[r]) cudaStreamDestroy(streams[r]);
    }
  }
};

// Launches `launch(r)` for every rank inside one NCCL group (required when one thread
// drives several ranks), `warmup` times untimed, then `iters` times between cudaEvents
// on every rank's stream. Returns seconds per launch on the slowest rank.
template <class Launch>
double timeCollective(Ranks& R, int warmup, int iters, Launch launch) {
  for (int it = 0; it < warmup; ++it) {
    PF_NCCL(ncclGroupStart());
    for (int r = 0; r < R.n; ++r) launch(r);
    PF_NCCL(ncclGroupEnd());
  }
  R.synchronize();
  for (int r = 0; r < R.n; ++r) {
    PF_CUDA(cudaSetDevice(r));
    PF_CUDA(cudaEventRecord(R.startEvents[r], R.streams[r]));
  }
  for (int it = 0; it < iters; ++it) {
    PF_NCCL(ncclGroupStart());
    for (int r = 0; r < R.n; ++r) launch(r);
    PF_NCCL(ncclGroupEnd());
  }
  for (int r = 0; r < R.n; ++r) {
    PF_CUDA(cudaSetDevice(r));
    PF_CUDA(cudaEventRecord(R.stopEvents[r], R.streams[r]));
  }
  R.synchronize();
  float worstMs = 0;
  for (int r = 0; r < R.n; ++r) {
    float ms = 0;
    PF_CUDA(cudaEventElapsedTime(&ms, R.startEvents[r], R.stopEvents[r]));
    worstMs = std::max(worstMs, ms);
  }
  return static_cast<double>(worstMs) / 1e3 / std::max(iters, 1);
}

}  // namespace

DeviceQuery queryDevices() {
  DeviceQuery q;
  cudaRuntimeGetVersion(&q.runtimeVersion);
  if (cudaDriverGetVersion(&q.driverVersion) != cudaSuccess) q.driverVersion = 0;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    q.error = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    q.count = 0;
    cudaGetLastError();  // clear the sticky error
  } else {
    q.count = count;
  }
  return q;
}

DeviceRunResult runDeviceStep(const Problem& p, const ShardLayout& L, const DeviceRunConfig& cfg) {
  const int n = cfg.worldSize;
  if (n < 1 || p.worldSize != n || L.worldSize != n || L.numel != p.numel)
    throw DeviceError("runDeviceStep: the problem, the layout and the world size disagree");
  DeviceRunResult out;

  // ---- devices and communicators ----
  for (int r = 0; r < n; ++r) {
    cudaDeviceProp prop{};
    PF_CUDA(cudaGetDeviceProperties(&prop, r));
    char bus[64] = {0};
    PF_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, r));
    out.devices.push_back(DeviceInfo{r, prop.name, prop.major, prop.minor, prop.totalGlobalMem, bus});
  }
  PF_NCCL(ncclGetVersion(&out.ncclVersion));

  Ranks R;
  R.n = n;
  R.buffers.resize(n);
  R.comms.assign(n, nullptr);
  R.streams.assign(n, nullptr);
  R.startEvents.assign(n, nullptr);
  R.stopEvents.assign(n, nullptr);
  std::vector<int> devs(n);
  for (int r = 0; r < n; ++r) devs[r] = r;
  PF_NCCL(ncclCommInitAll(R.comms.data(), n, devs.data()));
  for (int r = 0; r < n; ++r) {
    PF_CUDA(cudaSetDevice(r));
    PF_CUDA(cudaStreamCreateWithFlags(&R.streams[r], cudaStreamNonBlocking));
    PF_CUDA(cudaEventCreate(&R.startEvents[r]));
    PF_CUDA(cudaEventCreate(&R.stopEvents[r]));
  }

  // ---- the sharded step ----
  const std::size_t S = L.shardSize, P = L.paddedNumel;
  struct Bufs {
    float *paramShard, *paramFull, *x, *y, *gradFull, *gradShard, *m, *v;
  };
  std::vector<Bufs> B(n);
  for (int r = 0; r < n; ++r) {
    B[r] = Bufs{R.alloc(r, S), R.alloc(r, P), R.alloc(r, P), R.alloc(r, P),
                R.alloc(r, P), R.alloc(r, S), R.alloc(r, S), R.alloc(r, S)};
    // Buffers are zeroed; copy the real elements (padding stays 0: w = x = y = 0 there).
    if (L.validLengths[r] > 0)
      PF_CUDA(cudaMemcpyAsync(B[r].paramShard, p.params.data() + L.offsets[r], L.validLengths[r] * sizeof(float),
                              cudaMemcpyHostToDevice, R.streams[r]));
    if (p.numel > 0) {
      PF_CUDA(cudaMemcpyAsync(B[r].x, p.x[r].data(), p.numel * sizeof(float), cudaMemcpyHostToDevice, R.streams[r]));
      PF_CUDA(cudaMemcpyAsync(B[r].y, p.y[r].data(), p.numel * sizeof(float), cudaMemcpyHostToDevice, R.streams[r]));
    }
  }
  R.synchronize();  // the host vectors must outlive the copies

  // 1. all-gather the parameter shards into the full vector on every rank.
  PF_NCCL(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    PF_NCCL(ncclAllGather(B[r].paramShard, B[r].paramFull, S, ncclFloat, R.comms[r], R.streams[r]));
  PF_NCCL(ncclGroupEnd());
  // 2. each rank's gradient on its own data, over the full (padded) vector.
  for (int r = 0; r < n; ++r) {
    PF_CUDA(cudaSetDevice(r));
    localGradientKernel<<<blocksFor(P), 256, 0, R.streams[r]>>>(B[r].paramFull, B[r].x, B[r].y, B[r].gradFull, P);
    PF_CUDA(cudaGetLastError());
  }
  // 3. reduce-scatter (sum) the gradients into the shards.
  PF_NCCL(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    PF_NCCL(ncclReduceScatter(B[r].gradFull, B[r].gradShard, S, ncclFloat, ncclSum, R.comms[r], R.streams[r]));
  PF_NCCL(ncclGroupEnd());
  // 4. scale by 1/n and the Adam step on each rank's real elements.
  const AdamScalars& a = cfg.adam;
  const AdamF af{static_cast<float>(a.lr),
                 static_cast<float>(a.beta1),
                 static_cast<float>(a.beta2),
                 static_cast<float>(a.oneMinusBeta1),
                 static_cast<float>(a.oneMinusBeta2),
                 static_cast<float>(a.biasCorrection1),
                 static_cast<float>(a.biasCorrection2),
                 static_cast<float>(a.eps),
                 static_cast<float>(n)};
  for (int r = 0; r < n; ++r) {
    if (L.validLengths[r] == 0) continue;
    PF_CUDA(cudaSetDevice(r));
    adamKernel<<<blocksFor(L.validLengths[r]), 256, 0, R.streams[r]>>>(B[r].paramShard, B[r].gradShard, B[r].m,
                                                                        B[r].v, L.validLengths[r], af);
    PF_CUDA(cudaGetLastError());
  }
  R.synchronize();

  // 5. copy back.
  out.gathered.assign(n, std::vector<float>(P));
  out.grad.assign(p.numel, 0.f);
  out.m.assign(p.numel, 0.f);
  out.v.assign(p.numel, 0.f);
  out.params.assign(p.numel, 0.f);
  for (int r = 0; r < n; ++r) {
    PF_CUDA(cudaSetDevice(r));
    if (P > 0) PF_CUDA(cudaMemcpy(out.gathered[r].data(), B[r].paramFull, P * sizeof(float), cudaMemcpyDeviceToHost));
    const std::size_t off = L.offsets[r], len = L.validLengths[r];
    if (len == 0) continue;
    PF_CUDA(cudaMemcpy(out.grad.data() + off, B[r].gradShard, len * sizeof(float), cudaMemcpyDeviceToHost));
    PF_CUDA(cudaMemcpy(out.m.data() + off, B[r].m, len * sizeof(float), cudaMemcpyDeviceToHost));
    PF_CUDA(cudaMemcpy(out.v.data() + off, B[r].v, len * sizeof(float), cudaMemcpyDeviceToHost));
    PF_CUDA(cudaMemcpy(out.params.data() + off, B[r].paramShard, len * sizeof(float), cudaMemcpyDeviceToHost));
  }

  // ---- bus bandwidth on a larger vector ----
  if (cfg.benchBytes > 0 && cfg.benchIters > 0) {
    const std::size_t chunk = std::max<std::size_t>(cfg.benchBytes / sizeof(float) / n, 1);
    const std::size_t full = chunk * n;
    std::vector<float*> send(n), recv(n);
    for (int r = 0; r < n; ++r) {
      send[r] = R.alloc(r, full);
      recv[r] = R.alloc(r, full);
    }
    const double bytes = static_cast<double>(full * sizeof(float));
    const double ag = timeCollective(R, cfg.warmupIters, cfg.benchIters, [&](int r) {
      PF_NCCL(ncclAllGather(send[r], recv[r], chunk, ncclFloat, R.comms[r], R.streams[r]));
    });
    out.timings.push_back({"all_gather", bytes, cfg.benchIters, ag});
    const double rs = timeCollective(R, cfg.warmupIters, cfg.benchIters, [&](int r) {
      PF_NCCL(ncclReduceScatter(send[r], recv[r], chunk, ncclFloat, ncclSum, R.comms[r], R.streams[r]));
    });
    out.timings.push_back({"reduce_scatter", bytes, cfg.benchIters, rs});
  }

  R.ok = true;
  return out;
}

}  // namespace shardlint::probe::preflight
