// The pre-commit hook, run by Debian's real `pre-commit` on a throwaway repository.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "TestSupport.h"

namespace fs = std::filesystem;

namespace {
using Run = shardlint::testing::ShellResult;

// Runs `cmd` with stdout and stderr captured together.
Run sh(const std::string& cmd) { return shardlint::testing::runShell(cmd + " 2>&1"); }

const char* kBug =
    "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom nets import Net\n"
    "model = Net()\nopt = torch.optim.AdamW(model.parameters())\nmodel = FSDP(model)\nopt.step()\n";
const char* kClean =
    "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom nets import Net\n"
    "model = FSDP(Net())\nopt = torch.optim.AdamW(model.parameters())\nopt.step()\n";
}  // namespace

TEST_CASE("pre-commit: the hook blocks a commit with a bug and lets a clean one through", "[precommit]") {
  REQUIRE(sh("command -v pre-commit").code == 0);  // installed by scripts/setup.sh (Debian's pre-commit)
  REQUIRE(sh("command -v git").code == 0);
  fs::path base = fs::temp_directory_path() / ("shardlint-precommit-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::path repo = base / "repo";
  fs::create_directories(repo);
  std::string bin = fs::path(SHARDLINT_BINARY).parent_path().string();
  // The hook runs `shardlint` from PATH (language: system); an isolated cache and git identity.
  std::string env = "cd '" + repo.string() + "' && export PATH='" + bin + "':\"$PATH\" PRE_COMMIT_HOME='" +
                    (base / "cache").string() + "' GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t " +
                    "GIT_COMMITTER_EMAIL=t@t HOME='" + base.string() + "' && ";
  REQUIRE(sh(env + "git init -q . && git config commit.gpgsign false").code == 0);
  std::ofstream(repo / "train.py") << kBug;
  std::ofstream(repo / "clean.py") << kClean;
  REQUIRE(sh(env + "git add train.py clean.py").code == 0);

  SECTION("try-repo against this checkout") {
    Run bad = sh(env + "pre-commit try-repo '" + std::string(SHARDLINT_SOURCE_DIR) + "' shardlint --files train.py");
    INFO(bad.out);
    CHECK(bad.code != 0);
    CHECK(bad.out.find("SL101") != std::string::npos);
    Run good = sh(env + "pre-commit try-repo '" + std::string(SHARDLINT_SOURCE_DIR) + "' shardlint --files clean.py");
    INFO(good.out);
    CHECK(good.code == 0);
  }
  SECTION("shardlint-fix applies the safe fixes; pre-commit reports the modified file, then passes") {
    fs::path fixture = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "config" / "SL303_accelerate_space_after_comma.yaml";
    fs::copy_file(fixture, repo / "accelerate.yaml");
    REQUIRE(sh(env + "git add accelerate.yaml").code == 0);
    std::string run = env + "pre-commit try-repo '" + std::string(SHARDLINT_SOURCE_DIR) + "' shardlint-fix --files accelerate.yaml";
    Run fixed = sh(run);
    INFO(fixed.out);
    CHECK(fixed.code != 0);
    CHECK(fixed.out.find("files were modified by this hook") != std::string::npos);
    CHECK(shardlint::testing::readFile(repo / "accelerate.yaml") == shardlint::testing::readFile(fixture.string() + ".fixed"));
    Run again = sh(run);
    INFO(again.out);
    CHECK(again.code == 0);
  }
  SECTION("installed as a git hook at this checkout's HEAD") {
    Run head = sh("git -C '" + std::string(SHARDLINT_SOURCE_DIR) + "' rev-parse HEAD");
    REQUIRE(head.code == 0);
    std::string rev = head.out.substr(0, head.out.find_first_of("\r\n"));
    std::ofstream(repo / ".pre-commit-config.yaml")
        << "repos:\n  - repo: " << SHARDLINT_SOURCE_DIR << "\n    rev: " << rev << "\n    hooks:\n      - id: shardlint\n";
    REQUIRE(sh(env + "git add .pre-commit-config.yaml && pre-commit install").code == 0);
    REQUIRE(sh(env + "git reset -q train.py").code == 0);
    Run clean = sh(env + "git commit -q -m 'clean script'");
    INFO(clean.out);
    CHECK(clean.code == 0);
    REQUIRE(sh(env + "git add train.py").code == 0);
    Run blocked = sh(env + "git commit -q -m 'optimizer before the wrap'");
    INFO(blocked.out);
    CHECK(blocked.code != 0);
    CHECK(blocked.out.find("SL101") != std::string::npos);
  }
  fs::remove_all(base);
}
