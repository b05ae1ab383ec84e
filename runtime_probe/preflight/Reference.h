// The CPU side of the native preflight (`shardlint-preflight`): shard arithmetic,
// the deterministic toy problem, its float64 reference step, the comparison
// helper and the bus-bandwidth formulas. Pure C++ (no CUDA): the unit tests and
// the preflight binary use this same code.
//
// The toy problem. A parameter vector w of length N is sharded across n ranks.
// Rank r holds its own data (x_r, y_r), both of length N, and the objective is
//
//   L(w)   = (1/n) * sum_r L_r(w)
//   L_r(w) = 0.5 * sum_i (w_i * x_{r,i} - y_{r,i})^2
//
// so the exact gradients are
//
//   g_{r,i} = dL_r/dw_i = (w_i * x_{r,i} - y_{r,i}) * x_{r,i}     (each rank, on its own data)
//   g_i     = dL/dw_i   = (1/n) * sum_r g_{r,i}                    (sum reduce-scatter, then scale 1/n)
//
// followed by one Adam step (PyTorch's torch.optim.Adam without weight decay):
//
//   m_t = beta1 * m_{t-1} + (1 - beta1) * g
//   v_t = beta2 * v_{t-1} + (1 - beta2) * g^2
//   w_t = w_{t-1} - lr * (m_t / (1 - beta1^t)) / (sqrt(v_t / (1 - beta2^t)) + eps)
//
// The data is built so that every residual w_i * x_{r,i} - y_{r,i} has the same sign
// s_i on every rank and a magnitude in [0.25, 1] (x in [0.5, 1.5]), so |g_i| >= 0.125:
// no cancellation, and Adam's g / (|g| + eps) is far from its ill-conditioned point
// g = 0, which keeps the float32 device result within a small relative error of the
// float64 reference. At step 1 Adam's update is nearly lr * sign(g), blind to the
// gradient's scale, so the preflight also compares the averaged gradient and the
// moments m and v, which are not.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardlint::probe::preflight {

// ---- shard arithmetic (FSDP-style flat sharding with padding) ----

// A flat vector of `numel` elements split across `worldSize` ranks: every rank
// holds `shardSize = ceil(numel / worldSize)` elements (at least 1 when numel > 0),
// the vector is zero-padded to `paddedNumel = shardSize * worldSize`, rank r's
// shard starts at `offsets[r] = r * shardSize`, and `validLengths[r]` of its
// elements are real (the rest are padding; a trailing rank may hold only padding
// when numel < worldSize or the split is very uneven).
struct ShardLayout {
  std::size_t numel = 0;
  int worldSize = 1;
  std::size_t shardSize = 0;
  std::size_t paddedNumel = 0;
  std::vector<std::size_t> offsets;       // size worldSize
  std::vector<std::size_t> validLengths;  // size worldSize; sums to numel
  std::size_t padding() const { return paddedNumel - numel; }
};

// Throws std::invalid_argument when worldSize < 1.
ShardLayout shardLayout(std::size_t numel, int worldSize);

// ---- deterministic initialiser ----

// A counter-based generator (splitmix64): the value depends only on (seed, stream,
// index), never on call order, so any rank or thread can produce any element.
std::uint64_t mix64(std::uint64_t z);
double uniformAt(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);  // in [0, 1)

// The problem's inputs, stored as float32 exactly as the device sees them; the
// reference promotes these same values to double.
struct Problem {
  std::size_t numel = 0;
  int worldSize = 1;
  std::uint64_t seed = 0;
  std::vector<float> params;               // w, numel values in [-1, 1]
  std::vector<std::vector<float>> x, y;    // [rank][i], numel values each
};

// Throws std::invalid_argument when worldSize < 1.
Problem makeProblem(std::size_t numel, int worldSize, std::uint64_t seed = 0x5eed5a4d11a7ULL);

// ---- the float64 reference ----

// Rank r's gradient g_r on its own data, at parameters w (double).
std::vector<double> localGradient(const Problem& p, int rank, const std::vector<double>& w);
// The averaged gradient (1/n) * sum_r g_r at parameters w.
std::vector<double> averagedGradient(const Problem& p, const std::vector<double>& w);
// The objective L(w) defined above (used by the finite-difference test).
double objective(const Problem& p, const std::vector<double>& w);
// The problem's float32 parameters as double.
std::vector<double> initialParams(const Problem& p);

struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// The per-step constants of the update, computed once in double (the device gets
// them rounded to float; computing 1 - beta2 in float would cost ~3e-5 relative).
struct AdamScalars {
  double lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, biasCorrection1, biasCorrection2, eps;
};
AdamScalars adamScalars(const AdamParams& a, int step);  // step >= 1

// Adam moments; empty vectors mean zero (the state before step 1).
struct AdamState {
  std::vector<double> m, v;
  int step = 0;
};

// One Adam step on the full vector: advances state.step, updates m, v and w in place.
// Throws std::invalid_argument when the sizes disagree.
void adamStep(std::vector<double>& w, const std::vector<double>& g, AdamState& state, const AdamParams& a);

// The whole reference step: all-gather (the identity on the full vector), the
// averaged gradient, one Adam step from zero moments.
struct ReferenceStep {
  std::vector<double> grad, m, v, params;  // numel each, after the step
};
ReferenceStep referenceStep(const Problem& p, const AdamParams& a);

// ---- comparing a float32 result with the float64 reference ----

// An element passes when |got - want| <= abs + rel * |want|; NaN or Inf never passes.
// The default bound is 1e-5 relative + 1e-6 absolute: the device computes in float32
// (unit roundoff 6e-8) and the steps above accumulate at most a few tens of roundings
// relative to |g| >= 0.125, so a correct run stays ~10x inside it, while a missing
// 1/n scale, a wrong shard offset or a skipped update is off by orders of magnitude.
struct Tolerance {
  double rel = 1e-5;
  double abs = 1e-6;
};

struct Comparison {
  std::size_t count = 0;       // elements compared
  std::size_t mismatches = 0;  // elements outside the bound (or a size mismatch: all of them)
  bool sizeMismatch = false;
  std::size_t worstIndex = 0;  // the element with the largest error / allowed ratio
  double worstGot = 0, worstWant = 0;
  double maxAbsError = 0;      // max |got - want|
  double maxRelError = 0;      // max |got - want| / |want| over elements with want != 0
  double worstRatio = 0;       // max |got - want| / (abs + rel * |want|); <= 1 passes
  bool ok() const { return !sizeMismatch && mismatches == 0; }
};

Comparison compareToReference(const float* got, std::size_t gotSize, const std::vector<double>& want,
                              Tolerance tol = {});
inline Comparison compareToReference(const std::vector<float>& got, const std::vector<double>& want,
                                     Tolerance tol = {}) {
  return compareToReference(got.data(), got.size(), want, tol);
}

// ---- bus bandwidth (the NCCL-tests convention) ----

// algbw = bytes / seconds, in GB/s (1e9 bytes). `bytes` is the full vector: the
// output of an all-gather, the input of a reduce-scatter.
double algBandwidthGBs(double bytes, double seconds);
// all-gather and reduce-scatter move (n-1)/n of the vector over each rank's link:
// busbw = algbw * (n-1)/n (0 for one rank).
double allGatherBusBandwidth(double algbwGBs, int worldSize);
double reduceScatterBusBandwidth(double algbwGBs, int worldSize);
// all-reduce: busbw = algbw * 2(n-1)/n.
double allReduceBusBandwidth(double algbwGBs, int worldSize);

}  // namespace shardlint::probe::preflight
