// The native preflight's CPU side: shard arithmetic, the deterministic problem, the
// float64 reference step (gradient and Adam), the comparison bound, the bus-bandwidth
// formulas and the report; and, when shardlint-preflight was built, its behaviour on
// a machine without a usable GPU (exit 3 with "no CUDA device: ...").
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "TestSupport.h"
#include "preflight/Device.h"
#include "preflight/Reference.h"
#include "preflight/Report.h"

namespace fs = std::filesystem;
using namespace shardlint::probe::preflight;
using shardlint::testing::readFile;

namespace {

void checkLayoutInvariants(const ShardLayout& l, std::size_t numel, int world) {
  REQUIRE(l.numel == numel);
  REQUIRE(l.worldSize == world);
  REQUIRE(l.offsets.size() == static_cast<std::size_t>(world));
  REQUIRE(l.validLengths.size() == static_cast<std::size_t>(world));
  CHECK(l.shardSize == (numel + world - 1) / world);
  CHECK(l.paddedNumel == l.shardSize * world);
  CHECK(l.paddedNumel >= numel);
  CHECK(l.padding() < static_cast<std::size_t>(world));
  std::size_t total = 0;
  for (int r = 0; r < world; ++r) {
    CHECK(l.offsets[r] == r * l.shardSize);
    CHECK(l.validLengths[r] <= l.shardSize);
    if (l.validLengths[r] > 0) CHECK(l.offsets[r] + l.validLengths[r] <= numel);
    // Only a suffix of ranks is short: every rank before a short one is full.
    if (r > 0 && l.validLengths[r] > 0) CHECK(l.validLengths[r - 1] == l.shardSize);
    total += l.validLengths[r];
  }
  CHECK(total == numel);
}

// The device step emulated in float32 on the CPU, operation by operation as the
// kernels do it (the reduction order is a parameter: NCCL's is unspecified; nvcc
// contracts w * x - y into an FMA by default, so that is one too).
struct FloatStep {
  std::vector<float> grad, m, v, params;
};

FloatStep emulateFloatStep(const Problem& p, const AdamParams& a, bool reverseSum, bool useFma = false,
                           bool forgetScale = false) {
  const AdamScalars s = adamScalars(a, 1);
  const float lr = static_cast<float>(s.lr), b1 = static_cast<float>(s.beta1), b2 = static_cast<float>(s.beta2),
              omb1 = static_cast<float>(s.oneMinusBeta1), omb2 = static_cast<float>(s.oneMinusBeta2),
              bc1 = static_cast<float>(s.biasCorrection1), bc2 = static_cast<float>(s.biasCorrection2),
              eps = static_cast<float>(s.eps), n = static_cast<float>(p.worldSize);
  FloatStep out;
  out.grad.resize(p.numel);
  out.m.resize(p.numel);
  out.v.resize(p.numel);
  out.params = p.params;
  for (std::size_t i = 0; i < p.numel; ++i) {
    float sum = 0;
    for (int k = 0; k < p.worldSize; ++k) {
      const int r = reverseSum ? p.worldSize - 1 - k : k;
      const float w = p.params[i], x = p.x[r][i], y = p.y[r][i];
      sum += (useFma ? std::fma(w, x, -y) : w * x - y) * x;
    }
    const float g = forgetScale ? sum : sum / n;
    const float m = b1 * 0.0f + omb1 * g;
    const float v = b2 * 0.0f + omb2 * g * g;
    out.grad[i] = g;
    out.m[i] = m;
    out.v[i] = v;
    out.params[i] -= lr * (m / bc1) / (std::sqrt(v / bc2) + eps);
  }
  return out;
}

DeviceRunResult fakeRun(const Problem& p, const ShardLayout& l, const FloatStep& f) {
  DeviceRunResult run;
  for (int r = 0; r < l.worldSize; ++r) {
    std::vector<float> g = p.params;
    g.resize(l.paddedNumel, 0.0f);
    run.gathered.push_back(std::move(g));
  }
  run.grad = f.grad;
  run.m = f.m;
  run.v = f.v;
  run.params = f.params;
  return run;
}

struct RunOutput {
  int rc = -1;
  std::string out, err;
};

// Runs the preflight binary under `timeout 60` with the given environment prefix and
// arguments; stdout and stderr are captured separately.
RunOutput runPreflight(const std::string& envPrefix, const std::string& args) {
  const shardlint::testing::TempDir tmp("shardlint-preflight-test-");
  const fs::path& dir = tmp.path();
  const std::string cmd = envPrefix + " timeout 60 '" + std::string(SHARDLINT_PREFLIGHT_PATH) + "' " + args + " >'" +
                          (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int st = std::system(cmd.c_str());
  RunOutput r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = readFile(dir / "out");
  r.err = readFile(dir / "err");
  return r;
}

bool gpuDriverPresent() { return fs::exists("/dev/nvidiactl") || fs::exists("/proc/driver/nvidia/version"); }

}  // namespace

TEST_CASE("shard layout: even split", "[probe][preflight]") {
  const auto l = shardLayout(12, 4);
  checkLayoutInvariants(l, 12, 4);
  CHECK(l.shardSize == 3);
  CHECK(l.paddedNumel == 12);
  CHECK(l.padding() == 0);
  CHECK(l.offsets == std::vector<std::size_t>{0, 3, 6, 9});
  CHECK(l.validLengths == std::vector<std::size_t>{3, 3, 3, 3});
}

TEST_CASE("shard layout: uneven split is padded", "[probe][preflight]") {
  const auto l = shardLayout(10, 4);
  checkLayoutInvariants(l, 10, 4);
  CHECK(l.shardSize == 3);
  CHECK(l.paddedNumel == 12);
  CHECK(l.padding() == 2);
  CHECK(l.offsets == std::vector<std::size_t>{0, 3, 6, 9});
  CHECK(l.validLengths == std::vector<std::size_t>{3, 3, 3, 1});

  // A trailing rank can hold padding only: ceil(9/4) = 3, so ranks 0-2 take all 9.
  const auto t = shardLayout(9, 4);
  checkLayoutInvariants(t, 9, 4);
  CHECK(t.validLengths == std::vector<std::size_t>{3, 3, 3, 0});
  CHECK(t.padding() == 3);

  const auto big = shardLayout(1000003, 8);
  checkLayoutInvariants(big, 1000003, 8);
  CHECK(big.shardSize == 125001);
  CHECK(big.padding() == 5);
  CHECK(big.validLengths.back() == 1000003 - 7 * 125001);
}

TEST_CASE("shard layout: fewer elements than ranks", "[probe][preflight]") {
  const auto l = shardLayout(3, 8);
  checkLayoutInvariants(l, 3, 8);
  CHECK(l.shardSize == 1);
  CHECK(l.paddedNumel == 8);
  CHECK(l.validLengths == std::vector<std::size_t>{1, 1, 1, 0, 0, 0, 0, 0});
  CHECK(l.offsets[7] == 7);

  const auto empty = shardLayout(0, 4);
  checkLayoutInvariants(empty, 0, 4);
  CHECK(empty.shardSize == 0);
  CHECK(empty.paddedNumel == 0);
}

TEST_CASE("shard layout: world size 1 and invalid world sizes", "[probe][preflight]") {
  const auto l = shardLayout(7, 1);
  checkLayoutInvariants(l, 7, 1);
  CHECK(l.shardSize == 7);
  CHECK(l.paddedNumel == 7);
  CHECK(l.offsets == std::vector<std::size_t>{0});
  CHECK(l.validLengths == std::vector<std::size_t>{7});
  CHECK_THROWS_AS(shardLayout(7, 0), std::invalid_argument);
  CHECK_THROWS_AS(shardLayout(7, -2), std::invalid_argument);
}

TEST_CASE("shard layout: invariants over a grid of sizes", "[probe][preflight]") {
  for (std::size_t numel = 0; numel <= 70; ++numel)
    for (int world = 1; world <= 9; ++world) checkLayoutInvariants(shardLayout(numel, world), numel, world);
}

TEST_CASE("preflight problem: deterministic, index-addressed, well conditioned", "[probe][preflight]") {
  const Problem a = makeProblem(257, 3, 42), b = makeProblem(257, 3, 42);
  CHECK(a.params == b.params);
  CHECK(a.x == b.x);
  CHECK(a.y == b.y);
  CHECK(makeProblem(257, 3, 43).params != a.params);
  // Element i of rank r does not depend on the vector's length or the world size.
  const Problem longer = makeProblem(300, 4, 42);
  CHECK(std::equal(a.params.begin(), a.params.end(), longer.params.begin()));
  for (int r = 0; r < 3; ++r) {
    CHECK(std::equal(a.x[r].begin(), a.x[r].end(), longer.x[r].begin()));
    CHECK(std::equal(a.y[r].begin(), a.y[r].end(), longer.y[r].begin()));
  }
  CHECK(uniformAt(1, 2, 3) == uniformAt(1, 2, 3));
  CHECK(uniformAt(1, 2, 3) != uniformAt(1, 2, 4));

  const Problem p = makeProblem(5000, 5);
  const auto w = initialParams(p);
  int positive = 0;
  for (std::size_t i = 0; i < p.numel; ++i) {
    REQUIRE(p.params[i] >= -1.0f);
    REQUIRE(p.params[i] <= 1.0f);
    double sign = 0;
    for (int r = 0; r < p.worldSize; ++r) {
      REQUIRE(p.x[r][i] >= 0.5f);
      REQUIRE(p.x[r][i] <= 1.5f);
      const double res = w[i] * p.x[r][i] - static_cast<double>(p.y[r][i]);
      REQUIRE(std::fabs(res) >= 0.25 - 1e-6);
      REQUIRE(std::fabs(res) <= 1.0 + 1e-6);
      if (r == 0) sign = res > 0 ? 1 : -1;
      REQUIRE(res * sign > 0);  // the same sign on every rank: no cancellation in the sum
    }
    positive += sign > 0;
  }
  CHECK(positive > 2300);
  CHECK(positive < 2700);
  for (double g : averagedGradient(p, w)) REQUIRE(std::fabs(g) >= 0.125 - 1e-6);
  CHECK_THROWS_AS(makeProblem(3, 0), std::invalid_argument);
}

TEST_CASE("preflight reference: gradient matches finite differences", "[probe][preflight]") {
  const Problem p = makeProblem(17, 3);
  auto w = initialParams(p);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] += 0.01 * static_cast<double>(i % 5);  // off the data's point
  const auto g = averagedGradient(p, w);
  const double h = 1e-3;  // L is quadratic in each w_i: the central difference is exact up to rounding
  for (std::size_t i = 0; i < w.size(); ++i) {
    auto wp = w, wm = w;
    wp[i] += h;
    wm[i] -= h;
    const double fd = (objective(p, wp) - objective(p, wm)) / (2 * h);
    CHECK(g[i] == Approx(fd).epsilon(1e-8).margin(1e-10));
  }
  // The average of the ranks' local gradients.
  std::vector<double> sum(p.numel, 0.0);
  for (int r = 0; r < p.worldSize; ++r) {
    const auto gr = localGradient(p, r, w);
    for (std::size_t i = 0; i < p.numel; ++i) sum[i] += gr[i];
  }
  for (std::size_t i = 0; i < p.numel; ++i) CHECK(g[i] == Approx(sum[i] / 3).epsilon(1e-15));
  CHECK_THROWS_AS(localGradient(p, 3, w), std::invalid_argument);
}

TEST_CASE("preflight reference: Adam step on a 3-element vector", "[probe][preflight]") {
  std::vector<double> w{1.0, -0.5, 0.25};
  const std::vector<double> g{0.2, -0.1, 0.0};
  AdamState st;
  const AdamParams a;  // lr 1e-3, betas (0.9, 0.999), eps 1e-8
  adamStep(w, g, st, a);
  CHECK(st.step == 1);
  // m = 0.1 g, v = 0.001 g^2; bias-corrected m^ = g, v^ = g^2; w -= lr * g / (|g| + eps).
  CHECK(st.m[0] == Approx(0.02).epsilon(1e-14));
  CHECK(st.m[1] == Approx(-0.01).epsilon(1e-14));
  CHECK(st.m[2] == 0.0);
  CHECK(st.v[0] == Approx(4e-5).epsilon(1e-12));
  CHECK(st.v[1] == Approx(1e-5).epsilon(1e-12));
  CHECK(st.v[2] == 0.0);
  CHECK(w[0] == Approx(1.0 - 1e-3 * 0.2 / (0.2 + 1e-8)).epsilon(1e-15));
  CHECK(w[0] == Approx(0.99900000005).epsilon(1e-12));
  CHECK(w[1] == Approx(-0.4990000001).epsilon(1e-12));
  CHECK(w[2] == 0.25);  // g = 0: no update

  // Step 2 with the same gradient: m = 0.9*0.02 + 0.1*0.2 = 0.038, v = 0.999*4e-5 + 0.001*0.04 = 7.996e-5;
  // bias corrections 1 - 0.9^2 = 0.19 and 1 - 0.999^2 = 0.001999 give m^ = 0.2, v^ = 0.04 again.
  adamStep(w, g, st, a);
  CHECK(st.step == 2);
  CHECK(st.m[0] == Approx(0.038).epsilon(1e-12));
  CHECK(st.v[0] == Approx(7.996e-5).epsilon(1e-12));
  CHECK(w[0] == Approx(0.99900000005 - 0.00099999995).epsilon(1e-12));

  const AdamScalars s = adamScalars(a, 1);
  CHECK(s.oneMinusBeta2 == 1.0 - 0.999);
  CHECK(s.biasCorrection1 == Approx(0.1).epsilon(1e-15));
  CHECK(adamScalars(a, 2).biasCorrection2 == Approx(0.001999).epsilon(1e-12));
  CHECK_THROWS_AS(adamScalars(a, 0), std::invalid_argument);
  std::vector<double> wrong{1.0};
  CHECK_THROWS_AS(adamStep(wrong, g, st, a), std::invalid_argument);
}

TEST_CASE("preflight reference: the whole step", "[probe][preflight]") {
  const Problem p = makeProblem(101, 4);
  const ReferenceStep ref = referenceStep(p, AdamParams{});
  const auto w0 = initialParams(p);
  const auto g = averagedGradient(p, w0);
  REQUIRE(ref.grad.size() == 101);
  for (std::size_t i = 0; i < p.numel; ++i) {
    CHECK(ref.grad[i] == g[i]);
    CHECK(ref.m[i] == Approx(0.1 * g[i]).epsilon(1e-14));
    CHECK(ref.v[i] == Approx(0.001 * g[i] * g[i]).epsilon(1e-12));
    // |g| >= 0.125 >> eps: the first Adam step moves every parameter by lr against the gradient.
    CHECK(ref.params[i] - w0[i] == Approx(g[i] > 0 ? -1e-3 : 1e-3).epsilon(1e-6));
  }
}

TEST_CASE("preflight comparison: the relative + absolute bound", "[probe][preflight]") {
  const Tolerance tol;  // 1e-5 rel + 1e-6 abs
  CHECK(tol.rel == 1e-5);
  CHECK(tol.abs == 1e-6);
  // bound at 1: 1.1e-5; at 0: 1e-6; at 1000: 1.0000001e-2.
  const std::vector<double> want{1.0, 0.0, 1000.0, -2.0};
  auto cmp = compareToReference(std::vector<float>{1.0f + 1e-5f, 9e-7f, 1000.009f, -2.0f}, want, tol);
  CHECK(cmp.ok());
  CHECK(cmp.count == 4);
  CHECK(cmp.mismatches == 0);
  CHECK(cmp.worstRatio <= 1.0);
  CHECK(cmp.maxAbsError == Approx(0.009).margin(1e-4));

  cmp = compareToReference(std::vector<float>{1.0f + 1.2e-5f, 1.1e-6f, 1000.011f, -2.0f}, want, tol);
  CHECK_FALSE(cmp.ok());
  CHECK(cmp.mismatches == 3);
  CHECK(cmp.worstRatio > 1.0);

  cmp = compareToReference(std::vector<float>{1.0f, 0.0f, 1000.0f, -2.0f - 1e-3f}, want, tol);
  CHECK_FALSE(cmp.ok());
  CHECK(cmp.mismatches == 1);
  CHECK(cmp.worstIndex == 3);
  CHECK(cmp.worstWant == -2.0);
  CHECK(cmp.maxRelError == Approx(5e-4).epsilon(1e-3));

  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  cmp = compareToReference(std::vector<float>{1.0f, nan, 1000.0f, -2.0f}, want, tol);
  CHECK_FALSE(cmp.ok());
  CHECK(cmp.mismatches == 1);
  CHECK(cmp.worstIndex == 1);
  CHECK_FALSE(compareToReference(std::vector<float>{inf, 0.0f, 1000.0f, -2.0f}, want, tol).ok());

  cmp = compareToReference(std::vector<float>{1.0f, 0.0f, 1000.0f}, want, tol);
  CHECK(cmp.sizeMismatch);
  CHECK_FALSE(cmp.ok());

  // A zero tolerance demands bit equality.
  const Tolerance exact{0, 0};
  CHECK(compareToReference(std::vector<float>{1.5f, 0.0f}, std::vector<double>{1.5, 0.0}, exact).ok());
  CHECK_FALSE(compareToReference(std::vector<float>{std::nextafter(1.5f, 2.0f), 0.0f}, std::vector<double>{1.5, 0.0},
                                 exact)
                  .ok());
  CHECK(compareToReference(std::vector<float>{}, std::vector<double>{}, tol).ok());
}

TEST_CASE("preflight comparison: a float32 step fits the bound, faults do not", "[probe][preflight]") {
  const AdamParams a;
  for (int world : {1, 2, 3, 7, 8}) {
    CAPTURE(world);
    const Problem p = makeProblem(4099, world);
    const ShardLayout l = shardLayout(p.numel, world);
    const ReferenceStep ref = referenceStep(p, a);
    for (int variant = 0; variant < 4; ++variant) {
      const FloatStep f = emulateFloatStep(p, a, variant & 1, variant & 2);
      const auto checks = checkRun(p, l, ref, fakeRun(p, l, f));
      REQUIRE(checks.size() == 5);
      for (const auto& c : checks) {
        CAPTURE(c.name, c.cmp.worstRatio, c.cmp.maxRelError);
        CHECK(c.cmp.ok());
        CHECK(c.cmp.worstRatio < 0.1);  // a correct float32 step stays 10x inside the bound
      }
      CHECK(statusOf(checks) == Status::Ok);
    }
    if (world > 1) {
      // Forgetting the 1/n after the sum: Adam's first update is scale-blind, the gradient and moments are not.
      const auto bad = checkRun(p, l, ref, fakeRun(p, l, emulateFloatStep(p, a, false, false, true)));
      CHECK_FALSE(bad[1].cmp.ok());  // gradient
      CHECK_FALSE(bad[2].cmp.ok());  // m
      CHECK_FALSE(bad[3].cmp.ok());  // v
      CHECK(statusOf(bad) == Status::Mismatch);
    }
    // A shard written at the wrong offset (rank 0's shard shifted by one element).
    FloatStep f = emulateFloatStep(p, a, false);
    std::rotate(f.params.begin(), f.params.begin() + 1, f.params.begin() + static_cast<long>(l.validLengths[0]));
    CHECK_FALSE(checkRun(p, l, ref, fakeRun(p, l, f))[4].cmp.ok());
    // A skipped update.
    FloatStep skipped = emulateFloatStep(p, a, false);
    skipped.params = p.params;
    CHECK_FALSE(checkRun(p, l, ref, fakeRun(p, l, skipped))[4].cmp.ok());
    // Garbage in the all-gathered padding, or a missing rank.
    auto run = fakeRun(p, l, emulateFloatStep(p, a, false));
    if (l.padding() > 0) {
      run.gathered.back().back() = 1.0f;
      CHECK_FALSE(checkRun(p, l, ref, run)[0].cmp.ok());
    }
    run.gathered.pop_back();
    CHECK_FALSE(checkRun(p, l, ref, run)[0].cmp.ok());
  }
}

TEST_CASE("preflight bus bandwidth: the NCCL-tests convention", "[probe][preflight]") {
  CHECK(algBandwidthGBs(1e9, 0.5) == 2.0);
  CHECK(algBandwidthGBs(64.0 * (1 << 20), 1e-3) == Approx(67.108864));
  CHECK(algBandwidthGBs(1e9, 0.0) == 0.0);
  CHECK(allGatherBusBandwidth(100.0, 8) == Approx(87.5));
  CHECK(reduceScatterBusBandwidth(100.0, 4) == Approx(75.0));
  CHECK(allGatherBusBandwidth(100.0, 2) == Approx(50.0));
  CHECK(allGatherBusBandwidth(100.0, 1) == 0.0);
  CHECK(reduceScatterBusBandwidth(100.0, 1) == 0.0);
  CHECK(allReduceBusBandwidth(100.0, 4) == Approx(150.0));

  const auto ag = bandwidthOf(CollectiveTiming{"all_gather", 8e9, 5, 0.1}, 8);
  CHECK(ag.algbwGBs == Approx(80.0));
  CHECK(ag.busbwGBs == Approx(70.0));
  const auto rs = bandwidthOf(CollectiveTiming{"reduce_scatter", 4e9, 5, 0.1}, 4);
  CHECK(rs.algbwGBs == Approx(40.0));
  CHECK(rs.busbwGBs == Approx(30.0));
}

TEST_CASE("preflight report: exit codes, versions, JSON", "[probe][preflight]") {
  CHECK(exitCodeFor(Status::Ok) == 0);
  CHECK(exitCodeFor(Status::Mismatch) == 1);
  CHECK(exitCodeFor(Status::DeviceError) == 2);
  CHECK(exitCodeFor(Status::NoDevice) == 3);
  CHECK(exitCodeFor(Status::Usage) == 4);
  CHECK(std::string(statusName(Status::NoDevice)) == "no_gpu");
  CHECK(ncclVersionString(22809) == "2.28.9");
  CHECK(ncclVersionString(2708) == "2.7.8");
  CHECK(ncclVersionString(0).empty());
  CHECK(cudaVersionString(13000) == "13.0");
  CHECK(cudaVersionString(12080) == "12.8");

  Report none;
  none.status = Status::NoDevice;
  none.message = "no CUDA device: cudaErrorNoDevice: no CUDA-capable device is detected";
  none.query.error = "cudaErrorNoDevice: no CUDA-capable device is detected";
  none.query.runtimeVersion = 13000;
  auto j = nlohmann::json::parse(formatJson(none));
  CHECK(j["status"] == "no_gpu");
  CHECK(j["exit_code"] == 3);
  CHECK(j["message"].get<std::string>().rfind("no CUDA device: ", 0) == 0);
  CHECK(j["cuda"]["runtime_version"] == "13.0");
  CHECK(j["checks"].empty());
  CHECK(formatText(none).find("no CUDA device: ") != std::string::npos);

  // A full (emulated) two-rank report.
  const Problem p = makeProblem(1001, 2);
  Report r;
  r.worldSize = 2;
  r.layout = shardLayout(p.numel, 2);
  r.devices = {DeviceInfo{0, "NVIDIA H200", 9, 0, 150000000000ull, "0000:19:00.0"},
               DeviceInfo{1, "NVIDIA H200", 9, 0, 150000000000ull, "0000:3b:00.0"}};
  r.ncclVersion = 22809;
  r.query.count = 2;
  r.checks = checkRun(p, r.layout, referenceStep(p, r.adam), fakeRun(p, r.layout, emulateFloatStep(p, r.adam, false)));
  r.status = statusOf(r.checks);
  r.bandwidth.push_back(bandwidthOf(CollectiveTiming{"all_gather", 64.0 * (1 << 20), 5, 2e-4}, 2));
  r.bandwidth.push_back(bandwidthOf(CollectiveTiming{"reduce_scatter", 64.0 * (1 << 20), 5, 2.5e-4}, 2));
  j = nlohmann::json::parse(formatJson(r));
  CHECK(j["status"] == "ok");
  CHECK(j["exit_code"] == 0);
  CHECK(j["world_size"] == 2);
  CHECK(j["nccl_version"] == "2.28.9");
  CHECK(j["devices"].size() == 2);
  CHECK(j["devices"][1]["compute_capability"] == "9.0");
  CHECK(j["problem"]["numel"] == 1001);
  CHECK(j["problem"]["shard_size"] == 501);
  CHECK(j["problem"]["padding"] == 1);
  REQUIRE(j["checks"].size() == 5);
  for (const auto& c : j["checks"]) CHECK(c["ok"] == true);
  CHECK(j["checks"][0]["name"] == "all_gather");
  CHECK(j["checks"][1]["tolerance"]["rel"] == 1e-5);
  REQUIRE(j["bandwidth"].size() == 2);
  CHECK(j["bandwidth"][0]["busbw_gbps"].get<double>() == Approx(64.0 * (1 << 20) / 2e-4 / 1e9 / 2));
  const std::string text = formatText(r);
  CHECK(text.find("OK") != std::string::npos);
  CHECK(text.find("busbw") != std::string::npos);
  CHECK(text.find("FAIL") == std::string::npos);
}

TEST_CASE("shardlint-preflight binary: no GPU means exit 3", "[probe][preflight]") {
  const std::string bin = SHARDLINT_PREFLIGHT_PATH;
  if (bin.empty()) {
    WARN("shardlint-preflight was not built (no CUDA compiler or NCCL); skipping the binary checks");
    return;
  }
  REQUIRE(fs::exists(bin));

  // Hiding every device gives the no-GPU path on any machine.
  auto r = runPreflight("CUDA_VISIBLE_DEVICES=-1", "");
  CAPTURE(r.out, r.err);
  CHECK(r.rc == 3);
  CHECK(r.err.find("no CUDA device: ") != std::string::npos);

  r = runPreflight("CUDA_VISIBLE_DEVICES=-1", "--json");
  CAPTURE(r.out, r.err);
  CHECK(r.rc == 3);
  CHECK(r.err.find("no CUDA device: ") != std::string::npos);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["status"] == "no_gpu");
  CHECK(j["exit_code"] == 3);
  CHECK(j["message"].get<std::string>().rfind("no CUDA device: ", 0) == 0);

  // As the machine is.
  r = runPreflight("", "--json --bench-mib 8");
  CAPTURE(r.out, r.err);
  if (!gpuDriverPresent()) {
    CHECK(r.rc == 3);
    CHECK(r.err.find("no CUDA device: ") != std::string::npos);
  } else {
    CHECK(r.rc == 0);
    CHECK(nlohmann::json::parse(r.out)["status"] == "ok");
  }

  // Usage.
  r = runPreflight("", "--help");
  CHECK(r.rc == 0);
  CHECK(r.out.find("exit codes") != std::string::npos);
  r = runPreflight("", "--no-such-flag");
  CHECK(r.rc == 4);
  CHECK(r.err.find("unknown argument") != std::string::npos);
  r = runPreflight("", "--numel 0");
  CHECK(r.rc == 4);
}
