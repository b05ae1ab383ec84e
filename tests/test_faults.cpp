// Fault containment: a failure while analysing one file is an SL002 finding for that file and the
// run goes on (the other files' findings survive, exit 1); a failure outside the per-file analysis
// still fails the run (exit 101), after the findings made until then are written. The failures are
// injected with tests/FaultCatalog.h (a marker in a file's text, or a failing project-facts step).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "FaultCatalog.h"
#include "TestSupport.h"
#include "driver/Discovery.h"
#include "driver/Linter.h"

namespace fs = std::filesystem;
using shardlint::testing::readFile;
using shardlint::testing::runShell;
using shardlint::testing::shellQuote;

namespace {

// One SL101 bug: the optimizer is built before FSDP1 flattens the parameters (line 6).
std::string buggy(const std::string& extra = "") {
  return shardlint::testing::kBuggySL101 + extra;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A project whose files import each other: two fail (one std::runtime_error, one std::bad_alloc),
// three do not; every file has an SL101 bug.
void writeProject(const fs::path& dir) {
  write(dir / "helpers.py", "def build(m):\n    return m\n# " + std::string(shardlint::testing::kFaultRuntimeMarker) + "\n");
  write(dir / "train_a.py", buggy("import helpers\nhelpers.build(model)\n"));
  write(dir / "train_b.py", buggy("from helpers import build\nbuild(model)\n"));
  write(dir / "train_c.py", buggy("import train_a\n"));
  write(dir / "huge.py", buggy("# " + std::string(shardlint::testing::kFaultBadAllocMarker) + "\n"));
}

// An accelerate FSDP config: its checks need the project facts (computed after the analysis).
std::string kConfig() {
  return readFile(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "projects" / "accelerate_single_config_ok" / "fsdp.yaml");
}

std::string render(const std::vector<shardlint::Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags)
    out += fs::path(d.location.path).filename().string() + ":" + std::to_string(d.location.start.line + 1) + " " + d.code +
           " " + d.message + "\n";
  return out;
}

}  // namespace

TEST_CASE("faults: an exception while analysing one file is SL002 for it and the others' findings survive",
          "[faults]") {
  shardlint::testing::TempDir dir("shardlint-faults-");
  writeProject(dir.path());
  shardlint::RuleCatalog catalog = shardlint::testing::faultCatalog(false);
  auto files = shardlint::discover({dir.path().string()}).files;
  std::string first;
  for (unsigned jobs : {1u, 2u, 4u}) {
    shardlint::LintOptions options;
    options.jobs = jobs;
    shardlint::Linter linter(catalog, options);
    std::vector<shardlint::Diagnostic> diags;
    REQUIRE_NOTHROW(diags = linter.lintFiles(files));
    std::string text = render(diags);
    INFO("jobs " << jobs << "\n" << text);
    CHECK(text.find("helpers.py:1 SL002 analysis stopped: injected failure\n") != std::string::npos);
    CHECK(text.find("huge.py:1 SL002 analysis stopped: out of memory (std::bad_alloc)\n") != std::string::npos);
    CHECK(text.find("huge.py:6 SL101") == std::string::npos);  // a failed file keeps no partial findings
    for (const char* ok : {"train_a.py:6 SL101", "train_b.py:6 SL101", "train_c.py:6 SL101"})
      CHECK(text.find(ok) != std::string::npos);
    if (jobs == 1) first = text;
    else CHECK(text == first);  // deterministic for any number of jobs
  }
  SECTION("--ignore SL002 drops the finding, not the other files'") {
    shardlint::LintOptions options;
    options.selection = shardlint::RuleSelection(catalog, {"ALL"}, {"SL002"});
    std::string text = render(shardlint::Linter(catalog, options).lintFiles(files));
    CHECK(text.find("SL002") == std::string::npos);
    CHECK(text.find("train_a.py:6 SL101") != std::string::npos);
  }
}

TEST_CASE("faults: a failure outside the per-file analysis throws LintInternalError with the findings made",
          "[faults]") {
  shardlint::testing::TempDir dir("shardlint-faults-");
  write(dir.path() / "train.py", buggy());
  write(dir.path() / "fsdp.yaml", kConfig());
  shardlint::RuleCatalog catalog = shardlint::testing::faultCatalog(true);
  shardlint::LintOptions options;
  options.jobs = 2;
  shardlint::Linter linter(catalog, options);
  try {
    linter.lintFiles(shardlint::discover({dir.path().string()}).files);
    FAIL("no LintInternalError");
  } catch (const shardlint::LintInternalError& e) {
    CHECK(std::string(e.what()) == "injected internal failure");
    CHECK(render(e.partial).find("train.py:6 SL101") != std::string::npos);
  }
}

namespace {

struct Run {
  int code;
  std::string out, err;
};

Run runFaultCli(const fs::path& dir, const std::string& env, const std::string& args) {
  fs::path errPath = dir / "stderr.txt";
  auto r = runShell("cd " + shellQuote((dir / "w").string()) + " && " + env + " " + shellQuote(SHARDLINT_FAULT_BINARY) +
                    " check --no-cache --no-color " + args + " 2>" + shellQuote(errPath.string()));
  return {r.code, r.out, readFile(errPath)};
}

}  // namespace

TEST_CASE("faults: the CLI exits 1 with SL002 for the failed file and the other files' findings", "[faults][cli]") {
  shardlint::testing::TempDir dir("shardlint-faults-");
  writeProject(dir.path() / "w");
  for (const char* jobs : {"--jobs 1", "--jobs 3"}) {
    Run r = runFaultCli(dir.path(), "", jobs);
    INFO(jobs << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.out.find("helpers.py:1:1: error: analysis stopped: injected failure [SL002 file-skipped]") !=
          std::string::npos);
    CHECK(r.out.find("huge.py:1:1: error: analysis stopped: out of memory (std::bad_alloc) [SL002 file-skipped]") !=
          std::string::npos);
    CHECK(r.out.find("train_c.py:6:") != std::string::npos);
    CHECK(r.err.find("internal error") == std::string::npos);
  }
}

TEST_CASE("faults: an internal error exits 101 after writing what was found", "[faults][cli]") {
  shardlint::testing::TempDir dir("shardlint-faults-");
  write(dir.path() / "w" / "train.py", buggy());
  write(dir.path() / "w" / "fsdp.yaml", kConfig());
  for (const char* format : {"text", "json"}) {
    Run r = runFaultCli(dir.path(), "SHARDLINT_FAULT_INTERNAL=1", std::string("--jobs 2 --format ") + format);
    INFO(format << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.code == 101);
    CHECK(r.out.find("SL101") != std::string::npos);
    CHECK(r.err.find("shardlint: internal error: injected internal failure") != std::string::npos);
  }
}
