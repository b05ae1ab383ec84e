// Launching: the torch.distributed.run command line, shell-like words, free ports, and the runner
// that starts a command in its own process group and kills the whole group (and every descendant
// that carries the run's token) on a timeout or an interrupt (Probe.h).
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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "ProbeImpl.h"

extern char** environ;

namespace shardlint::probe {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

// Set by SIGINT/SIGTERM while a probe runs; the runner then kills its process group.
volatile sig_atomic_t gInterrupted = 0;
void onInterrupt(int) { gInterrupted = 1; }

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

}  // namespace shardlint::probe
