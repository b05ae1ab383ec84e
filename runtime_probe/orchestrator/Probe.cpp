#include "core/SourceFile.h"
#include "Probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "Replay.h"

extern char** environ;

namespace shardlint::probe {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string firstLine(const std::string& s, size_t max = 240) {
  std::string out = s.substr(0, s.find('\n'));
  while (!out.empty() && (out.back() == '\r' || out.back() == ' ')) out.pop_back();
  if (out.size() > max) out = out.substr(0, max) + "...";
  return out;
}

std::string fmtSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

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

// torchrun's output when the chosen master port was taken.
bool addressInUse(const std::string& output) {
  return contains(output, "EADDRINUSE") || contains(lower(output), "address already in use");
}

// Whether the replay of `s` needs FSDP2 (`fully_shard`).
bool usesFsdp2(const ReplaySpec& s) {
  return s.wrapApi == "fully_shard" || (s.wrapApi == "accelerate" && s.fsdpVersion == 2);
}

// Set by SIGINT/SIGTERM while a probe runs; the runner then kills its process group.
volatile sig_atomic_t gInterrupted = 0;
void onInterrupt(int) { gInterrupted = 1; }

}  // namespace

std::string_view verdictName(Verdict v) {
  switch (v) {
    case Verdict::Confirmed:
      return "confirmed";
    case Verdict::NotReproduced:
      return "not-reproduced";
    case Verdict::NotReached:
      return "not-reached";
    case Verdict::ProbeError:
      return "probe-error";
  }
  return "probe-error";
}

const std::vector<std::string_view>& probedCodes() {
  static const std::vector<std::string_view> codes = {"SL101", "SL102", "SL103", "SL104", "SL105", "SL201",
                                                      "SL202", "SL203", "SL204", "SL205", "SL207", "SL402"};
  return codes;
}

bool probedCode(std::string_view code) {
  return std::find(probedCodes().begin(), probedCodes().end(), code) != probedCodes().end();
}

std::string probedCodesText(std::string_view conjunction) {
  std::string out;
  const auto& codes = probedCodes();
  for (size_t i = 0; i < codes.size(); ++i) {
    if (i) out += i + 1 == codes.size() ? " " + std::string(conjunction) + " " : ", ";
    out += codes[i];
  }
  return out;
}

// ============================================================================================
// Replay specs
// ============================================================================================

namespace {

// Optimizers a replay can build from `params` alone (no closure, no sparse gradients).
const std::set<std::string>& replayableOptimizers() {
  static const std::set<std::string> s = {"SGD",     "Adam",  "AdamW", "Adagrad", "Adadelta", "Adamax",
                                          "RMSprop", "NAdam", "RAdam", "ASGD",    "Rprop"};
  return s;
}

// `torch.optim.X` or `optim.X` in `text`, if X is replayable.
std::optional<std::string> optimizerIn(const std::string& text) {
  static const std::regex re(R"((?:^|[^\w.])(?:torch\.)?optim\.([A-Z]\w*)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    std::string cls = (*it)[1].str();
    if (replayableOptimizers().count(cls)) return "torch.optim." + cls;
  }
  return std::nullopt;
}

std::string allText(const Diagnostic& d) {
  std::string t = d.message;
  for (const auto& n : d.notes) t += "\n" + n.message;
  return t;
}

}  // namespace

std::optional<ReplaySpec> replaySpecFor(const Diagnostic& d, const std::string& source, std::string* whyNot) {
  auto fail = [&](std::string why) -> std::optional<ReplaySpec> {
    if (whyNot) *whyNot = std::move(why);
    return std::nullopt;
  };
  if (!probedCode(d.code))
    return fail(d.code + " is not a rule the probe tests (" + probedCodesText("and") + ")");
  ReplaySpec s;
  s.code = d.code;
  s.path = d.location.path;
  s.line = static_cast<int>(d.location.start.line) + 1;
  const std::string text = allText(d);
  std::string at;  // the source text of the finding's range
  if (d.location.range.end > d.location.range.begin && d.location.range.end <= source.size())
    at = source.substr(d.location.range.begin, d.location.range.end - d.location.range.begin);

  if (!d.facts.empty()) {
    // A control (RuleContext::control): the rule's facts say what it saw.
    auto fact = [&](const char* k) {
      auto it = d.facts.find(k);
      return it == d.facts.end() ? std::string() : it->second;
    };
    s.shape = fact("shape");
    s.wrapApi = fact("wrap_api");
    s.fsdpVersion = fact("fsdp_version") == "1" ? 1 : 2;
    s.useOrigParams = fact("use_orig_params") == "1";
    s.joint = fact("joint") == "1";
    s.replacement = fact("replacement");
    if (!fact("fsdp_from").empty()) s.fsdpFrom = fact("fsdp_from");
    s.control = true;
    if (s.shape.empty() || s.wrapApi.empty()) return fail("the control names no shape or wrap API");
  } else if (d.code == "SL104") {
    // FSDP2: a forward between fully_shard and the optimizer. Which modules stay unsharded, from the message:
    // the root (its reshard_after_forward not True), blocks with reshard_after_forward=False, or both.
    s.wrapApi = "fully_shard";
    bool root = contains(text, "FSDP2 leaves the root `") || contains(text, "FSDP2 leaves the parameters that the root `");
    bool parts = contains(text, "FSDP2 leaves the parameters of `") || contains(text, " and the parameters of `");
    if (root && parts) s.shape = "forward-before-optimizer-all-kept";
    else if (parts) s.shape = "forward-before-optimizer-blocks-kept";
    else if (root) s.shape = "forward-before-optimizer";
    else return fail("cannot tell which modules stay unsharded from this SL104 finding's message");
  } else if (d.code == "SL205") {
    // FSDP2: `.forward(...)` of a unit instead of a call. A part of `self` inside a class's forward (the
    // message says "in every `Class` made here") replays as the blocks' forward bypassed inside the
    // root's; anything else as the root's own forward called directly. accelerate FSDP2's prepare applies
    // the same `fully_shard` to the root, so its findings replay with fully_shard too.
    s.wrapApi = "fully_shard";
    s.shape = contains(d.message, "` made here (`") ? "bypass-block" : "bypass-root";
  } else if (d.code == "SL203") {
    // A clip by each rank's shard norm: torch's clip on an FSDP1 model (replayed as FULL_SHARD, whatever
    // sharding strategy the finding names), or accelerate's clip given less than the prepared model's parameters.
    s.fsdpVersion = 1;
    if (contains(d.message, "with FSDP1 accelerate uses the model's own `clip_grad_norm_`")) {
      s.wrapApi = "accelerate";
      s.shape = "clip-accelerate-subset";
      s.useOrigParams = true;  // the original parameters, so that the subset holds gradients
    } else if (contains(d.message, "sharded by FSDP1 (")) {
      s.wrapApi = "fsdp1";
      s.shape = "clip-torch";
    } else {
      return fail("cannot tell the shape of this SL203 finding from its message");
    }
  } else if (d.code == "SL201") {
    // accelerate FSDP2 refuses a model and an optimizer prepared apart, and prepare_model: the replay
    // makes the same calls and expects accelerate's ValueError.
    s.wrapApi = "accelerate";
    s.fsdpVersion = 2;
    if (contains(text, "prepare_model")) s.shape = "prepare-model";
    else if (contains(text, "prepared in a call of its own")) s.shape = "separate-prepare";
    else return fail("cannot tell the shape of this SL201 finding from its message");
  } else if (d.code == "SL207") {
    // Tied modules in different FSDP units: the stand-in's embedding and head, tied, split as the message says.
    s.fsdpVersion = contains(text, "is sharded by `fully_shard(") ? 2 : 1;
    s.wrapApi = s.fsdpVersion == 2 ? "fully_shard" : "fsdp1";
    if (s.fsdpVersion == 2 && contains(text, "already managed by another FSDP group")) s.shape = "tied-split-root";
    else if (s.fsdpVersion == 2 && contains(text, "each unit shards and updates its own copy")) s.shape = "tied-split-roots";
    else if (s.fsdpVersion == 1 && contains(text, "each unit flattens its own copy") &&
             !contains(text, "use_orig_params=True`, the first forward fails"))
      s.shape = "tied-split-root";
    else if (s.fsdpVersion == 1 && contains(text, "with `use_orig_params=True` the first forward fails")) {
      s.shape = "tied-split-root";
      s.useOrigParams = true;
    } else {
      return fail("cannot tell how this SL207 finding splits the tied modules from its message");
    }
  } else if (d.code == "SL204") {
    // A collective state dict under a rank guard, on rank 0 only: the call the message names. FSDP1's over a
    // group with a collective timeout of seconds; accelerate's on an FSDP2 model, with the probe's watchdog.
    s.wrapApi = "fsdp1";
    s.fsdpVersion = 1;
    if (contains(d.message, ".state_dict()` on an FSDP1 model")) s.shape = "state-dict-rank0-only";
    else if (d.message.rfind("`FSDP.full_optim_state_dict(", 0) == 0) s.shape = "full-optim-state-dict-rank0-only";
    else if (d.message.rfind("`FSDP.optim_state_dict(", 0) == 0) s.shape = "optim-state-dict-rank0-only";
    else if (contains(d.message, ".get_state_dict(...)` of an accelerate FSDP2 model")) s.shape = "accelerate-state-dict-rank0-only";
    else if (contains(d.message, ".save_model(...)` of an accelerate FSDP2 model")) s.shape = "accelerate-save-model-rank0-only";
    else
      return fail("the probe replays SL204 for FSDP1 state_dict() and optimizer state dicts and accelerate FSDP2's "
                  "get_state_dict and save_model, not this call (accelerate FSDP1 and save_state are not replayed)");
    if (s.shape.rfind("accelerate-", 0) == 0) s.wrapApi = "accelerate", s.fsdpVersion = 2;
  } else if (d.code == "SL202") {
    // transformers' Trainer refuses `optimizers=` when FSDP is on (needs transformers on the rank): FSDP from
    // the TrainingArguments, or from the accelerate config the script is launched with.
    s.wrapApi = "trainer";
    s.shape = "trainer-prebuilt-optimizer";
    s.fsdpFrom = contains(text, "the accelerate config the script is launched with") ? "launcher" : "args";
  } else if (d.code == "SL105") {
    // The parameters are replaced after the optimizer was built, then the model is wrapped in a way that
    // keeps (or re-points) the parameters it is given: the message names the replacement and the wrap.
    s.shape = "params-replaced-after-optimizer";
    if (contains(text, "`PeftModel.from_pretrained")) s.replacement = "peft_from_pretrained";
    else if (contains(text, "`get_peft_model`")) s.replacement = "get_peft_model";
    else if (contains(text, "`to_empty`")) s.replacement = "to_empty";
    else if (contains(text, "`load_state_dict(..., assign=True)`")) s.replacement = "load_state_dict_assign";
    else return fail("cannot tell how this SL105 finding replaces the parameters from its message");
    // SL105 leaves the wraps that make the optimizer stale by themselves (use_orig_params=False) to SL101 and
    // SL402: FSDP1 and accelerate FSDP1 are replayed with use_orig_params=True, as are Fabric (Lightning 2.1+'s
    // default) and a use_orig_params the analysis could not read.
    s.useOrigParams = true;
    if (contains(text, "accelerate FSDP2 `prepare`")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 2;
    } else if (contains(text, "after accelerate FSDP1 `prepare` wraps")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 1;
    } else if (contains(text, "after FSDP1 `FullyShardedDataParallel` wraps")) {
      s.wrapApi = "fsdp1";
      s.fsdpVersion = 1;
    } else if (contains(text, "after FSDP2 `fully_shard` wraps")) {
      s.wrapApi = "fully_shard";
    } else if (contains(text, "after Fabric FSDP `setup_module` wraps")) {
      s.wrapApi = "fabric";
      s.fsdpVersion = 1;
      // `fabric.setup(model, optimizer)` (joint) or `setup_module`: the note at the wrap says which.
      for (const auto& n : d.notes) {
        if (n.message != "the model is wrapped here" || n.location.path != d.location.path) continue;
        size_t b = n.location.range.begin, e = n.location.range.end;
        if (e <= b || e > source.size()) continue;
        std::string call = source.substr(b, e - b);
        s.joint = contains(call, ".setup(");
      }
    } else {
      return fail("cannot tell which FSDP API the finding is about from its message");
    }
  } else if (d.code == "SL402") {
    // accelerate FSDP1 with use_orig_params false (the plugin's default or the config's) and an
    // optimizer built before prepare: SL101's accelerate FSDP1 replay, judged like SL101.
    s.shape = "optimizer-before-wrap";
    s.wrapApi = "accelerate";
    s.fsdpVersion = 1;
    s.useOrigParams = false;
  } else if (d.code == "SL101") {
    s.shape = "optimizer-before-wrap";
    if (contains(text, "FSDP2 `fully_shard`")) {
      s.wrapApi = "fully_shard";
    } else if (contains(text, "FSDP1 `FullyShardedDataParallel`")) {
      s.wrapApi = "fsdp1";
      s.fsdpVersion = 1;
      s.useOrigParams = false;
    } else if (contains(text, "accelerate FSDP1")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 1;
      s.useOrigParams = false;
    } else if (contains(text, "accelerate FSDP2")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 2;
    } else if (contains(text, "Fabric")) {
      // SL101 reports Fabric only with use_orig_params=False (written in FSDPStrategy, or the default of a
      // Lightning before 2.1 that the project pins): the replay passes it explicitly.
      s.wrapApi = "fabric";
      s.fsdpVersion = 1;
      s.useOrigParams = false;
    } else {
      return fail("cannot tell which FSDP API the finding is about from its message");
    }
  } else if (d.code == "SL102") {
    if (contains(text, "accelerate's FSDP2 `prepare`") || contains(text, "accelerate FSDP2")) {
      s.wrapApi = "accelerate";
      s.fsdpVersion = 2;
      s.shape = "stray-param-before-prepare";
    } else if (contains(text, "FSDP2 mixes plain tensors") || contains(text, "FSDP2 `fully_shard`")) {
      s.wrapApi = "fully_shard";
      s.shape = "stray-param-after-wrap";
    } else if (contains(text, "FSDP1 `FullyShardedDataParallel`") || contains(text, "FSDP never reduces")) {
      s.wrapApi = "fsdp1";
      s.fsdpVersion = 1;
      // A later optimizer over FSDP1 parameters only works with use_orig_params=True or the
      // flat parameters; the replay wraps with use_orig_params=True unless the source says False.
      s.useOrigParams = !contains(source, "use_orig_params=False");
      s.shape = "stray-param-after-wrap";
    } else {
      return fail("cannot tell which FSDP API the finding is about from its message");
    }
  } else {  // SL103
    if (contains(text, "excluded from FSDP (`ignored_*`)")) {
      s.shape = "ignored-trainable";
      // The finding's range is the wrap call that ignores them.
      std::string call = at.empty() ? source : at;
      bool fsdp1 = contains(call, "FullyShardedDataParallel") || std::regex_search(call, std::regex(R"(\bFSDP\s*\()"));
      bool fsdp2 = contains(call, "fully_shard");
      if (fsdp1 && !fsdp2) {
        s.wrapApi = "fsdp1";
        s.fsdpVersion = 1;
        s.useOrigParams = contains(call, "use_orig_params=True");
      } else {
        s.wrapApi = "fully_shard";
      }
    } else if (contains(text, "`fully_shard` is applied to submodules")) {
      s.shape = "blocks-without-root";
      s.wrapApi = "fully_shard";
    } else {
      return fail("cannot tell the shape of this SL103 finding from its message");
    }
  }
  // The optimizer class: at the finding (SL101's range is the constructor), else the first
  // replayable optimizer built in the file; AdamW otherwise.
  if (auto o = optimizerIn(at + "("))
    s.optimizer = *o;
  else if (auto o2 = optimizerIn(source))
    s.optimizer = *o2;
  return s;
}

std::optional<ReplaySpec> replaySpecFor(const Diagnostic& d, std::string* whyNot) {
  std::string source;
  readFileBytes(d.location.path, source);
  return replaySpecFor(d, source, whyNot);
}

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
// How long the CPU self-test may take (two gloo ranks, six one-step checks; 15-30 s on two busy cores).
constexpr double kCpuSelfTestTimeoutSeconds = 180.0;

// The self-test lives in the instrumentation package (runtime_probe/python/shardlint_probe/selftest.py);
// this stub runs it with the package on PYTHONPATH.
const char* kCpuFsdpSelfTest =
    "import sys\n"
    "from shardlint_probe.selftest import main\n"
    "if __name__ == \"__main__\":  # torch.multiprocessing imports this file again in each rank\n"
    "    sys.exit(main())\n";

// The self-test's name for the API a replay needs on CPU.
std::string selfTestKey(const ReplaySpec& s) {
  if (s.wrapApi == "fully_shard") return "fsdp2";
  if (s.wrapApi == "fsdp1") return s.useOrigParams ? "fsdp1_orig" : "fsdp1_flat";
  if (s.wrapApi == "accelerate") return "accelerate_fsdp" + std::to_string(s.fsdpVersion);
  if (s.wrapApi == "fabric") return "fabric";
  return "";
}
}  // namespace

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

// ============================================================================================
// Launching
// ============================================================================================

std::vector<std::string> splitWords(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool inWord = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char ch = line[i];
    if (quote) {
      if (ch == quote)
        quote = 0;
      else if (ch == '\\' && quote == '"' && i + 1 < line.size() &&
               (line[i + 1] == '"' || line[i + 1] == '\\' || line[i + 1] == '$'))
        cur += line[++i];
      else
        cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      inWord = true;
    } else if (ch == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      inWord = true;
    } else if (std::isspace(static_cast<unsigned char>(ch))) {
      if (inWord) out.push_back(cur), cur.clear(), inWord = false;
    } else {
      cur += ch;
      inWord = true;
    }
  }
  if (inWord) out.push_back(cur);
  return out;
}

std::string shellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    bool plain = !w.empty() && w.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                   "_-./=:,+@%") == std::string::npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) {
      if (c == '\'')
        out += "'\\''";
      else
        out += c;
    }
    out += '\'';
  }
  return out;
}

std::vector<std::string> launchCommand(const LaunchSpec& spec) {
  std::vector<std::string> cmd;
  if (!spec.srun.empty()) cmd = splitWords(spec.srun);
  cmd.insert(cmd.end(),
             {spec.python, "-m", "torch.distributed.run", "--nproc_per_node", std::to_string(spec.nprocPerNode)});
  if (!spec.nnodes.empty()) cmd.insert(cmd.end(), {"--nnodes", spec.nnodes});
  // torchrun's default rendezvous (`static`) needs a --node-rank per node, which the probe does not
  // pass: every node would be node 0 and wait for the others until the timeout. `c10d` ranks the
  // nodes as they join the store at the endpoint.
  if (!spec.rdzvEndpoint.empty())
    cmd.insert(cmd.end(), {"--rdzv-endpoint", spec.rdzvEndpoint, "--rdzv-backend", "c10d"});
  else if (spec.masterPort > 0)
    cmd.insert(cmd.end(), {"--master_port", std::to_string(spec.masterPort)});
  cmd.insert(cmd.end(), {"--max_restarts", "0"});
  cmd.insert(cmd.end(), spec.program.begin(), spec.program.end());
  return cmd;
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

bool portInUse(int port) {
  if (port <= 0 || port > 65535) return true;
  // torchrun's store listens on all interfaces with SO_REUSEADDR: a bind with SO_REUSEADDR to
  // the wildcard address fails exactly when something listens on the port.
  for (uint32_t host : {INADDR_ANY, INADDR_LOOPBACK}) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return true;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(host);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bool busy = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 1) != 0;
    close(fd);
    if (busy) return true;
  }
  return false;
}

// ---- the runner ----

namespace {

std::string makeRunToken() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d-%u-%08x", static_cast<int>(getpid()), counter++, rd());
  return buf;
}

// Processes whose environment carries the run's token: every descendant, also those torchrun
// starts in sessions of their own, which a process-group kill misses.
std::vector<pid_t> taggedProcesses(const std::string& token) {
  std::vector<pid_t> out;
  std::string needle = "SHARDLINT_PROBE_RUN_TOKEN=" + token;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0 || pid == getpid()) continue;
    std::string path = std::string("/proc/") + e->d_name + "/environ";
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string env;
    char buf[8192];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 && env.size() < (1u << 20)) env.append(buf, static_cast<size_t>(n));
    close(fd);
    size_t at = 0;
    while ((at = env.find(needle, at)) != std::string::npos) {
      size_t after = at + needle.size();
      if ((at == 0 || env[at - 1] == '\0') && (after == env.size() || env[after] == '\0')) {
        out.push_back(static_cast<pid_t>(pid));
        break;
      }
      at = after;
    }
  }
  closedir(d);
  return out;
}

void killAll(pid_t pgid, const std::string& token, int sig) {
  if (pgid > 0) kill(-pgid, sig);
  for (pid_t p : taggedProcesses(token)) kill(p, sig);
}

// The last SIGKILL of a run. One scan can miss a process: /proc/PID/environ reads empty while the
// process is in the middle of an exec (a `setsid sleep` straggler survived about 1 run in 150 that
// way). So scan again until two scans in a row, 20 ms apart, find no tagged process (at most 1 s).
void killAllUntilGone(pid_t pgid, const std::string& token) {
  killAll(pgid, token, SIGKILL);
  int clean = 0;
  for (int round = 0; round < 50 && clean < 2; ++round) {
    usleep(20 * 1000);
    std::vector<pid_t> left = taggedProcesses(token);
    clean = left.empty() ? clean + 1 : 0;
    for (pid_t p : left) kill(p, SIGKILL);
  }
}

}  // namespace

std::string tailLines(const std::string& text, size_t lines) {
  if (lines == 0) return "";
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  size_t pos = end;
  size_t count = 0;
  while (pos > 0) {
    if (text[pos - 1] == '\n' && ++count == lines) break;
    --pos;
  }
  return text.substr(pos, end - pos);
}

RunResult runProcess(const std::vector<std::string>& argv, const RunOptions& options) {
  RunResult r;
  if (argv.empty()) {
    r.startError = "empty command";
    return r;
  }
  // Everything the child needs is prepared before fork.
  std::map<std::string, std::string> envMap;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) envMap[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& k : options.unsetEnv) envMap.erase(k);
  for (const auto& [k, v] : options.env) envMap[k] = v;
  const std::string token = makeRunToken();
  envMap["SHARDLINT_PROBE_RUN_TOKEN"] = token;
  std::vector<std::string> envStrings;
  for (const auto& [k, v] : envMap) envStrings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argCopy = argv;
  for (auto& s : argCopy) args.push_back(s.data());
  args.push_back(nullptr);
  // execvpe searches the PATH of the environment the child gets.
  std::string pathVar = envMap.count("PATH") ? envMap["PATH"] : "/usr/local/bin:/usr/bin:/bin";

  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (options.capture && pipe2(out, O_CLOEXEC) != 0) {
    r.startError = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    r.startError = std::string("pipe: ") + std::strerror(errno);
    if (out[0] >= 0) close(out[0]), close(out[1]);
    return r;
  }
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    r.startError = std::string("fork: ") + std::strerror(errno);
    for (int fd : {out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
    return r;
  }
  if (pid == 0) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (options.capture) {
      dup2(out[1], 1);
      dup2(out[1], 2);
    }
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) {
      int e = errno;
      (void)!write(err[1], &e, sizeof e);
      _exit(127);
    }
    // Search PATH by hand (execvpe reads the parent's PATH).
    const char* file = args[0];
    if (std::strchr(file, '/')) {
      execve(file, args.data(), envp.data());
    } else {
      const char* p = pathVar.c_str();
      char candidate[4096];
      int lastErr = ENOENT;
      while (true) {
        const char* colon = std::strchr(p, ':');
        size_t len = colon ? static_cast<size_t>(colon - p) : std::strlen(p);
        if (len == 0) len = 1, p = ".";  // an empty entry is the current directory
        if (len + std::strlen(file) + 2 < sizeof candidate) {
          std::memcpy(candidate, p, len);
          candidate[len] = '/';
          std::strcpy(candidate + len + 1, file);
          execve(candidate, args.data(), envp.data());
          if (errno != ENOENT && errno != ENOTDIR) lastErr = errno;
        }
        if (!colon) break;
        p = colon + 1;
      }
      errno = lastErr;
    }
    int e = errno;
    (void)!write(err[1], &e, sizeof e);
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so the group exists before any kill
  r.pgid = pid;
  if (out[1] >= 0) close(out[1]);
  close(err[1]);
  int childErrno = 0;
  ssize_t got;
  do got = read(err[0], &childErrno, sizeof childErrno);
  while (got < 0 && errno == EINTR);
  close(err[0]);
  if (got == static_cast<ssize_t>(sizeof childErrno)) {
    waitpid(pid, nullptr, 0);
    if (out[0] >= 0) close(out[0]);
    r.startError = argv[0] + ": " + std::strerror(childErrno);
    r.seconds = secondsSince(start);
    return r;
  }
  r.started = true;

  auto append = [&](const char* data, size_t n) {
    r.output.append(data, n);
    if (r.output.size() > options.maxOutput * 2) r.output.erase(0, r.output.size() - options.maxOutput);
  };
  auto drain = [&](int timeoutMs) {
    if (out[0] < 0) return false;
    pollfd p{out[0], POLLIN, 0};
    int n = poll(&p, 1, timeoutMs);
    if (n <= 0) return false;
    char buf[16384];
    ssize_t k = read(out[0], buf, sizeof buf);
    if (k > 0) {
      append(buf, static_cast<size_t>(k));
      return true;
    }
    if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
      close(out[0]);
      out[0] = -1;
    }
    return false;
  };
  auto idle = [&] {  // wait a little, reading output meanwhile
    if (out[0] >= 0)
      drain(50);
    else
      usleep(20 * 1000);
  };
  auto leaderExited = [&]() {
    siginfo_t info{};
    info.si_pid = 0;
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
  };

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::max(0.0, options.timeoutSeconds)));
  bool exited = false;
  while (true) {
    if (leaderExited()) {
      exited = true;
      break;
    }
    if (Clock::now() >= deadline || gInterrupted) break;
    idle();
  }
  if (!exited) {
    r.timedOut = !gInterrupted;
    // The whole group (and every tagged descendant): SIGTERM, a grace period, then SIGKILL.
    killAll(pid, token, SIGTERM);
    auto graceEnd = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(std::max(0.0, options.killGraceSeconds)));
    while (Clock::now() < graceEnd && !leaderExited()) idle();
  }
  // Whatever is left (of the group, or in sessions of its own; also after a normal exit) goes too.
  killAllUntilGone(pid, token);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status))
    r.exitCode = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.signal = WTERMSIG(status), r.exitCode = -1;
  // Stragglers were killed, so the pipe reaches EOF promptly; read what is left (bounded).
  auto drainEnd = Clock::now() + std::chrono::seconds(2);
  while (out[0] >= 0 && Clock::now() < drainEnd) drain(50);
  if (out[0] >= 0) close(out[0]);
  if (r.output.size() > options.maxOutput) r.output.erase(0, r.output.size() - options.maxOutput);
  r.seconds = secondsSince(start);
  return r;
}

// ============================================================================================
// Reports and verdicts
// ============================================================================================

std::optional<RankReport> parseRankReport(const std::string& text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<RankReport> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail("not valid JSON");
  if (!j.is_object()) return fail("not a JSON object");
  RankReport r;
  std::string bad;  // the first field of the wrong type
  // The field `k` when present, not null and of the type `isType` tests; else nullptr (and a
  // wrong type is recorded in `bad`, saying the field is not `what`).
  auto field = [&](const char* k, bool (json::*isType)() const noexcept, const char* what) -> const json* {
    if (!j.contains(k) || j[k].is_null()) return nullptr;
    if ((j[k].*isType)()) return &j[k];
    if (bad.empty()) bad = std::string("`") + k + "` is not " + what;
    return nullptr;
  };
  auto num = [&](const char* k, auto& dst) {
    if (const json* v = field(k, &json::is_number, "a number")) dst = v->get<std::remove_reference_t<decltype(dst)>>();
  };
  auto str = [&](const char* k, std::string& dst) {
    if (const json* v = field(k, &json::is_string, "a string")) dst = v->get<std::string>();
  };
  auto boolean = [&](const char* k, bool& dst) {
    if (const json* v = field(k, &json::is_boolean, "true or false")) dst = v->get<bool>();
  };
  auto optBool = [&](const char* k, std::optional<bool>& dst) {
    if (const json* v = field(k, &json::is_boolean, "true, false or null")) dst = v->get<bool>();
  };
  if (!j.contains("rank") || !j["rank"].is_number_integer()) return fail("no integer `rank`");
  num("rank", r.rank);
  num("world_size", r.worldSize);
  str("backend", r.backend);
  str("torch_version", r.torchVersion);
  str("accelerate_version", r.accelerateVersion);
  boolean("reached_step", r.reachedStep);
  num("stale_optimizer_entries", r.staleOptimizerEntries);
  num("unmanaged_entries", r.unmanagedEntries);
  optBool("params_changed", r.paramsChanged);
  optBool("diverged", r.diverged);
  optBool("tied_apart", r.tiedApart);
  str("phase", r.phase);
  if (const json* v = field("tied_max_diff", &json::is_number, "a number")) r.tiedMaxDiff = v->get<double>();
  if (const json* v = field("trainable_params", &json::is_number_integer, "an integer")) r.trainableParams = v->get<int>();
  if (const json* v = field("trainable_not_optimized", &json::is_number_integer, "an integer"))
    r.trainableNotOptimized = v->get<int>();
  if (const json* v = field("trainable_not_optimized_names", &json::is_array, "a list")) {
    for (const auto& n : *v)
      if (n.is_string() && r.trainableNotOptimizedNames.size() < 32) r.trainableNotOptimizedNames.push_back(n.get<std::string>());
  }
  str("exception_type", r.exceptionType);
  str("exception_message", r.exceptionMessage);
  num("elapsed_seconds", r.elapsedSeconds);
  if (const json* v = field("notes", &json::is_array, "a list")) {
    for (const auto& n : *v)
      if (n.is_string()) r.notes.push_back(n.get<std::string>());
  }
  // `probe_error` (an extra of the Python reports): the probe could not do its job on this rank
  // (torch or accelerate missing or too old, no process group). It travels as a ProbeError
  // exception when the rank recorded no framework exception of its own.
  std::string probeError;
  str("probe_error", probeError);
  if (!bad.empty()) return fail(bad);
  if (!probeError.empty() && r.exceptionType.empty()) {
    r.exceptionType = "ProbeError";
    r.exceptionMessage = probeError;
  }
  if (r.rank < 0) return fail("negative `rank`");
  return r;
}

std::vector<RankReport> readReports(const std::string& dir, std::vector<std::string>* errors) {
  std::vector<RankReport> out;
  std::error_code ec;
  static const std::regex name(R"(rank(\d+)\.json)");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (std::regex_match(it->path().filename().string(), name)) files.push_back(it->path());
  for (const auto& f : files) {
    std::string text, why;
    if (!readFileBytes(f.string(), text)) {
      if (errors) errors->push_back(f.filename().string() + ": unreadable");
      continue;
    }
    auto r = parseRankReport(text, &why);
    if (!r) {
      if (errors) errors->push_back(f.filename().string() + ": " + why);
      continue;
    }
    out.push_back(*r);
  }
  std::sort(out.begin(), out.end(), [](const RankReport& a, const RankReport& b) { return a.rank < b.rank; });
  return out;
}

namespace {

std::string plural(int n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string exceptionText(const RankReport& r) {
  std::string m = firstLine(r.exceptionMessage, 300);
  return r.exceptionType + (m.empty() ? "" : ": " + m);
}

// Framework errors that show the bug itself.
bool isShardedKeyError(const RankReport& r) {
  return contains(r.exceptionMessage, "couldn't be switched to its sharded version") ||
         contains(r.exceptionMessage, "could not be switched to its sharded version");
}
bool isMixedDTensor(const RankReport& r) {
  return contains(r.exceptionMessage, "mixed torch.Tensor and DTensor") ||
         contains(r.exceptionMessage, "mixed Tensor and DTensor");
}
// accelerate FSDP2's refusals (SL201) and the Trainer's (SL202).
// SL207: torch's refusal of a parameter in two FSDP2 groups (2.13+), at the root's lazy init (first forward).
bool isSharedParamError(const RankReport& r) {
  return r.exceptionType == "ValueError" && contains(r.exceptionMessage, "already managed by another FSDP group");
}

// SL207 with FSDP1 use_orig_params=True: the first forward fails (measured on torch 2.15: `RuntimeError: size
// mismatch`, the head computing with the embedding unit's sharded view).
bool isTiedForwardError(const RankReport& r) { return r.exceptionType == "RuntimeError" && r.phase == "forward"; }

bool isSeparatePrepareError(const RankReport& r) {
  return contains(r.exceptionMessage, "a model and optimizer must be passed together") ||
         contains(r.exceptionMessage, "FSDP2 preparation should be done via");
}
bool isTrainerOptimizersError(const RankReport& r) {
  return contains(r.exceptionMessage, "Passing `optimizers` is not allowed") ||
         contains(r.exceptionMessage, "Passing optimizers is not allowed");
}
// Lightning Fabric's joint `setup(model, optimizer)` refuses an optimizer still holding meta-device tensors
// (parameters materialised by to_empty after it was built): SL105's bug, caught by the framework.
bool isFabricMetaOptimizerError(const RankReport& r) {
  return contains(r.exceptionMessage, "optimizer has references to the model's meta-device parameters");
}
bool isSl101FrameworkError(const RankReport& r) {
  return contains(r.exceptionMessage, "FlatParameter") || isMixedDTensor(r) || isShardedKeyError(r) ||
         contains(r.exceptionMessage, "can't optimize a non-leaf Tensor") ||
         // Lightning's FSDPStrategy.setup_optimizer on an optimizer built before setup_module
         contains(r.exceptionMessage, "does not seem to reference any FSDP parameters");
}

// The run could not test anything: the probe's own environment failed.
std::optional<std::string> probeFailure(const std::vector<RankReport>& reports, const RunOutcome& run) {
  for (const auto& r : reports) {
    if (r.exceptionType == "ShardlintProbeError" || r.exceptionType == "ProbeError")
      return "the probe failed on rank " + std::to_string(r.rank) + ": " + exceptionText(r);
    if (run.mode == "replay" && (r.exceptionType == "ModuleNotFoundError" || r.exceptionType == "ImportError")) {
      std::string v = r.torchVersion.empty() ? run.torchVersion : r.torchVersion;
      if (contains(r.exceptionMessage, "fully_shard"))
        return "torch " + v + " has no `fully_shard` (FSDP2): " + exceptionText(r);
      return "the replay could not import what it needs (torch " + v + "): " + exceptionText(r);
    }
  }
  const std::string& t = run.outputTail;
  if (contains(t, "No module named 'shardlint_probe'"))
    return "the instrumentation package is not importable (No module named 'shardlint_probe')";
  if (contains(t, "No module named torch") || contains(t, "No module named 'torch'"))
    return "the launcher's python has no torch (No module named 'torch')";
  if (reports.empty() && run.mode == "replay" && contains(t, "cannot import name 'fully_shard'"))
    return "torch " + run.torchVersion + " has no `fully_shard` (FSDP2)";
  return std::nullopt;
}

std::string stderrTail(const std::string& tail) {
  std::string t = tailLines(tail, 6);
  std::string out;
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (!out.empty()) out += " | ";
    out += line;
  }
  if (out.size() > 600) out = "..." + out.substr(out.size() - 600);
  return out.empty() ? "(no output)" : out;
}

// SL203: what each rank's replay noted after the backward ("rank R clip norm X; global norm Y").
struct ClipNorm {
  int rank = 0;
  double norm = 0, global = 0;
  std::string normText, globalText;
};

const std::regex& clipNormRe() {
  static const std::regex re(R"(^rank (\d+) clip norm ([0-9.eE+-]+|nan|inf); global norm ([0-9.eE+-]+|nan|inf)$)");
  return re;
}

bool isClipNormNote(const std::string& n) { return std::regex_match(n, clipNormRe()); }

std::vector<ClipNorm> clipNormsOf(const std::vector<RankReport>& reports) {
  std::vector<ClipNorm> out;
  for (const auto& r : reports)
    for (const auto& n : r.notes) {
      std::smatch m;
      if (!std::regex_match(n, m, clipNormRe()) || std::stoi(m[1].str()) != r.rank) continue;
      ClipNorm c{r.rank, std::strtod(m[2].str().c_str(), nullptr), std::strtod(m[3].str().c_str(), nullptr),
                 m[2].str(), m[3].str()};
      out.push_back(c);
      break;
    }
  return out;
}

// Two norms differ beyond float rounding (relative 1e-4).
bool normsDiffer(double a, double b) { return std::fabs(a - b) > 1e-4 * std::max({std::fabs(a), std::fabs(b), 1e-12}); }

// decide(); `nodeRanks` > 0: a multi-node probe with one orchestrator per node, whose report folder
// holds this node's `nodeRanks` ranks only (every node judges its own ranks).
ProbeResult decideOnNode(const std::string& code, const std::vector<RankReport>& reports, const RunOutcome& run,
                         int nodeRanks) {
  ProbeResult res;
  res.backend = run.backend;
  res.worldSize = run.worldSize;
  res.torchVersion = run.torchVersion;
  res.accelerateVersion = run.accelerateVersion;
  res.elapsedSeconds = run.seconds;
  for (const auto& r : reports) {
    if (!r.backend.empty()) res.backend = r.backend;
    if (!r.torchVersion.empty()) res.torchVersion = r.torchVersion;
    if (!r.accelerateVersion.empty()) res.accelerateVersion = r.accelerateVersion;
  }
  if (!reports.empty()) {
    int ws = 0;
    for (const auto& r : reports) ws = std::max(ws, r.worldSize);
    if (ws > 0) res.worldSize = ws;
  }
  // The ranks' notes (what the replay adapted, e.g. accelerate's FSDP switched on in CPU
  // processes) travel with the evidence, each once.
  std::vector<std::string> rankNotes;
  std::vector<ClipNorm> clipNorms = clipNormsOf(reports);  // SL203: read off below, not repeated as notes
  for (const auto& r : reports)
    for (const auto& n : r.notes)
      if (std::find(rankNotes.begin(), rankNotes.end(), n) == rankNotes.end() && !isClipNormNote(n))
        rankNotes.push_back(n);
  std::string nodeScope;  // multi-node: which ranks this node judged
  if (nodeRanks > 0 && !reports.empty()) {
    nodeScope = std::string("multi-node: judged from this node's ") + (reports.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < reports.size(); ++i) nodeScope += (i ? ", " : "") + std::to_string(reports[i].rank);
    nodeScope += " of world size " + std::to_string(res.worldSize) + "; each node judges its own ranks";
  }
  auto verdict = [&](Verdict v, std::string evidence) {
    res.verdict = v;
    res.evidence = std::move(evidence);
    for (const auto& n : rankNotes) res.evidence += " (note: " + firstLine(n, 300) + ")";
    if (!nodeScope.empty()) res.evidence += " (" + nodeScope + ")";
    return res;
  };

  // Which ranks reported, which are missing.
  int expected = run.expectedRanks;
  for (const auto& r : reports) expected = std::max(expected, r.worldSize);
  std::set<int> seen;
  for (const auto& r : reports) seen.insert(r.rank);
  std::vector<int> missing;
  for (int i = 0; i < expected; ++i)
    if (!seen.count(i)) missing.push_back(i);
  std::string missingText;
  if (!missing.empty()) {
    missingText = missing.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < missing.size(); ++i) missingText += (i ? ", " : "") + std::to_string(missing[i]);
    missingText += " wrote no report";
  }
  if (nodeRanks > 0) {
    // The other nodes' ranks report on their own nodes: only this node's can be missing here.
    missingText.clear();
    if (static_cast<int>(reports.size()) < nodeRanks)
      missingText = std::to_string(nodeRanks - static_cast<int>(reports.size())) + " of this node's " +
                    std::to_string(nodeRanks) + " ranks wrote no report";
  }

  // Signals over all ranks.
  int stale = 0, unmanaged = 0, staleRank = -1, unmanagedRank = -1, reached = 0;
  int untrained = 0, untrainedRank = -1, trainable = 0;  // SL105: trainable parameters in no param group
  bool trainableKnown = false;
  const RankReport* untrainedReport = nullptr;
  std::optional<int> unchangedRank, divergedRank;
  bool changedKnown = false, divergenceKnown = false;
  const RankReport* keyError = nullptr;
  const RankReport* mixed = nullptr;
  const RankReport* sl101Error = nullptr;
  const RankReport* firstException = nullptr;
  const RankReport* refused = nullptr;  // SL201 / SL202: the framework's own refusal
  const RankReport* tiedApart = nullptr;  // SL207: the tied weights differ after the step
  bool tieKnown = false;
  for (const auto& r : reports) {
    if (r.reachedStep) ++reached;
    if (r.staleOptimizerEntries > stale) stale = r.staleOptimizerEntries, staleRank = r.rank;
    if (r.unmanagedEntries > unmanaged) unmanaged = r.unmanagedEntries, unmanagedRank = r.rank;
    if (r.trainableParams && r.trainableNotOptimized) {
      trainableKnown = true;
      trainable = std::max(trainable, *r.trainableParams);
      if (*r.trainableNotOptimized > untrained)
        untrained = *r.trainableNotOptimized, untrainedRank = r.rank, untrainedReport = &r;
    }
    if (r.paramsChanged.has_value()) {
      changedKnown = true;
      if (!*r.paramsChanged && !unchangedRank) unchangedRank = r.rank;
    }
    if (r.diverged.has_value()) {
      divergenceKnown = true;
      if (*r.diverged && !divergedRank) divergedRank = r.rank;
    }
    if (r.tiedApart.has_value()) {
      tieKnown = true;
      if (*r.tiedApart && !tiedApart) tiedApart = &r;
    }
    if (!r.exceptionType.empty()) {
      if (!firstException) firstException = &r;
      // A forward that fails in the stand-in whose controls (the same model, the tie kept in one unit) train.
      if (!refused && code == "SL207" && (isSharedParamError(r) || isTiedForwardError(r))) refused = &r;
      if (isShardedKeyError(r) && !keyError) keyError = &r;
      if (isMixedDTensor(r) && !mixed) mixed = &r;
      if (isSl101FrameworkError(r) && !sl101Error) sl101Error = &r;
      if (!refused && ((code == "SL201" && isSeparatePrepareError(r)) || (code == "SL202" && isTrainerOptimizersError(r))))
        refused = &r;
    }
  }
  const int ranksReported = static_cast<int>(reports.size());
  auto onRank = [](int rank) { return " (rank " + std::to_string(rank) + ")"; };

  std::vector<std::string> confirm;
  if (code == "SL101" || code == "SL402") {
    if (stale > 0)
      confirm.push_back("after the wrap the optimizer still held " +
                        plural(stale, "tensor that is not a parameter", "tensors that are not parameters") +
                        " of the wrapped model" + onRank(staleRank));
    if (unchangedRank && reached > 0)
      confirm.push_back("optimizer.step() left the wrapped model's parameters unchanged" + onRank(*unchangedRank));
    if (sl101Error) confirm.push_back("the framework raised " + exceptionText(*sl101Error) + onRank(sl101Error->rank));
  } else if (code == "SL102") {
    if (unmanaged > 0)
      confirm.push_back("the optimizer held " + plural(unmanaged, "tensor", "tensors") + " that no FSDP unit manages" +
                        onRank(unmanagedRank));
    if (keyError) confirm.push_back("accelerate raised " + exceptionText(*keyError) + onRank(keyError->rank));
    if (mixed && mixed != keyError) confirm.push_back("the step raised " + exceptionText(*mixed) + onRank(mixed->rank));
    if (divergedRank)
      confirm.push_back("ranks disagree on the unmanaged parameters after the step (world size " +
                        std::to_string(std::max(res.worldSize, expected)) + ")");
  } else if (code == "SL105") {
    if (untrainedReport) {
      const RankReport& u = *untrainedReport;
      int of = u.trainableParams.value_or(untrained);
      std::string which = untrained == of
                              ? "the optimizer held none of the model's " + plural(of, "trainable parameter", "trainable parameters")
                              : std::to_string(untrained) + " of the model's " + std::to_string(of) +
                                    " trainable parameters are in no param group of the optimizer";
      std::string names;
      for (size_t k = 0; k < u.trainableNotOptimizedNames.size() && k < 2; ++k)
        names += (k ? ", " : "") + u.trainableNotOptimizedNames[k];
      if (u.trainableNotOptimizedNames.size() > 2) names += ", ...";
      confirm.push_back(which + " (rank " + std::to_string(untrainedRank) + (names.empty() ? "" : ": " + names) + ")");
      if (unchangedRank && reached > 0)
        confirm.push_back("optimizer.step() left the model's parameters unchanged" + onRank(*unchangedRank));
    }
    if (keyError) confirm.push_back("accelerate raised " + exceptionText(*keyError) + onRank(keyError->rank));
    for (const auto& r : reports)
      if (isFabricMetaOptimizerError(r)) {
        confirm.push_back("Lightning Fabric raised " + exceptionText(r) + onRank(r.rank));
        break;
      }
  } else if (code == "SL104") {
    if (stale + unmanaged > 0)
      confirm.push_back("after the first step the optimizer held " +
                        plural(stale + unmanaged, "tensor that is not", "tensors that are not") +
                        " among the model's sharded parameters (the unsharded ones the forward left registered)" +
                        onRank(unmanaged >= stale ? unmanagedRank : staleRank));
    if (unchangedRank && reached > 0)
      confirm.push_back("optimizer.step() left the model's parameters unchanged" + onRank(*unchangedRank));
  } else if (code == "SL205") {
    if (mixed)
      confirm.push_back("the forward called as `.forward(...)` raised " + exceptionText(*mixed) + onRank(mixed->rank));
  } else if (code == "SL203") {
    // Confirmed when the clip returned different norms on different ranks (each rank's own shards).
    bool differ = false;
    for (const auto& c : clipNorms) differ = differ || normsDiffer(c.norm, clipNorms.front().norm);
    if (clipNorms.size() >= 2 && differ) {
      std::string each;
      for (size_t i = 0; i < clipNorms.size(); ++i)
        each += std::string(i == 0 ? "" : i + 1 == clipNorms.size() ? " and " : ", ") + clipNorms[i].normText +
                " on rank " + std::to_string(clipNorms[i].rank);
      confirm.push_back("the clip returned " + each + ", where the global norm is " + clipNorms.front().globalText +
                        " on every rank: each rank clipped by its own shard's norm");
    }
  } else if (code == "SL201" || code == "SL202") {
    if (refused)
      confirm.push_back(std::string(code == "SL201" ? "accelerate" : "the Trainer") + " raised " +
                        exceptionText(*refused) + onRank(refused->rank));
  } else if (code == "SL207") {
    if (refused) confirm.push_back("torch raised " + exceptionText(*refused) + " in the " + refused->phase + onRank(refused->rank));
    if (tiedApart) {
      std::string diff;
      if (tiedApart->tiedMaxDiff) {
        std::ostringstream os;
        os << std::setprecision(3) << *tiedApart->tiedMaxDiff;
        diff = " (largest difference " + os.str() + ")";
      }
      confirm.push_back("after the first step the tied embedding and head weights differ" + diff + onRank(tiedApart->rank));
    }
  } else if (code == "SL204") {
    // Confirmed only when a rank that made the call ended in a collective timeout after waiting (or was still
    // waiting when the probe's watchdog gave up), and every other rank says it skipped the call and raised nothing.
    static const std::regex waitedRe(R"(^rank (\d+) waited ([0-9.]+) s in (.+) \(collective timeout (\d+) s\)$)");
    static const std::regex watchedRe(R"(^rank (\d+) was still waiting in (.+) after ([0-9.]+) s \(the probe's watchdog)");
    static const std::regex skippedRe(R"(^rank (\d+) skipped (.+)$)");
    static const std::regex timeoutRe(R"(timed out|timeout)", std::regex::icase);
    const RankReport* caller = nullptr;
    std::string waited, limit, call;
    bool watched = false;
    std::vector<int> skipped;
    bool othersClean = true;
    for (const auto& r : reports) {
      bool skip = false;
      for (const auto& n : r.notes) {
        std::smatch m;
        if (caller) {
        } else if (std::regex_search(n, m, waitedRe) && std::stoi(m[1].str()) == r.rank && !r.exceptionType.empty() &&
                   std::regex_search(r.exceptionMessage, timeoutRe)) {
          caller = &r, waited = m[2].str(), call = m[3].str(), limit = m[4].str();
        } else if (std::regex_search(n, m, watchedRe) && std::stoi(m[1].str()) == r.rank && r.exceptionType.empty()) {
          caller = &r, call = m[2].str(), waited = m[3].str(), watched = true;
        }
        if (std::regex_search(n, m, skippedRe) && std::stoi(m[1].str()) == r.rank) skip = true;
      }
      if (skip) {
        skipped.push_back(r.rank);
        if (!r.exceptionType.empty()) othersClean = false;
      }
    }
    if (caller && !skipped.empty() && othersClean && static_cast<int>(skipped.size()) + 1 == ranksReported) {
      std::string who = skipped.size() == 1 ? "rank " + std::to_string(skipped[0]) : "ranks ";
      if (skipped.size() > 1)
        for (size_t i = 0; i < skipped.size(); ++i) who += (i ? ", " : "") + std::to_string(skipped[i]);
      if (watched)
        confirm.push_back("rank " + std::to_string(caller->rank) + " was still waiting in " + call + "'s collective after " +
                          waited + " s, which " + who + " never joined (the probe's watchdog ended the wait; the "
                          "default group's timeout is far longer)");
      else
        confirm.push_back("rank " + std::to_string(caller->rank) + " waited " + waited + " s in " + call +
                          "'s collective that " + who + " never joined, until the group's " + limit +
                          " s timeout: it raised " + exceptionText(*caller));
    }
  } else if (code == "SL103") {
    if (unmanaged > 0)
      confirm.push_back("the optimizer held " + plural(unmanaged, "tensor", "tensors") + " that no FSDP unit manages" +
                        onRank(unmanagedRank));
    if (mixed) confirm.push_back("the step raised " + exceptionText(*mixed) + onRank(mixed->rank));
    if (divergedRank)
      confirm.push_back("ranks disagree on the parameters outside FSDP after the step (world size " +
                        std::to_string(std::max(res.worldSize, expected)) + ")");
  } else {
    return verdict(Verdict::ProbeError, code + " is not a rule the probe tests");
  }

  if (!confirm.empty()) {
    std::string e;
    for (const auto& c : confirm) e += (e.empty() ? "" : "; ") + c;
    if (!missingText.empty()) e += " (" + missingText + ")";
    return verdict(Verdict::Confirmed, e);
  }

  // Nothing confirms it: could the probe do its job at all?
  if (auto failure = probeFailure(reports, run)) return verdict(Verdict::ProbeError, *failure);

  // Did the run get far enough to refute it?
  if (reports.empty()) {
    if (run.timedOut)
      return verdict(Verdict::NotReached, "timed out after " + fmtSeconds(run.timeoutSeconds) +
                                              " before any rank reported (the whole process group was killed); "
                                              "output: " +
                                              stderrTail(run.outputTail));
    std::string e = "no rank wrote a report (launcher exit code " + std::to_string(run.exitCode) + ")";
    for (const auto& err : run.reportErrors) e += "; " + err;
    return verdict(Verdict::NotReached, e + "; output: " + stderrTail(run.outputTail));
  }
  if (reached == 0) {
    std::string e = "no rank reached the first optimizer step";
    if (firstException)
      e += ": rank " + std::to_string(firstException->rank) + " raised " + exceptionText(*firstException);
    if (run.timedOut) e += "; timed out after " + fmtSeconds(run.timeoutSeconds);
    if (!missingText.empty()) e += "; " + missingText;
    if (!firstException) e += "; output: " + stderrTail(run.outputTail);
    return verdict(Verdict::NotReached, e);
  }
  if (!missingText.empty()) {
    std::string e = missingText + (run.timedOut ? " (timed out after " + fmtSeconds(run.timeoutSeconds) + ")" : "") +
                    "; output: " + stderrTail(run.outputTail);
    return verdict(Verdict::NotReached, e);
  }
  if (reached < ranksReported) {
    std::string e = std::to_string(ranksReported - reached) + " of " + std::to_string(ranksReported) +
                    " ranks did not reach the first optimizer step";
    if (firstException)
      e += ": rank " + std::to_string(firstException->rank) + " raised " + exceptionText(*firstException);
    return verdict(Verdict::NotReached, e);
  }

  std::string e =
      "the first optimizer step ran on " +
      (ranksReported == 1 ? std::string(nodeRanks > 0 ? "this node's rank" : "the only rank")
                          : "all " + std::to_string(ranksReported) + " ranks") +
      " with no sign of the bug: ";
  std::vector<std::string> facts;
  if (code == "SL203") {
    if (clipNorms.size() < 2) {
      facts.push_back(plural(static_cast<int>(clipNorms.size()), "rank", "ranks") +
                      " noted the clip's norm (comparing ranks needs 2 or more)");
    } else {
      bool global = std::all_of(clipNorms.begin(), clipNorms.end(),
                                [](const ClipNorm& c) { return !normsDiffer(c.norm, c.global); });
      facts.push_back("the clip returned " + clipNorms.front().normText + " on every rank" +
                      (global ? ", the global norm" : ", not the global norm " + clipNorms.front().globalText));
    }
  } else if (code == "SL205") {
    facts.push_back("no rank raised the mixed torch.Tensor / DTensor error");
    facts.push_back(changedKnown ? (unchangedRank ? "the step left the parameters unchanged" : "the step changed the parameters")
                                 : "parameter change not measured");
  } else if (code == "SL201" || code == "SL202") {
    facts.push_back(code == "SL201" ? "accelerate's prepare raised no ValueError"
                                    : "the Trainer raised no RuntimeError for the optimizers");
  } else if (code == "SL207") {
    facts.push_back(tieKnown ? "the tied embedding and head weights are still one value after the step"
                             : "the tie was not checked");
  } else if (code == "SL105") {
    facts.push_back(trainableKnown ? "the optimizer held all " + plural(trainable, "trainable parameter", "trainable parameters") +
                                         " of the model"
                                   : "the trainable parameters the optimizer holds were not counted");
    facts.push_back(changedKnown ? (unchangedRank ? "the step left the parameters unchanged" : "the step changed the parameters")
                                 : "parameter change not measured");
  } else if (code == "SL204") {
    static const std::regex returnedRe(R"(^rank (\d+) (.+) returned( \d+ entries)? after )");
    int returned = 0;
    std::string call = "the call";
    for (const auto& r : reports)
      for (const auto& n : r.notes) {
        std::smatch m;
        if (std::regex_search(n, m, returnedRe) && std::stoi(m[1].str()) == r.rank) ++returned, call = m[2].str();
      }
    facts.push_back(returned == ranksReported ? call + " returned on every rank"
                                              : std::to_string(returned) + " of " + std::to_string(ranksReported) +
                                                    " ranks' " + call + " returned, none timed out waiting for the others");
  } else if (code == "SL104") {
    facts.push_back(plural(stale + unmanaged, "optimizer entry", "optimizer entries") +
                    " outside the model's sharded parameters");
    facts.push_back(changedKnown ? "the step changed the parameters" : "parameter change not measured");
  } else if (code == "SL101" || code == "SL402") {
    facts.push_back(plural(stale, "stale optimizer entry", "stale optimizer entries"));
    facts.push_back(changedKnown ? "the step changed the parameters" : "parameter change not measured");
  } else {
    facts.push_back(plural(unmanaged, "unmanaged optimizer entry", "unmanaged optimizer entries"));
    if (divergenceKnown)
      facts.push_back("ranks agree after the step");
    else if (res.worldSize < 2)
      facts.push_back("divergence not checked (world size 1: it needs 2 or more ranks)");
    else
      facts.push_back("divergence not measured");
  }
  for (size_t i = 0; i < facts.size(); ++i) e += (i ? ", " : "") + facts[i];
  if (firstException)
    e += "; later rank " + std::to_string(firstException->rank) + " raised " + exceptionText(*firstException);
  return verdict(Verdict::NotReproduced, e);
}

}  // namespace

ProbeResult decide(const std::string& code, const std::vector<RankReport>& reports, const RunOutcome& run) {
  return decideOnNode(code, reports, run, 0);
}

ProbeResult mergeDivergencePass(const ProbeResult& first, const ProbeResult& second) {
  ProbeResult r = first;
  r.backend = first.backend + "+" + second.backend;
  r.worldSize = std::max(first.worldSize, second.worldSize);
  r.elapsedSeconds = first.elapsedSeconds + second.elapsedSeconds;
  std::string firstPart = first.backend + " (world size " + std::to_string(first.worldSize) + "): " + first.evidence;
  std::string secondPart =
      second.backend + " (world size " + std::to_string(second.worldSize) + "): " + second.evidence;
  if (first.verdict == Verdict::Confirmed) return r;
  if (second.verdict == Verdict::Confirmed || second.verdict == Verdict::NotReproduced) {
    r.verdict = second.verdict;
    r.evidence = secondPart + "; " + firstPart;
    return r;
  }
  r.evidence = firstPart + "; the divergence pass on " + second.backend + " was " +
               std::string(verdictName(second.verdict)) + ": " + second.evidence;
  return r;
}

std::string verdictText(const ProbeResult& r) {
  std::string s = "probe: " + std::string(verdictName(r.verdict)) + " \u2014 " + r.evidence;
  std::vector<std::string> ctx;
  if (!r.backend.empty()) ctx.push_back(r.backend);
  if (r.worldSize > 0) ctx.push_back("world size " + std::to_string(r.worldSize));
  if (!r.torchVersion.empty()) ctx.push_back("torch " + r.torchVersion);
  if (!r.accelerateVersion.empty()) ctx.push_back("accelerate " + r.accelerateVersion);
  ctx.push_back(fmtSeconds(r.elapsedSeconds));
  s += " [";
  for (size_t i = 0; i < ctx.size(); ++i) s += (i ? ", " : "") + ctx[i];
  return s + "]";
}

void attachVerdict(Diagnostic& d, const ProbeResult& r) { d.notes.push_back({d.location, verdictText(r)}); }

namespace {
json verdictObject(const ProbeResult& r) {
  double secs = std::round(r.elapsedSeconds * 1000.0) / 1000.0;
  json j = {{"verdict", std::string(verdictName(r.verdict))},
            {"evidence", r.evidence},
            {"backend", r.backend.empty() ? json(nullptr) : json(r.backend)},
            {"world_size", r.worldSize},
            {"torch_version", r.torchVersion.empty() ? json(nullptr) : json(r.torchVersion)},
            {"accelerate_version", r.accelerateVersion.empty() ? json(nullptr) : json(r.accelerateVersion)},
            {"elapsed_seconds", secs}};
  if (r.replay) {
    const ReplaySpec& s = *r.replay;
    j["replay"] = {{"shape", s.shape},
                   {"wrap_api", s.wrapApi},
                   {"use_orig_params", s.wrapApi == "fully_shard" || s.wrapApi == "trainer" ? json(nullptr) : json(s.useOrigParams)},
                   {"fsdp_version", s.wrapApi == "accelerate" || (s.wrapApi == "trainer" && s.fsdpFrom == "launcher")
                                        ? json(s.fsdpVersion)
                                        : json(nullptr)},
                   {"joint", s.wrapApi == "fabric" ? json(s.joint) : json(nullptr)},
                   {"replacement", s.replacement.empty() ? json(nullptr) : json(s.replacement)},
                   {"fsdp_from", s.wrapApi == "trainer" ? json(s.fsdpFrom) : json(nullptr)},
                   {"optimizer", s.optimizer},
                   {"shared_with", r.sharedWith.empty() ? json(nullptr) : json(r.sharedWith)}};
  }
  return j;
}
std::string findingKey(const std::string& code, const std::string& path, long line, long column,
                       const std::string& message) {
  return code + "\x1f" + path + "\x1f" + std::to_string(line) + "\x1f" + std::to_string(column) + "\x1f" + message;
}
}  // namespace

std::string verdictJson(const ProbeResult& r) { return verdictObject(r).dump(); }

std::string addProbeToJson(const std::string& text, const std::vector<Diagnostic>& diags,
                           const std::map<size_t, ProbeResult>& results, const std::vector<Diagnostic>& controls,
                           const std::map<size_t, ProbeResult>& controlResults) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("findings") || !doc["findings"].is_array()) return text;
  std::map<std::string, const ProbeResult*> byKey;
  for (const auto& [i, r] : results)
    if (i < diags.size()) {
      const Diagnostic& d = diags[i];
      byKey[findingKey(d.code, d.location.path, static_cast<long>(d.location.start.line) + 1,
                       static_cast<long>(d.location.start.codepointColumn) + 1, d.message)] = &r;
    }
  for (auto& f : doc["findings"]) {
    if (!f.is_object()) continue;
    auto key = findingKey(f.value("code", ""), f.value("path", ""), f.value("line", 0L), f.value("column", 0L),
                          f.value("message", ""));
    auto it = byKey.find(key);
    if (it != byKey.end()) f["probe"] = verdictObject(*it->second);
  }
  if (!controls.empty()) {
    // The patterns the rules found correct, each with the verdict of its replay (--controls).
    json list = json::array();
    for (size_t i = 0; i < controls.size(); ++i) {
      const Diagnostic& c = controls[i];
      json item = {{"code", c.code},
                   {"path", c.location.path},
                   {"line", c.location.start.line + 1},
                   {"column", c.location.start.codepointColumn + 1},
                   {"message", c.message},
                   {"facts", c.facts}};
      if (auto it = controlResults.find(i); it != controlResults.end()) item["probe"] = verdictObject(it->second);
      list.push_back(std::move(item));
    }
    doc["controls"] = std::move(list);
  }
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void writeControls(std::ostream& out, const std::vector<Diagnostic>& controls,
                   const std::map<size_t, ProbeResult>& controlResults) {
  out << "\nControls (patterns the rules found correct, replayed to check that silence):\n";
  for (size_t i = 0; i < controls.size(); ++i) {
    const Diagnostic& c = controls[i];
    out << c.location.path << ":" << c.location.start.line + 1 << ":" << c.location.start.codepointColumn + 1 << ": "
        << c.code << " control: " << c.message;
    if (auto it = controlResults.find(i); it != controlResults.end()) out << " [" << verdictText(it->second) << "]";
    out << "\n";
  }
}

// ============================================================================================
// The command
// ============================================================================================

std::string instrumentationDir() {
  std::error_code ec;
  if (const char* env = std::getenv("SHARDLINT_PROBE_PYTHONPATH"); env && *env) return env;
  std::vector<fs::path> candidates;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = exe.parent_path();
    candidates.push_back(dir / ".." / "runtime_probe" / "python");         // build/ inside the tree
    candidates.push_back(dir / ".." / "share" / "shardlint" / "python");   // an install prefix
    candidates.push_back(dir / ".." / ".." / "runtime_probe" / "python");  // build/sub/
  }
#ifdef SHARDLINT_SOURCE_DIR
  candidates.push_back(fs::path(SHARDLINT_SOURCE_DIR) / "runtime_probe" / "python");
#endif
  for (const auto& c : candidates)
    if (fs::is_directory(c, ec)) return fs::weakly_canonical(c, ec).string();
  return "";
}

Session::Session(ProbeOptions options, std::ostream& log) : options_(std::move(options)), log_(log) {}

std::string cxxProbeLibrary() {
  std::error_code ec;
  if (const char* env = std::getenv("SHARDLINT_CXX_PROBE_LIB"); env && *env) return env;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::is_regular_file(exe.parent_path() / "libshardlint_cxxprobe.so", ec))
    return (exe.parent_path() / "libshardlint_cxxprobe.so").string();
#ifdef SHARDLINT_CXX_PROBE_LIB
  if (fs::is_regular_file(SHARDLINT_CXX_PROBE_LIB, ec)) return SHARDLINT_CXX_PROBE_LIB;
#endif
  return "";
}

ProbeResult cxxVerdict(const std::string& reportJson) {
  ProbeResult r;
  r.backend = "none";
  r.worldSize = 1;
  nlohmann::json j = nlohmann::json::parse(reportJson, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("parameters") || !j["parameters"].is_array()) {
    r.verdict = Verdict::ProbeError;
    r.evidence = "the probe library's report is not valid JSON";
    return r;
  }
  int groups = j.value("param_groups", 0);
  // Late: registered after the first optimizer was built, trainable, in no optimizer. With a gradient
  // the backward pass reached it, and no step() will ever apply that gradient.
  std::vector<std::string> lateTrained, lateIdle;
  int optimizedMoved = 0, optimized = 0;
  for (const auto& p : j["parameters"]) {
    std::string name = p.value("module", std::string("?")) + "." + p.value("name", std::string("?"));
    if (p.value("optimized", false)) {
      ++optimized;
      optimizedMoved += p.value("moved", false);
    } else if (p.value("after_optimizer", false) && p.value("requires_grad", true)) {
      (p.value("has_grad", false) ? lateTrained : lateIdle).push_back(name);
    }
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 6; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 6) out += ", ...";
    return out;
  };
  std::string stepped = optimized == 0 ? "the optimizer holds no parameter at all"
                                       : std::to_string(optimizedMoved) + " of " + std::to_string(optimized) +
                                             " optimized parameters moved";
  if (groups == 0) {
    r.verdict = Verdict::NotReached;
    r.evidence = "the program built no LibTorch optimizer before it exited";
  } else if (lateTrained.empty() && lateIdle.empty()) {
    r.verdict = Verdict::NotReproduced;
    r.evidence = "every trainable parameter registered after the first optimizer was built is in an optimizer";
  } else if (lateTrained.empty()) {
    r.verdict = Verdict::NotReached;
    r.evidence = std::to_string(lateIdle.size()) + " parameter(s) registered after the optimizer are in no optimizer (" +
                 list(lateIdle) + ") but got no gradient: the program ran no backward pass through them";
  } else if (optimized > 0 && optimizedMoved == 0) {
    r.verdict = Verdict::NotReached;
    r.evidence = std::to_string(lateTrained.size()) + " parameter(s) registered after the optimizer got gradients but "
                 "are in no optimizer (" + list(lateTrained) + "); no optimizer step ran (" + stepped + ")";
  } else {
    r.verdict = Verdict::Confirmed;
    r.evidence = std::to_string(lateTrained.size()) + " parameter(s) registered after the optimizer was built got "
                 "gradients but are in no optimizer, so step() never updates them (" + list(lateTrained) + "); " +
                 stepped;
  }
  return r;
}

int Session::runCxx(std::vector<Diagnostic>& diags) {
  const ProbeOptions& o = options_;
  std::vector<size_t> probed;
  for (size_t i = 0; i < diags.size(); ++i)
    if (diags[i].code == "SL501") probed.push_back(i);
  if (probed.empty()) {
    log_ << "shardlint probe: no SL501 finding to probe\n";
    return 0;
  }
  if (o.runCommand.empty()) {
    log_ << "shardlint: error: --mode cxx needs --run CMD (the command that runs the program; --build CMD builds "
            "it first)\n";
    return 2;
  }
  std::string lib = cxxProbeLibrary();
  if (lib.empty()) {
    log_ << "shardlint: error: the C++ probe library (libshardlint_cxxprobe.so) was not built: it needs LibTorch "
            "(libtorch-dev) at build time; or set SHARDLINT_CXX_PROBE_LIB\n";
    return 2;
  }
  auto started = std::chrono::steady_clock::now();
  auto finishAll = [&](ProbeResult r) {
    r.elapsedSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (size_t i : probed) {
      log_ << "  " << diags[i].code << " " << diags[i].location.path << ":" << diags[i].location.start.line + 1
           << ": " << verdictName(r.verdict) << "\n";
      results_[i] = r;
    }
  };
  RunOptions ro;
  ro.timeoutSeconds = o.timeoutSeconds;
  if (!o.buildCommand.empty()) {
    log_ << "shardlint probe: building: " << o.buildCommand << "\n";
    RunResult b = runProcess({"/bin/sh", "-c", o.buildCommand}, ro);
    if (!b.started || b.timedOut || b.exitCode != 0) {
      ProbeResult r;
      r.verdict = Verdict::ProbeError;
      r.evidence = "the build command " +
                   std::string(b.timedOut ? "timed out" : "failed (exit " + std::to_string(b.exitCode) + ")") + ": " +
                   tailLines(b.output, 3);
      finishAll(r);
      return 0;
    }
  }
  char tmpl[] = "/tmp/shardlint-cxxprobe-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    log_ << "shardlint: error: cannot create a temporary folder for the probe report\n";
    return 2;
  }
  fs::path report = fs::path(tmpl) / "report.json";
  ro.env["SHARDLINT_CXX_PROBE_REPORT"] = report.string();
  const char* preload = std::getenv("LD_PRELOAD");
  ro.env["LD_PRELOAD"] = lib + (preload && *preload ? std::string(":") + preload : std::string());
  log_ << "shardlint probe: running: " << o.runCommand << " (with " << lib << " preloaded)\n";
  RunResult run = runProcess({"/bin/sh", "-c", o.runCommand}, ro);
  std::string text;
  ProbeResult r;
  if (!readFileBytes(report.string(), text)) {
    r.verdict = run.timedOut ? Verdict::ProbeError : Verdict::NotReached;
    r.evidence = run.timedOut ? "the program timed out" :
                 "the program wrote no probe report (it never registered a parameter or built an optimizer, or it "
                 "is not dynamically linked to LibTorch); exit " + std::to_string(run.exitCode) + ": " +
                     tailLines(run.output, 3);
  } else {
    r = cxxVerdict(text);
    if (run.exitCode != 0) r.evidence += " (the program exited with " + std::to_string(run.exitCode) + ")";
  }
  std::error_code ec;
  if (!o.keep) fs::remove_all(tmpl, ec);
  else log_ << "shardlint probe: kept " << tmpl << "\n";
  finishAll(r);
  return 0;
}

namespace {

struct Pass {
  std::vector<RankReport> reports;
  RunOutcome outcome;
  int nodeRanks = 0;  // multi-node with one orchestrator per node: this node's ranks (decideOnNode)
};

struct SignalGuard {
  struct sigaction oldInt {
  }, oldTerm{};
  SignalGuard() {
    gInterrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
  }
};

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.size() > 40) out = out.substr(out.size() - 40);
  return out;
}

int expectedRanksFor(const ProbeOptions& o, int perNode) {
  if (o.nnodes.empty()) return perNode;
  if (o.nnodes.find_first_not_of("0123456789") == std::string::npos) return perNode * std::atoi(o.nnodes.c_str());
  return 0;  // elastic "MIN:MAX": the reports' world_size decides
}

// Several nodes: `--nnodes 2`, `1:4` (not `1` or `1:1`).
bool multiNode(const ProbeOptions& o) { return !o.nnodes.empty() && o.nnodes != "1" && o.nnodes != "1:1"; }

// `--rdzv-conf` for a multi-node launch: $PET_RDZV_CONF (torchrun's environment form of the option,
// which the explicit option would override) first, then join_timeout and read_timeout where it sets
// neither: half of --timeout (at least 5 s) instead of torchrun's 600 s and 60 s, so a node whose
// peers never join, or whose endpoint cannot be reached, fails at the rendezvous before the run is killed.
std::string rendezvousConf(double timeoutSeconds) {
  const char* env = std::getenv("PET_RDZV_CONF");
  std::string conf = env ? env : "";
  const std::string wait = std::to_string(std::max(5, static_cast<int>(timeoutSeconds / 2)));
  for (const std::string key : {"join_timeout", "read_timeout"}) {
    bool given = false;
    std::istringstream items(conf);
    for (std::string item; std::getline(items, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      if (item.rfind(key + "=", 0) == 0) given = true;
    }
    if (!given) conf += (conf.empty() ? "" : ",") + key + "=" + wait;
  }
  return conf;
}

// One line for a launch that failed at the rendezvous, from torchrun's output ("" when it did not).
std::string rendezvousFailure(const std::string& output, const ProbeOptions& o, const std::string& conf) {
  static const std::regex errorLine(R"(torch\.distributed\.elastic\.rendezvous\.api\.(Rendezvous\w*Error)[^\n]*)");
  std::string last, name;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), errorLine); it != std::sregex_iterator(); ++it)
    last = it->str(), name = (*it)[1].str();
  if (name.empty()) return "";
  std::string why;
  if (name == "RendezvousTimeoutError") {
    why = "the rendezvous at " + o.rdzvEndpoint + " timed out: not every node joined (--nnodes " + o.nnodes + ")";
  } else if (name == "RendezvousConnectionError") {
    why = "cannot reach the rendezvous store at " + o.rdzvEndpoint;
    std::smatch m;
    if (std::regex_search(output, m, std::regex(R"(errno: (\d+) - ([^)\n]+))")))
      why += " (" + m[2].str() + ", errno " + m[1].str() + ")";
  } else {
    why = "the rendezvous at " + o.rdzvEndpoint + " failed (" + name + ")";
  }
  return why + " [--rdzv-conf " + conf + "]\n" + last;
}

}  // namespace

int Session::exitCode(const std::vector<Diagnostic>& diags) const {
  for (size_t i = 0; i < diags.size(); ++i) {
    auto it = results_.find(i);
    if (it == results_.end() || it->second.verdict != Verdict::NotReproduced) return 1;
  }
  // A control the run confirmed is a bug the rules did not report.
  for (const auto& [i, r] : controlResults_)
    if (r.verdict == Verdict::Confirmed) return 1;
  return 0;
}

int Session::run(std::vector<Diagnostic>& diags) {
  if (options_.mode == "cxx") return runCxx(diags);
  // Controls (--controls, replay mode) are probed like findings: they ride at the end of `diags`
  // for this call and leave it, with their results, on every way out.
  const size_t nFindings = diags.size();
  if (options_.mode == "replay")
    for (const auto& c : controls_)
      if (probedCode(c.code)) diags.push_back(c);
  struct Split {
    Session& self;
    std::vector<Diagnostic>& diags;
    size_t n;
    ~Split() {
      self.controls_.assign(std::make_move_iterator(diags.begin() + static_cast<long>(n)),
                            std::make_move_iterator(diags.end()));
      diags.resize(n);
      for (auto it = self.results_.begin(); it != self.results_.end();) {
        if (it->first < n) {
          ++it;
          continue;
        }
        self.controlResults_[it->first - n] = std::move(it->second);
        it = self.results_.erase(it);
      }
    }
  } split{*this, diags, options_.mode == "replay" ? nFindings : diags.size()};
  std::vector<size_t> probed;
  for (size_t i = 0; i < diags.size(); ++i)
    if (probedCode(diags[i].code)) probed.push_back(i);
  if (probed.empty()) {
    log_ << "shardlint probe: no " << probedCodesText("or") << " finding"
         << (controls_.empty() ? "" : " or control")
         << " to probe\n";
    return 0;
  }
  const ProbeOptions& o = options_;
  if (o.mode != "replay" && o.mode != "script") {
    log_ << "shardlint: error: --mode must be replay, script or cxx\n";
    return 2;
  }
  if (o.mode == "script") {
    std::error_code ec;
    if (o.script.empty() || !fs::is_regular_file(o.script, ec) || fs::path(o.script).extension() != ".py") {
      log_ << "shardlint: error: --mode script runs the first PATH, which must be a Python file"
           << (o.script.empty() ? "" : " (got " + o.script + ")") << "\n";
      return 2;
    }
  }
  if (o.timeoutSeconds <= 0) {
    log_ << "shardlint: error: --timeout must be positive\n";
    return 2;
  }
  if (multiNode(o) && o.rdzvEndpoint.empty()) {
    // Without an endpoint every node's torchrun would wait for the others on its own 127.0.0.1.
    log_ << "shardlint: error: --nnodes " << o.nnodes
         << " needs --rdzv-endpoint HOST:PORT (one node's address, the same on every node)\n";
    return 2;
  }
  const std::string pyDir = instrumentationDir();
  if (pyDir.empty()) {
    log_ << "shardlint: error: the probe's Python package (runtime_probe/python) was not found next to the "
            "executable or in the source tree; set SHARDLINT_PROBE_PYTHONPATH to its folder\n";
    return 2;
  }
  if (o.masterPort && portInUse(*o.masterPort)) {
    log_ << "shardlint: error: --master-port " << *o.masterPort
         << " is already in use; pick another port or leave it out (a free one is chosen)\n";
    return 2;
  }

  // Which APIs the findings need (decides the CPU self-test that counts).
  std::map<size_t, std::optional<ReplaySpec>> specs;
  std::map<size_t, std::string> whyNot;
  bool needsFsdp2 = false;
  for (size_t i : probed) {
    std::string why;
    auto s = replaySpecFor(diags[i], &why);
    if (s && usesFsdp2(*s)) needsFsdp2 = true;
    specs[i] = s;
    whyNot[i] = why;
  }

  SignalGuard guard;  // Ctrl-C: the runner kills the current process group, then we stop
  auto interrupted = [&] {
    if (!gInterrupted) return false;
    log_ << "shardlint probe: interrupted; the launched processes were killed\n";
    return true;
  };
  torch_ = probeTorch(o.python, o.torchProbeTimeout);
  if (interrupted()) return 130;
  if (!torch_.ok) {
    log_ << "shardlint: error: the probe needs PyTorch, and `" << o.python << "` cannot import it: " << torch_.error
         << "\n  install torch (2.4 or later for FSDP2 `fully_shard`) or pass --python with an interpreter that has "
            "it\n";
    return 2;
  }
  if (!torch_.distributed) {
    log_ << "shardlint: error: torch " << torch_.torchVersion << " was built without torch.distributed\n";
    return 2;
  }
  int smiGpus = countVisibleGpus();
  int gpus = std::min(smiGpus > 0 ? smiGpus : torch_.cudaDevices, torch_.cudaDevices);
  log_ << "shardlint probe: " << o.python << ": python " << torch_.pythonVersion << ", torch " << torch_.torchVersion
       << ", accelerate " << (torch_.accelerateVersion.empty() ? "not installed" : torch_.accelerateVersion) << "; "
       << gpus << (gpus == 1 ? " GPU" : " GPUs") << " visible to torch (nvidia-smi: " << smiGpus << ")\n";
  bool wantCpu = o.backend == "gloo" || (o.backend == "auto" && gpus < o.nproc) ||
                 (o.backend == "nccl" && gpus < o.nproc && o.nproc >= 2);
  if (wantCpu && torch_.gloo) {
    log_ << "shardlint probe: checking FSDP on CPU with gloo (2 ranks, one step)...\n";
    // Its own limit, not --timeout (the limit of the user's run): under load the self-test takes
    // 15-30 s, and a short --timeout must not turn it into "gloo cannot run FSDP" (exit 2).
    probeCpuFsdp(o.python, kCpuSelfTestTimeoutSeconds, torch_, pyDir, cacheDir_);
    if (interrupted()) return 130;
    if (!torch_.cpuSelfTestCached.empty())
      log_ << "shardlint probe: the CPU self-test's answer for this interpreter is cached (" << torch_.cpuSelfTestCached
           << "; --no-cache runs it again)\n";
    if (std::string summary = cpuSelfTestSummary(torch_); !summary.empty())
      log_ << "shardlint probe: CPU self-test (2 gloo ranks, one step each): " << summary << "\n";
    for (const auto& n : torch_.cpuNotes) log_ << "  note: " << n << "\n";
  }
  BackendChoice choice = chooseBackend(o.backend, o.nproc, gpus, torch_, needsFsdp2);
  if (!choice.ok) {
    log_ << "shardlint: error: " << choice.reason << "\n";
    return 2;
  }
  log_ << "shardlint probe: backend " << choice.reason << "\n";

  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec) /
                  ("shardlint-probe-" + std::to_string(getpid()) + "-" +
                   std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000));
  fs::create_directories(base, ec);
  if (ec) {
    log_ << "shardlint: error: cannot create a temporary folder " << base.string() << ": " << ec.message() << "\n";
    return 2;
  }

  auto launch = [&](const std::vector<std::string>& program, const BackendChoice& c, const fs::path& dir,
                    const std::string& findingId) {
    Pass p;
    fs::path outDir = dir / (c.backend + "-" + std::to_string(c.worldSize));
    fs::create_directories(outDir, ec);
    LaunchSpec ls;
    ls.python = o.python;
    ls.nprocPerNode = c.worldSize;
    ls.nnodes = o.nnodes;
    ls.rdzvEndpoint = o.rdzvEndpoint;
    ls.srun = o.srun;
    ls.program = program;
    bool autoPort = !o.masterPort && o.rdzvEndpoint.empty();
    ls.masterPort = o.masterPort ? *o.masterPort : (o.rdzvEndpoint.empty() ? freePort() : 0);
    RunOptions ro;
    ro.timeoutSeconds = o.timeoutSeconds;
    const char* oldPath = std::getenv("PYTHONPATH");
    ro.env["PYTHONPATH"] = pyDir + (oldPath && *oldPath ? ":" + std::string(oldPath) : "");
    ro.env["SHARDLINT_PROBE_OUT"] = outDir.string();
    ro.env["SHARDLINT_PROBE_MODE"] = o.mode;
    ro.env["SHARDLINT_PROBE_BACKEND"] = c.backend;
    ro.env["SHARDLINT_PROBE_DEVICE"] = c.device;
    ro.env["SHARDLINT_PROBE_FINDING"] = findingId;  // {"code", "path", "line"}
    // Collectives give up (and the ranks report) well before the run is killed.
    ro.env["SHARDLINT_PROBE_TIMEOUT"] = std::to_string(std::max(5, static_cast<int>(o.timeoutSeconds * 0.75)));
    ro.env["PYTHONUNBUFFERED"] = "1";
    if (c.device == "cpu") ro.env["CUDA_VISIBLE_DEVICES"] = "";  // gloo on CPU: torch must not pick a GPU
    const std::string rdzvConf = o.rdzvEndpoint.empty() ? "" : rendezvousConf(o.timeoutSeconds);
    RunResult rr;
    bool portClash = false;
    for (int attempt = 0; attempt < 2; ++attempt) {
      for (const auto& f : fs::directory_iterator(outDir, ec)) fs::remove(f.path(), ec);
      auto cmd = launchCommand(ls);
      if (!rdzvConf.empty())  // after launchCommand's `--rdzv-backend c10d`
        cmd.insert(std::find(cmd.begin(), cmd.end(), "c10d") + 1, {"--rdzv-conf", rdzvConf});
      log_ << "  $ " << shellJoin(cmd) << "\n";
      rr = runProcess(cmd, ro);
      // A clash at start (another job took the chosen port): nothing ran, so run again once.
      portClash = addressInUse(rr.output);
      if (!(portClash && autoPort && attempt == 0 && readReports(outDir.string()).empty())) break;
      ls.masterPort = freePort();
      log_ << "  port clash; retrying on port " << ls.masterPort << "\n";
    }
    std::ofstream(dir / (c.backend + "-" + std::to_string(c.worldSize) + ".log")) << rr.output;
    p.outcome.timedOut = rr.timedOut;
    p.outcome.timeoutSeconds = o.timeoutSeconds;
    p.outcome.exitCode = rr.exitCode;
    p.outcome.outputTail = rr.started ? tailLines(rr.output, 40) : rr.startError;
    p.outcome.expectedRanks = expectedRanksFor(o, c.worldSize);
    p.outcome.backend = c.backend;
    p.outcome.worldSize = c.worldSize * std::max(1, o.nnodes.empty() ? 1 : std::atoi(o.nnodes.c_str()));
    p.outcome.seconds = rr.seconds;
    p.outcome.torchVersion = torch_.torchVersion;
    p.outcome.accelerateVersion = torch_.accelerateVersion;
    p.outcome.mode = o.mode;
    p.reports = readReports(outDir.string(), &p.outcome.reportErrors);
    if (!rr.started) p.outcome.outputTail = "cannot start the launcher: " + rr.startError;
    if (o.masterPort && portClash && p.reports.empty())
      p.outcome.outputTail =
          "port " + std::to_string(*o.masterPort) + " is in use (EADDRINUSE); " + p.outcome.outputTail;
    if (!rdzvConf.empty() && rr.started && !rr.timedOut && p.reports.empty())
      if (std::string why = rendezvousFailure(rr.output, o, rdzvConf); !why.empty()) {
        p.outcome.outputTail = why;
        log_ << "  " << why.substr(0, why.find('\n')) << "\n";
      }
    // One orchestrator per node (no srun): this node's folder holds its own ranks' reports only.
    if (multiNode(o) && o.srun.empty()) p.nodeRanks = c.worldSize;
    return p;
  };
  BackendChoice glooPass = choice;
  glooPass.backend = "gloo";
  glooPass.device = "cpu";
  glooPass.worldSize = o.nproc;

  // The divergence pass where the first pass could not check divergence; `g` holds the gloo
  // pass once run (script mode runs it once for all findings).
  auto withGloo = [&](const std::string& code, ProbeResult first, const std::vector<std::string>& program,
                      const fs::path& dir, const std::string& id, std::optional<Pass>& g) {
    if (!choice.divergenceOnGloo || code == "SL101" || code == "SL104" || code == "SL402" || code == "SL105" ||
        code == "SL201" || code == "SL202" || code == "SL203" || code == "SL204" || code == "SL205" || code == "SL207" ||
        first.verdict == Verdict::Confirmed ||
        first.verdict == Verdict::ProbeError || gInterrupted)
      return first;
    if (!g) {
      log_ << "  divergence pass: gloo on CPU, " << o.nproc << " ranks\n";
      g = launch(program, glooPass, dir, id);
    }
    return mergeDivergencePass(first, decideOnNode(code, g->reports, g->outcome, g->nodeRanks));
  };

  auto finish = [&](size_t i, ProbeResult r) {
    log_ << "  " << diags[i].code << " " << diags[i].location.path << ":" << diags[i].location.start.line + 1 << ": "
         << verdictName(r.verdict) << " (" << fmtSeconds(r.elapsedSeconds) << ")\n";
    results_[i] = std::move(r);
  };
  auto errorResult = [&](std::string evidence) {
    ProbeResult r;
    r.verdict = Verdict::ProbeError;
    r.evidence = std::move(evidence);
    r.backend = choice.backend;
    r.worldSize = choice.worldSize;
    r.torchVersion = torch_.torchVersion;
    r.accelerateVersion = torch_.accelerateVersion;
    return r;
  };

  if (o.mode == "script") {
    fs::path dir = base / ("script-" + slug(fs::path(o.script).stem().string()));
    fs::create_directories(dir, ec);
    // runtime_probe/python/sitecustomize.py instruments the script (SHARDLINT_PROBE_MODE=script).
    std::vector<std::string> program = {o.script};
    program.insert(program.end(), o.scriptArgs.begin(), o.scriptArgs.end());
    log_ << "shardlint probe: running " << o.script << " once for " << probed.size()
         << (probed.size() == 1 ? " finding" : " findings") << "\n";
    const std::string id = json{{"code", ""}, {"path", o.script}, {"line", 0}}.dump();
    Pass p = launch(program, choice, dir, id);
    std::optional<Pass> g;
    for (size_t i : probed)
      finish(i, withGloo(diags[i].code, decideOnNode(diags[i].code, p.reports, p.outcome, p.nodeRanks), program, dir, id, g));
  } else {
    // Findings whose replays are the same program (same rule, shape, API, options and optimizer)
    // share one run: the program differs only in the finding's path and line, which it reports.
    std::map<std::string, std::pair<size_t, std::string>> ranReplays;  // key -> (finding index, "path:line")
    auto replayKey = [](const ReplaySpec& s) {
      return s.code + "|" + s.shape + "|" + s.wrapApi + "|" + (s.useOrigParams ? "1" : "0") + "|" +
             std::to_string(s.fsdpVersion) + "|" + (s.joint ? "joint|" : "|") + s.replacement + "|" + s.fsdpFrom +
             "|" + s.optimizer;
    };
    for (size_t i : probed) {
      if (gInterrupted) break;
      const Diagnostic& d = diags[i];
      std::string where = d.location.path + ":" + std::to_string(d.location.start.line + 1);
      const auto& spec = specs[i];
      if (!spec) {
        finish(i, errorResult("not replayable: " + whyNot[i]));
        continue;
      }
      if (auto same = ranReplays.find(replayKey(*spec)); same != ranReplays.end()) {
        ProbeResult r = results_[same->second.first];
        r.sharedWith = same->second.second;
        r.evidence += " (the same replay as for " + same->second.second + ")";
        log_ << "shardlint probe: " << d.code << " " << where << ": the same replay as " << same->second.second << "\n";
        finish(i, std::move(r));
        continue;
      }
      std::string api =
          spec->wrapApi == "accelerate" ? "accelerate FSDP" + std::to_string(spec->fsdpVersion) : spec->wrapApi;
      if ((spec->wrapApi == "fully_shard") && torch_.fullyShardModule.empty()) {
        finish(i, errorResult("torch " + torch_.torchVersion +
                              " has no `fully_shard` (FSDP2 needs torch 2.4 or "
                              "later; public as torch.distributed.fsdp.fully_shard since 2.6)"));
        continue;
      }
      if (spec->wrapApi == "fsdp1" && !torch_.fsdp1) {
        finish(i, errorResult("torch " + torch_.torchVersion + " has no FullyShardedDataParallel"));
        continue;
      }
      if (spec->wrapApi == "accelerate" && torch_.accelerateVersion.empty()) {
        finish(i, errorResult("accelerate is not installed for `" + o.python + "`"));
        continue;
      }
      if (spec->wrapApi == "accelerate" && spec->fsdpVersion == 2 && torch_.fullyShardModule.empty()) {
        finish(i, errorResult("accelerate FSDP2 needs `fully_shard`, which torch " + torch_.torchVersion + " lacks"));
        continue;
      }
      if (choice.device == "cpu") {
        auto check = torch_.cpuChecks.find(selfTestKey(*spec));
        if (check != torch_.cpuChecks.end() && !check->second.empty()) {
          finish(i, errorResult("gloo on CPU cannot run " + wrapApiText(*spec) + " with torch " + torch_.torchVersion +
                                (torch_.accelerateVersion.empty() ? "" : ", accelerate " + torch_.accelerateVersion) +
                                ": the CPU self-test failed with " + check->second));
          continue;
        }
        std::optional<bool> ok = usesFsdp2(*spec) ? torch_.cpuFsdp2 : torch_.cpuFsdp1;
        if (ok.has_value() && !*ok) {
          finish(i, errorResult("gloo on CPU cannot run " + api + " with torch " + torch_.torchVersion +
                                (torch_.cpuFsdpError.empty() ? "" : " (" + torch_.cpuFsdpError + ")")));
          continue;
        }
      }
      if (std::string why; !replaySupported(*spec, &why)) {
        finish(i, errorResult("not replayable: " + why));
        continue;
      }
      fs::path dir = base / (std::to_string(i) + "-" + d.code + "-" + slug(fs::path(d.location.path).stem().string()) +
                             "-" + std::to_string(d.location.start.line + 1));
      fs::create_directories(dir, ec);
      fs::path program = dir / "replay.py";
      std::string source;
      try {
        source = replayProgram(*spec);
      } catch (const std::exception& e) {
        finish(i, errorResult(std::string("the replay generator failed: ") + e.what()));
        continue;
      }
      std::ofstream(program) << source;
      log_ << "shardlint probe: " << d.code << " " << where << ": replay " << spec->shape << " with " << api << "\n";
      const std::string id =
          json{{"code", d.code}, {"path", d.location.path}, {"line", d.location.start.line + 1}}.dump();
      const std::vector<std::string> argv = {program.string()};
      Pass p = launch(argv, choice, dir, id);
      std::optional<Pass> g;
      ProbeResult r = withGloo(d.code, decideOnNode(d.code, p.reports, p.outcome, p.nodeRanks), argv, dir, id, g);
      r.replay = spec;
      finish(i, std::move(r));
      ranReplays[replayKey(*spec)] = {i, where};
    }
  }
  if (interrupted()) {
    if (!o.keep) fs::remove_all(base, ec);
    return 130;
  }

  for (auto& [i, r] : results_) {
    if (o.mode != "script" && !r.replay)
      if (auto s = specs.find(i); s != specs.end()) r.replay = s->second;  // the replay it would have run
    if (i >= split.n) continue;  // a control: its verdict is printed with the controls
    attachVerdict(diags[i], r);
    // concise prints no notes: the verdict goes into the message there.
    if (o.format == "concise") diags[i].message += " [" + verdictText(r) + "]";
  }
  if (o.keep)
    log_ << "shardlint probe: kept the replay programs, logs and rank reports in " << base.string() << "\n";
  else
    fs::remove_all(base, ec);
  return 0;
}

// ============================================================================================
// Preflight
// ============================================================================================

namespace {
// `relative` in this executable's folder, when it exists there; "" otherwise.
std::string besideExecutable(const fs::path& relative) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path p = self.parent_path() / relative;
  return fs::exists(p, ec) ? p.string() : "";
}
}  // namespace

std::string defaultPython() {
  if (const char* env = std::getenv("SHARDLINT_PROBE_PYTHON"); env && *env) return env;
  std::string venv = besideExecutable(fs::path("probe-venv") / "bin" / "python");
  return venv.empty() ? "python3" : venv;
}

std::string preflightPath() {
  // $SHARDLINT_PREFLIGHT, then next to this executable (an installed or relocated build: the
  // build tree and `install()` both put it beside `shardlint`), then the path CMake built it at.
  if (const char* env = std::getenv("SHARDLINT_PREFLIGHT"); env && *env) return env;
  std::string built;
#ifdef SHARDLINT_PREFLIGHT_PATH
  built = SHARDLINT_PREFLIGHT_PATH;
#endif
  if (built.empty()) return "";  // configured without the preflight
  std::string beside = besideExecutable(fs::path(built).filename());
  return beside.empty() ? built : beside;
}

int runPreflight(std::ostream& err, const std::vector<std::string>& args) {
  std::string path = preflightPath();
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) {
    err << "shardlint: error: the native preflight was not built"
        << (path.empty() ? std::string(" (this shardlint was configured without it)")
                         : " (expected at " + path + "; build the `shardlint_preflight` target)")
        << "\n";
    return 2;
  }
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.capture = false;  // its output goes straight through
  o.timeoutSeconds = 600;
  SignalGuard guard;
  RunResult r = runProcess(argv, o);
  if (!r.started) {
    err << "shardlint: error: cannot run the preflight " << path << ": " << r.startError << "\n";
    return 2;
  }
  if (r.timedOut) {
    err << "shardlint: error: the preflight did not finish within 600 s and was killed\n";
    return 2;
  }
  if (r.signal) {
    err << "shardlint: error: the preflight was killed by signal " << r.signal << "\n";
    return 101;
  }
  return r.exitCode;
}

}  // namespace shardlint::probe
