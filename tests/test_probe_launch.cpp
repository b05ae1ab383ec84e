// The probe's launching (runtime_probe/orchestrator/ProbeLaunch.cpp, ProbeEnvironment.cpp): launch
// commands, the environment and backend choice, the process runner (timeouts kill the whole process
// group) and ports. No torch and no GPU needed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ProbeTestSupport.h"

using namespace shardlint;
using namespace shardlint::probe;
using namespace shardlint::testing::probe_tests;

// ---------------------------------------------------------------------------------------------
// Launch commands
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe launch: single node", "[probe]") {
  LaunchSpec s;
  s.python = "/opt/venv/bin/python";
  s.nprocPerNode = 2;
  s.masterPort = 29555;
  s.program = {"/tmp/x/replay.py"};
  std::vector<std::string> want = {
      "/opt/venv/bin/python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29555",
      "--max_restarts",       "0",  "/tmp/x/replay.py"};
  CHECK(launchCommand(s) == want);
}

TEST_CASE("probe launch: --nnodes and --rdzv-endpoint are passed through", "[probe]") {
  LaunchSpec s;
  s.nprocPerNode = 8;
  s.masterPort = 29555;  // ignored: the rendezvous endpoint carries the port
  s.nnodes = "2";
  s.rdzvEndpoint = "node0:29400";
  s.program = {"-m", "shardlint_probe", "train.py", "--lr", "1e-4"};
  // c10d: torchrun's default (static) rendezvous would make every node node 0 without a --node-rank.
  std::vector<std::string> want = {
      "python3", "-m", "torch.distributed.run", "--nproc_per_node", "8", "--nnodes", "2", "--rdzv-endpoint",
      "node0:29400", "--rdzv-backend", "c10d", "--max_restarts", "0", "-m", "shardlint_probe", "train.py", "--lr",
      "1e-4"};
  CHECK(launchCommand(s) == want);
}

TEST_CASE("probe launch: an srun line is put in front", "[probe]") {
  LaunchSpec s;
  s.nprocPerNode = 4;
  s.masterPort = 0;
  s.nnodes = "2";
  s.rdzvEndpoint = "$(hostname):29400";
  s.srun = "srun -N2 --ntasks-per-node=1 --export='ALL,NCCL_DEBUG=INFO' \"--job-name=shard probe\"";
  s.program = {"replay.py"};
  auto cmd = launchCommand(s);
  std::vector<std::string> head = {
      "srun",    "-N2", "--ntasks-per-node=1",  "--export=ALL,NCCL_DEBUG=INFO", "--job-name=shard probe",
      "python3", "-m",  "torch.distributed.run"};
  REQUIRE(cmd.size() > head.size());
  CHECK(std::vector<std::string>(cmd.begin(), cmd.begin() + static_cast<long>(head.size())) == head);
  CHECK(std::find(cmd.begin(), cmd.end(), "--master_port") == cmd.end());
  auto backend = std::find(cmd.begin(), cmd.end(), "--rdzv-backend");
  REQUIRE(backend + 1 < cmd.end());
  CHECK(backend[1] == "c10d");
  CHECK(cmd.back() == "replay.py");
}

TEST_CASE("probe launch: words split and join like a shell", "[probe]") {
  CHECK(splitWords("  a 'b c'  \"d \\\" e\" f\\ g ") == std::vector<std::string>{"a", "b c", "d \" e", "f g"});
  CHECK(splitWords("").empty());
  std::vector<std::string> words = {"python3", "-c", "print('hi')", "a b", ""};
  CHECK(splitWords(shellJoin(words)) == words);
  CHECK(shellJoin({"--nproc_per_node", "2"}) == "--nproc_per_node 2");
}

// ---------------------------------------------------------------------------------------------
// Environment and backend choice
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe env: CUDA_VISIBLE_DEVICES limits the GPUs", "[probe]") {
  CHECK(applyCudaVisibleDevices(4, nullptr) == 4);
  CHECK(applyCudaVisibleDevices(4, "") == 0);
  CHECK(applyCudaVisibleDevices(4, "0,1") == 2);
  CHECK(applyCudaVisibleDevices(1, "0,1,2") == 1);
  CHECK(applyCudaVisibleDevices(4, "-1") == 0);
  CHECK(applyCudaVisibleDevices(4, "0,-1,2") == 1);
  CHECK(applyCudaVisibleDevices(8, "GPU-1234,GPU-5678") == 2);
  CHECK(countVisibleGpus("", false) == 0);
}

TEST_CASE("probe env: the torch check's answer", "[probe]") {
  TorchInfo t = parseTorchInfo(
      "some warning\n{\"python\": \"3.11.2\", \"torch\": \"2.11.0\", \"cuda_devices\": 1, \"distributed\": true, "
      "\"nccl\": true, \"gloo\": true, \"fully_shard\": \"torch.distributed.fsdp\", \"fsdp1\": true, "
      "\"accelerate\": \"1.15.0\"}\n");
  CHECK(t.ok);
  CHECK(t.torchVersion == "2.11.0");
  CHECK(t.accelerateVersion == "1.15.0");
  CHECK(t.cudaDevices == 1);
  CHECK(t.nccl);
  CHECK(t.fullyShardModule == "torch.distributed.fsdp");
  TorchInfo none =
      parseTorchInfo("{\"python\": \"3.11.2\", \"error\": \"ModuleNotFoundError: No module named 'torch'\"}\n");
  CHECK_FALSE(none.ok);
  CHECK(none.error.find("No module named 'torch'") != std::string::npos);
  CHECK_FALSE(parseTorchInfo("").ok);
}

TEST_CASE("probe env: the torch check never hangs", "[probe]") {
  ProbeTempDir dir;
  auto hang = dir.write("hang-python", "#!/bin/sh\nsleep 30\n", true);
  auto start = std::chrono::steady_clock::now();
  TorchInfo t = probeTorch(hang.string(), 1);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK_FALSE(t.ok);
  CHECK(t.error.find("did not answer") != std::string::npos);
  CHECK(secs < 8);
  TorchInfo f = probeTorch("/bin/false", 10);
  CHECK_FALSE(f.ok);
  TorchInfo missing = probeTorch("/nonexistent/python3", 10);
  CHECK_FALSE(missing.ok);
  CHECK(missing.error.find("cannot run") != std::string::npos);
}

TEST_CASE("probe backend: auto, nccl and gloo", "[probe]") {
  TorchInfo t;
  t.ok = true;
  t.torchVersion = "2.11.0";
  t.distributed = t.nccl = t.gloo = true;
  t.fullyShardModule = "torch.distributed.fsdp";
  t.cpuFsdp2 = true;
  t.cpuFsdp1 = true;

  BackendChoice c = chooseBackend("auto", 2, 2, t, true);
  CHECK(c.ok);
  CHECK(c.backend == "nccl");
  CHECK(c.worldSize == 2);

  c = chooseBackend("auto", 2, 1, t, true);  // one GPU, two ranks: gloo on CPU
  CHECK(c.backend == "gloo");
  CHECK(c.device == "cpu");
  CHECK(c.worldSize == 2);
  CHECK(c.reason.find("only 1 GPU visible") != std::string::npos);

  c = chooseBackend("nccl", 2, 1, t, true);  // NCCL refuses two ranks on one device
  CHECK(c.ok);
  CHECK(c.worldSize == 1);
  CHECK(c.divergenceOnGloo);
  CHECK(c.reason.find("NCCL refuses two ranks on one device") != std::string::npos);

  c = chooseBackend("nccl", 1, 1, t, true);
  CHECK(c.worldSize == 1);
  CHECK_FALSE(c.divergenceOnGloo);

  TorchInfo noCpu = t;
  noCpu.cpuFsdp2 = false;
  noCpu.cpuFsdpError = "FSDP2 on CPU: RuntimeError: synthetic";
  c = chooseBackend("auto", 2, 1, noCpu, true);  // gloo cannot: one rank on the GPU
  CHECK(c.backend == "nccl");
  CHECK(c.worldSize == 1);
  CHECK(c.reason.find("not checked") != std::string::npos);
  c = chooseBackend("gloo", 2, 0, noCpu, true);
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("self-test") != std::string::npos);
  c = chooseBackend("auto", 2, 0, noCpu, true);
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("no usable backend") != std::string::npos);
  c = chooseBackend("auto", 2, 0, noCpu, false);  // FSDP1 findings only: the FSDP1 self-test counts
  CHECK(c.ok);
  CHECK(c.backend == "gloo");

  TorchInfo cpuOnly = t;
  cpuOnly.nccl = false;
  c = chooseBackend("nccl", 1, 0, cpuOnly, true);
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("NCCL") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The process runner
// ---------------------------------------------------------------------------------------------

TEST_CASE("probe runner: output, exit code and environment", "[probe]") {
  RunOptions o;
  o.timeoutSeconds = 20;
  o.env["SHARDLINT_TEST_VALUE"] = "forty two";
  RunResult r = runProcess({"sh", "-c", "echo out; echo err >&2; echo \"$SHARDLINT_TEST_VALUE\"; exit 3"}, o);
  CHECK(r.started);
  CHECK(r.exitCode == 3);
  CHECK_FALSE(r.timedOut);
  CHECK(r.output.find("out") != std::string::npos);
  CHECK(r.output.find("err") != std::string::npos);
  CHECK(r.output.find("forty two") != std::string::npos);

  RunResult missing = runProcess({"/nonexistent/binary"}, o);
  CHECK_FALSE(missing.started);
  CHECK(missing.startError.find("No such file") != std::string::npos);
}

TEST_CASE("probe runner: a timeout kills the whole process group promptly", "[probe]") {
  RunOptions o;
  o.timeoutSeconds = 1;
  o.killGraceSeconds = 1;
  auto start = std::chrono::steady_clock::now();
  RunResult r = runProcess({"sleep", "30"}, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.started);
  CHECK(r.timedOut);
  CHECK(secs < 5);
  CHECK(r.pgid > 0);
  CHECK(groupGone(r.pgid));
}

TEST_CASE("probe runner: children in the group and in their own sessions die too", "[probe]") {
  ProbeTempDir dir;
  fs::path pids = dir.path() / "pids";
  RunOptions o;
  o.timeoutSeconds = 1;
  o.killGraceSeconds = 1;
  // A child that ignores SIGTERM, and one that escapes the group (like torchrun's workers).
  std::string script = "trap '' TERM; sleep 30 & echo $! > " + pids.string() + "; setsid sleep 31 & echo $! >> " +
                       pids.string() + "; wait";
  auto start = std::chrono::steady_clock::now();
  RunResult r = runProcess({"sh", "-c", script}, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.timedOut);
  CHECK(secs < 6);
  std::ifstream in(pids);
  pid_t pid;
  int n = 0;
  while (in >> pid) {
    ++n;
    INFO("pid " << pid);
    CHECK(processGone(pid));
  }
  CHECK(n == 2);
  CHECK(groupGone(r.pgid));
}

TEST_CASE("probe runner: stragglers left after a clean exit are killed", "[probe]") {
  ProbeTempDir dir;
  fs::path pids = dir.path() / "pids";
  RunOptions o;
  o.timeoutSeconds = 20;
  std::string script = "setsid sleep 30 >/dev/null 2>&1 & echo $! > " + pids.string() + "; exit 0";
  auto start = std::chrono::steady_clock::now();
  RunResult r = runProcess({"sh", "-c", script}, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.exitCode == 0);
  CHECK(secs < 5);
  std::ifstream in(pids);
  pid_t pid = 0;
  REQUIRE(in >> pid);
  CHECK(processGone(pid));
}

TEST_CASE("probe ports: a free port, and one in use", "[probe]") {
  int port = freePort();
  REQUIRE(port > 0);
  CHECK_FALSE(portInUse(port));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  int busy = ntohs(addr.sin_port);
  CHECK(portInUse(busy));
  close(fd);
  CHECK_FALSE(portInUse(busy));
  CHECK(portInUse(0));
  CHECK(portInUse(70000));
}
