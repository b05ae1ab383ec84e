// Helpers shared by the test files: shell quoting, reading a file, running a shell command and
// capturing its stdout and exit code, and a temporary directory removed at scope exit.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include "core/SourceFile.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <system_error>

namespace shardlint::testing {

// An FSDP1 script with one SL101 bug: the optimizer (line 6, column 7) is built over
// model.parameters() before FSDP(model) flattens them.
inline constexpr const char* kBuggySL101 =
    "import torch\n"
    "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
    "from mymodels import Net\n"
    "\n"
    "model = Net()\n"
    "opt = torch.optim.AdamW(model.parameters())\n"
    "model = FSDP(model)\n"
    "opt.step()\n";

// `s` in single quotes for /bin/sh (an embedded ' becomes '\'').
inline std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// The whole file, byte for byte; "" when it cannot be read.
// The file's bytes ("" when it cannot be read).
inline std::string readFile(const std::filesystem::path& p) {
  std::string bytes;
  shardlint::readFileBytes(p.string(), bytes);
  return bytes;
}

// The SARIF checker (tests/sarif_check.py: the official SARIF 2.1.0 schema, GitHub code scanning's
// required properties and upload limits) under the test tools' Python (build/venv, which
// scripts/setup.sh makes), as a shell command prefix: append the quoted log paths.
inline std::filesystem::path sarifCheckPython() {
  return std::filesystem::path(SHARDLINT_SOURCE_DIR) / "build" / "venv" / "bin" / "python";
}
inline std::string sarifCheckCommand() {
  return shellQuote(sarifCheckPython().string()) + " " +
         shellQuote((std::filesystem::path(SHARDLINT_SOURCE_DIR) / "tests" / "sarif_check.py").string());
}

struct ShellResult {
  int code = -1;    // exit status; -1 when the shell did not exit normally
  std::string out;  // what the command wrote to stdout
};

// Runs `cmd` with /bin/sh (popen) and captures its stdout; stderr is left alone (redirect it in
// `cmd`, e.g. `2>&1`, to capture it too).
inline ShellResult runShell(const std::string& cmd) {
  ShellResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A fresh directory `<system temp>/<prefix><pid>-<counter>-<random>`, removed at scope exit
// (after making anything a test chmod'ed removable again).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()) + "-" +
                                                      std::to_string(counter++) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `content` to path()/rel, creating parent folders; `executable` adds owner rwx.
  std::filesystem::path write(const std::filesystem::path& rel, const std::string& content,
                              bool executable = false) const {
    namespace fs = std::filesystem;
    fs::path p = path_ / rel;
    fs::create_directories(p.parent_path());
    {
      std::ofstream out(p, std::ios::binary);
      out << content;
    }
    if (executable) fs::permissions(p, fs::perms::owner_all, fs::perm_options::add);
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace shardlint::testing
