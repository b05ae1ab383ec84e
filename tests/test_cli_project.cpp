// End-to-end tests of the `shardlint` executable on a project (issue 3): configuration files and settings,
// --jobs and --stats, --accelerate-config, baselines, and the cache of findings.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <chrono>
#include <vector>

#include "CliSupport.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint::testing::cli;

// ---------------------------------------------------------------- project-wide (issue 3)

TEST_CASE("cli: configuration in pyproject.toml / .shardlint.toml", "[cli][config]") {
  TempDir dir;
  dir.write("lib/helpers.py",
            "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "def make_opt(m):\n    return torch.optim.AdamW(m.parameters())\n");
  dir.write("scripts/train.py",
            "from helpers import make_opt\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "from nets import Net\nmodel = Net()\nopt = make_opt(model)\nmodel = FSDP(model)\nopt.step()\n");
  SECTION("without a root, `helpers` is external: not guessed about") {
    Result r = run(dir, "check scripts");
    CHECK(r.code == 0);
  }
  SECTION("roots from [tool.shardlint] make the helper visible") {
    dir.write("pyproject.toml", "[project]\nname = \"x\"\n\n[tool.shardlint]\nroots = [\"lib\"]\n");
    Result r = run(dir, "check scripts -q");
    CHECK(r.code == 1);
    CHECK(r.out.find("scripts/train.py:5:7: error:") == 0);
    CHECK(r.out.find("lib/helpers.py:4:12: note: the optimizer is constructed here") != std::string::npos);
  }
  SECTION("--root does the same; ignore in .shardlint.toml silences it") {
    Result r = run(dir, "check scripts --root lib -q");
    CHECK(r.code == 1);
    dir.write(".shardlint.toml", "ignore = [\"optimizer-before-wrap\"]\n");
    CHECK(run(dir, "check scripts --root lib").code == 0);
  }
  SECTION("a bad configuration is a usage error with the file and the key") {
    dir.write("pyproject.toml", "[tool.shardlint]\nselct = [\"SL101\"]\n");
    Result r = run(dir, "check scripts");
    CHECK(r.code == 2);
    CHECK(r.err.find("pyproject.toml:2: unknown key `selct`") != std::string::npos);
    dir.write("pyproject.toml", "[tool.shardlint]\nroots = \"lib\"\n");
    CHECK(run(dir, "check scripts").code == 2);
    dir.write("pyproject.toml", "[tool.shardlint\n");
    Result bad = run(dir, "check scripts");
    CHECK(bad.code == 2);
    CHECK(bad.err.find("invalid TOML") != std::string::npos);
  }
}

TEST_CASE("cli: --jobs and --stats", "[cli][jobs]") {
  TempDir dir;
  for (int i = 0; i < 6; ++i)
    dir.write("t" + std::to_string(i) + ".py",
              "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
              "from nets import Net\nmodel = Net()\nopt = torch.optim.AdamW(model.parameters())\n"
              "model = FSDP(model)\nopt.step()\n");
  dir.write("plain.py", "print('no training here')\n");
  Result one = run(dir, "check . --jobs 1");
  Result many = run(dir, "check . -j 4");
  CHECK(one.code == 1);
  CHECK(one.out == many.out);
  Result stats = run(dir, "check . --stats -q");
  CHECK(stats.out == run(dir, "check . -q").out);
  for (const char* key : {"files seen      7", "files skipped   1", "files analysed  6", "peak RSS", "pre-scan"})
    CHECK(stats.err.find(key) != std::string::npos);
  CHECK(run(dir, "check . --jobs -1").code == 2);
}

TEST_CASE("cli: --accelerate-config links a config to scripts no launch command names", "[cli][config]") {
  TempDir dir;
  dir.write("configs/a.yaml",
            "distributed_type: FSDP\nfsdp_config:\n  fsdp_use_orig_params: false\nnum_processes: 2\n");
  dir.write("configs/b.yaml",
            "distributed_type: FSDP\nfsdp_config:\n  fsdp_use_orig_params: true\nnum_processes: 2\n");
  dir.write("train.py",
            "import torch\nfrom accelerate import Accelerator\nfrom nets import Net\n"
            "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.AdamW(model.parameters())\n"
            "model, opt = accelerator.prepare(model, opt)\nopt.step()\n");
  // Two configs: none is "the only one", so nothing links without the option.
  CHECK(run(dir, "check .").code == 0);
  Result r = run(dir, "check . --accelerate-config configs/a.yaml -q");
  CHECK(r.code == 1);
  CHECK(r.out.find("train.py:6:7: error:") == 0);
  CHECK(r.out.find("[SL402 orig-params-false-with-prebuilt-optimizer]") != std::string::npos);
  CHECK(r.out.find("configs/a.yaml:3:25: note: the setting that decides it") != std::string::npos);
  CHECK(run(dir, "check . --accelerate-config configs/b.yaml").code == 0);
}

TEST_CASE("cli: settings: per-file-ignores, exclude, severity, extend-select, optimizers, fsdp-version",
          "[cli][config]") {
  TempDir dir;
  const char* bug =
      "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom nets import Net\n"
      "model = Net()\nopt = torch.optim.AdamW(model.parameters())\nmodel = FSDP(model)\nopt.step()\n";
  dir.write("train.py", bug);
  dir.write("tests/test_train.py", bug);
  dir.write("legacy/old/train.py", bug);
  dir.write("custom.py",
            "from mylib import make_opt\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "from nets import Net\nmodel = Net()\nopt = make_opt(model.parameters())\nmodel = FSDP(model)\nopt.step()\n");
  dir.write("acc.py",
            "import torch\nimport torch.nn as nn\nfrom accelerate import Accelerator\nfrom nets import Net\n"
            "accelerator = Accelerator()\nmodel = Net()\nscale = nn.Parameter(torch.ones(1))\n"
            "opt = torch.optim.AdamW([{'params': model.parameters()}, {'params': [scale]}])\n"
            "model, opt = accelerator.prepare(model, opt)\n");
  auto paths = [](const std::string& out) {
    std::vector<std::string> p;
    for (const auto& l : lines(out))
      if (l.find(": error:") != std::string::npos || l.find(": warning:") != std::string::npos)
        p.push_back(l.substr(0, l.find(':')));
    return p;
  };
  CHECK(paths(run(dir, "check . -q").out) ==
        std::vector<std::string>{"legacy/old/train.py", "tests/test_train.py", "train.py"});
  dir.write("pyproject.toml",
            "[tool.shardlint]\nexclude = [\"legacy/**\"]\noptimizers = [\"mylib.make_opt\"]\nfsdp-version = 2\n"
            "[tool.shardlint.per-file-ignores]\n\"tests/*.py\" = [\"SL101\"]\n"
            "[tool.shardlint.severity]\nSL101 = \"warning\"\n");
  Result r = run(dir, "check . -q");
  INFO(r.out << r.err);
  // custom.py: the configured helper builds optimizers; acc.py: FSDP2 assumed, so the stray parameter is SL102.
  CHECK(paths(r.out) == std::vector<std::string>{"acc.py", "custom.py", "train.py"});
  CHECK(r.out.find("train.py:5:7: warning:") != std::string::npos);
  CHECK(r.out.find("[SL102 stray-param-group]") != std::string::npos);
  Result shown = run(dir, "check --show-settings --extend-select SL003");
  CHECK(shown.code == 0);
  CHECK(shown.out.find("extend-select = [\"SL003\"]") != std::string::npos);
  CHECK(shown.out.find("\"tests/*.py\" = [\"SL101\"]") != std::string::npos);
  // An unused noqa is reported only when SL003 is asked for by name.
  dir.write("pyproject.toml", "[tool.shardlint]\n");
  dir.write("n.py", "import torch  # noqa: SL101\nimport torch.distributed.fsdp\nx = torch.optim\n");
  CHECK(run(dir, "check n.py -q").out.empty());
  CHECK(run(dir, "check n.py -q --extend-select SL003").out.find("[SL003 unused-suppression]") != std::string::npos);
}

TEST_CASE("cli: --baseline writes, then reports only new findings", "[cli][baseline]") {
  TempDir dir;
  const char* bug =
      "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom nets import Net\n"
      "model = Net()\nopt = torch.optim.AdamW(model.parameters())\nmodel = FSDP(model)\nopt.step()\n";
  dir.write("old.py", bug);
  Result first = run(dir, "check . --baseline base.json");
  CHECK(first.code == 0);
  CHECK(first.err.find("wrote the baseline base.json with 1 finding") != std::string::npos);
  CHECK(run(dir, "check . --baseline base.json").code == 0);
  // Moving the old finding down does not make it new; a new file's finding is reported.
  dir.write("old.py", std::string("# a comment added on top\n") + bug);
  CHECK(run(dir, "check . --baseline base.json").code == 0);
  dir.write("new.py", bug);
  Result second = run(dir, "check . --baseline base.json -q");
  CHECK(second.code == 1);
  CHECK(second.out.find("new.py:5:7:") == 0);
  CHECK(second.out.find("old.py") == std::string::npos);
  dir.write("broken.json", "not json");
  CHECK(run(dir, "check . --baseline broken.json").code == 2);
}

// The persistent cache: a second run takes every file's findings from it and parses nothing;
// a change to a helper module re-analyses exactly the files whose analysis read it.
TEST_CASE("cli: a cached finding depends on the YAML file its script loads", "[cli][cache]") {
  TempDir dir;
  const std::string kDefaultCache = "-u SHARDLINT_CACHE_DIR";
  dir.write("configs/train.yaml", "fsdp:\n  use_orig_params: false\n");
  dir.write("train.py",
            "import torch\nfrom omegaconf import OmegaConf\n"
            "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "cfg = OmegaConf.load(\"configs/train.yaml\")\nmodel = torch.nn.Linear(8, 8)\n"
            "opt = torch.optim.AdamW(model.parameters())\n"
            "model = FSDP(model, use_orig_params=cfg.fsdp.use_orig_params)\nopt.step()\n");
  auto cacheLine = [](const Result& r) {
    for (const auto& l : lines(r.err))
      if (l.find("cache ") != std::string::npos) return l;
    return std::string();
  };
  Result cold = run(dir, "check train.py --stats", kDefaultCache);
  CHECK(cold.code == 1);
  CHECK(cold.out.find("is False in configs/train.yaml unless the command line sets it") != std::string::npos);
  Result warm = run(dir, "check train.py --stats", kDefaultCache);
  CHECK(warm.out == cold.out);
  CHECK(cacheLine(warm).find("1 of 1 analysed") != std::string::npos);

  SECTION("the YAML file edited: the script is analysed again") {
    dir.write("configs/train.yaml", "fsdp:\n  use_orig_params: true\n");
    Result after = run(dir, "check train.py --stats", kDefaultCache);
    CHECK(after.code == 0);
    CHECK(cacheLine(after).find("0 of 1 analysed") != std::string::npos);
    CHECK(after.out == run(dir, "check train.py --no-cache").out);
  }
  SECTION("the YAML file removed, then created again") {
    fs::remove(dir.work() / "configs" / "train.yaml");
    Result gone = run(dir, "check train.py --stats", kDefaultCache);
    CHECK(gone.code == 0);
    CHECK(cacheLine(gone).find("0 of 1 analysed") != std::string::npos);
    dir.write("configs/train.yaml", "fsdp:\n  use_orig_params: false\n");
    Result back = run(dir, "check train.py --stats", kDefaultCache);
    CHECK(back.code == 1);
    CHECK(back.out == cold.out);
    CHECK(cacheLine(back).find("0 of 1 analysed") != std::string::npos);
  }
}

TEST_CASE("cli: the cache of findings (.shardlint_cache)", "[cli][cache]") {
  TempDir dir;
  // The default location, whatever the test environment sets.
  const std::string kDefaultCache = "-u SHARDLINT_CACHE_DIR";
  dir.write("helpers.py",
            "import torch\n"
            "def build_optimizer(model):\n"
            "    return torch.optim.AdamW(model.parameters())\n");
  dir.write("train.py",
            "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "from helpers import build_optimizer\nfrom nets import Net\n"
            "model = Net()\nopt = build_optimizer(model)\nmodel = FSDP(model)\nopt.step()\n");
  dir.write("other.py", kBuggy);
  Result cold = run(dir, "check . --stats", kDefaultCache);
  CHECK(cold.code == 1);
  CHECK(statLine(cold, "cache ").find("0 of 2 analysed") != std::string::npos);
  CHECK(fs::exists(dir.work() / ".shardlint_cache" / ".gitignore"));
  CHECK(fs::exists(dir.work() / ".shardlint_cache" / "CACHEDIR.TAG"));

  SECTION("an unchanged tree: every finding from the cache, no parse") {
    Result warm = run(dir, "check . --stats", kDefaultCache);
    CHECK(warm.code == 1);
    CHECK(warm.out == cold.out);
    CHECK(statLine(warm, "cache ").find("2 of 2 analysed") != std::string::npos);
    CHECK(statLine(warm, "parses ").find("parses          0") != std::string::npos);
  }
  SECTION("a helper fixed: its dependent is analysed again, the other file is not") {
    dir.write("helpers.py", "import torch\ndef build_optimizer(model):\n    return None\n");
    Result after = run(dir, "check . --stats --format json", kDefaultCache);
    CHECK(statLine(after, "cache ").find("1 of 2 analysed") != std::string::npos);
    Result fresh = run(dir, "check . --no-cache --format json");
    CHECK(after.out == fresh.out);
    CHECK(reportedPaths(parseJson(after)).count("train.py") == 0);
  }
  SECTION("a damaged cache file is ignored and replaced") {
    for (const auto& e : fs::directory_iterator(dir.work() / ".shardlint_cache"))
      if (e.path().extension() == ".msgpack") std::ofstream(e.path()) << "\x85\xa6format\x03\xa5names";
    Result again = run(dir, "check . --stats", kDefaultCache);
    CHECK(again.code == 1);
    CHECK(again.out == cold.out);
    CHECK(statLine(again, "cache ").find("0 of 2 analysed") != std::string::npos);
    CHECK(statLine(run(dir, "check . --stats", kDefaultCache), "cache ").find("2 of 2 analysed") != std::string::npos);
  }
  SECTION("a cache file cut short or with bytes changed is ignored, whatever the place") {
    fs::path file;
    for (const auto& e : fs::directory_iterator(dir.work() / ".shardlint_cache"))
      if (e.path().extension() == ".msgpack") file = e.path();
    REQUIRE(!file.empty());
    const std::string whole = shardlint::testing::readFile(file);
    REQUIRE(whole.size() > 64);
    for (size_t cut : {size_t{1}, whole.size() / 3, whole.size() / 2, whole.size() - 1}) {
      for (bool flip : {false, true}) {
        INFO("cut at " << cut << (flip ? ", byte flipped instead" : ""));
        std::string damaged = whole;
        if (flip) damaged[cut] = static_cast<char>(damaged[cut] ^ 0x5a);
        else damaged.resize(cut);
        std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged;
        Result again = run(dir, "check . --stats", kDefaultCache);
        CHECK(again.code == 1);
        CHECK(again.out == cold.out);
      }
    }
  }
  SECTION("--no-cache reads and writes nothing; --cache-dir and SHARDLINT_CACHE_DIR move it") {
    Result none = run(dir, "check . --no-cache --stats");
    CHECK(none.out == cold.out);
    CHECK(statLine(none, "cache ").find("off") != std::string::npos);
    Result moved = run(dir, "check . --cache-dir ../elsewhere");
    CHECK(moved.out == cold.out);
    CHECK(fs::exists(dir.base() / "elsewhere" / ".gitignore"));
    run(dir, "check .", "SHARDLINT_CACHE_DIR=../fromenv");
    CHECK(fs::exists(dir.base() / "fromenv" / ".gitignore"));
  }
  SECTION("with a configuration file: a warm run parses only the configuration (outlines are cached)") {
    dir.write("accelerate_fsdp.yaml",
              "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_transformer_layer_cls_to_wrap: Block\n");
    Result first = run(dir, "check . --stats --format json", kDefaultCache);
    Result warm = run(dir, "check . --stats --format json", kDefaultCache);
    CHECK(warm.out == first.out);
    CHECK(warm.out == run(dir, "check . --no-cache --format json").out);
    CHECK(statLine(warm, "parses ").find("parses          1 (of 1 files") != std::string::npos);
  }
  SECTION("a cache folder that cannot be written: the findings still come, the stats say why") {
    dir.write("blocker", "a file where the cache folder would go\n");
    Result blocked = run(dir, "check . --cache-dir blocker/sub --stats");
    CHECK(blocked.code == 1);
    CHECK(blocked.out == cold.out);
    CHECK(statLine(blocked, "cache ").find("not written") != std::string::npos);
  }
}

// Writes `text` over the project file `name` and sets its old modification time back (as `rsync -t`
// or `touch -r` would): only its status-change time tells that it changed.
static void rewriteKeepingMtime(TempDir& dir, const std::string& name, const std::string& text) {
  fs::path file = dir.work() / name;
  auto mtime = fs::last_write_time(file);
  dir.write(name, text);
  fs::last_write_time(file, mtime);
}

// The stamps in the cache: a warm run knows an unchanged file by its size and times and reads none of
// its text; a file rewritten with its old size and modification time (its status-change time moves)
// is read again, and a file written less than two seconds before a run is not trusted by its stamp.
TEST_CASE("cli: the cache knows unchanged files by their stamps; rewritten ones are read again", "[cli][cache]") {
  TempDir dir;
  const std::string kDefaultCache = "-u SHARDLINT_CACHE_DIR";
  const std::string before =
      "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom helpers import Net\n"
      "model = Net()\nopt = torch.optim.AdamW(model.parameters())\nmodel = FSDP(model)\nopt.step()\n";
  const std::string after =  // the same bytes, the optimizer now built after the wrap
      "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom helpers import Net\n"
      "model = Net()\nmodel = FSDP(model)\nopt = torch.optim.AdamW(model.parameters())\nopt.step()\n";
  REQUIRE(before.size() == after.size());
  dir.write("helpers.py", "import torch\nclass Net(torch.nn.Module):\n    pass\n");
  dir.write("train.py", before);
  dir.write("other.py", kBuggy);
  // Stamps younger than two seconds at a run's start are not kept (a file written again within its
  // clock's granularity could keep them).
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  Result cold = run(dir, "check . --stats --format json", kDefaultCache);
  CHECK(cold.code == 1);
  CHECK(statLine(cold, "files read ").find("known unchanged") == std::string::npos);
  Result warm = run(dir, "check . --stats --format json", kDefaultCache);
  CHECK(warm.out == cold.out);
  CHECK(statLine(warm, "files read ").find("3 of them known unchanged") != std::string::npos);
  CHECK(statLine(warm, "bytes read ").find("bytes read      0") != std::string::npos);
  CHECK(statLine(warm, "cache ").find("2 of 2 analysed") != std::string::npos);
  CHECK(reportedPaths(parseJson(warm)).count("train.py") == 1);

  // train.py rewritten with its old size and modification time: only its status-change time tells.
  rewriteKeepingMtime(dir, "train.py", after);
  Result rewritten = run(dir, "check . --stats --format json", kDefaultCache);
  CHECK(rewritten.out == run(dir, "check . --no-cache --format json").out);
  CHECK(reportedPaths(parseJson(rewritten)).count("train.py") == 0);
  CHECK(statLine(rewritten, "files read ").find("2 of them known unchanged") != std::string::npos);
  // Written within two seconds of that run: its stamp was not kept, so it is read again.
  Result again = run(dir, "check . --stats --format json", kDefaultCache);
  CHECK(again.out == rewritten.out);
  CHECK(statLine(again, "files read ").find("2 of them known unchanged") != std::string::npos);
  CHECK(statLine(again, "cache ").find("2 of 2 analysed") != std::string::npos);
}

// Configuration and Markdown files by their stamps: a warm run does not read one that an earlier run
// found mentions no word the config rules need; rewritten with its old size and modification time to
// mention one, it is read and checked again.
TEST_CASE("cli: quiet configuration files are known by their stamps", "[cli][cache]") {
  TempDir dir;
  const std::string kDefaultCache = "-u SHARDLINT_CACHE_DIR";
  const std::string bad = "distributed_type: FSDP\nfsdp_config:\n  fsdp_min_num_params: 1e8\n";
  const std::string quiet = "distributed_type: XXXX\nxxxx_config:\n  xxxx_xxx_xxx_xxxxxx: 1e8\n";  // no config word
  REQUIRE(bad.size() == quiet.size());
  dir.write("train.py", kBuggy);
  dir.write("settings.yaml", quiet);
  dir.write("notes.md", "# Notes\n\n```yaml\nlr: 0.1\n```\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // stamps younger than 2 s are not kept
  Result cold = run(dir, "check . --stats --format json", kDefaultCache);
  CHECK(cold.code == 1);
  CHECK(reportedPaths(parseJson(cold)).count("settings.yaml") == 0);
  Result warm = run(dir, "check . --stats --format json", kDefaultCache);
  CHECK(warm.out == cold.out);
  // train.py, settings.yaml and notes.md, none of them read
  CHECK(statLine(warm, "files read ").find("3 of them known unchanged") != std::string::npos);
  CHECK(statLine(warm, "bytes read ").find("bytes read      0") != std::string::npos);

  rewriteKeepingMtime(dir, "settings.yaml", bad);
  Result rewritten = run(dir, "check . --stats --format json", kDefaultCache);
  CHECK(rewritten.out == run(dir, "check . --no-cache --format json").out);
  CHECK(reportedPaths(parseJson(rewritten)).count("settings.yaml") == 1);
  CHECK(statLine(rewritten, "files read ").find("2 of them known unchanged") != std::string::npos);
}

// A script with no rule word of its own (only what `helpers` holds makes it relevant): its optimizer is
// built before the helper wraps the model.
const std::string kWrappedByHelper =
    "import torch\nfrom helpers import wrap_model\nmodel = torch.nn.Linear(2, 2)\n"
    "opt = torch.optim.AdamW(model.parameters())\nwrap_model(model)\nopt.step()\n";
const std::string kHelperWraps = "from torch.distributed.fsdp import fully_shard\ndef wrap_model(m):\n    fully_shard(m)\n";

// Import answers in the cache rest on the project's layout: a warm run follows a file's imports as the
// cache says while no folder they were looked up in changed; a module created since (its folder changed)
// is found, and makes the script that imports it relevant, as without the cache.
TEST_CASE("cli: the cache's import answers are dropped when a folder they rest on changes", "[cli][cache]") {
  TempDir dir;
  dir.write(".git/HEAD", "ref: refs/heads/main\n");
  dir.write("train.py", kWrappedByHelper);
  dir.write("pkg/__init__.py", "");
  // Stamps younger than 2 s are not kept. The cache folder is outside the project: one inside it (the
  // default) changes the project folder once, when it is made, and the next run resolves again.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  Result cold = run(dir, "check . --cache-dir ../cache --stats --format json");
  CHECK(cold.code == 0);
  Result warm = run(dir, "check . --cache-dir ../cache --stats --format json");
  CHECK(warm.out == cold.out);
  CHECK(statLine(warm, "imports ").find("followed as the cache says") != std::string::npos);

  dir.write("helpers.py", kHelperWraps);
  Result created = run(dir, "check . --cache-dir ../cache --stats --format json");
  CHECK(statLine(created, "imports ").find("resolved again") != std::string::npos);
  CHECK(created.code == 1);
  CHECK(created.out == run(dir, "check . --no-cache --format json").out);
  CHECK(reportedPaths(parseJson(created)).count("train.py") == 1);
}

// A module reached through a symbolic link: what the link points to can change with no folder's stamp,
// so the cache keeps no import answers for such a project (each run resolves its imports again).
TEST_CASE("cli: no import answers are kept when a lookup went through a symbolic link", "[cli][cache]") {
  TempDir dir;
  dir.write(".git/HEAD", "ref: refs/heads/main\n");
  dir.write("train.py", kWrappedByHelper);
  dir.write("lib/real_helpers.py", kHelperWraps);
  fs::create_symlink("lib/real_helpers.py", dir.work() / "helpers.py");
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  Result cold = run(dir, "check train.py --cache-dir ../cache --stats --format json");
  CHECK(cold.code == 1);
  Result warm = run(dir, "check train.py --cache-dir ../cache --stats --format json");
  CHECK(warm.out == cold.out);
  CHECK(warm.err.find("imports ") == std::string::npos);  // no layout was kept
}
