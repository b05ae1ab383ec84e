// Data safety: every file shardlint writes for the user (the baseline, the cache of findings)
// goes through atomicWriteFile: a temporary file in the same folder, fsync'ed, renamed into
// place, the existing file's mode kept. A writer killed midway (the SHARDLINT_TEST_ABORT_WRITE
// hook: _exit after half the bytes) leaves the original byte-identical.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "TestSupport.h"
#include "core/AtomicWrite.h"

namespace fs = std::filesystem;
using shardlint::testing::readFile;
using shardlint::testing::runShell;
using shardlint::testing::ShellResult;
using shardlint::testing::shellQuote;

namespace {

struct TempDir : shardlint::testing::TempDir {
  TempDir() : shardlint::testing::TempDir("shardlint-atomic-") {}
};

mode_t modeOf(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Names in `dir` that look like our temporary files.
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

std::string big(size_t n) {
  std::string s;
  while (s.size() < n) s += "line " + std::to_string(s.size()) + " of a large file\n";
  return s;
}

}  // namespace

TEST_CASE("atomic write: replaces the contents, keeps the mode, leaves no temporary file", "[atomic]") {
  TempDir dir;
  fs::path p = dir.write("kept.json", "old contents\n");
  REQUIRE(::chmod(p.c_str(), 0640) == 0);
  CHECK(shardlint::atomicWriteFile(p, "new contents\n").empty());
  CHECK(readFile(p) == "new contents\n");
  CHECK(modeOf(p) == 0640);
  CHECK(leftovers(dir.path()).empty());

  // A new file: 0666 less the umask, like open(O_CREAT) (mkstemp alone would give 0600).
  mode_t mask = ::umask(022);
  ::umask(mask);
  fs::path fresh = dir.path() / "fresh.json";
  CHECK(shardlint::atomicWriteFile(fresh, "x").empty());
  CHECK(modeOf(fresh) == (0666 & ~mask));

  // Through a symbolic link: the file it points to is replaced, the link stays a link.
  fs::path link = dir.path() / "link.json";
  fs::create_symlink(p, link);
  CHECK(shardlint::atomicWriteFile(link, "via link\n").empty());
  CHECK(fs::is_symlink(link));
  CHECK(readFile(p) == "via link\n");
  CHECK(modeOf(p) == 0640);

  // A folder that does not exist: an error, nothing written.
  CHECK(!shardlint::atomicWriteFile(dir.path() / "no" / "such" / "f.json", "x").empty());
  CHECK(!shardlint::atomicWriteFile(dir.path(), "x").empty());  // a folder is not replaced
  CHECK(leftovers(dir.path()).empty());
}

TEST_CASE("atomic write: a writer killed midway leaves the original intact", "[atomic]") {
  TempDir dir;
  const std::string original = big(200000);
  fs::path p = dir.write("data.json", original);
  REQUIRE(::chmod(p.c_str(), 0604) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("SHARDLINT_TEST_ABORT_WRITE", "1", 1);
    shardlint::atomicWriteFile(p, big(400000));
    ::_exit(0);  // not reached: the hook ends the process after half the bytes
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == shardlint::kAbortWriteExitCode);
  CHECK(readFile(p) == original);
  CHECK(modeOf(p) == 0604);
  // What the killed writer left: its temporary file, half written, next to the target.
  std::vector<std::string> left = leftovers(dir.path());
  REQUIRE(left.size() == 1);
  CHECK(fs::path(left[0]).parent_path() == dir.path());
  CHECK(fs::file_size(left[0]) == big(400000).size() / 2);
}

TEST_CASE("atomic write: shardlint check killed while writing its cache or the baseline", "[atomic][cli]") {
  TempDir dir;
  std::string bug =
      "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom nets import Net\n"
      "model = Net()\nopt = torch.optim.AdamW(model.parameters())\nmodel = FSDP(model)\nopt.step()\n";
  // Many files with a finding each: a large baseline and cache.
  for (int i = 0; i < 150; ++i) dir.write("pkg/m" + std::to_string(i) + ".py", bug);
  fs::path cacheDir = dir.path() / "cache";
  std::string cd = "cd " + shellQuote(dir.path().string()) + " && ";
  std::string bin = shellQuote(SHARDLINT_BINARY);
  std::string check = bin + " check pkg --cache-dir " + shellQuote(cacheDir.string());

  SECTION("the cache file is replaced whole or not at all") {
    REQUIRE(runShell(cd + check + " -q >/dev/null 2>&1").code == 1);
    fs::path cacheFile;
    for (const auto& e : fs::directory_iterator(cacheDir))
      if (e.path().filename().string().rfind("results-", 0) == 0) cacheFile = e.path();
    REQUIRE(!cacheFile.empty());
    REQUIRE(::chmod(cacheFile.c_str(), 0640) == 0);
    const std::string before = readFile(cacheFile);
    REQUIRE(before.size() > 10000);
    dir.write("pkg/m0.py", "# changed\n" + bug);  // the cache must be written again
    ShellResult killed = runShell(cd + "SHARDLINT_TEST_ABORT_WRITE=1 " + check + " -q >/dev/null 2>&1");
    CHECK(killed.code == shardlint::kAbortWriteExitCode);
    CHECK(readFile(cacheFile) == before);
    CHECK(modeOf(cacheFile) == 0640);
    // A normal run replaces it, keeps the mode and leaves no temporary file of its own.
    for (const auto& t : leftovers(dir.path())) fs::remove(t);
    CHECK(runShell(cd + check + " -q >/dev/null 2>&1").code == 1);
    CHECK(readFile(cacheFile) != before);
    CHECK(modeOf(cacheFile) == 0640);
    CHECK(leftovers(dir.path()).empty());
  }

  SECTION("an interrupted baseline write leaves no half baseline") {
    fs::path base = dir.path() / "base.json";
    ShellResult killed = runShell(cd + "SHARDLINT_TEST_ABORT_WRITE=1 " + check + " --no-cache --baseline base.json 2>&1");
    CHECK(killed.code == shardlint::kAbortWriteExitCode);
    CHECK(!fs::exists(base));  // not a truncated file that later runs would reject
    for (const auto& t : leftovers(dir.path())) fs::remove(t);
    ShellResult wrote = runShell(cd + check + " --no-cache --baseline base.json 2>&1");
    INFO(wrote.out);
    CHECK(wrote.code == 0);
    CHECK(wrote.out.find("with 150 findings") != std::string::npos);
    CHECK(leftovers(dir.path()).empty());
    mode_t mask = ::umask(022);
    ::umask(mask);
    CHECK(modeOf(base) == (0666 & ~mask));
    // The existing baseline is only read by later runs, never rewritten.
    REQUIRE(::chmod(base.c_str(), 0600) == 0);
    const std::string saved = readFile(base);
    CHECK(runShell(cd + "SHARDLINT_TEST_ABORT_WRITE=1 " + check + " --no-cache --baseline base.json -q >/dev/null 2>&1")
              .code == 0);
    CHECK(readFile(base) == saved);
    CHECK(modeOf(base) == 0600);
  }
}
