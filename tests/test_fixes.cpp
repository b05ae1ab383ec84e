// Fixes: applying edits (overlaps, fixed point), the `.fixed` expected output of every fixture with a
// fix (byte for byte), the unified diff, and the CLI options --fix, --diff, --fix-only,
// --unsafe-fixes and --show-fixes, with the file-safety guarantees (mode kept, a file changed on
// disk left alone, a writer killed midway leaves the original).
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "Registry.h"
#include "TestSupport.h"
#include "config/Yaml.h"
#include "core/AtomicWrite.h"
#include "driver/Discovery.h"
#include "driver/Fixer.h"
#include "driver/Linter.h"
#include "output/Emitters.h"

namespace fs = std::filesystem;
using shardlint::testing::readFile;
using shardlint::testing::runShell;
using shardlint::testing::shellQuote;
using shardlint::testing::TempDir;

namespace {

shardlint::Diagnostic withFix(const std::string& path, uint32_t begin, uint32_t end, std::string text,
                              shardlint::Applicability a = shardlint::Applicability::Safe) {
  shardlint::Diagnostic d;
  d.code = "SL999";
  d.location.path = path;
  shardlint::Edit e;
  e.location.path = path;
  e.location.range = {begin, end};
  e.text = std::move(text);
  d.fix = shardlint::Fix{"test", a, {e}};
  return d;
}

// Flattens a configuration document into "a.b.c" -> scalar text (sequences by index).
void flatten(const shardlint::config::YNode& n, const std::string& at, std::map<std::string, std::string>& out) {
  using K = shardlint::config::YNode::Kind;
  if (n.kind == K::Map) {
    for (const auto& [k, v] : n.entries) flatten(v, at + "." + k.value, out);
  } else if (n.kind == K::Seq) {
    for (size_t i = 0; i < n.items.size(); ++i) flatten(n.items[i], at + "[" + std::to_string(i) + "]", out);
  } else {
    out[at] = n.value;
  }
}

std::map<std::string, std::string> flatConfig(const std::string& path, const std::string& text) {
  std::map<std::string, std::string> out;
  shardlint::SourceFile f(path, text);
  auto docs = shardlint::config::parseYaml(f);
  for (size_t i = 0; i < docs.size(); ++i) flatten(docs[i], std::to_string(i), out);
  return out;
}

// How many values (of the flattened documents) differ between two texts of one config; both must load.
size_t configDifferences(const std::string& path, const std::string& before, const std::string& after) {
  std::map<std::string, std::string> a = flatConfig(path, before), b = flatConfig(path, after);
  size_t differing = 0;
  for (const auto& [k, v] : a) differing += !b.count(k) || b.at(k) != v;
  for (const auto& [k, v] : b) differing += !a.count(k);
  return differing;
}

std::vector<fs::path> fixtures() {
  std::vector<fs::path> out;
  for (const char* dir : {"python", "config"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / dir)) {
      std::string ext = e.path().extension().string();
      if (ext == ".py" || ext == ".yaml" || ext == ".yml" || ext == ".json" || ext == ".sh") out.push_back(e.path());
    }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("fixes: edits apply in order, overlapping or no-op fixes wait for a later round", "[fixes]") {
  const std::string text = "abcdefghij";
  std::vector<shardlint::Diagnostic> diags{withFix("f", 6, 8, "XY"), withFix("f", 1, 3, "B"),
                                           withFix("f", 2, 4, "overlaps"), withFix("f", 9, 9, ""),
                                           withFix("f", 0, 0, "<"), withFix("g", 0, 1, "other file"),
                                           withFix("f", 4, 5, "E", shardlint::Applicability::Unsafe)};
  auto safe = shardlint::applyFixes("f", text, diags, false);
  CHECK(safe.text == "<aBdefXYij");
  CHECK(safe.count == 3);
  auto all = shardlint::applyFixes("f", text, diags, true);
  CHECK(all.text == "<aBdEfXYij");
  CHECK(all.count == 4);
}

TEST_CASE("fixes: a unified diff with context, and none for equal texts", "[fixes]") {
  std::string before, after;
  for (int i = 1; i <= 20; ++i) {
    before += "line " + std::to_string(i) + "\n";
    after += i == 5 ? "five\n" : i == 17 ? "" : "line " + std::to_string(i) + "\n";
  }
  CHECK(shardlint::unifiedDiff("a.yaml", before, before).empty());
  CHECK(shardlint::unifiedDiff("a.yaml", before, after) ==
        "--- a.yaml\n+++ a.yaml\n"
        "@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+five\n line 6\n line 7\n line 8\n"
        "@@ -14,7 +14,6 @@\n line 14\n line 15\n line 16\n-line 17\n line 18\n line 19\n line 20\n");
  CHECK(shardlint::unifiedDiff("b", "x", "y") ==
        "--- b\n+++ b\n@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n");
}

TEST_CASE("fixes: every fixture with a fix has its `.fixed` output, byte for byte, at a fixed point", "[fixes][fixtures]") {
  const auto& catalog = shardlint::rules::catalog();

  for (const auto& path : fixtures()) {
    DYNAMIC_SECTION(path.filename().string()) {
      shardlint::Linter linter(catalog, {});
      auto first = linter.lintFiles({path.string()});
      auto relint = [&](const std::map<std::string, std::string>& texts) {
        shardlint::LintOptions o;
        for (const auto& [p, t] : texts) o.overlays[shardlint::absolutePathKey(p)] = t;
        return shardlint::Linter(catalog, o).lintFiles({path.string()});
      };
      shardlint::FixRun run = shardlint::fixToFixedPoint(first, /*unsafe=*/true, relint);
      fs::path expected = path.string() + ".fixed";
      auto it = run.changed.find(path.string());
      if (it == run.changed.end()) {
        INFO("a fixture without fixes has no .fixed file");
        CHECK(!fs::exists(expected));
      } else {

        INFO("expected " << expected << ", got:\n" << it->second.second);
        REQUIRE(fs::exists(expected));
        CHECK(it->second.second == readFile(expected));
        // A fixed point: fixing the fixed text changes nothing.
        for (const auto& d : run.remaining) CHECK_FALSE((d.fix && d.location.path == path.string()));
        CHECK(run.rounds <= 2);
        std::string ext = path.extension().string();
        if (ext == ".py") {
          // CPython's own compiler accepts the fixed file.
          auto compiled = runShell("python3 -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], \"exec\")' " +
                                   shellQuote(expected.string()) + " 2>&1");
          INFO(compiled.out);
          CHECK(compiled.code == 0);
        }
        if (ext == ".yaml" || ext == ".yml" || ext == ".json") {
          // It still loads, and means the same except for the edited keys.
          size_t differing = 0;
          REQUIRE_NOTHROW(differing = configDifferences(path.string(), it->second.first, it->second.second));
          CHECK(differing <= 2 * run.fixed);
        }
      }
    }
  }
}

TEST_CASE("fixes: project fixtures: a fix may edit another file of the project, as its `.fixed` says", "[fixes][fixtures][projects]") {
  // SL402's finding is in the script; its fix edits the accelerate config (or launch command) that
  // sets use_orig_params to false. Every file a project's fixes change has its `.fixed` output,
  // and every `.fixed` file in a project is produced.
  const auto& catalog = shardlint::rules::catalog();
  size_t projectsWithFixes = 0;
  for (const auto& dir : fs::directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "projects")) {
    if (!dir.is_directory()) continue;
    {
      INFO("project " << dir.path().filename().string());
      const std::vector<std::string> paths = shardlint::discover({dir.path().string()}).files;
      auto first = shardlint::Linter(catalog, {}).lintFiles(paths);
      auto relint = [&](const std::map<std::string, std::string>& texts) {
        shardlint::LintOptions o;
        for (const auto& [p, t] : texts) o.overlays[shardlint::absolutePathKey(p)] = t;
        return shardlint::Linter(catalog, o).lintFiles(paths);
      };
      shardlint::FixRun run = shardlint::fixToFixedPoint(first, /*unsafe=*/true, relint);
      std::set<std::string> expected;
      for (const auto& e : fs::recursive_directory_iterator(dir.path()))
        if (e.path().extension() == ".fixed") expected.insert(fs::path(e.path()).replace_extension().string());
      std::set<std::string> changed;
      for (const auto& [path, texts] : run.changed) {
        changed.insert(fs::path(path).lexically_normal().string());
        INFO(path << " fixed:\n" << texts.second);
        REQUIRE(fs::exists(path + ".fixed"));
        CHECK(texts.second == readFile(path + ".fixed"));
        std::string ext = fs::path(path).extension().string();
        if (ext == ".yaml" || ext == ".yml" || ext == ".json") {
          // The fixed config still loads and differs in the edited entries only (a renamed key
          // is two: the old one gone, the new one there).
          size_t differing = 0;
          REQUIRE_NOTHROW(differing = configDifferences(path, texts.first, texts.second));
          CHECK(differing <= 2 * run.fixed);
        }
      }
      std::set<std::string> wanted;
      for (const auto& p : expected) wanted.insert(fs::path(p).lexically_normal().string());
      CHECK(changed == wanted);
      for (const auto& d : run.remaining) CHECK_FALSE(d.fix.has_value());  // a fixed point
      CHECK(run.rounds <= 2);
      projectsWithFixes += !run.changed.empty();
    }
  }
  // accelerate_launch_config (a config), accelerate_launch_flag (a launch flag), the accelerate_pin_* renames
  CHECK(projectsWithFixes >= 5);
}

TEST_CASE("fixes: the fixture set covers each rule's fix", "[fixes][fixtures]") {
  // Every `.fixed` file belongs to a fixture, and each rule with a fix has at least one.
  std::set<std::string> rules;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures")) {
    if (e.path().extension() != ".fixed") continue;
    fs::path fixture = e.path();
    fixture.replace_extension();
    CHECK(fs::exists(fixture));
    rules.insert(e.path().filename().string().substr(0, 5));
  }
  for (const char* code : {"SL101", "SL103", "SL301", "SL302", "SL303", "SL305", "SL402"}) {
    INFO(code);
    CHECK(rules.count(code));
  }
}

TEST_CASE("fixes: files are written only when unchanged on disk, keeping their mode", "[fixes]") {
  TempDir dir("shardlint-fixes-");
  fs::path a = dir.write("a.yaml", "x: 1\n");
  fs::path b = dir.write("b.yaml", "y: 2\n");
  REQUIRE(::chmod(a.c_str(), 0640) == 0);
  shardlint::FixRun run;
  run.changed[a.string()] = {"x: 1\n", "x: 10\n"};
  run.changed[b.string()] = {"y: 1\n", "y: 10\n"};  // b holds something else now
  auto problems = shardlint::writeFixedFiles(run);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].first == b.string());
  CHECK(problems[0].second.find("changed on disk") != std::string::npos);
  CHECK(readFile(a) == "x: 10\n");
  CHECK(readFile(b) == "y: 2\n");
  struct stat st {};
  REQUIRE(::stat(a.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("cli: --fix, --diff, --fix-only, --unsafe-fixes, --show-fixes", "[cli][fixes]") {
  TempDir dir("shardlint-fix-cli-");
  const fs::path src = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "config";
  auto copy = [&](const std::string& name) {
    fs::copy_file(src / name, dir.path() / name, fs::copy_options::overwrite_existing);
    return dir.path() / name;
  };
  std::string cd = "cd " + shellQuote(dir.path().string()) + " && ";
  std::string bin = shellQuote(SHARDLINT_BINARY) + " check --no-cache ";

  SECTION("--fix applies the safe fixes, reports what is left, and a second --fix changes nothing") {
    fs::path f = copy("SL303_accelerate_space_after_comma.yaml");
    REQUIRE(::chmod(f.c_str(), 0604) == 0);
    auto r = runShell(cd + bin + "--fix SL303_accelerate_space_after_comma.yaml 2>&1");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("fixed 1 finding in 1 file; 0 findings left") != std::string::npos);
    CHECK(readFile(f) == readFile(src / "SL303_accelerate_space_after_comma.yaml.fixed"));
    struct stat st {};
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0604);
    auto again = runShell(cd + bin + "--fix SL303_accelerate_space_after_comma.yaml 2>&1");
    CHECK(again.code == 0);
    CHECK(again.out.find("fixed 0 findings in 0 files") != std::string::npos);
    CHECK(readFile(f) == readFile(src / "SL303_accelerate_space_after_comma.yaml.fixed"));
  }
  SECTION("--diff prints the fixes without writing; exit 1 when there is one") {
    fs::path f = copy("SL305_scientific_notation.yaml");
    const std::string before = readFile(f);
    auto r = runShell(cd + bin + "--diff SL305_scientific_notation.yaml 2>/dev/null");
    CHECK(r.code == 1);
    CHECK(r.out.find("--- SL305_scientific_notation.yaml\n+++ SL305_scientific_notation.yaml\n") == 0);
    CHECK(r.out.find("\n-  fsdp_min_num_params: 1e8\n+  fsdp_min_num_params: 100000000\n") != std::string::npos);
    CHECK(readFile(f) == before);
    // The diff applies with patch(1) and gives the .fixed file.
    auto patched = runShell(cd + bin + "--diff SL305_scientific_notation.yaml 2>/dev/null | patch -p0 -s && echo ok");
    CHECK(patched.out == "ok\n");
    CHECK(readFile(f) == readFile(src / "SL305_scientific_notation.yaml.fixed"));
    CHECK(runShell(cd + bin + "--diff SL305_scientific_notation.yaml 2>/dev/null").out.empty());
    CHECK(runShell(cd + bin + "--diff SL305_scientific_notation.yaml 2>/dev/null").code == 0);
  }
  SECTION("unsafe fixes only with --unsafe-fixes; --fix-only exits 0 and reports nothing else") {
    fs::path f = copy("SL301_accelerate_typo.yaml");
    const std::string before = readFile(f);
    auto shown = runShell(cd + bin + "--show-fixes SL301_accelerate_typo.yaml");
    CHECK(shown.code == 1);
    CHECK(shown.out.find("  fix (unsafe, --unsafe-fixes): Rename `fsdp_offload_param` to `fsdp_offload_params`\n") !=
          std::string::npos);
    auto only = runShell(cd + bin + "--fix-only SL301_accelerate_typo.yaml 2>&1");
    INFO(only.out);
    CHECK(only.code == 0);
    CHECK(only.out.find("2 more fixes with --unsafe-fixes") != std::string::npos);
    CHECK(only.out.find("error:") == std::string::npos);
    CHECK(readFile(f) == before);
    auto unsafe = runShell(cd + bin + "--fix --unsafe-fixes SL301_accelerate_typo.yaml 2>&1");
    CHECK(unsafe.code == 0);
    CHECK(readFile(f) == readFile(src / "SL301_accelerate_typo.yaml.fixed"));
  }
  SECTION("a fix in another file: SL402 in the script, the edit in the linked config") {
    const fs::path project = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "projects" / "accelerate_launch_config";
    fs::copy(project, dir.path() / "p", fs::copy_options::recursive);
    std::string in = "cd " + shellQuote((dir.path() / "p").string()) + " && ";
    auto json = nlohmann::json::parse(runShell(in + bin + "--format json .").out);
    REQUIRE(json["findings"].size() == 1);
    CHECK(json["findings"][0]["path"] == "train.py");
    CHECK(json["findings"][0]["fix"]["edits"][0]["path"] == "configs/fsdp1.yaml");
    auto diff = runShell(in + bin + "--diff --unsafe-fixes . 2>/dev/null");
    CHECK(diff.code == 1);
    CHECK(diff.out.find("--- configs/fsdp1.yaml\n+++ configs/fsdp1.yaml\n") == 0);
    CHECK(diff.out.find("\n-  fsdp_use_orig_params: false\n+  fsdp_use_orig_params: true\n") != std::string::npos);
    auto fixed = runShell(in + bin + "--fix --unsafe-fixes . 2>&1");
    INFO(fixed.out);
    CHECK(fixed.code == 0);
    CHECK(fixed.out.find("fixed 1 finding in 1 file; 0 findings left") != std::string::npos);
    CHECK(readFile(dir.path() / "p" / "configs" / "fsdp1.yaml") == readFile(project / "configs" / "fsdp1.yaml.fixed"));
    CHECK(readFile(dir.path() / "p" / "train.py") == readFile(project / "train.py"));
  }
  SECTION("JSON output carries each fix with its applicability and edits") {
    copy("SL305_trainer_quoted.json");
    auto r = runShell(cd + bin + "--format json SL305_trainer_quoted.json");
    auto doc = nlohmann::json::parse(r.out);
    REQUIRE(doc["findings"].size() == 1);
    const auto& fix = doc["findings"][0]["fix"];
    CHECK(fix["applicability"] == "safe");
    REQUIRE(fix["edits"].size() == 1);
    CHECK(fix["edits"][0]["content"] == "20000000");
    CHECK(fix["edits"][0]["line"] == 2);
    CHECK(fix["edits"][0]["column"] == 26);
    CHECK(fix["edits"][0]["end_column"] == 36);
  }
  SECTION("a writer killed midway leaves the original file") {
    fs::path f = copy("SL303_trailing_comma.yaml");
    const std::string before = readFile(f);
    auto r = runShell(cd + "SHARDLINT_TEST_ABORT_WRITE=1 " + bin + "--fix SL303_trailing_comma.yaml >/dev/null 2>&1");
    CHECK(r.code == shardlint::kAbortWriteExitCode);
    CHECK(readFile(f) == before);
  }
}

TEST_CASE("cli: --output-file, --exit-zero, --statistics, --stdin-filename", "[cli]") {
  TempDir dir("shardlint-cli-conv-");
  const fs::path src = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "config";
  for (const char* name : {"SL303_trailing_comma.yaml", "SL305_scientific_notation.yaml", "SL301_accelerate_typo.yaml"})
    fs::copy_file(src / name, dir.path() / name);
  std::string cd = "cd " + shellQuote(dir.path().string()) + " && ";
  std::string bin = shellQuote(SHARDLINT_BINARY) + " check --no-cache ";

  SECTION("--output-file writes the report there, in any format, and the exit code stays") {
    auto r = runShell(cd + bin + "--format json -o report.json . 2>&1");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    auto doc = nlohmann::json::parse(readFile(dir.path() / "report.json"));
    CHECK(doc["findings"].size() == 4);
    CHECK(runShell(cd + bin + "--output-file report.txt -q SL303_trailing_comma.yaml").code == 1);
    CHECK(readFile(dir.path() / "report.txt").find("SL303_trailing_comma.yaml:15:39: error:") == 0);
    auto bad = runShell(cd + bin + "-o no/such/folder/r.txt . 2>&1");
    CHECK(bad.code == 2);
    CHECK(bad.out.find("cannot write no/such/folder/r.txt") != std::string::npos);
  }
  SECTION("--exit-zero: findings are reported, the exit code is 0; usage errors stay 2") {
    auto r = runShell(cd + bin + "--exit-zero .");
    CHECK(r.code == 0);
    CHECK(r.out.find("Found 4 findings") != std::string::npos);
    CHECK(runShell(cd + bin + "--exit-zero missing.yaml 2>/dev/null").code == 2);
  }
  SECTION("--statistics: a count per rule, most first, [*] where a fix exists") {
    auto r = runShell(cd + bin + "--statistics .");
    CHECK(r.code == 1);
    CHECK(r.out == "2  SL301  [*] unknown-fsdp-key\n1  SL303  [*] layer-class-list-format\n"
                   "1  SL305  [*] min-num-params-invalid\n");
    auto j = nlohmann::json::parse(runShell(cd + bin + "--statistics --format json .").out);
    REQUIRE(j.size() == 3);
    CHECK(j[0] == nlohmann::json({{"code", "SL301"}, {"name", "unknown-fsdp-key"}, {"count", 2}, {"fixable", 2}}));
  }
  SECTION("--stdin-filename: stdin is linted as that file; --diff works on it, --fix is refused") {
    auto r = runShell(cd + "cat SL305_scientific_notation.yaml | " + bin + "- --stdin-filename conf/accelerate.yaml");
    CHECK(r.code == 1);
    CHECK(r.out.find("conf/accelerate.yaml:11:24: error:") == 0);
    auto d = runShell(cd + "cat SL305_scientific_notation.yaml | " + bin +
                      "--diff - --stdin-filename conf/accelerate.yaml 2>/dev/null");
    CHECK(d.code == 1);
    CHECK(d.out.find("+  fsdp_min_num_params: 100000000\n") != std::string::npos);
    auto fix = runShell(cd + "cat SL305_scientific_notation.yaml | " + bin + "--fix - --stdin-filename c.yaml 2>&1");
    CHECK(fix.code == 2);
    CHECK(runShell(cd + "echo x | " + bin + "- 2>&1").code == 2);
    CHECK(runShell(cd + bin + "--stdin-filename c.yaml . 2>&1").code == 2);
    // A suppression in the piped text applies, as in the file.
    auto quiet = runShell(cd + "sed 's/1e8$/1e8  # noqa: SL305/' SL305_scientific_notation.yaml | " + bin +
                          "- --stdin-filename c.yaml");
    CHECK(quiet.code == 0);
  }
}

TEST_CASE("formats: a snippet keeps tabs, counts code points, and stops at the line's end", "[formats]") {
  const std::string text = "first\n\tx = \"\xC3\xA9\" + yy\nlast";
  shardlint::SourceFile f("t.py", text);
  // `yy` on line 2: tab, then `x = "é" + ` (é is two bytes).
  uint32_t at = static_cast<uint32_t>(text.find("yy"));
  auto loc = shardlint::makeLocation(f, {at, at + 2});
  CHECK(shardlint::output::snippet(loc, text, false) == "  2 | \tx = \"\xC3\xA9\" + yy\n    | \t          ^^\n");
  // A range running past the line is cut at its end; an empty range gets one caret.
  auto multi = shardlint::makeLocation(f, {0, static_cast<uint32_t>(text.size())});
  CHECK(shardlint::output::snippet(multi, text, false) == "  1 | first\n    | ^^^^^\n");
  auto empty = shardlint::makeLocation(f, {static_cast<uint32_t>(text.size()), static_cast<uint32_t>(text.size())});
  CHECK(shardlint::output::snippet(empty, text, false) == "  3 | last\n    |     ^\n");
  // A line over 1,000 bytes is not shown.
  std::string wide(2000, 'a');
  shardlint::SourceFile w("w.py", wide);
  CHECK(shardlint::output::snippet(shardlint::makeLocation(w, {5, 6}), wide, false).empty());
}

TEST_CASE("cli: --watch lints again on changes and prints only what changed", "[cli][watch]") {
  TempDir dir("shardlint-watch-");
  const fs::path src = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "config";
  fs::create_directories(dir.path() / "tree" / "sub");
  fs::copy_file(src / "SL303_trailing_comma.yaml", dir.path() / "tree" / "sub" / "a.yaml");
  std::string bin = shellQuote(SHARDLINT_BINARY);
  // Waits (at most 20 s) for a line in a file; the output goes outside the watched tree.
  auto waitFor = [](const std::string& what, const std::string& file) {
    return "for i in $(seq 200); do grep -q " + shellQuote(what) + " " + file + " && break; sleep 0.1; done; ";
  };
  std::string script =
      "cd " + shellQuote(dir.path().string()) + " && (" + bin +
      " check --no-cache --watch tree > out.txt 2> err.txt & echo $! > pid) && " + waitFor("watching", "err.txt") +
      "cp " + shellQuote((src / "SL305_scientific_notation.yaml").string()) + " tree/sub/b.yaml; " +
      waitFor("1 new", "out.txt") + "echo noise > tree/notes.txt; cp " +
      shellQuote((src / "SL303_trailing_comma.yaml.fixed").string()) + " tree/sub/a.yaml; " +
      waitFor("gone:", "out.txt") + "kill $(cat pid); cat out.txt";
  auto r = runShell(script);
  INFO(r.out);
  // The first report in full, then one block per change.
  CHECK(r.out.find("sub/a.yaml:15:39: error:") == r.out.find("tree/sub/a.yaml:15:39: error:") + 5);
  CHECK(r.out.find("Found 1 finding in 1 file (1 checked).\n") != std::string::npos);
  CHECK(r.out.find("] 2 findings (1 new, 0 gone)\ntree/sub/b.yaml:11:24: error:") != std::string::npos);
  CHECK(r.out.find("] 1 finding (0 new, 1 gone)\ngone: tree/sub/a.yaml:15:39: SL303 layer-class-list-format\n") !=
        std::string::npos);
  // Nothing else: the unrelated file and unchanged findings print nothing.
  size_t blocks = 0;
  for (size_t at = r.out.find("] "); at != std::string::npos; at = r.out.find("] ", at + 1))
    blocks += r.out.compare(at, 3, "] 1") == 0 || r.out.compare(at, 3, "] 2") == 0;
  CHECK(blocks == 2);
  auto bad = runShell(bin + " check --watch --fix tree 2>&1");
  CHECK(bad.code == 2);
  CHECK(bad.out.find("--watch") != std::string::npos);
}
