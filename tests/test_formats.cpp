// Output formats against their consumers: SARIF through the official schema and GitHub's checks,
// GitHub workflow commands, LSP JSON, concise.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "TestSupport.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
using Run = shardlint::testing::ShellResult;

// Runs `cmd` and captures its stdout (stderr is not captured).
Run sh(const std::string& cmd) { return shardlint::testing::runShell(cmd); }

std::string shardlintStdout(const std::string& args, const fs::path& cwd = SHARDLINT_SOURCE_DIR) {
  return sh("cd '" + cwd.string() + "' && '" + std::string(SHARDLINT_BINARY) + "' " + args + " 2>/dev/null").out;
}

fs::path tempDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("shardlint-formats-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const char* kBug =
    "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom nets import Net\n"
    "model = Net()\nopt = torch.optim.AdamW(model.parameters())  # caf\xC3\xA9 \xF0\x9F\x99\x82\n"
    "model = FSDP(model)\nopt.step()\n";
}  // namespace

TEST_CASE("sarif: the whole fixture suite passes the SARIF 2.1.0 schema and GitHub's checks", "[formats][sarif]") {
  REQUIRE(fs::exists(shardlint::testing::sarifCheckPython()));  // build/venv, made by scripts/setup.sh
  fs::path dir = tempDir("sarif");
  fs::path log = dir / "fixtures.sarif";
  { std::ofstream(log) << shardlintStdout("check fixtures examples --format sarif"); }
  json doc = json::parse(std::ifstream(log));
  REQUIRE(doc["runs"][0]["results"].size() > 100);
  Run v = sh(shardlint::testing::sarifCheckCommand() + " '" + log.string() + "' 2>&1");
  INFO(v.out);
  CHECK(v.code == 0);
  CHECK(v.out.find("valid SARIF 2.1.0 (schema and GitHub code scanning)") != std::string::npos);
  fs::remove_all(dir);
}

// The checker can fail: each log below breaks the fixture suite's valid log in one way, and each is
// rejected with the place and the reason.
TEST_CASE("sarif: the checker rejects broken logs", "[formats][sarif]") {
  REQUIRE(fs::exists(shardlint::testing::sarifCheckPython()));
  fs::path dir = tempDir("sarif-broken");
  json good = json::parse(shardlintStdout("check fixtures/python --format sarif"));  // no LibTorch units: fast
  REQUIRE(good["runs"][0]["results"].size() > 10);
  struct Case {
    const char* name;
    std::function<void(json&)> breakIt;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"level", [](json& d) { d["runs"][0]["results"][0]["level"] = "fatal"; },
       "/runs/0/results/0/level: schema: 'fatal' is not one of"},
      {"unknown-property", [](json& d) { d["runs"][0]["results"][0]["severity"] = "high"; },
       "/runs/0/results/0: schema: Additional properties are not allowed ('severity' was unexpected)"},
      {"no-message", [](json& d) { d["runs"][0]["results"][1].erase("message"); },
       "/runs/0/results/1: schema: 'message' is a required property"},
      {"start-line-zero", [](json& d) { d["runs"][0]["results"][2]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0; },
       "/runs/0/results/2/locations/0/physicalLocation/region/startLine: schema: 0 is less than the minimum of 1"},
      {"version", [](json& d) { d["version"] = "2.0.0"; }, "/version: schema: '2.0.0' is not one of ['2.1.0']"},
      {"rule-help", [](json& d) { d["runs"][0]["tool"]["driver"]["rules"][0].erase("help"); },
       "/runs/0/tool/driver/rules/0/help/text: github: missing"},
      {"unknown-rule", [](json& d) { d["runs"][0]["results"][0]["ruleId"] = "SL999"; },
       "/runs/0/results/0/ruleId: github: 'SL999' names no rule"},
      {"absolute-uri",
       [](json& d) { d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "/abs/train.py"; },
       "github: '/abs/train.py': an absolute path"},
      {"no-fingerprints", [](json& d) { d["runs"][0]["results"][0].erase("partialFingerprints"); },
       "/runs/0/results/0/partialFingerprints: github: missing"},
      {"runs", [](json& d) { json run = d["runs"][0]; d["runs"] = json::array(); for (int i = 0; i < 21; ++i) d["runs"].push_back(run); },
       "/runs: github: 21 runs, over the limit of 20"},
      {"results", [](json& d) { json r = d["runs"][0]["results"][0]; auto& rs = d["runs"][0]["results"];
                                 while (rs.size() <= 25000) rs.push_back(r); },
       "/runs/0/results: github: 25001 results, over the limit of 25000"},
  };
  for (const Case& c : cases) {
    json bad = good;
    c.breakIt(bad);
    fs::path log = dir / (std::string(c.name) + ".sarif");
    { std::ofstream(log) << bad.dump(); }
    Run v = sh(shardlint::testing::sarifCheckCommand() + " '" + log.string() + "' 2>&1");
    INFO(c.name << ": " << v.out.substr(0, 2000));
    CHECK(v.code == 1);
    CHECK(v.out.find(c.expect) != std::string::npos);
  }
  // Not JSON at all, and the good log for contrast.
  { std::ofstream(dir / "truncated.sarif") << good.dump().substr(0, 100); }
  { std::ofstream(dir / "good.sarif") << good.dump(); }
  Run t = sh(shardlint::testing::sarifCheckCommand() + " '" + (dir / "truncated.sarif").string() + "' 2>&1");
  CHECK(t.code == 1);
  CHECK(t.out.find("not JSON") != std::string::npos);
  Run g = sh(shardlint::testing::sarifCheckCommand() + " '" + (dir / "good.sarif").string() + "' 2>&1");
  INFO(g.out);
  CHECK(g.code == 0);
  fs::remove_all(dir);
}

TEST_CASE("sarif: rules, UTF-16 columns, related locations, stable fingerprints", "[formats][sarif]") {
  fs::path dir = tempDir("sarif2");
  std::ofstream(dir / "train.py") << kBug;
  json a = json::parse(shardlintStdout("check train.py --format sarif", dir));
  const json& run = a["runs"][0];
  CHECK(run["tool"]["driver"]["name"] == "shardlint");
  CHECK(run["columnKind"] == "utf16CodeUnits");
  bool hasSL101 = false;
  for (const auto& r : run["tool"]["driver"]["rules"])
    if (r["id"] == "SL101") {
      hasSL101 = true;
      CHECK(!r["fullDescription"]["text"].get<std::string>().empty());
      CHECK(r["help"]["markdown"].get<std::string>().rfind("# SL101", 0) == 0);
    }
  CHECK(hasSL101);
  REQUIRE(run["results"].size() == 1);
  const json& res = run["results"][0];
  CHECK(res["ruleId"] == "SL101");
  CHECK(res["locations"][0]["physicalLocation"]["region"]["startLine"] == 5);
  CHECK(res["locations"][0]["physicalLocation"]["region"]["startColumn"] == 7);
  CHECK(res["relatedLocations"].size() >= 2);
  std::string fp = res["partialFingerprints"]["primaryLocationLineHash"];
  // Unrelated lines above move the finding; its fingerprint stays.
  std::ofstream(dir / "train.py") << "# a new header comment\n\n" << kBug;
  json b = json::parse(shardlintStdout("check train.py --format sarif", dir));
  CHECK(b["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 7);
  CHECK(b["runs"][0]["results"][0]["partialFingerprints"]["primaryLocationLineHash"] == fp);
  fs::remove_all(dir);
}

namespace {
// The byte offset of SARIF's 1-based line and UTF-16 column in `text`.
size_t sarifOffset(const std::string& text, int line, int column) {
  size_t at = 0;
  for (int l = 1; l < line; ++l) at = text.find('\n', at) + 1;
  for (int units = 1; units < column; ++at) {
    unsigned char c = static_cast<unsigned char>(text[at]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    units += c >= 0xF0 ? 2 : 1;        // a 4-byte sequence is a surrogate pair
  }
  return at;
}
}  // namespace

TEST_CASE("sarif: a finding's fix as SARIF replacements gives what --fix writes", "[formats][sarif]") {
  fs::path dir = tempDir("sarif-fix");
  std::ofstream(dir / "train.py") << kBug;
  json a = json::parse(shardlintStdout("check train.py --format sarif", dir));
  const json& res = a["runs"][0]["results"][0];
  REQUIRE(res["ruleId"] == "SL101");
  REQUIRE(res["fixes"].size() == 1);
  const json& fix = res["fixes"][0];
  CHECK(fix["properties"]["applicability"] == "unsafe");
  CHECK(fix["description"]["text"] == "Build `opt` after the wrap");
  REQUIRE(fix["artifactChanges"].size() == 1);
  CHECK(fix["artifactChanges"][0]["artifactLocation"]["uri"] == "train.py");
  // Apply the replacements, last first (the line with the multi-byte comment is the one moved).
  std::string text = kBug;
  std::vector<std::tuple<size_t, size_t, std::string>> edits;
  for (const auto& r : fix["artifactChanges"][0]["replacements"]) {
    const json& g = r["deletedRegion"];
    size_t b = sarifOffset(text, g["startLine"], g["startColumn"]);
    size_t e = sarifOffset(text, g["endLine"], g["endColumn"]);
    edits.emplace_back(b, e, r["insertedContent"]["text"].get<std::string>());
  }
  std::sort(edits.rbegin(), edits.rend());
  for (const auto& [b, e, t] : edits) text.replace(b, e - b, t);
  sh("cd '" + dir.string() + "' && '" + std::string(SHARDLINT_BINARY) + "' check train.py --fix --unsafe-fixes -q");
  std::ifstream in(dir / "train.py");
  std::string fixed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == fixed);
  CHECK(text != kBug);
  fs::remove_all(dir);
}

TEST_CASE("github: workflow commands with escaping", "[formats][github]") {
  fs::path dir = tempDir("github");
  fs::create_directories(dir / "a,b:c");
  std::ofstream(dir / "a,b:c" / "100%.py") << kBug;
  std::string out = shardlintStdout("check . --format github", dir);
  INFO(out);
  CHECK(out.rfind("::error file=a%2Cb%3Ac/100%25.py,line=5,col=7,endColumn=", 0) == 0);
  CHECK(out.find(",title=SL101 optimizer-before-wrap::optimizer is built") != std::string::npos);
  CHECK(out.find("%0Aa,b:c/100%25.py:6:9: note:") != std::string::npos);  // notes after %0A; data keeps , and :
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  fs::remove_all(dir);
}

TEST_CASE("lsp: PublishDiagnosticsParams with 0-based UTF-16 ranges", "[formats][lsp]") {
  fs::path dir = tempDir("lsp");
  std::ofstream(dir / "train.py") << "x = '\xF0\x9F\x99\x82'; import torch\n" << kBug;
  json j = json::parse(shardlintStdout("check train.py --format lsp", dir));
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 1);
  CHECK(j[0]["uri"].get<std::string>().rfind("file:///", 0) == 0);
  const json& d = j[0]["diagnostics"][0];
  CHECK(d["range"]["start"]["line"] == 5);
  CHECK(d["range"]["start"]["character"] == 6);
  CHECK(d["severity"] == 1);
  CHECK(d["code"] == "SL101");
  CHECK(d["source"] == "shardlint");
  CHECK(d["codeDescription"]["href"].get<std::string>().find("SL101_optimizer_before_wrap.md") != std::string::npos);
  CHECK(d["relatedInformation"].size() >= 2);
  fs::remove_all(dir);
}

TEST_CASE("concise: one line per finding", "[formats]") {
  fs::path dir = tempDir("concise");
  std::ofstream(dir / "train.py") << kBug;
  std::string out = shardlintStdout("check train.py --format concise", dir);
  CHECK(out.rfind("train.py:5:7: SL101 optimizer is built", 0) == 0);
  CHECK(out.find("note:") == std::string::npos);
  CHECK(out.find("\nFound 1 finding in 1 file (1 checked).\n") != std::string::npos);
  fs::remove_all(dir);
}
