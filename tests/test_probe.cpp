// The `shardlint probe` command (runtime_probe/orchestrator/Probe.cpp and the files beside it): its
// error paths (bad input gives clear errors, never a hang), runs with a stand-in `python`, the
// default interpreter, the preflight, `--mode cxx`'s verdicts and the CPU self-test's cache.
// No torch and no GPU needed. The other probe tests: test_probe_launch.cpp, test_probe_specs.cpp,
// test_probe_verdicts.cpp, test_probe_controls.cpp, test_probe_rules.cpp.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ProbeTestSupport.h"

using namespace shardlint;
using namespace shardlint::probe;
using namespace shardlint::testing::probe_tests;

// ---------------------------------------------------------------------------------------------
// The `shardlint probe` command: bad input gives clear errors, never a hang
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe cli: no torch means exit 2 with a clear message", "[probe]") {
  ProbeTempDir dir;
  auto silent = dir.write("silent-python", "#!/bin/sh\nexit 0\n", true);
  for (const std::string& python : {std::string("/bin/false"), silent.string()}) {
    CliResult r =
        runShardlint("probe --python " + shellQuote(python) + " fixtures/python/SL101_alias.py", dir.path() / "err.txt");
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("the probe needs PyTorch") != std::string::npos);
    CHECK(r.seconds < 30);
  }
  auto notorch = dir.write("notorch-python",
                           "#!/bin/sh\necho '{\"python\": \"3.11.2\", \"error\": \"ModuleNotFoundError: No module "
                           "named '\"'\"'torch'\"'\"'\"}'\n",
                           true);
  CliResult r = runShardlint("probe --python " + shellQuote(notorch.string()) + " fixtures/python/SL101_alias.py",
                             dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("No module named 'torch'") != std::string::npos);
}

TEST_CASE("probe cli: nothing to probe needs no torch", "[probe]") {
  ProbeTempDir dir;
  CliResult r = runShardlint("probe --python /bin/false fixtures/python/SL101_alias_ok.py", dir.path() / "err.txt");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("no SL101, SL102, SL103, SL104, SL105, SL201, SL202, SL203, SL204, SL205, SL207 or SL402 finding") != std::string::npos);
}

TEST_CASE("probe cli: usage errors", "[probe]") {
  ProbeTempDir dir;
  CliResult r =
      runShardlint("probe --python /bin/false fixtures/python/SL101_alias.py -- --epochs 1", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("--mode script") != std::string::npos);
  r = runShardlint("probe --backend mpi fixtures/python/SL101_alias.py", dir.path() / "err.txt");
  CHECK(r.code == 2);
  r = runShardlint("probe --mode script --python /bin/false fixtures/python", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("must be a Python file") != std::string::npos);
  for (const char* bad : {"-1", "0", "abc", "1e9"}) {
    r = runShardlint(std::string("probe --timeout ") + bad + " fixtures/python/SL101_alias.py", dir.path() / "err.txt");
    CHECK(r.code == 2);
    CHECK(r.err.find("must be a number of seconds above 0") != std::string::npos);
  }
  // Several nodes need one rendezvous endpoint (without it each node's torchrun waits for itself).
  r = runShardlint("probe --nnodes 2 --python /bin/false fixtures/python/SL101_alias.py", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("--nnodes 2 needs --rdzv-endpoint HOST:PORT") != std::string::npos);
}

TEST_CASE("probe cli: a --master-port in use is refused", "[probe]") {
  ProbeTempDir dir;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  int port = ntohs(addr.sin_port);
  CliResult r = runShardlint("probe --master-port " + std::to_string(port) + " fixtures/python/SL101_alias.py",
                             dir.path() / "err.txt");
  close(fd);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("--master-port " + std::to_string(port) + " is already in use") != std::string::npos);
}

TEST_CASE("probe cli: --preflight finds the built native preflight and passes on its exit code", "[probe]") {
  if (std::string(SHARDLINT_PREFLIGHT_PATH).empty()) {
    WARN("shardlint-preflight was not built (no CUDA compiler or NCCL): see the next test");
    return;
  }
  REQUIRE(preflightPath() == SHARDLINT_PREFLIGHT_PATH);  // found without $SHARDLINT_PREFLIGHT or a --flag
  REQUIRE(fs::exists(preflightPath()));
  ProbeTempDir dir;
  // Every device hidden: the no-GPU path on any machine (exit 3, the preflight's own message).
  CliResult r = runShardlint("probe --preflight", dir.path() / "err.txt", "CUDA_VISIBLE_DEVICES=-1");
  INFO(r.err);
  CHECK(r.code == 3);
  CHECK(r.err.find("shardlint-preflight: no CUDA device: ") != std::string::npos);
  // Arguments after `--` reach it: --json gives its report on stdout.
  r = runShardlint("probe --preflight -- --json", dir.path() / "err.txt", "CUDA_VISIBLE_DEVICES=-1");
  INFO(r.out);
  CHECK(r.code == 3);
  CHECK(nlohmann::json::parse(r.out)["status"] == "no_gpu");
}

TEST_CASE("probe cli: --preflight without the native preflight", "[probe]") {
  if (!preflightPath().empty() && fs::exists(preflightPath())) {
    SUCCEED("the preflight is built here: the test above covers it");
    return;
  }
  ProbeTempDir dir;
  CliResult r = runShardlint("probe --preflight", dir.path() / "err.txt");
  CHECK(r.code == 2);
  CHECK(r.err.find("preflight was not built") != std::string::npos);
}

TEST_CASE("probe cli: a hanging launch times out, is killed, and is not reached", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  fs::path pidfile = dir.path() / "pids";
  CliResult r = runShardlint(
      "probe --format json --timeout 1 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py",
      dir.path() / "err.txt", "FAKE_LAUNCH=hang FAKE_PIDFILE=" + shellQuote(pidfile.string()));
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.seconds < 30);
  CHECK(r.err.find("gloo on CPU, 2 ranks") != std::string::npos);
  json doc = json::parse(r.out);
  REQUIRE(doc["findings"].size() >= 1);
  json p = doc["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reached");
  CHECK(p["evidence"].get<std::string>().find("timed out after 1.0 s") != std::string::npos);
  CHECK(p["torch_version"] == "2.11.0+synthetic");
  std::ifstream in(pidfile);
  pid_t pid;
  int n = 0;
  while (in >> pid) {
    ++n;
    CHECK(processGone(pid));
  }
  CHECK(n == 2);
}

TEST_CASE("probe cli: a crash before the first step is not reached, with its output", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  CliResult r =
      runShardlint("probe --timeout 20 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py",
                   dir.path() / "err.txt", "FAKE_LAUNCH=crash");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("note: probe: not-reached \u2014") != std::string::npos);
  CHECK(r.out.find("synthetic crash before the first step") != std::string::npos);
}

TEST_CASE("probe cli: reports are collected and merged into every format", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  std::string base = "probe --timeout 20 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py";
  CliResult text = runShardlint(base, dir.path() / "err.txt", "FAKE_LAUNCH=stale");
  INFO(text.err);
  CHECK(text.code == 1);
  CHECK(text.out.find("probe: confirmed \u2014 after the wrap the optimizer still held 4 tensors") !=
        std::string::npos);
  CHECK(text.out.find("[gloo, world size 2, torch 2.11.0+synthetic, accelerate 1.15.0") != std::string::npos);
  CliResult concise = runShardlint(base + " --format concise", dir.path() / "err.txt", "FAKE_LAUNCH=stale");
  CHECK(concise.out.find("SL101") != std::string::npos);
  CHECK(concise.out.find("[probe: confirmed") != std::string::npos);
  for (const std::string f : {"sarif", "github", "lsp"}) {
    CliResult o = runShardlint(base + " --format " + f, dir.path() / "err.txt", "FAKE_LAUNCH=stale");
    INFO(f);
    CHECK(o.out.find("probe: confirmed") != std::string::npos);
  }
  CliResult js = runShardlint(base + " --format json", dir.path() / "err.txt", "FAKE_LAUNCH=stale");
  json doc = json::parse(js.out);
  CHECK(doc["findings"][0]["probe"]["verdict"] == "confirmed");
  CHECK(doc["findings"][0]["probe"]["world_size"] == 2);
  // The replay that ran, for tools that check verdicts against shapes (tests/probe_real.py).
  json replay = doc["findings"][0]["probe"]["replay"];
  CHECK(replay["shape"] == "optimizer-before-wrap");
  CHECK(replay["wrap_api"] == "fully_shard");
  CHECK(replay["use_orig_params"].is_null());
  CHECK(replay["shared_with"].is_null());
  CHECK(replay["replacement"].is_null());  // SL105's only
  CHECK(replay["fsdp_from"].is_null());    // the Trainer's only
  CHECK(replay["joint"].is_null());        // Fabric's only
}

TEST_CASE("probe reports: the ranks' notes travel with the evidence, each once", "[probe]") {
  RunOutcome run;
  run.expectedRanks = 2;
  run.backend = "gloo";
  std::vector<RankReport> reports(2);
  for (int r = 0; r < 2; ++r) {
    reports[r].rank = r;
    reports[r].worldSize = 2;
    reports[r].reachedStep = true;
    reports[r].staleOptimizerEntries = 2;
    reports[r].notes = {"accelerate switched to FSDP on CPU"};
  }
  reports[1].notes.push_back("second note");
  ProbeResult res = decide("SL402", reports, run);
  CHECK(res.verdict == Verdict::Confirmed);
  CHECK(res.evidence.find("(note: accelerate switched to FSDP on CPU)") != std::string::npos);
  CHECK(res.evidence.find("(note: accelerate switched to FSDP on CPU)", res.evidence.find("(note: accelerate") + 1) ==
        std::string::npos);
  CHECK(res.evidence.find("(note: second note)") != std::string::npos);
  // Parsed from a rank report; a note list of the wrong type is refused like any other field.
  std::string why;
  auto parsed = parseRankReport(R"({"rank": 0, "notes": ["a", "b"]})", &why);
  REQUIRE(parsed);
  CHECK(parsed->notes == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(parseRankReport(R"({"rank": 0, "notes": "a"})", &why));
  CHECK(why.find("notes") != std::string::npos);
}

TEST_CASE("probe self-test: the summary names each API and its error", "[probe]") {
  TorchInfo t;
  t.cpuChecks = {{"fsdp2", ""}, {"fsdp1_flat", "RuntimeError: FSDP needs a non-CPU accelerator device"},
                 {"fabric", "not installed: ModuleNotFoundError: No module named 'lightning'"}};
  std::string s = cpuSelfTestSummary(t);
  CHECK(s == "FSDP2 fully_shard: ok; FSDP1 use_orig_params=False: RuntimeError: FSDP needs a non-CPU accelerator "
             "device; Lightning Fabric FSDPStrategy: not installed: ModuleNotFoundError: No module named 'lightning'");
}

// One `shardlint probe` per node (tests/probe_two_nodes.sh runs two across network namespaces with
// real torch): the launch is a c10d rendezvous with bounded waits, and the node judges from its own
// ranks' reports, the only ones in its folder.
TEST_CASE("probe cli: one node of a multi-node probe judges from its own ranks", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  fs::path args = dir.path() / "args";
  std::string base = "probe --format json --nproc 1 --nnodes 2 --rdzv-endpoint 10.9.9.1:29400 --timeout 20 --python " +
                     shellQuote(python.string()) + " fixtures/python/SL101_alias.py";
  std::string env = "-u PET_RDZV_CONF FAKE_LAUNCH=node1 FAKE_ARGS=" + shellQuote(args.string());
  CliResult r = runShardlint(base, dir.path() / "err.txt", env + " FAKE_STALE=4 FAKE_CHANGED=false");
  INFO(r.err);
  CHECK(r.code == 1);
  std::string argv = shardlint::testing::readFile(args);
  CHECK(argv.find("--nnodes 2 --rdzv-endpoint 10.9.9.1:29400 --rdzv-backend c10d "
                  "--rdzv-conf join_timeout=10,read_timeout=10 --max_restarts 0") != std::string::npos);
  json p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "confirmed");
  CHECK(p["world_size"] == 2);
  std::string evidence = p["evidence"];
  CHECK(evidence.find("(rank 1)") != std::string::npos);
  CHECK(evidence.find("multi-node: judged from this node's rank 1 of world size 2") != std::string::npos);
  CHECK(evidence.find("wrote no report") == std::string::npos);  // rank 0 reports on the other node

  // Refuted on this node: not-reproduced from its one rank, not not-reached for the other node's.
  r = runShardlint(base, dir.path() / "err.txt", env + " FAKE_STALE=0 FAKE_CHANGED=true");
  p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reproduced");
  CHECK(p["evidence"].get<std::string>().find("ran on this node's rank with no sign of the bug") != std::string::npos);

  // $PET_RDZV_CONF (torchrun's environment form of --rdzv-conf) is kept; its waits win.
  r = runShardlint(base, dir.path() / "err.txt",
                   "PET_RDZV_CONF=is_host=1,join_timeout=3 FAKE_LAUNCH=node1 FAKE_STALE=4 FAKE_CHANGED=false FAKE_ARGS=" +
                       shellQuote(args.string()));
  CHECK(shardlint::testing::readFile(args).find("--rdzv-conf is_host=1,join_timeout=3,read_timeout=10 ") !=
        std::string::npos);
}

TEST_CASE("probe cli: a rendezvous that fails is not reached, and says so", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  std::string base = "probe --format json --nproc 1 --nnodes 2 --timeout 30 --python " + shellQuote(python.string());
  CliResult r = runShardlint(base + " --rdzv-endpoint 10.9.9.1:29401 fixtures/python/SL101_alias.py",
                             dir.path() / "err.txt", "-u PET_RDZV_CONF FAKE_LAUNCH=rdzv-timeout");
  INFO(r.err);
  CHECK(r.code == 1);
  json p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reached");
  CHECK(p["evidence"].get<std::string>().find("the rendezvous at 10.9.9.1:29401 timed out: not every node joined "
                                              "(--nnodes 2) [--rdzv-conf join_timeout=15,read_timeout=15]") !=
        std::string::npos);
  r = runShardlint(base + " --rdzv-endpoint 10.9.9.9:29400 fixtures/python/SL101_alias.py", dir.path() / "err.txt",
                   "-u PET_RDZV_CONF FAKE_LAUNCH=rdzv-unreachable");
  p = json::parse(r.out)["findings"][0]["probe"];
  CHECK(p["verdict"] == "not-reached");
  CHECK(p["evidence"].get<std::string>().find(
            "cannot reach the rendezvous store at 10.9.9.9:29400 (No route to host, errno 113)") != std::string::npos);
}

TEST_CASE("probe cli: the instrumentation's own report without torch is a probe-error", "[probe]") {
  // The real replay generator and the real Python package, run by a python3 without torch
  // (skipped where python3 is missing or has torch: then this would run a real replay).
  if (std::system("command -v python3 >/dev/null 2>&1 && ! python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    SUCCEED("no python3 without torch here");
    return;
  }
  ProbeTempDir dir;
  // Answers the torch check with a synthetic torch; "launches" the program as rank 0 of 1 with python3.
  auto shim = dir.write("python",
                        "#!/bin/sh\n"
                        "case \"$1\" in\n"
                        "  -c) echo '{\"python\": \"3\", \"torch\": \"2.11.0+synthetic\", \"cuda_devices\": 0, "
                        "\"distributed\": true, \"nccl\": false, \"gloo\": true, \"fully_shard\": "
                        "\"torch.distributed.fsdp\", \"fsdp1\": true, \"accelerate\": \"1.15.0\"}' ;;\n"
                        "  -m) while [ \"$1\" != \"--max_restarts\" ]; do shift; done; shift 2\n"
                        "      RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 exec python3 \"$@\" ;;\n"
                        "  *) echo '{\"fsdp2\": true, \"fsdp1\": true}' ;;\n"
                        "esac\n",
                        true);
  CliResult r = runShardlint("probe --format json --timeout 60 --python " + shellQuote(shim.string()) +
                                 " fixtures/python/SL101_fsdp1_orig_params_false.py",
                             dir.path() / "err.txt");
  INFO(r.err);
  CHECK(r.code == 1);
  json doc = json::parse(r.out);
  json p = doc["findings"][0]["probe"];
  CHECK(p["verdict"] == "probe-error");
  CHECK(p["evidence"].get<std::string>().find("torch") != std::string::npos);
}

TEST_CASE("probe python: $SHARDLINT_PROBE_PYTHON, then build/probe-venv beside shardlint, then python3", "[probe]") {
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  // The CLI uses the variable without --python: the fake answers the torch check with its synthetic torch.
  CliResult r = runShardlint("probe --format json fixtures/python/SL101_alias.py", dir.path() / "err.txt",
                             "SHARDLINT_PROBE_PYTHON=" + shellQuote(python.string()) + " FAKE_LAUNCH=stale");
  INFO(r.err);
  CHECK(r.err.find("shardlint probe: " + python.string() + ": python ") != std::string::npos);
  // In this process: the variable, else the probe environment next to the test binary's folder, else python3.
  ::setenv("SHARDLINT_PROBE_PYTHON", "/opt/py/bin/python", 1);
  CHECK(shardlint::probe::defaultPython() == "/opt/py/bin/python");
  ::unsetenv("SHARDLINT_PROBE_PYTHON");
  fs::path beside = fs::read_symlink("/proc/self/exe").parent_path() / "probe-venv" / "bin" / "python";
  CHECK(shardlint::probe::defaultPython() == (fs::exists(beside) ? beside.string() : std::string("python3")));
}

TEST_CASE("probe preflight: $SHARDLINT_PREFLIGHT overrides where the preflight is looked for", "[probe]") {
  const char* old = std::getenv("SHARDLINT_PREFLIGHT");
  std::string saved = old ? old : "";
  ::setenv("SHARDLINT_PREFLIGHT", "/opt/elsewhere/shardlint-preflight", 1);
  CHECK(preflightPath() == "/opt/elsewhere/shardlint-preflight");
  if (old)
    ::setenv("SHARDLINT_PREFLIGHT", saved.c_str(), 1);
  else
    ::unsetenv("SHARDLINT_PREFLIGHT");
  CHECK(preflightPath() != "/opt/elsewhere/shardlint-preflight");
}

// `--mode cxx`: the verdict from the report the preloaded library writes (runtime_probe/cxx).
TEST_CASE("probe: C++ verdicts from the probe library's report", "[probe][cxx]") {
  using shardlint::probe::cxxVerdict;
  using shardlint::probe::Verdict;
  auto param = [](const char* name, bool after, bool optimized, bool grad, bool moved) {
    return std::string("{\"name\": \"") + name + "\", \"module\": \"Net\", \"after_optimizer\": " +
           (after ? "true" : "false") + ", \"optimized\": " + (optimized ? "true" : "false") +
           ", \"requires_grad\": true, \"has_grad\": " + (grad ? "true" : "false") + ", \"moved\": " +
           (moved ? "true" : "false") + "}";
  };
  auto report = [](int groups, const std::vector<std::string>& params) {
    std::string out = "{\"param_groups\": " + std::to_string(groups) + ", \"parameters\": [";
    for (size_t i = 0; i < params.size(); ++i) out += (i ? "," : "") + params[i];
    return out + "]}";
  };
  auto late = cxxVerdict(report(1, {param("w", false, true, true, true), param("head", true, false, true, false)}));
  CHECK(late.verdict == Verdict::Confirmed);
  CHECK(late.evidence.find("Net.head") != std::string::npos);
  CHECK(late.evidence.find("1 of 1 optimized parameters moved") != std::string::npos);
  // Everything registered late was added to the optimizer (add_param_group, or a new optimizer).
  CHECK(cxxVerdict(report(2, {param("w", false, true, true, true), param("head", true, true, true, true)})).verdict ==
        Verdict::NotReproduced);
  // No optimizer at all; late parameters that never got a gradient; a gradient but no step.
  CHECK(cxxVerdict(report(0, {param("w", false, false, true, false)})).verdict == Verdict::NotReached);
  CHECK(cxxVerdict(report(1, {param("w", false, true, true, true), param("head", true, false, false, false)})).verdict ==
        Verdict::NotReached);
  CHECK(cxxVerdict(report(1, {param("w", false, true, true, false), param("head", true, false, true, false)})).verdict ==
        Verdict::NotReached);
  // An optimizer built before any parameter existed (a constructor's initialiser list).
  CHECK(cxxVerdict(report(1, {param("fc", true, false, true, false)})).verdict == Verdict::Confirmed);
  CHECK(cxxVerdict("not json").verdict == Verdict::ProbeError);
}

TEST_CASE("probe self-test: an answer is applied whole; a cached one is reused", "[probe]") {
  TorchInfo t;
  // One JSON line, as the self-test prints it (after whatever torch printed first).
  applyCpuSelfTest("a warning first\n"
                   R"({"fsdp2": true, "fsdp1": true, "fsdp1_orig": true, "fsdp1_flat": "RuntimeError: x", )"
                   R"("accelerate_fsdp2": true, "notes": ["switched"]})",
                   t);
  CHECK(t.cpuFsdp2.value_or(false));
  CHECK(t.cpuFsdp1.value_or(false));
  CHECK(t.cpuChecks["fsdp1_flat"] == "RuntimeError: x");
  CHECK(t.cpuChecks["accelerate_fsdp2"].empty());
  CHECK(t.cpuNotes == std::vector<std::string>{"switched"});
  TorchInfo none;
  applyCpuSelfTest("no json here", none);
  CHECK_FALSE(none.cpuFsdp2.value_or(true));
  CHECK_FALSE(none.cpuFsdpError.empty());

  // The stand-in python answers the self-test once; the second command reads the cache and says so.
  ProbeTempDir dir;
  auto python = dir.write("fake-python", kFakePython, true);
  fs::path cache = dir.path() / "cache";
  std::string base = "probe --timeout 20 --python " + shellQuote(python.string()) + " fixtures/python/SL101_alias.py";
  std::string env = "FAKE_LAUNCH=stale SHARDLINT_CACHE_DIR=" + shellQuote(cache.string());
  CliResult first = runShardlint(base, dir.path() / "err.txt", env);
  INFO(first.err);
  CHECK(first.err.find("is cached") == std::string::npos);
  CliResult second = runShardlint(base, dir.path() / "err.txt", env);
  INFO(second.err);
  CHECK(second.err.find("the CPU self-test's answer for this interpreter is cached") != std::string::npos);
  CHECK(second.code == first.code);
  CliResult fresh = runShardlint(base + " --no-cache", dir.path() / "err.txt", env);
  CHECK(fresh.err.find("is cached") == std::string::npos);
}
