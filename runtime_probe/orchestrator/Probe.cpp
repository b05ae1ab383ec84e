// The `shardlint probe` command (Probe.h's Session): checks the options and the environment, picks
// the backend, writes and launches one replay per finding (or runs the user's script once), and
// attaches the verdicts. The parts it uses live beside it: ProbeSpecs.cpp (what to replay),
// ProbeEnvironment.cpp (torch, GPUs, backend), ProbeLaunch.cpp (the launcher and the runner),
// ProbeVerdicts.cpp (reports and verdicts), ProbeOutput.cpp (text and JSON), ProbeCxx.cpp
// (`--mode cxx`) and ProbePreflight.cpp (`--preflight`); ProbeImpl.h holds what they share.
#include "Probe.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <sstream>

#include "ProbeImpl.h"
#include "Replay.h"

namespace shardlint::probe {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// torchrun's output when the chosen master port was taken.
bool addressInUse(const std::string& output) {
  return contains(output, "EADDRINUSE") || contains(lower(output), "address already in use");
}

// Whether the replay of `s` needs FSDP2 (`fully_shard`).
bool usesFsdp2(const ReplaySpec& s) {
  return s.wrapApi == "fully_shard" || (s.wrapApi == "accelerate" && s.fsdpVersion == 2);
}

}  // namespace

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

namespace {

struct Pass {
  std::vector<RankReport> reports;
  RunOutcome outcome;
  int nodeRanks = 0;  // multi-node with one orchestrator per node: this node's ranks (decideOnNode)
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

}  // namespace shardlint::probe
