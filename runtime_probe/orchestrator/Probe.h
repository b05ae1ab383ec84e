// The runtime probe's orchestrator: turns static SL101/SL102/SL103 findings into
// replay specs (or runs the user's script), picks a backend, launches the ranks
// under torch.distributed.run in their own process group with a timeout, merges
// the per-rank JSON reports and attaches a verdict to every probed finding.
#pragma once
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/Diagnostic.h"
#include "probe/Types.h"

namespace shardlint::probe {

// "confirmed", "not-reproduced", "not-reached", "probe-error".
std::string_view verdictName(Verdict v);

// ---- What to replay -------------------------------------------------------------------------

// Whether the probe tests findings of this rule (SL101, SL102, SL103, SL105, SL201, SL202, SL402).
// The rules whose findings the probe replays, in order.
const std::vector<std::string_view>& probedCodes();
bool probedCode(std::string_view code);
// "SL101, SL102, ... <conjunction> SL402".
std::string probedCodesText(std::string_view conjunction);

// The replay spec of one finding, from its code, its message and notes, and the source text at
// its location (`source`: the whole file, or empty when unreadable). std::nullopt with `whyNot`
// set when the finding's shape is not replayable (Fabric's `setup_module`, another rule).
std::optional<ReplaySpec> replaySpecFor(const Diagnostic& d, const std::string& source, std::string* whyNot = nullptr);
// The same, reading the finding's file.
std::optional<ReplaySpec> replaySpecFor(const Diagnostic& d, std::string* whyNot = nullptr);

// ---- Environment ----------------------------------------------------------------------------

// What `<python> -c ...` reports about the installed torch (and accelerate).
struct TorchInfo {
  bool ok = false;    // torch imported
  std::string error;  // why not (no python, no torch, timeout, unparsable answer)
  std::string pythonVersion, torchVersion, accelerateVersion;
  int cudaDevices = 0;  // torch.cuda.device_count() (0 without CUDA)
  bool distributed = false, nccl = false, gloo = false;
  std::string fullyShardModule;  // where fully_shard imports from; empty: no FSDP2
  bool fsdp1 = false;            // torch.distributed.fsdp.FullyShardedDataParallel
  // The CPU self-test (two gloo ranks on CPU, one forward/backward/step): run on demand.
  std::optional<bool> cpuFsdp2, cpuFsdp1;
  std::string cpuFsdpError;
  // Every API the self-test tried on CPU (runtime_probe/python/shardlint_probe/selftest.py): "fsdp2",
  // "fsdp1_orig", "fsdp1_flat", "accelerate_fsdp2", "accelerate_fsdp1", "fabric" -> "" (a step ran)
  // or the error; and what it adapted to run there (notes).
  std::map<std::string, std::string> cpuChecks;
  std::vector<std::string> cpuNotes;
  std::string cpuSelfTestCached;  // the cache file the answer came from ("" when it ran)
};

// The Python snippet behind probeTorch (printed JSON, one line).
const std::string& torchProbeSource();
// Runs `<python> -c <torchProbeSource()>` with a timeout and parses its answer.
TorchInfo probeTorch(const std::string& python, double timeoutSeconds);
// Parses the snippet's JSON line (exposed for tests).
TorchInfo parseTorchInfo(const std::string& output);
// Two gloo ranks on CPU (torch.multiprocessing, a FileStore: no port): does FSDP2 / FSDP1 train a step?
// `packageDir`: runtime_probe/python (the self-test is shardlint_probe.selftest).
void probeCpuFsdp(const std::string& python, double timeoutSeconds, TorchInfo& info,
                  const std::string& packageDir = "", const std::string& cacheDir = "");
// Fills `info` from the self-test's JSON answer (exposed for tests).
void applyCpuSelfTest(const std::string& answerJson, TorchInfo& info);
// One line: what the self-test found for each API it tried.
std::string cpuSelfTestSummary(const TorchInfo& info);

// GPUs visible to this process: `nvidia-smi -L` (or /proc/driver/nvidia/gpus), then limited by
// CUDA_VISIBLE_DEVICES. `cudaVisibleDevices` nullptr: read the environment.
int countVisibleGpus(const char* cudaVisibleDevices = nullptr, bool useNvidiaSmi = true);
// Applies CUDA_VISIBLE_DEVICES ("" hides all, "0,1" lists, "-1" hides) to a device count.
int applyCudaVisibleDevices(int devices, const char* cudaVisibleDevices);

struct BackendChoice {
  bool ok = false;
  std::string backend;  // "nccl" | "gloo"
  std::string device;   // "cuda" | "cpu"
  int worldSize = 1;    // ranks on this node
  std::string reason;   // printed: what was chosen and why (or why nothing could be)
  // NCCL with fewer GPUs than requested ranks ran with one rank per GPU: divergence needs a
  // second pass with gloo on CPU at the requested world size (when torch supports it).
  bool divergenceOnGloo = false;
};

// auto: NCCL when at least `nproc` GPUs are visible; otherwise gloo on CPU where the installed
// torch passes the CPU FSDP self-test; otherwise NCCL with one rank per visible GPU.
// `needsFsdp2`: some finding needs fully_shard (decides which CPU self-test counts).
BackendChoice chooseBackend(const std::string& requested, int nproc, int visibleGpus, const TorchInfo& torch,
                            bool needsFsdp2);

// ---- Launching ------------------------------------------------------------------------------

struct LaunchSpec {
  std::string python = "python3";
  int nprocPerNode = 1;
  int masterPort = 0;                // 0: none (e.g. with --rdzv-endpoint)
  std::string nnodes;                // passed through to torch.distributed.run
  std::string rdzvEndpoint;          // passed through (then no --master_port)
  std::string srun;                  // a Slurm line put in front ("srun -N2 --ntasks-per-node=1")
  std::vector<std::string> program;  // the script and its arguments (or "-m", module, ...)
};

// `[srun words...] <python> -m torch.distributed.run --nproc_per_node N [--nnodes X]
//  [--rdzv-endpoint E | --master_port P] --max_restarts 0 <program...>`
std::vector<std::string> launchCommand(const LaunchSpec& spec);
// Splits a shell-like line into words (single and double quotes, backslashes; no expansion).
std::vector<std::string> splitWords(const std::string& line);
// Joins words into a line a shell reads back (for messages).
std::string shellJoin(const std::vector<std::string>& words);

// A free TCP port on 127.0.0.1 (bind to port 0); 0 when none could be had.
int freePort();
// Whether something already listens on (or holds) `port`.
bool portInUse(int port);

struct RunOptions {
  std::map<std::string, std::string> env;  // set (an empty value sets an empty variable)
  std::vector<std::string> unsetEnv;
  double timeoutSeconds = 300;
  double killGraceSeconds = 3;    // SIGTERM to the process group, then SIGKILL after this
  bool capture = true;            // stdout+stderr into RunResult::output; else inherited
  size_t maxOutput = 256 * 1024;  // keep the last bytes only
  std::string cwd;
};

struct RunResult {
  bool started = false;
  std::string startError;
  int exitCode = -1;  // the exit status; -1 when killed by a signal
  int signal = 0;     // the signal that ended it
  bool timedOut = false;
  double seconds = 0;
  std::string output;  // stdout and stderr, interleaved (the tail)
  int pgid = 0;        // the process group it ran in (for tests)
};

// Runs argv in a new process group; on timeout kills the whole group (SIGTERM, then SIGKILL),
// and after the leader exits kills whatever is left of the group too. Never hangs past
// timeout + grace + a second.
RunResult runProcess(const std::vector<std::string>& argv, const RunOptions& options);

// The last `lines` lines of `text`.
std::string tailLines(const std::string& text, size_t lines);

// ---- Reports and verdicts -------------------------------------------------------------------

// Parses one rank report (snake_case keys); std::nullopt with `error` on malformed input.
std::optional<RankReport> parseRankReport(const std::string& json, std::string* error = nullptr);
// Every rank<R>.json in `dir` (sorted by rank); unreadable or malformed files go to `errors`.
std::vector<RankReport> readReports(const std::string& dir, std::vector<std::string>* errors = nullptr);

// What the orchestrator saw of one run (beside the reports).
struct RunOutcome {
  bool timedOut = false;
  double timeoutSeconds = 0;
  int exitCode = 0;
  std::string outputTail;  // the launcher's stdout/stderr tail
  int expectedRanks = 0;   // ranks launched (0: take the reports' world_size)
  std::string backend;     // as chosen (reports override when present)
  int worldSize = 0;
  double seconds = 0;
  std::string torchVersion, accelerateVersion;  // from the torch probe (reports override)
  std::vector<std::string> reportErrors;        // malformed report files
  std::string mode = "replay";                  // replay | script (a failed import means different things)
};

// The verdict for a finding of rule `code` from its ranks' reports.
ProbeResult decide(const std::string& code, const std::vector<RankReport>& reports, const RunOutcome& run);

// Merges a second (gloo, CPU) pass that checked divergence into the first pass's result.
ProbeResult mergeDivergencePass(const ProbeResult& first, const ProbeResult& second);

// "probe: confirmed — <evidence> [gloo, world size 2, torch 2.11.0, accelerate 1.15.0, 3.2 s]"
std::string verdictText(const ProbeResult& r);
// Adds the verdict as a note at the finding's own location.
void attachVerdict(Diagnostic& d, const ProbeResult& r);
// The "probe" object of a finding in `--format json`.
std::string verdictJson(const ProbeResult& r);
// Adds a "probe" object to each finding of writeJson's output that has a result (matched by
// code, path, line and column); other output is unchanged.
std::string addProbeToJson(const std::string& json, const std::vector<Diagnostic>& diags,
                           const std::map<size_t, ProbeResult>& results,
                           const std::vector<Diagnostic>& controls = {},
                           const std::map<size_t, ProbeResult>& controlResults = {});
// The controls and their verdicts, for the text and concise formats (a section after the findings).
void writeControls(std::ostream& out, const std::vector<Diagnostic>& controls,
                   const std::map<size_t, ProbeResult>& controlResults);

// ---- The `shardlint probe` command ----------------------------------------------------------

struct ProbeOptions {
  std::string mode = "replay";   // replay | script
  int nproc = 2;                 // ranks per node requested
  std::string backend = "auto";  // auto | nccl | gloo
  std::string python = "python3";
  double timeoutSeconds = 300;  // per launched run
  std::string format = "text";
  bool keep = false;  // keep the per-finding temp dirs
  std::optional<int> masterPort;
  std::string nnodes, rdzvEndpoint, srun;
  std::string buildCommand, runCommand;  // cxx mode: shell commands that build and run the program
  std::string script;                   // script mode: the entry script (the first PATH)
  std::vector<std::string> scriptArgs;  // after `--`
  double torchProbeTimeout = 120;       // the `python -c` environment probe
  bool controls = false;                // --controls: replay the rules' controls too (replay mode)
};

// The verdict of a C++ probe run from the report the preloaded library wrote (runtime_probe/cxx):
// confirmed when parameters registered after the first optimizer was built are in no optimizer and
// did not move while optimized ones moved; not-reproduced when every parameter registered after an
// optimizer is in one; not-reached when no optimizer was built or nothing moved (no step ran).
ProbeResult cxxVerdict(const std::string& reportJson);
// The C++ probe library: $SHARDLINT_CXX_PROBE_LIB, next to the executable, or where the build put it
// ("" when it was not built: no LibTorch).
std::string cxxProbeLibrary();

// Where the instrumentation package lives (runtime_probe/python): $SHARDLINT_PROBE_PYTHONPATH,
// next to the executable (../runtime_probe/python, ../share/shardlint/python), or the source tree.
std::string instrumentationDir();

class Session {
 public:
  Session(ProbeOptions options, std::ostream& log);
  // Probes every SL101/SL102/SL103 finding of `diags` and attaches the verdicts.
  // Returns 0, or an exit code when probing was impossible (2: usage or environment, 101).
  int run(std::vector<Diagnostic>& diags);
  // 0 when every finding was probed and not reproduced (or there are none), else 1.
  int exitCode(const std::vector<Diagnostic>& diags) const;
  // `--mode cxx`: SL501 findings, checked on the user's own LibTorch program.
  int runCxx(std::vector<Diagnostic>& diags);
  const std::map<size_t, ProbeResult>& results() const { return results_; }
  // The folder the CPU self-test's answer is cached in (`probe-selftest/`), keyed by the
  // interpreter (path, size, mtime), its torch/accelerate versions and the self-test's own source;
  // empty: no cache (--no-cache).
  void setCacheDir(std::string dir) { cacheDir_ = std::move(dir); }
  // Controls (RuleContext::control, collected by `probe --controls`): replayed like findings in
  // replay mode; a confirmed one makes the exit code 1.
  void setControls(std::vector<Diagnostic> controls) { controls_ = std::move(controls); }
  const std::vector<Diagnostic>& controls() const { return controls_; }
  const std::map<size_t, ProbeResult>& controlResults() const { return controlResults_; }
  const ProbeOptions& options() const { return options_; }

 private:
  ProbeOptions options_;
  std::ostream& log_;
  TorchInfo torch_;
  std::map<size_t, ProbeResult> results_;  // by index into the diagnostics
  std::string cacheDir_;
  std::vector<Diagnostic> controls_;
  std::map<size_t, ProbeResult> controlResults_;  // by index into controls_
};

// `shardlint probe --preflight`: runs the native preflight binary (SHARDLINT_PREFLIGHT_PATH),
// passing its output and exit code through; 2 when it was not built.
int runPreflight(std::ostream& err, const std::vector<std::string>& args = {});
// The preflight binary's path ("" when not built).
std::string preflightPath();

// The interpreter `shardlint probe` runs without --python: $SHARDLINT_PROBE_PYTHON, else the probe
// environment scripts/setup-probe.sh makes next to the executable (build/probe-venv/bin/python beside
// build/shardlint), else `python3` from PATH.
std::string defaultPython();

}  // namespace shardlint::probe
