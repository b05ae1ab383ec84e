#include "preflight/Report.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace shardlint::probe::preflight {

int exitCodeFor(Status s) {
  switch (s) {
    case Status::Ok: return 0;
    case Status::Mismatch: return 1;
    case Status::DeviceError: return 2;
    case Status::NoDevice: return 3;
    case Status::Usage: return 4;
  }
  return 2;
}

const char* statusName(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::Mismatch: return "mismatch";
    case Status::DeviceError: return "error";
    case Status::NoDevice: return "no_gpu";
    case Status::Usage: return "usage";
  }
  return "error";
}

std::vector<CheckResult> checkRun(const Problem& p, const ShardLayout& layout, const ReferenceStep& ref,
                                  const DeviceRunResult& run, Tolerance tol) {
  std::vector<CheckResult> out;
  // all-gather: bit-exact on every rank, padding included.
  {
    std::vector<double> want;
    std::vector<float> got;
    want.reserve(layout.paddedNumel * layout.worldSize);
    for (int r = 0; r < layout.worldSize; ++r) {
      want.insert(want.end(), p.params.begin(), p.params.end());
      want.resize(want.size() + layout.padding(), 0.0);
    }
    for (const auto& g : run.gathered) got.insert(got.end(), g.begin(), g.end());
    if (run.gathered.size() != static_cast<std::size_t>(layout.worldSize)) got.clear();
    out.push_back({"all_gather", Tolerance{0, 0}, compareToReference(got, want, Tolerance{0, 0})});
  }
  out.push_back({"gradient", tol, compareToReference(run.grad, ref.grad, tol)});
  out.push_back({"adam_m", tol, compareToReference(run.m, ref.m, tol)});
  out.push_back({"adam_v", tol, compareToReference(run.v, ref.v, tol)});
  out.push_back({"params", tol, compareToReference(run.params, ref.params, tol)});
  return out;
}

BandwidthResult bandwidthOf(const CollectiveTiming& t, int worldSize) {
  BandwidthResult b;
  b.collective = t.collective;
  b.bytes = t.bytes;
  b.iters = t.iters;
  b.seconds = t.seconds;
  b.algbwGBs = algBandwidthGBs(t.bytes, t.seconds);
  b.busbwGBs = t.collective == "all_gather" ? allGatherBusBandwidth(b.algbwGBs, worldSize)
               : t.collective == "reduce_scatter" ? reduceScatterBusBandwidth(b.algbwGBs, worldSize)
                                                  : allReduceBusBandwidth(b.algbwGBs, worldSize);
  return b;
}

Status statusOf(const std::vector<CheckResult>& checks) {
  if (checks.empty()) return Status::Mismatch;
  for (const auto& c : checks)
    if (!c.cmp.ok()) return Status::Mismatch;
  return Status::Ok;
}

std::string ncclVersionString(int code) {
  if (code <= 0) return "";
  if (code >= 20900) return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
}

std::string cudaVersionString(int code) {
  if (code <= 0) return "";
  return fmt::format("{}.{}", code / 1000, code % 1000 / 10);
}

namespace {

std::string gib(std::size_t bytes) { return fmt::format("{:.0f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

std::string checkLine(const CheckResult& c) {
  const auto& m = c.cmp;
  std::string bound = c.tol.rel == 0 && c.tol.abs == 0
                          ? std::string("bit-exact")
                          : fmt::format("bound {:g} rel + {:g} abs", c.tol.rel, c.tol.abs);
  if (m.sizeMismatch) return fmt::format("  {:<12} FAIL  wrong number of elements ({})", c.name, bound);
  std::string line = fmt::format("  {:<12} {:<4}  {} elements, max abs err {:.3g}, max rel err {:.3g} ({})", c.name,
                                 m.ok() ? "ok" : "FAIL", m.count, m.maxAbsError, m.maxRelError, bound);
  if (!m.ok())
    line += fmt::format("; {} outside, worst [{}] = {:.9g}, want {:.17g}", m.mismatches, m.worstIndex, m.worstGot,
                        m.worstWant);
  return line;
}

double finiteOrZero(double v) { return std::isfinite(v) ? v : 0.0; }

}  // namespace

std::string formatText(const Report& r) {
  std::string s;
  switch (r.status) {
    case Status::Ok: s += "shardlint-preflight: OK: the GPUs and NCCL carried a sharded step\n"; break;
    case Status::Mismatch: s += "shardlint-preflight: FAIL: the sharded step does not match the float64 reference\n"; break;
    case Status::DeviceError: s += fmt::format("shardlint-preflight: ERROR: {}\n", r.message); break;
    case Status::NoDevice: s += fmt::format("shardlint-preflight: {}\n", r.message); break;
    case Status::Usage: s += fmt::format("shardlint-preflight: {}\n", r.message); break;
  }
  if (r.query.runtimeVersion || r.query.driverVersion || r.ncclVersion) {
    s += fmt::format("  CUDA runtime {}, driver {}", cudaVersionString(r.query.runtimeVersion),
                     r.query.driverVersion ? cudaVersionString(r.query.driverVersion) : std::string("none"));
    if (r.ncclVersion) s += fmt::format(", NCCL {}", ncclVersionString(r.ncclVersion));
    s += "\n";
  }
  if (!r.devices.empty()) {
    s += fmt::format("  {} rank{}, one per GPU:\n", r.worldSize, r.worldSize == 1 ? "" : "s");
    for (const auto& d : r.devices)
      s += fmt::format("    rank {}: {} (sm_{}{}, {}, {})\n", d.ordinal, d.name, d.ccMajor, d.ccMinor,
                       gib(d.memoryBytes), d.pciBusId);
  }
  if (!r.checks.empty()) {
    s += fmt::format(
        "  step: {} parameters, {} per rank ({} padding); all-gather, local gradient, reduce-scatter (sum, 1/{}), "
        "Adam lr={:g} betas=({:g}, {:g}) eps={:g}\n",
        r.layout.numel, r.layout.shardSize, r.layout.padding(), r.worldSize, r.adam.lr, r.adam.beta1, r.adam.beta2,
        r.adam.eps);
    for (const auto& c : r.checks) s += checkLine(c) + "\n";
  }
  for (const auto& b : r.bandwidth)
    s += fmt::format("  {:<14} {:.1f} MiB x{}: {:.1f} us, algbw {:.2f} GB/s, busbw {:.2f} GB/s\n", b.collective,
                     b.bytes / (1 << 20), b.iters, b.seconds * 1e6, b.algbwGBs, b.busbwGBs);
  if (r.worldSize == 1 && !r.bandwidth.empty())
    s += "  (one rank: the bus bandwidth of a single-rank collective is 0 by definition)\n";
  if (!r.devices.empty()) s += fmt::format("  elapsed {:.2f} s\n", r.elapsedSeconds);
  return s;
}

std::string formatJson(const Report& r) {
  using nlohmann::json;
  json j;
  j["tool"] = "shardlint-preflight";
  j["status"] = statusName(r.status);
  j["exit_code"] = exitCodeFor(r.status);
  j["message"] = r.message;
  j["cuda"] = {{"runtime_version", cudaVersionString(r.query.runtimeVersion)},
               {"driver_version", cudaVersionString(r.query.driverVersion)},
               {"device_count", r.query.count}};
  if (!r.query.error.empty()) j["cuda"]["error"] = r.query.error;
  j["nccl_version"] = ncclVersionString(r.ncclVersion);
  j["world_size"] = r.worldSize;
  json devs = json::array();
  for (const auto& d : r.devices)
    devs.push_back({{"rank", d.ordinal},
                    {"name", d.name},
                    {"compute_capability", fmt::format("{}.{}", d.ccMajor, d.ccMinor)},
                    {"memory_bytes", d.memoryBytes},
                    {"pci_bus_id", d.pciBusId}});
  j["devices"] = devs;
  if (!r.checks.empty()) {
    j["problem"] = {{"numel", r.layout.numel},
                    {"shard_size", r.layout.shardSize},
                    {"padded_numel", r.layout.paddedNumel},
                    {"padding", r.layout.padding()},
                    {"seed", r.seed},
                    {"adam", {{"lr", r.adam.lr}, {"beta1", r.adam.beta1}, {"beta2", r.adam.beta2},
                              {"eps", r.adam.eps}, {"step", 1}}}};
  }
  json checks = json::array();
  for (const auto& c : r.checks) {
    const auto& m = c.cmp;
    checks.push_back({{"name", c.name},
                      {"ok", m.ok()},
                      {"count", m.count},
                      {"mismatches", m.mismatches},
                      {"size_mismatch", m.sizeMismatch},
                      {"tolerance", {{"rel", c.tol.rel}, {"abs", c.tol.abs}}},
                      {"max_abs_error", finiteOrZero(m.maxAbsError)},
                      {"max_rel_error", finiteOrZero(m.maxRelError)},
                      {"worst_ratio", std::isfinite(m.worstRatio) ? json(m.worstRatio) : json(nullptr)},
                      {"worst_index", m.worstIndex},
                      {"worst_got", std::isfinite(m.worstGot) ? json(m.worstGot) : json(nullptr)},
                      {"worst_want", m.worstWant}});
  }
  j["checks"] = checks;
  json bw = json::array();
  for (const auto& b : r.bandwidth)
    bw.push_back({{"collective", b.collective},
                  {"bytes", b.bytes},
                  {"iterations", b.iters},
                  {"seconds", b.seconds},
                  {"algbw_gbps", b.algbwGBs},
                  {"busbw_gbps", b.busbwGBs}});
  j["bandwidth"] = bw;
  j["elapsed_seconds"] = r.elapsedSeconds;
  return j.dump(2) + "\n";
}

}  // namespace shardlint::probe::preflight
