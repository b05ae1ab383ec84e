#include "preflight/Reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace shardlint::probe::preflight {

ShardLayout shardLayout(std::size_t numel, int worldSize) {
  if (worldSize < 1) throw std::invalid_argument("shardLayout: worldSize must be >= 1");
  ShardLayout l;
  l.numel = numel;
  l.worldSize = worldSize;
  const auto n = static_cast<std::size_t>(worldSize);
  l.shardSize = (numel + n - 1) / n;
  l.paddedNumel = l.shardSize * n;
  l.offsets.resize(n);
  l.validLengths.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    l.offsets[r] = r * l.shardSize;
    l.validLengths[r] = l.offsets[r] >= numel ? 0 : std::min(l.shardSize, numel - l.offsets[r]);
  }
  return l;
}

std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double uniformAt(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const std::uint64_t z = mix64(seed ^ mix64(stream * 0xD1B54A32D192ED03ULL + 1) ^ mix64(index));
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

namespace {
enum Stream : std::uint64_t { kParams = 0, kSigns = 1, kFirstRank = 2 };  // rank r: x at 2+2r, residual at 3+2r
}

Problem makeProblem(std::size_t numel, int worldSize, std::uint64_t seed) {
  if (worldSize < 1) throw std::invalid_argument("makeProblem: worldSize must be >= 1");
  Problem p;
  p.numel = numel;
  p.worldSize = worldSize;
  p.seed = seed;
  p.params.resize(numel);
  std::vector<double> sign(numel);
  for (std::size_t i = 0; i < numel; ++i) {
    p.params[i] = static_cast<float>(-1.0 + 2.0 * uniformAt(seed, kParams, i));
    sign[i] = uniformAt(seed, kSigns, i) < 0.5 ? -1.0 : 1.0;
  }
  p.x.assign(worldSize, std::vector<float>(numel));
  p.y.assign(worldSize, std::vector<float>(numel));
  for (int r = 0; r < worldSize; ++r) {
    const std::uint64_t sx = kFirstRank + 2 * static_cast<std::uint64_t>(r), sd = sx + 1;
    for (std::size_t i = 0; i < numel; ++i) {
      const float x = static_cast<float>(0.5 + uniformAt(seed, sx, i));                // [0.5, 1.5]
      const double d = sign[i] * (0.25 + 0.75 * uniformAt(seed, sd, i));              // residual, |d| in [0.25, 1]
      p.x[r][i] = x;
      p.y[r][i] = static_cast<float>(static_cast<double>(p.params[i]) * x - d);
    }
  }
  return p;
}

std::vector<double> initialParams(const Problem& p) { return {p.params.begin(), p.params.end()}; }

std::vector<double> localGradient(const Problem& p, int rank, const std::vector<double>& w) {
  if (rank < 0 || rank >= p.worldSize) throw std::invalid_argument("localGradient: rank out of range");
  if (w.size() != p.numel) throw std::invalid_argument("localGradient: size mismatch");
  const auto& x = p.x[rank];
  const auto& y = p.y[rank];
  std::vector<double> g(p.numel);
  for (std::size_t i = 0; i < p.numel; ++i) {
    const double xi = x[i];
    g[i] = (w[i] * xi - static_cast<double>(y[i])) * xi;
  }
  return g;
}

std::vector<double> averagedGradient(const Problem& p, const std::vector<double>& w) {
  std::vector<double> g(p.numel, 0.0);
  for (int r = 0; r < p.worldSize; ++r) {
    const auto gr = localGradient(p, r, w);
    for (std::size_t i = 0; i < p.numel; ++i) g[i] += gr[i];
  }
  for (auto& v : g) v /= p.worldSize;
  return g;
}

double objective(const Problem& p, const std::vector<double>& w) {
  if (w.size() != p.numel) throw std::invalid_argument("objective: size mismatch");
  double total = 0;
  for (int r = 0; r < p.worldSize; ++r) {
    double lr = 0;
    for (std::size_t i = 0; i < p.numel; ++i) {
      const double res = w[i] * static_cast<double>(p.x[r][i]) - static_cast<double>(p.y[r][i]);
      lr += 0.5 * res * res;
    }
    total += lr;
  }
  return total / p.worldSize;
}

AdamScalars adamScalars(const AdamParams& a, int step) {
  if (step < 1) throw std::invalid_argument("adamScalars: step must be >= 1");
  return AdamScalars{a.lr,
                     a.beta1,
                     a.beta2,
                     1.0 - a.beta1,
                     1.0 - a.beta2,
                     1.0 - std::pow(a.beta1, step),
                     1.0 - std::pow(a.beta2, step),
                     a.eps};
}

void adamStep(std::vector<double>& w, const std::vector<double>& g, AdamState& state, const AdamParams& a) {
  const std::size_t n = w.size();
  if (g.size() != n) throw std::invalid_argument("adamStep: gradient size mismatch");
  if (state.m.empty()) state.m.assign(n, 0.0);
  if (state.v.empty()) state.v.assign(n, 0.0);
  if (state.m.size() != n || state.v.size() != n) throw std::invalid_argument("adamStep: state size mismatch");
  state.step += 1;
  const AdamScalars s = adamScalars(a, state.step);
  for (std::size_t i = 0; i < n; ++i) {
    state.m[i] = s.beta1 * state.m[i] + s.oneMinusBeta1 * g[i];
    state.v[i] = s.beta2 * state.v[i] + s.oneMinusBeta2 * g[i] * g[i];
    const double mHat = state.m[i] / s.biasCorrection1;
    const double vHat = state.v[i] / s.biasCorrection2;
    w[i] -= s.lr * mHat / (std::sqrt(vHat) + s.eps);
  }
}

ReferenceStep referenceStep(const Problem& p, const AdamParams& a) {
  ReferenceStep out;
  out.params = initialParams(p);
  out.grad = averagedGradient(p, out.params);
  AdamState st;
  adamStep(out.params, out.grad, st, a);
  out.m = std::move(st.m);
  out.v = std::move(st.v);
  return out;
}

Comparison compareToReference(const float* got, std::size_t gotSize, const std::vector<double>& want,
                              Tolerance tol) {
  Comparison c;
  c.count = want.size();
  if (gotSize != want.size()) {
    c.sizeMismatch = true;
    c.mismatches = std::max(gotSize, want.size());
    c.worstRatio = std::numeric_limits<double>::infinity();
    return c;
  }
  for (std::size_t i = 0; i < gotSize; ++i) {
    const double g = got[i], w = want[i];
    const double err = std::fabs(g - w);
    const double allowed = tol.abs + tol.rel * std::fabs(w);
    double ratio;
    if (!std::isfinite(g) || !std::isfinite(err)) {
      ratio = std::numeric_limits<double>::infinity();
    } else if (allowed > 0) {
      ratio = err / allowed;
    } else {
      ratio = err == 0 ? 0 : std::numeric_limits<double>::infinity();
    }
    const bool pass = std::isfinite(g) && err <= allowed;
    if (!pass) ++c.mismatches;
    if (std::isfinite(err)) {
      c.maxAbsError = std::max(c.maxAbsError, err);
      if (w != 0) c.maxRelError = std::max(c.maxRelError, err / std::fabs(w));
    } else {
      c.maxAbsError = std::numeric_limits<double>::infinity();
    }
    if (i == 0 || ratio > c.worstRatio) {
      c.worstRatio = ratio;
      c.worstIndex = i;
      c.worstGot = g;
      c.worstWant = w;
    }
  }
  return c;
}

double algBandwidthGBs(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }

double allGatherBusBandwidth(double algbwGBs, int worldSize) {
  return worldSize < 1 ? 0.0 : algbwGBs * (worldSize - 1) / worldSize;
}

double reduceScatterBusBandwidth(double algbwGBs, int worldSize) {
  return worldSize < 1 ? 0.0 : algbwGBs * (worldSize - 1) / worldSize;
}

double allReduceBusBandwidth(double algbwGBs, int worldSize) {
  return worldSize < 1 ? 0.0 : algbwGBs * 2.0 * (worldSize - 1) / worldSize;
}

}  // namespace shardlint::probe::preflight
