// What the end-to-end tests of the `shardlint` executable share: the SL101 script and its clean twin, a
// temporary folder whose stderr file lies outside the linted tree, running the binary (on a pipe or on a
// pseudo-terminal), and reading its JSON output.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "TestSupport.h"

namespace shardlint::testing::cli {

namespace fs = std::filesystem;
using nlohmann::json;

// An FSDP1 script with one SL101 bug: the optimizer (line 6, column 7) is built
// over model.parameters() before FSDP(model) flattens them.
inline const char* const kBuggy = shardlint::testing::kBuggySL101;

// The same script done right: wrap first, then build the optimizer.
inline const char* const kClean =
    "import torch\n"
    "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
    "from mymodels import Net\n"
    "\n"
    "model = FSDP(Net())\n"
    "opt = torch.optim.AdamW(model.parameters())\n"
    "opt.step()\n";

// Inputs go under work(); the captured stderr lives in base(), outside the linted tree.
class TempDir : public shardlint::testing::TempDir {
 public:
  TempDir() : shardlint::testing::TempDir("shardlint-cli-") { fs::create_directories(work()); }

  const fs::path& base() const { return path(); }
  fs::path work() const { return path() / "w"; }

  // Writes `content` to work()/rel, creating parent folders.
  fs::path write(const std::string& rel, const std::string& content) const {
    return shardlint::testing::TempDir::write(fs::path("w") / rel, content);
  }
};

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs `shardlint <args>` in `cwd` (stdout is a pipe, so not a TTY). `env` is
// prepended as `NAME=value ...`; NO_COLOR from the caller's environment is dropped.
inline Result runIn(const fs::path& cwd, const std::string& args, const std::string& env = "",
             const fs::path& errFile = {}) {
  fs::path errPath = errFile.empty() ? cwd.parent_path() / "stderr.txt" : errFile;
  std::string cmd = "cd " + shellQuote(cwd.string()) + " && env -u NO_COLOR " + env + " " +
                    shellQuote(SHARDLINT_BINARY) + " " + args + " 2>" + shellQuote(errPath.string());
  shardlint::testing::ShellResult sh = shardlint::testing::runShell(cmd);
  Result r;
  r.code = sh.code;
  r.out = std::move(sh.out);
  r.err = readFile(errPath);
  return r;
}

inline Result run(const TempDir& dir, const std::string& args, const std::string& env = "") {
  return runIn(dir.work(), args, env, dir.base() / "stderr.txt");
}

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

inline json parseJson(const Result& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  json j;
  REQUIRE_NOTHROW(j = json::parse(r.out));
  return j;
}

// The line of `--stats` output (stderr) that contains `key`, or "".
inline std::string statLine(const Result& r, const std::string& key) {
  for (const auto& l : lines(r.err))
    if (l.find(key) != std::string::npos) return l;
  return std::string();
}

inline std::set<std::string> reportedPaths(const json& j) {
  std::set<std::string> out;
  for (const auto& f : j.at("findings")) out.insert(f.at("path").get<std::string>());
  return out;
}

inline std::vector<std::string> codes(const json& j) {
  std::vector<std::string> out;
  for (const auto& f : j.at("findings")) out.push_back(f.at("code").get<std::string>());
  return out;
}

inline bool isValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

// Runs shardlint with stdout on a pseudo-terminal and returns what it wrote there.
// Returns false when no pty can be opened (then the caller skips).
inline bool runOnTty(const TempDir& dir, const std::string& args, const std::string& env, std::string& out) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0) return false;
  if (::grantpt(master) != 0 || ::unlockpt(master) != 0 || ::ptsname(master) == nullptr) {
    ::close(master);
    return false;
  }
  std::string slave = ::ptsname(master);
  std::string cmd = "cd " + shellQuote(dir.work().string()) + " && env -u NO_COLOR " + env + " " +
                    shellQuote(SHARDLINT_BINARY) + " " + args + " >" + shellQuote(slave) + " 2>/dev/null";
  int status = std::system(cmd.c_str());
  (void)status;
  char buf[4096];
  for (;;) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0 || !(p.revents & POLLIN)) break;
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(master);
  return true;
}


}  // namespace shardlint::testing::cli
