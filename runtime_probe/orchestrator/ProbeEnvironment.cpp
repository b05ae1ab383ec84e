// The environment a probe runs in: what the interpreter's torch (and accelerate) can do, the CPU
// FSDP self-test and its cache, the GPUs visible, and the backend chosen from them (Probe.h).
#include "Probe.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "ProbeImpl.h"
#include "core/SourceFile.h"

namespace shardlint::probe {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The last line of `output` that parses as a JSON object (python may print warnings first).
std::optional<json> lastJsonObjectLine(const std::string& output) {
  std::optional<json> found;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    json k = json::parse(line, nullptr, false);
    if (!k.is_discarded() && k.is_object()) found = std::move(k);
  }
  return found;
}


}  // namespace

// ============================================================================================
// Environment: torch, GPUs, backend
// ============================================================================================

const std::string& torchProbeSource() {
  static const std::string s = R"PY(
import json, sys
out = {"python": sys.version.split()[0]}
try:
    import torch
except BaseException as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out)); sys.exit(0)
out["torch"] = torch.__version__
try:
    out["cuda_devices"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
except BaseException:
    out["cuda_devices"] = 0
import torch.distributed as dist
out["distributed"] = bool(dist.is_available())
out["nccl"] = bool(dist.is_available() and dist.is_nccl_available())
out["gloo"] = bool(dist.is_available() and dist.is_gloo_available())
out["fully_shard"] = None
for mod in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
    try:
        m = __import__(mod, fromlist=["fully_shard"])
        if hasattr(m, "fully_shard"):
            out["fully_shard"] = mod
            break
    except BaseException:
        pass
try:
    from torch.distributed.fsdp import FullyShardedDataParallel
    out["fsdp1"] = True
except BaseException:
    out["fsdp1"] = False
try:
    import accelerate
    out["accelerate"] = accelerate.__version__
except BaseException:
    out["accelerate"] = None
print(json.dumps(out))
)PY";
  return s;
}

TorchInfo parseTorchInfo(const std::string& output) {
  TorchInfo info;
  std::optional<json> answer = lastJsonObjectLine(output);  // torch may print warnings first
  if (!answer) {
    info.error = "no answer from the torch check" + (output.empty() ? std::string() : ": " + firstLine(output));
    return info;
  }
  json& j = *answer;
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  auto boolean = [&](const char* k) { return j.contains(k) && j[k].is_boolean() && j[k].get<bool>(); };
  info.pythonVersion = str("python");
  if (j.contains("error")) {
    info.error = str("error");
    return info;
  }
  info.torchVersion = str("torch");
  if (info.torchVersion.empty()) {
    info.error = "the torch check printed no torch version";
    return info;
  }
  info.ok = true;
  info.accelerateVersion = str("accelerate");
  if (j.contains("cuda_devices") && j["cuda_devices"].is_number_integer())
    info.cudaDevices = j["cuda_devices"].get<int>();
  info.distributed = boolean("distributed");
  info.nccl = boolean("nccl");
  info.gloo = boolean("gloo");
  info.fullyShardModule = str("fully_shard");
  info.fsdp1 = boolean("fsdp1");
  return info;
}

TorchInfo probeTorch(const std::string& python, double timeoutSeconds) {
  RunOptions o;
  o.timeoutSeconds = timeoutSeconds;
  o.killGraceSeconds = 1;
  o.maxOutput = 64 * 1024;
  RunResult r = runProcess({python, "-c", torchProbeSource()}, o);
  TorchInfo info;
  if (!r.started) {
    info.error = "cannot run `" + python + "`: " + r.startError;
    return info;
  }
  if (r.timedOut) {
    info.error = "`" + python + " -c 'import torch ...'` did not answer within " + fmtSeconds(timeoutSeconds);
    return info;
  }
  info = parseTorchInfo(r.output);
  if (!info.ok && info.error.rfind("no answer", 0) == 0)
    info.error = "`" + python + "` printed no torch information (exit code " + std::to_string(r.exitCode) + ")" +
                 (r.output.empty() ? std::string() : ": " + firstLine(tailLines(r.output, 1)));
  return info;
}

namespace {
// The self-test lives in the instrumentation package (runtime_probe/python/shardlint_probe/selftest.py);
// this stub runs it with the package on PYTHONPATH.
const char* kCpuFsdpSelfTest =
    "import sys\n"
    "from shardlint_probe.selftest import main\n"
    "if __name__ == \"__main__\":  # torch.multiprocessing imports this file again in each rank\n"
    "    sys.exit(main())\n";
}  // namespace

// The self-test's name for the API a replay needs on CPU.
std::string selfTestKey(const ReplaySpec& s) {
  if (s.wrapApi == "fully_shard") return "fsdp2";
  if (s.wrapApi == "fsdp1") return s.useOrigParams ? "fsdp1_orig" : "fsdp1_flat";
  if (s.wrapApi == "accelerate") return "accelerate_fsdp" + std::to_string(s.fsdpVersion);
  if (s.wrapApi == "fabric") return "fabric";
  return "";
}

namespace {
// FNV-1a, 64 bits: a cache key that is the same in every run (std::hash need not be).
uint64_t fnv1a(std::string_view data, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The self-test's cache file for this interpreter and this package, or "" (no cache dir, no interpreter).
fs::path selfTestCacheFile(const std::string& python, const TorchInfo& info, const std::string& packageDir,
                           const std::string& cacheDir) {
  if (cacheDir.empty()) return {};
  std::error_code ec;
  fs::path exe = python.find('/') == std::string::npos ? fs::path() : fs::canonical(python, ec);
  std::string key = python + "\n" + exe.string() + "\n" + info.torchVersion + "\n" + info.accelerateVersion + "\n";
  if (!exe.empty()) {
    auto size = fs::file_size(exe, ec);
    auto mtime = fs::last_write_time(exe, ec).time_since_epoch().count();
    key += std::to_string(size) + ":" + std::to_string(mtime) + "\n";
  } else {
    return {};  // a bare name: PATH decides which interpreter runs, so do not cache
  }
  // The interpreter's site-packages change without its binary changing: the versions above
  // cover torch and accelerate; lightning and the self-test code are covered by the package's sources.
  for (const char* f : {"selftest.py", "replay_runtime.py", "compat.py"}) {
    std::string text;
    if (readFileBytes((fs::path(packageDir) / "shardlint_probe" / f).string(), text)) key += text;
  }
  char name[40];
  std::snprintf(name, sizeof name, "%016llx.json", static_cast<unsigned long long>(fnv1a(key)));
  return fs::path(cacheDir) / "probe-selftest" / name;
}
}  // namespace

namespace {
// The self-test's answers (runtime_probe/python/shardlint_probe/selftest.py), in words.
const std::vector<std::pair<std::string, std::string>>& selfTestChecks() {
  static const std::vector<std::pair<std::string, std::string>> checks = {
      {"fsdp2", "FSDP2 fully_shard"},
      {"fsdp1_orig", "FSDP1 use_orig_params=True"},
      {"fsdp1_flat", "FSDP1 use_orig_params=False"},
      {"accelerate_fsdp2", "accelerate FSDP2 prepare"},
      {"accelerate_fsdp1", "accelerate FSDP1 prepare"},
      {"fabric", "Lightning Fabric FSDPStrategy"}};
  return checks;
}

void applySelfTestAnswer(const json& j, TorchInfo& info) {
  auto take = [&](const char* k, std::optional<bool>& flag) {
    if (j.contains(k) && j[k].is_boolean() && j[k].get<bool>())
      flag = true;
    else if (j.contains(k) && j[k].is_string() && info.cpuFsdpError.empty())
      info.cpuFsdpError =
          std::string(k == std::string("fsdp2") ? "FSDP2" : "FSDP1") + " on CPU: " + j[k].get<std::string>();
  };
  take("fsdp2", info.cpuFsdp2);
  take("fsdp1", info.cpuFsdp1);
  for (const auto& [k, name] : selfTestChecks()) {
    if (!j.contains(k)) continue;
    if (j[k].is_boolean())
      info.cpuChecks[k] = j[k].get<bool>() ? "" : "failed";
    else if (j[k].is_string())
      info.cpuChecks[k] = j[k].get<std::string>();
  }
  if (j.contains("notes") && j["notes"].is_array())
    for (const auto& n : j["notes"])
      if (n.is_string()) info.cpuNotes.push_back(n.get<std::string>());
}
}  // namespace

void applyCpuSelfTest(const std::string& answerJson, TorchInfo& info) {
  info.cpuFsdp1 = false;
  info.cpuFsdp2 = false;
  std::optional<json> answer = lastJsonObjectLine(answerJson);
  if (!answer) {
    info.cpuFsdpError = "the CPU FSDP self-test gave no answer";
    return;
  }
  applySelfTestAnswer(*answer, info);
}

void probeCpuFsdp(const std::string& python, double timeoutSeconds, TorchInfo& info, const std::string& packageDir,
                  const std::string& cacheDir) {
  std::error_code ec;
  const fs::path cached = selfTestCacheFile(python, info, packageDir, cacheDir);
  if (std::string text; !cached.empty() && readFileBytes(cached.string(), text) && lastJsonObjectLine(text)) {
    applyCpuSelfTest(text, info);
    info.cpuSelfTestCached = cached.string();
    return;
  }
  // A fresh file (mkstemps: O_EXCL, mode 0600): a predictable name in the shared temporary
  // folder could be a planted symbolic link, and writing through it would clobber its target.
  std::string templ = (fs::temp_directory_path(ec) / "shardlint-cpu-selftest-XXXXXX.py").string();
  fs::path script;
  if (int fd = ::mkstemps(templ.data(), 3); fd >= 0) {
    script = templ;
    std::string_view text(kCpuFsdpSelfTest);
    while (!text.empty()) {
      ssize_t n = ::write(fd, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.remove_prefix(static_cast<size_t>(n));
    }
    ::close(fd);
  }
  RunOptions o;
  o.timeoutSeconds = timeoutSeconds;
  o.killGraceSeconds = 1;
  o.env["CUDA_VISIBLE_DEVICES"] = "";
  o.env["OMP_NUM_THREADS"] = "1";
  if (!packageDir.empty()) {
    const char* oldPath = std::getenv("PYTHONPATH");
    o.env["PYTHONPATH"] = packageDir + (oldPath && *oldPath ? ":" + std::string(oldPath) : "");
  }
  RunResult r = runProcess({python, script.string()}, o);
  fs::remove(script, ec);
  info.cpuFsdp1 = false;
  info.cpuFsdp2 = false;
  if (r.timedOut) {
    info.cpuFsdpError = "the CPU FSDP self-test did not finish within " + fmtSeconds(timeoutSeconds);
    return;
  }
  std::optional<json> answer = lastJsonObjectLine(r.output);
  if (!answer) {
    info.cpuFsdpError = "the CPU FSDP self-test failed (exit code " + std::to_string(r.exitCode) + ")" +
                        (r.output.empty() ? std::string() : ": " + firstLine(tailLines(r.output, 1)));
    return;
  }
  applySelfTestAnswer(*answer, info);
  if (!cached.empty()) {
    // Only an answer is kept, never a timeout or a crash; written whole (rename) so a reader never
    // sees half a file.
    fs::create_directories(cached.parent_path(), ec);
    fs::path tmp = cached;
    tmp += ".tmp" + std::to_string(getpid());
    { std::ofstream(tmp) << answer->dump() << "\n"; }
    fs::rename(tmp, cached, ec);
    if (ec) fs::remove(tmp, ec);
  }
}

std::string cpuSelfTestSummary(const TorchInfo& info) {
  std::string out;
  for (const auto& [key, name] : selfTestChecks()) {
    auto it = info.cpuChecks.find(key);
    if (it == info.cpuChecks.end()) continue;
    out += (out.empty() ? "" : "; ") + name + ": " + (it->second.empty() ? "ok" : it->second);
  }
  return out;
}

int applyCudaVisibleDevices(int devices, const char* cvd) {
  if (!cvd) return devices;
  std::string s = cvd;
  int n = 0;
  size_t start = 0;
  if (s.find_first_not_of(" \t") == std::string::npos) return 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string tok = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    // CUDA stops at the first invalid entry ("-1" hides everything after it).
    if (tok.empty() || tok[0] == '-') break;
    ++n;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return std::min(n, devices);
}

int countVisibleGpus(const char* cvd, bool useNvidiaSmi) {
  int devices = -1;
  if (useNvidiaSmi) {
    RunOptions o;
    o.timeoutSeconds = 15;
    o.killGraceSeconds = 1;
    RunResult r = runProcess({"nvidia-smi", "-L"}, o);
    if (r.started && !r.timedOut && r.exitCode == 0) {
      devices = 0;
      std::istringstream in(r.output);
      std::string line;
      while (std::getline(in, line))
        if (line.rfind("GPU ", 0) == 0) ++devices;
    }
  }
  if (devices < 0) {
    devices = 0;
    std::error_code ec;
    for (fs::directory_iterator it("/proc/driver/nvidia/gpus", ec), end; !ec && it != end; it.increment(ec)) ++devices;
  }
  if (!cvd) cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  return applyCudaVisibleDevices(devices, cvd);
}

BackendChoice chooseBackend(const std::string& requested, int nproc, int gpus, const TorchInfo& torch,
                            bool needsFsdp2) {
  BackendChoice c;
  if (nproc < 1) {
    c.reason = "--nproc must be at least 1";
    return c;
  }
  std::string tv = "torch " + torch.torchVersion;
  // FSDP on CPU with gloo: decided by the self-test (two gloo ranks, one forward/backward/step).
  bool cpuTested = torch.cpuFsdp2.has_value() || torch.cpuFsdp1.has_value();
  bool cpuOk =
      needsFsdp2 ? torch.cpuFsdp2.value_or(false) : (torch.cpuFsdp1.value_or(false) || torch.cpuFsdp2.value_or(false));
  std::string cpuWhy = !cpuTested ? "the CPU FSDP self-test was not run"
                       : cpuOk    ? tv + " passes the CPU FSDP self-test (2 gloo ranks on CPU)"
                                  : tv + " fails the CPU FSDP self-test" +
                                     (torch.cpuFsdpError.empty() ? std::string() : " (" + torch.cpuFsdpError + ")");
  std::string gpuWord = std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") + " visible";
  auto gloo = [&](std::string why) {
    c.ok = true;
    c.backend = "gloo";
    c.device = "cpu";
    c.worldSize = nproc;
    c.reason = "gloo on CPU, " + std::to_string(nproc) + (nproc == 1 ? " rank" : " ranks") + ": " + why;
  };
  auto nccl = [&](std::string why) {
    c.ok = true;
    c.backend = "nccl";
    c.device = "cuda";
    c.worldSize = std::min(nproc, gpus);
    c.reason = "nccl, " + std::to_string(c.worldSize) + (c.worldSize == 1 ? " rank" : " ranks") + ": " + why;
    if (c.worldSize < nproc) {
      c.reason += "; NCCL refuses two ranks on one device, so world size is " + std::to_string(c.worldSize);
      if (nproc >= 2 && torch.gloo && cpuOk) {
        c.divergenceOnGloo = true;
        c.reason += "; divergence (needs 2 or more ranks) is checked in a second pass with gloo on CPU, " +
                    std::to_string(nproc) + " ranks";
      } else if (c.worldSize < 2) {
        c.reason += "; divergence (needs 2 or more ranks) is not checked: " + cpuWhy;
      }
    }
  };
  if (requested == "nccl") {
    if (!torch.nccl)
      c.reason = tv + " has no NCCL support (a CPU-only build?); use --backend gloo";
    else if (gpus < 1)
      c.reason = "--backend nccl needs a GPU and none is visible; use --backend gloo";
    else
      nccl("requested; " + gpuWord);
    return c;
  }
  if (requested == "gloo") {
    if (!torch.gloo)
      c.reason = tv + " has no gloo support";
    else if (cpuTested && !cpuOk)
      c.reason = "--backend gloo: " + cpuWhy + "; use --backend nccl on a GPU machine";
    else
      gloo("requested; " + cpuWhy);
    return c;
  }
  if (requested != "auto") {
    c.reason = "unknown backend `" + requested + "` (auto, nccl or gloo)";
    return c;
  }
  if (torch.nccl && gpus >= nproc) {
    nccl(gpuWord + ", at least one per rank");
    return c;
  }
  std::string few = gpus == 0 ? "no GPU visible" : "only " + gpuWord + " for " + std::to_string(nproc) + " ranks";
  if (torch.gloo && cpuOk) {
    gloo(few + "; " + cpuWhy);
    return c;
  }
  if (torch.nccl && gpus >= 1) {
    nccl(few + ", and " + cpuWhy);
    return c;
  }
  c.reason = "no usable backend: " + few + (torch.nccl || gpus == 0 ? "" : " (and this torch has no NCCL)") + ", and " +
             (torch.gloo ? cpuWhy : tv + " has no gloo support");
  return c;
}

}  // namespace shardlint::probe
