// The project fixture runner: every directory under fixtures/projects is linted as
// one project; every finding in any of its files must be expected inline there.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "Fixtures.h"
#include "TestSupport.h"
#include "Registry.h"
#include "driver/Discovery.h"
#include "driver/Importers.h"
#include "driver/Linter.h"
#include "driver/ModuleTable.h"
#include "driver/Project.h"

namespace fs = std::filesystem;
using shardlint::testing::readFile;

namespace {
std::vector<fs::path> projects() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "projects"))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Findings as "relative/path.py:line:col CODE" (sorted), with their messages.
std::vector<std::string> lintProject(const fs::path& dir, unsigned jobs,
                                     std::multimap<std::string, std::string>* messages = nullptr) {
  shardlint::LintOptions options;
  options.jobs = jobs;
  shardlint::Linter linter(shardlint::rules::catalog(), options);
  auto found = shardlint::discover({dir.string()});
  std::vector<std::string> out;
  for (const auto& d : linter.lintFiles(found.files)) {
    std::string rel = fs::path(d.location.path).lexically_relative(dir).generic_string();
    out.push_back(rel + ":" + std::to_string(d.location.start.line + 1) + ":" +
                  std::to_string(d.location.start.codepointColumn + 1) + " " + d.code);
    if (messages) messages->emplace(out.back(), d.message);
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST_CASE("project fixtures: cross-file findings exactly as expected", "[projects]") {
  auto dirs = projects();
  REQUIRE(dirs.size() >= 8);
  for (const auto& dir : dirs) {
    DYNAMIC_SECTION(dir.filename().string()) {
      std::vector<std::string> expected;
      std::vector<std::pair<std::string, std::string>> messageRegexes;  // finding -> `: regex` of its expectation
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        std::string ext = e.path().extension().string();
        if (ext != ".py" && ext != ".yaml" && ext != ".yml") continue;
        std::string rel = e.path().lexically_relative(dir).generic_string();
        for (const auto& x : shardlint::testing::parseExpectations(readFile(e.path()))) {
          expected.push_back(rel + ":" + std::to_string(x.line) + ":" + std::to_string(x.column) + " " + x.code);
          if (x.messageRegex) messageRegexes.emplace_back(expected.back(), *x.messageRegex);
        }
      }
      std::sort(expected.begin(), expected.end());
      std::string name = dir.filename().string();
      bool ok = name.size() > 3 && name.substr(name.size() - 3) == "_ok";
      if (ok) CHECK(expected.empty());
      else CHECK(!expected.empty());
      std::multimap<std::string, std::string> messages;
      CHECK(lintProject(dir, 1, &messages) == expected);
      for (const auto& [finding, re] : messageRegexes) {
        auto [lo, hi] = messages.equal_range(finding);
        bool any = false;
        std::string seen;
        for (auto it = lo; it != hi; ++it) {
          any = any || std::regex_search(it->second, std::regex(re));
          seen += it->second + "\n";
        }
        INFO("message of " << finding << " does not match `" << re << "`: " << seen);
        CHECK(any);
      }
    }
  }
}

TEST_CASE("parallel linting gives output identical to one thread", "[projects][jobs]") {
  shardlint::LintOptions one, four;
  one.jobs = 1;
  four.jobs = 4;
  shardlint::Linter a(shardlint::rules::catalog(), one), b(shardlint::rules::catalog(), four);
  fs::path root = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures";
  // The Python and config fixtures: the C++ units (fixtures/cxx) are each one LibTorch parse, alone on
  // its thread, and lint the same at any --jobs (tests/test_fixtures.cpp runs them in parallel); with them
  // this test took 200 s, nearly all of it re-parsing the LibTorch headers.
  std::vector<std::string> files;
  for (auto& f : shardlint::discover({root.string()}).files)
    if (fs::path(f).extension() != ".cpp") files.push_back(f);
  REQUIRE(files.size() > 100);
  auto render = [](const std::vector<shardlint::Diagnostic>& ds) {
    std::string s;
    for (const auto& d : ds) {
      s += d.location.path + ":" + std::to_string(d.location.start.line) + ":" +
           std::to_string(d.location.start.codepointColumn) + " " + d.code + " " + d.message + "\n";
      for (const auto& n : d.notes) s += "  " + n.location.path + ":" + std::to_string(n.location.start.line) + " " + n.message + "\n";
    }
    return s;
  };
  std::string first = render(a.lintFiles(files));
  CHECK(!first.empty());
  for (int i = 0; i < 3; ++i) CHECK(render(b.lintFiles(files)) == first);
}

TEST_CASE("pre-scan: a file that only imports the helpers is still analysed", "[projects][prescan]") {
  fs::path dir = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "projects" / "prescan_import_only";
  std::string run = readFile(dir / "run.py");
  for (const char* word : {"optim", "fsdp", "FSDP", "fully_shard", "FullyShardedDataParallel", "Optimizer"})
    CHECK(run.find(word) == std::string::npos);
  shardlint::LintStats stats;
  shardlint::Linter linter(shardlint::rules::catalog(), {});
  auto diags = linter.lintFiles({(dir / "run.py").string()}, &stats);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].code == "SL101");
  CHECK(stats.filesAnalysed == 1);
  CHECK(stats.filesParsed == 2);  // run.py and the helpers module its calls reach

  // A file that mentions neither (and imports nothing that does) is not parsed at all.
  fs::path tmp = fs::temp_directory_path() / "shardlint-prescan-test";
  fs::create_directories(tmp);
  std::ofstream(tmp / "plain.py") << "import os\nprint(os.getcwd())\n";
  shardlint::LintStats stats2;
  CHECK(linter.lintFiles({(tmp / "plain.py").string()}, &stats2).empty());
  CHECK(stats2.filesAnalysed == 0);
  CHECK(stats2.filesSkipped == 1);
  CHECK(stats2.filesParsed == 0);
  fs::remove_all(tmp);
}

TEST_CASE("pre-scan: a module that names no word of a Python rule is not loaded for its summaries", "[projects][prescan]") {
  // SL501 checks only C++ and has no pre-scan words: it must not make every Python module worth loading.
  shardlint::testing::TempDir dir("shardlint-worth-");
  dir.write("util.py", "def log(x):\n    print(x)\n    return x\n");
  auto train = dir.write("train.py",
                         "import torch\nimport torch.distributed as dist\nimport util\n"
                         "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
                         "dist.init_process_group('nccl')\nutil.log('building')\n"
                         "model = torch.nn.Linear(2, 2).cuda()\nopt = torch.optim.AdamW(model.parameters())\n"
                         "model = FSDP(model)\nfor s in range(3):\n"
                         "    model(torch.randn(2, 2)).sum().backward()\n    opt.step()\n");
  shardlint::LintStats stats;
  shardlint::Linter linter(shardlint::rules::catalog(), {});
  auto diags = linter.lintFiles({train.string()}, &stats);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].code == "SL101");
  CHECK(stats.filesAnalysed == 1);
  CHECK(stats.filesParsed == 1);  // train.py; util.py is read by the pre-scan, never parsed
}

namespace {
// Lints every file under `dir` on one thread (tasks in path order) and expects exactly one SL101, in
// `findingIn`, with `analysed` files analysed and each of `parsed` files parsed exactly once.
void expectOneParseEach(const fs::path& dir, const std::string& findingIn, size_t analysed, size_t parsed) {
  shardlint::LintOptions options;
  options.jobs = 1;
  shardlint::LintStats stats;
  shardlint::Linter linter(shardlint::rules::catalog(), options);
  auto diags = linter.lintFiles(shardlint::discover({dir.string()}).files, &stats);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].code == "SL101");
  CHECK(fs::path(diags[0].location.path).filename() == findingIn);
  CHECK(stats.filesAnalysed == analysed);
  CHECK(stats.filesParsed == parsed);  // with a tree freed too early, one file was parsed twice
  CHECK(stats.filesParsedOnce == parsed);
}
const std::string kFsdpImports = "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n";
const std::string kMakeOptimizer = "\n\ndef make_optimizer(model):\n    return torch.optim.AdamW(model.parameters())\n";
// Wraps `model` after `opt` was built from it, then steps: SL101 at the line building `opt`.
const std::string kWrapAndStep = "model = FSDP(model)\nfor s in range(3):\n    model(torch.randn(2, 2)).sum().backward()\n    opt.step()\n";
}  // namespace

TEST_CASE("one parse per file: a package a linted module imports from (`from . import f`) keeps its tree until that module's analysis", "[projects][prescan]") {
  // pkg/sub/__init__.py is analysed first. pkg/sub/train.py, analysed after it, takes its helper
  // with `from . import make_optimizer` and hands it to pkg/tools.py, whose code calls it there. The
  // pre-scan leaves a module's own ancestor packages out of the relevance closure, but the
  // package's tree must still be kept until train.py's analysis ended (it was freed and parsed again).
  shardlint::testing::TempDir dir("shardlint-ancestor-");
  dir.write("pkg/__init__.py", "");
  dir.write("pkg/sub/__init__.py", kFsdpImports + kMakeOptimizer);
  dir.write("pkg/tools.py", "import torch\n\n\ndef build(factory, model):\n"
                            "    \"\"\"Builds the optimizer with factory.\"\"\"\n    return factory(model)\n");
  dir.write("pkg/sub/train.py", kFsdpImports + "from pkg.tools import build\nfrom . import make_optimizer\n\n"
                                               "model = torch.nn.Linear(2, 2).cuda()\nopt = build(make_optimizer, model)\n" +
                                               kWrapAndStep);
  expectOneParseEach(dir.path(), "train.py", 2, 3);  // the package, train.py and tools.py
}

TEST_CASE("one parse per file: a module a package re-exports keeps its tree until the files importing the package are analysed", "[projects][prescan]") {
  // pkg/impl.py and pkg/__init__.py (which re-exports impl's helper) are analysed first; run.py
  // imports only the package, and its call reaches impl.py through the re-export.
  shardlint::testing::TempDir dir("shardlint-reexport-");
  dir.write("pkg/__init__.py", "from .impl import make_optimizer\n");
  dir.write("pkg/impl.py", kFsdpImports + kMakeOptimizer);
  dir.write("run.py", kFsdpImports + "from pkg import make_optimizer\n\nmodel = torch.nn.Linear(2, 2).cuda()\n"
                                     "opt = make_optimizer(model)\n" + kWrapAndStep);
  expectOneParseEach(dir.path(), "run.py", 3, 3);
}

TEST_CASE("module table: trimming frees first the trees needed again latest, then the least recently used", "[unit][index]") {
  shardlint::testing::TempDir dir("shardlint-trim-");
  const std::string body = "def f(x):\n    return x\n";  // every module the same size
  shardlint::ModuleTable::Config config;
  shardlint::ModuleTable table(config);
  shardlint::LintOptions options;
  std::map<std::string, shardlint::ModuleTable::Entry*> e;
  for (const char* name : {"a", "b", "c", "d"}) {
    std::string path = dir.write(std::string(name) + ".py", body).string();
    e[name] = table.loadModule(path, nullptr, options, nullptr);
    REQUIRE(e[name]);
    table.lease(e[name]);
    table.unlease(e[name]);
  }
  table.lease(e["d"]);  // held by a task: never freed
  REQUIRE(table.parses() == 4);
  // a: needed by task 5, b: by none, c: by task 1, d: held. Two trees' worth of budget.
  std::map<std::string, size_t> next{{"a", 5}, {"b", SIZE_MAX}, {"c", 1}, {"d", 0}};
  table.trimTrees(2 * body.size(), [&](const std::string& path) {
    return next.at(fs::path(path).stem().string());
  });
  CHECK(!e["b"]->tree);  // never needed again: freed first
  CHECK(!e["a"]->tree);  // needed later than c
  CHECK(e["c"]->tree);
  CHECK(e["d"]->tree);
  // Needed again: parsed again, counted.
  table.lease(e["a"]);
  CHECK(e["a"]->tree);
  CHECK(table.parses() == 5);
  table.unlease(e["a"]);
  table.unlease(e["d"]);
  // Without an estimate: least recently used first (b, then c; a and d were leased since).
  table.trimTrees(2 * body.size());
  CHECK(!e["c"]->tree);
  CHECK(e["a"]->tree);
  CHECK(e["d"]->tree);
}

TEST_CASE("module table: an editor buffer's outline is made when asked for, the same as at parse", "[unit][index]") {
  // The language server's table keeps every tree (retireRoots false) and parses an edited buffer on each
  // keystroke; its outline (the config checks' project facts) waits for outlineOf().
  shardlint::testing::TempDir dir("shardlint-outline-");
  const std::string text =
      "from transformers import AutoModelForCausalLM\n\n"
      "class Head(torch.nn.Module):\n    pass\n\n"
      "model = AutoModelForCausalLM.from_pretrained(\"Qwen/Qwen2.5-0.5B\", trust_remote_code=True)\n";
  std::string disk = dir.write("disk.py", text).string(), buffer = dir.write("buffer.py", "# on disk\n").string();
  shardlint::ModuleTable::Config config;
  config.retireRoots = false;
  config.outlineWant = [](std::string_view) { return true; };
  config.outline.callNames = {"from_pretrained"};
  config.outline.keywords = {"trust_remote_code"};
  shardlint::ModuleTable table(config);
  shardlint::LintOptions options;
  options.overlays[shardlint::absolutePathKey(buffer)] = text;
  auto* fromDisk = table.loadRoot(disk, nullptr, options);
  auto* fromBuffer = table.loadRoot(buffer, nullptr, options);
  REQUIRE(fromDisk->parsed);
  REQUIRE(fromBuffer->parsed);
  CHECK_FALSE(fromDisk->outlineDeferred);
  CHECK(fromBuffer->outlineDeferred);
  uint64_t diskHash = 0, bufferHash = 0;
  const shardlint::syntax::Outline* a = table.outlineOf(disk, &diskHash);
  const shardlint::syntax::Outline* b = table.outlineOf(buffer, &bufferHash);
  REQUIRE(a);
  REQUIRE(b);
  CHECK_FALSE(fromBuffer->outlineDeferred);
  CHECK(bufferHash == diskHash);  // the same text
  REQUIRE(a->classes.size() == 1);
  REQUIRE(b->classes.size() == 1);
  CHECK(b->classes[0].name == a->classes[0].name);
  REQUIRE(a->calls.size() == 1);
  REQUIRE(b->calls.size() == 1);
  CHECK(b->calls[0].callee == a->calls[0].callee);
  CHECK(b->calls[0].args.size() == a->calls[0].args.size());
  CHECK(table.outlineOf(buffer) == b);  // made once
}

// One answer per file: a Python file of a project fixture linted alone (as pre-commit and the editor do)
// gives exactly the findings located in it when the whole project is linted.
// A finding located in a class's file that only a driver script's flow shows (trainer_class/trainer.py)
// comes from the driver analysed as an importer of the file (driver/Importers.h).
TEST_CASE("project fixtures: each Python file alone gives its whole-project findings", "[projects]") {
  auto render = [](const fs::path& dir, const shardlint::Diagnostic& d) {
    fs::path p = fs::absolute(d.location.path).lexically_normal();
    return p.lexically_relative(dir).generic_string() + ":" + std::to_string(d.location.start.line + 1) + ":" +
           std::to_string(d.location.start.codepointColumn + 1) + " " + d.code;
  };
  for (const auto& dir : projects()) {
    std::vector<std::string> whole = lintProject(dir, 1);
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.path().extension() != ".py") continue;
      std::string rel = e.path().lexically_relative(dir).generic_string();
      auto mine = [&](const std::string& f) { return f.compare(0, rel.size() + 1, rel + ":") == 0; };
      std::vector<std::string> want, alone;
      std::copy_if(whole.begin(), whole.end(), std::back_inserter(want), mine);
      shardlint::LintOptions options;
      shardlint::Linter linter(shardlint::rules::catalog(), options);
      for (const auto& d : linter.lintFiles({e.path().string()}))
        if (mine(render(dir, d))) alone.push_back(render(dir, d));
      std::sort(alone.begin(), alone.end());
      std::string key = dir.filename().string() + "/" + rel;
      INFO(key);
      CHECK(alone == want);
    }
  }
}

// The project walk that finds a script's launch scripts and configs is bounded; a project larger than the
// bound is not searched (the named files still count), and the bound itself is reported by discovery.
TEST_CASE("discovery: a bounded walk says it stopped", "[projects]") {
  shardlint::testing::TempDir dir("shardlint-bounded-");
  for (int i = 0; i < 30; ++i) dir.write("pkg/m" + std::to_string(i) + ".py", "x = 1\n");
  auto all = shardlint::discover({dir.path().string()});
  CHECK_FALSE(all.truncated);
  CHECK(all.files.size() == 30);
  auto some = shardlint::discover({dir.path().string()}, 10);
  CHECK(some.truncated);
  CHECK(some.files.size() < 10);
}

// A script linted alone gets the accelerate config its project's launch script links to it, the same as
// when the launch script is named too (one answer per file).
TEST_CASE("projects: a launch script of the project links its config to a script linted alone", "[projects]") {
  shardlint::testing::TempDir dir("shardlint-launch-");
  dir.write("pyproject.toml", "[project]\nname = \"p\"\n");
  dir.write("configs/fsdp1.yaml",
            "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 1\n  fsdp_use_orig_params: false\n");
  dir.write("scripts/run.sh", "accelerate launch --config_file configs/fsdp1.yaml train.py\n");
  dir.write("train.py",
            "import torch\nfrom accelerate import Accelerator\n\n\ndef main(model):\n"
            "    accelerator = Accelerator()\n    opt = torch.optim.AdamW(model.parameters())\n"
            "    model, opt = accelerator.prepare(model, opt)\n    opt.step()\n");
  auto codes = [&](const std::vector<std::string>& files) {
    shardlint::LintOptions options;
    shardlint::Linter linter(shardlint::rules::catalog(), options);
    std::vector<std::string> out;
    for (const auto& d : linter.lintFiles(files))
      if (fs::path(d.location.path).filename() == "train.py")
        out.push_back(std::to_string(d.location.start.line + 1) + " " + d.code);
    return out;
  };
  std::string script = (dir.path() / "train.py").string();
  auto alone = codes({script});
  CHECK(alone == std::vector<std::string>{"7 SL402"});
  CHECK(codes({script, (dir.path() / "scripts/run.sh").string(), (dir.path() / "configs/fsdp1.yaml").string()}) ==
        alone);
}

// The importer search: a class's file linted alone is analysed with the project files that import it
// (nearest first, bounded), and only the findings located in the linted file are kept.
TEST_CASE("importers: a file linted alone gets the findings its importers' flow makes in it, bounded", "[projects]") {
  shardlint::testing::TempDir dir("shardlint-importers-");
  dir.write("pyproject.toml", "[project]\nname = \"p\"\n");
  dir.write("pkg/__init__.py", "from .trainer import Trainer\n");
  dir.write("pkg/trainer.py",
            "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\n\n"
            "class Trainer:\n    def __init__(self, model):\n        self.model = model\n"
            "        self.opt = torch.optim.AdamW(self.model.parameters())\n\n"
            "    def setup(self):\n        self.model = FSDP(self.model)\n\n"
            "    def fit(self):\n        self.opt.step()\n");
  // Two steps away: the script imports the package, whose __init__ imports the trainer.
  dir.write("scripts/train.py",
            "import torch\nfrom pkg import Trainer\n\n\ndef main():\n    t = Trainer(torch.nn.Linear(2, 2))\n"
            "    t.setup()\n    t.fit()\n\n\nmain()\n");
  // Its own finding is not the trainer file's: not reported when only the trainer is linted.
  dir.write("scripts/other.py",
            "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nimport pkg.trainer\n\n"
            "m = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters())\nm = FSDP(m)\nopt.step()\n");
  auto run = [&](const std::vector<std::string>& files, shardlint::LintStats* stats = nullptr) {
    shardlint::LintOptions options;
    shardlint::Linter linter(shardlint::rules::catalog(), options);
    std::vector<std::string> out;
    for (const auto& d : linter.lintFiles(files, stats))
      out.push_back(fs::path(d.location.path).lexically_relative(dir.path()).generic_string() + ":" +
                    std::to_string(d.location.start.line + 1) + " " + d.code);
    return out;
  };
  std::string trainer = (dir.path() / "pkg/trainer.py").string();
  shardlint::LintStats stats;
  CHECK(run({trainer}, &stats) == std::vector<std::string>{"pkg/trainer.py:8 SL101"});
  CHECK(stats.filesAnalysed == 1);
  CHECK(stats.importersAnalysed >= 1);
  CHECK_FALSE(stats.importersTruncated);
  auto whole = run(shardlint::discover({dir.path().string()}).files);
  CHECK(std::count(whole.begin(), whole.end(), "pkg/trainer.py:8 SL101") == 1);
  CHECK(std::count(whole.begin(), whole.end(), "scripts/other.py:6 SL101") == 1);

  // Bounded: a module imported by more files than the bound; the list is cut and said to be.
  for (int i = 0; i < 20; ++i)
    dir.write("many/user" + std::to_string(100 + i) + ".py", "import pkg.trainer\n");
  shardlint::LintStats many;
  run({trainer}, &many);
  CHECK(many.importersTruncated);
  CHECK(many.importersAnalysed <= 16);
}

// The scan cache of the importer search (kept by the language server): a file's imports are read again
// when the file changes; a file without the word is remembered as such until it changes.
TEST_CASE("importers: the scan cache answers from what it kept until the file changes", "[projects][unit]") {
  shardlint::testing::TempDir dir("shardlint-importscan-");
  dir.write("a.py", "x = 1\n");
  std::string a = (dir.path() / "a.py").string();
  shardlint::LintOptions options;
  shardlint::ImportScanCache cache;
  CHECK_FALSE(cache.importsMentioning(a, {"trainer"}, options));
  CHECK_FALSE(cache.importsMentioning(a, {"trainer"}, options));
  dir.write("a.py", "from pkg import trainer  # now it does\n");
  auto got = cache.importsMentioning(a, {"trainer"}, options);
  REQUIRE(got);
  CHECK(std::count(got->begin(), got->end(), "pkg.trainer") == 1);
  // An editor's buffer wins over the file and is not kept.
  options.overlays[shardlint::absolutePathKey(a)] = "y = 2\n";
  CHECK_FALSE(cache.importsMentioning(a, {"trainer"}, options));
}

// The project index keeps what it learns per folder, per root and per name (a run asks for every file's
// project, roots and imports): its answers must not depend on the order of the questions.
TEST_CASE("project index: project folders, roots and module lookups answer alike in any order", "[projects][unit][index]") {
  shardlint::testing::TempDir dir("sl-index-");
  fs::create_directories(dir.path() / "repo" / ".git");
  dir.write("repo/pyproject.toml", "[project]\nname = \"pkg\"\n");
  dir.write("repo/src/pkg/__init__.py", "");
  dir.write("repo/src/pkg/mod.py", "x = 1\n");
  dir.write("repo/src/pkg/sub/__init__.py", "");
  dir.write("repo/src/pkg/sub/deep.py", "y = 2\n");
  dir.write("repo/tools/setup.py", "");
  dir.write("repo/tools/t/run.py", "import local\n");
  dir.write("repo/scripts/train.py", "import local\nimport pkg.mod\n");
  dir.write("repo/scripts/local.py", "");
  fs::create_symlink("mod.py", dir.path() / "repo" / "src" / "pkg" / "linked.py");
  const fs::path repo = fs::canonical(dir.path() / "repo");
  const std::string train = (repo / "scripts" / "train.py").string(), run = (repo / "tools" / "t" / "run.py").string(),
                    deep = (repo / "src" / "pkg" / "sub" / "deep.py").string();
  auto where = [](const std::optional<std::string>& shown) -> std::string {
    if (!shown) return "none";
    return fs::weakly_canonical(fs::absolute(*shown)).string();
  };
  struct Question {
    std::string dotted, from, want;
  };
  const std::vector<Question> questions = {
      {"pkg.mod", train, (repo / "src" / "pkg" / "mod.py").string()},
      {"pkg.sub", train, (repo / "src" / "pkg" / "sub" / "__init__.py").string()},
      {"pkg.sub.deep", run, "none"},  // tools/ is a project of its own: repo/src is not its root
      {"local", train, (repo / "scripts" / "local.py").string()},
      {"local", run, "none"},  // another script's folder is not on this one's path
      {"pkg.linked", train, (repo / "src" / "pkg" / "mod.py").string()},  // a link to a file counts
      {"pkg.missing", train, "none"},
      {"pkg.sub.deep", deep, deep},
  };
  for (bool reversed : {false, true}) {
    INFO("questions " << (reversed ? "in reverse order" : "in order"));
    shardlint::ProjectIndex index;
    std::vector<Question> asked = questions;
    if (reversed) std::reverse(asked.begin(), asked.end());
    if (reversed) CHECK(index.projectDirOf(run) == repo / "tools");  // the nested project first this time
    for (const auto& q : asked) {
      INFO(q.dotted << " from " << q.from);
      CHECK(where(index.findModule(q.dotted, q.from)) == q.want);
    }
    CHECK(index.projectDirOf(train) == repo);
    CHECK(index.projectDirOf(run) == repo / "tools");
    CHECK(index.projectDirOf(deep) == repo);
    CHECK(index.moduleOf(deep).name == "pkg.sub.deep");
    CHECK(index.moduleOf(train).name == "train");
  }
}

// The layout an index's answers rest on (ProjectIndex::Layout, kept by the cache with them): the folders
// it looked into by their stamps, a folder it looked for and did not find as missing, and no trust once a
// lookup followed a symbolic link.
TEST_CASE("project index: the layout records the folders its answers rest on", "[projects][unit][index]") {
  shardlint::testing::TempDir dir("sl-layout-");
  fs::create_directories(dir.path() / "repo" / ".git");
  dir.write("repo/pkg/__init__.py", "");
  dir.write("repo/pkg/mod.py", "x = 1\n");
  dir.write("repo/train.py", "import pkg.mod\n");
  const fs::path repo = fs::canonical(dir.path() / "repo");
  const std::string train = (repo / "train.py").string();
  {
    shardlint::ProjectIndex index;
    CHECK(index.findModuleFile("pkg.mod", train) == (repo / "pkg" / "mod.py").string());
    CHECK(!index.findModuleFile("pkg.nothere.deep", train));
    shardlint::ProjectIndex::Layout layout = index.layout();
    CHECK(layout.trustworthy);
    REQUIRE(layout.folders.count(repo.string()) == 1);
    REQUIRE(layout.folders.count((repo / "pkg").string()) == 1);
    CHECK(layout.folders.at(repo.string()) == *shardlint::ProjectIndex::folderStamp(repo.string()));
    // Looked for, not there: recorded as missing, so that its coming changes the layout.
    REQUIRE(layout.folders.count((repo / "pkg" / "nothere").string()) == 1);
    CHECK(layout.folders.at((repo / "pkg" / "nothere").string()).size == shardlint::ProjectIndex::kMissing);
    fs::create_directories(repo / "pkg" / "nothere");
    CHECK(*shardlint::ProjectIndex::folderStamp((repo / "pkg" / "nothere").string()) !=
          layout.folders.at((repo / "pkg" / "nothere").string()));
  }
  {
    fs::create_symlink("mod.py", repo / "pkg" / "linked.py");
    shardlint::ProjectIndex index;
    CHECK(index.findModuleFile("pkg.mod", train));
    CHECK(index.layout().trustworthy);
    CHECK(index.findModuleFile("pkg.linked", train));
    CHECK(!index.layout().trustworthy);
  }
}
