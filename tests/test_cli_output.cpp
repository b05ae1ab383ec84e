// End-to-end tests of the `shardlint` executable's output: the text and JSON formats, colours only on a
// terminal, columns in code points, the order of findings, and deterministic output.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "CliSupport.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint::testing::cli;

// ------------------------------------------------------------------ text format

TEST_CASE("cli: text format", "[cli]") {
  TempDir dir;
  dir.write("train.py", kBuggy);
  Result r = run(dir, "check train.py");
  INFO(r.out);
  REQUIRE(r.code == 1);
  auto ls = lines(r.out);
  REQUIRE(ls.size() >= 3);
  CHECK(std::regex_match(ls.front(), std::regex(R"(^train\.py:6:7: error: .* \[SL101 optimizer-before-wrap\]$)")));
  // The snippet: the line, then carets under the range (like Ruff and rustc).
  REQUIRE(ls.size() >= 5);
  CHECK(ls[1] == "  6 | opt = torch.optim.AdamW(model.parameters())");
  CHECK(ls[2] == "    |       " + std::string(37, '^'));
  // Notes: indented by two spaces, `path:line:col: note: message`.
  std::regex noteRe(R"(^  train\.py:\d+:\d+: note: .+$)");
  size_t notes = 0;
  for (size_t i = 3; i + 1 < ls.size(); ++i) {
    INFO("line " << i << ": " << ls[i]);
    CHECK(ls[i].rfind("  ", 0) == 0);
    CHECK(ls[i].find(": note: ") != std::string::npos);
    CHECK(std::regex_match(ls[i], noteRe));
    ++notes;
  }
  CHECK(notes >= 1);
  CHECK(ls.back() == "Found 1 finding in 1 file (1 checked).");
  CHECK(r.out.back() == '\n');

  SECTION("--no-snippets and the concise format have no source lines") {
    Result plain = run(dir, "check --no-snippets train.py");
    CHECK(plain.code == 1);
    CHECK(lines(plain.out).size() == ls.size() - 2);
    CHECK(plain.out.find(" | ") == std::string::npos);
    CHECK(run(dir, "check --format concise train.py").out.find(" | ") == std::string::npos);
  }
  SECTION("--quiet drops the summary") {
    Result q = run(dir, "check --quiet train.py");
    CHECK(q.code == 1);
    auto ql = lines(q.out);
    REQUIRE(!ql.empty());
    CHECK(ql.size() == ls.size() - 1);
    CHECK(q.out + ls.back() + "\n" == r.out);
    CHECK(q.out.find("Found ") == std::string::npos);

    Result qs = run(dir, "check -q train.py");
    CHECK(qs.out == q.out);
  }
  SECTION("--quiet on a clean run prints nothing") {
    dir.write("ok.py", kClean);
    Result q = run(dir, "check -q ok.py");
    CHECK(q.code == 0);
    CHECK(q.out.empty());
  }
  SECTION("plural summary") {
    dir.write("b.py", kBuggy);
    dir.write("ok.py", kClean);
    Result all = run(dir, "check .");
    CHECK(all.code == 1);
    CHECK(lines(all.out).back() == "Found 2 findings in 2 files (3 checked).");
  }
}

TEST_CASE("cli: no ANSI escapes unless stdout is a terminal", "[cli]") {
  TempDir dir;
  dir.write("train.py", kBuggy);
  auto hasEsc = [](const std::string& s) { return s.find('\x1b') != std::string::npos; };

  CHECK_FALSE(hasEsc(run(dir, "check train.py").out));
  CHECK_FALSE(hasEsc(run(dir, "check --no-color train.py").out));
  CHECK_FALSE(hasEsc(run(dir, "check train.py", "NO_COLOR=1").out));

  // On a real terminal colors are on by default, and --no-color / NO_COLOR turn them off.
  std::string tty, ttyNoColor, ttyEnv;
  if (!runOnTty(dir, "check train.py", "", tty)) {
    WARN("no pseudo-terminal available; skipping the TTY part");
    return;
  }
  REQUIRE(runOnTty(dir, "check --no-color train.py", "", ttyNoColor));
  REQUIRE(runOnTty(dir, "check train.py", "NO_COLOR=1", ttyEnv));
  INFO("tty output: " << tty);
  CHECK(tty.find("SL101") != std::string::npos);
  CHECK(hasEsc(tty));
  CHECK(ttyNoColor.find("SL101") != std::string::npos);
  CHECK_FALSE(hasEsc(ttyNoColor));
  CHECK(ttyEnv.find("SL101") != std::string::npos);
  CHECK_FALSE(hasEsc(ttyEnv));
}

// ------------------------------------------------------------------ JSON format

TEST_CASE("cli: JSON format", "[cli]") {
  TempDir dir;
  dir.write("train.py", kBuggy);
  Result r = run(dir, "check --format json train.py");
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  json j = parseJson(r);

  REQUIRE(j.is_object());
  REQUIRE(j.contains("version"));
  CHECK(j["version"].is_string());
  Result v = run(dir, "--version");
  CHECK(v.out == "shardlint " + j["version"].get<std::string>() + "\n");

  REQUIRE(j.contains("findings"));
  REQUIRE(j["findings"].is_array());
  REQUIRE(j["findings"].size() == 1);
  const json& f = j["findings"][0];
  for (const char* key : {"code", "name", "severity", "path", "line", "column", "end_line", "end_column", "message",
                          "notes"}) {
    INFO("finding key " << key);
    CHECK(f.contains(key));
  }
  CHECK(f["code"] == "SL101");
  CHECK(f["name"] == "optimizer-before-wrap");
  CHECK(f["severity"] == "error");
  CHECK(f["path"] == "train.py");
  CHECK(f["line"] == 6);
  CHECK(f["column"] == 7);
  CHECK(f["end_line"] == 6);
  // `torch.optim.AdamW(model.parameters())` spans columns 7..43; the end is exclusive.
  CHECK(f["end_column"] == 44);
  CHECK(f["message"].is_string());
  CHECK(!f["message"].get<std::string>().empty());
  REQUIRE(f["notes"].is_array());
  REQUIRE(!f["notes"].empty());
  for (const auto& n : f["notes"]) {
    for (const char* key : {"path", "line", "column", "message"}) {
      INFO("note key " << key);
      CHECK(n.contains(key));
    }
    CHECK(n["path"] == "train.py");
    CHECK(n["line"].get<int>() >= 1);
    CHECK(n["column"].get<int>() >= 1);
  }
  // The wrap `FSDP(model)` is at 7:9, the stale `opt.step()` at 8:1.
  CHECK(f["notes"][0]["line"] == 7);
  CHECK(f["notes"][0]["column"] == 9);

  REQUIRE(j.contains("summary"));
  const json& s = j["summary"];
  CHECK(s["files_checked"] == 1);
  CHECK(s["files_with_findings"] == 1);
  CHECK(s["findings"] == 1);
  CHECK(s["by_code"] == json{{"SL101", 1}});

  SECTION("the JSON matches the text output") {
    Result t = run(dir, "check train.py");
    auto first = lines(t.out).front();
    CHECK(first == "train.py:6:7: error: " + f["message"].get<std::string>() + " [SL101 optimizer-before-wrap]");
  }
  SECTION("a clean run") {
    dir.write("ok.py", kClean);
    Result c = run(dir, "check --format json ok.py");
    CHECK(c.code == 0);
    json cj = parseJson(c);
    CHECK(cj["findings"] == json::array());
    CHECK(cj["summary"]["files_checked"] == 1);
    CHECK(cj["summary"]["files_with_findings"] == 0);
    CHECK(cj["summary"]["findings"] == 0);
    CHECK(cj["summary"]["by_code"].empty());
  }
}

TEST_CASE("cli: columns count code points", "[cli]") {
  TempDir dir;
  std::string src = kBuggy;
  // `x = "é🙂"; ` is 10 code points (13 bytes, 11 UTF-16 units): the call starts at column 17.
  std::string from = "opt = torch.optim.AdamW";
  src.replace(src.find(from), from.size(), "x = \"\xC3\xA9\xF0\x9F\x99\x82\"; " + from);
  dir.write("train.py", src);
  Result r = run(dir, "check --format json train.py");
  CHECK(r.code == 1);
  json j = parseJson(r);
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["line"] == 6);
  CHECK(j["findings"][0]["column"] == 17);
  CHECK(j["findings"][0]["end_column"] == 54);
  Result t = run(dir, "check train.py");
  CHECK(t.out.rfind("train.py:6:17: ", 0) == 0);
}

TEST_CASE("cli: findings are sorted by path, then line", "[cli]") {
  TempDir dir;
  // a.py: SL101 on line 6 and a syntax error on line 10 (numeric, not string, order).
  dir.write("a.py", std::string(kBuggy) + "\ndef broken(:\n    pass\n");
  dir.write("b.py", kBuggy);
  dir.write("sub/c.py", kBuggy);
  dir.write("ok.py", kClean);
  Result r = run(dir, "check --format json sub b.py . a.py");
  CHECK(r.code == 1);
  json j = parseJson(r);
  std::vector<std::pair<std::string, int>> order;
  for (const auto& f : j["findings"]) order.emplace_back(f["path"].get<std::string>(), f["line"].get<int>());
  std::vector<std::pair<std::string, int>> expected = {
      {"a.py", 6}, {"a.py", 10}, {"b.py", 6}, {"sub/c.py", 6}};
  CHECK(order == expected);
  CHECK(j["summary"]["files_checked"] == 4);  // each file once, though named twice
  CHECK(j["summary"]["files_with_findings"] == 3);
  CHECK(j["summary"]["findings"] == 4);
  CHECK(j["summary"]["by_code"] == json{{"SL001", 1}, {"SL101", 3}});
}
// ------------------------------------------------------------------ determinism

TEST_CASE("cli: output is deterministic", "[cli]") {
  TempDir dir;
  dir.write("z.py", kBuggy);
  dir.write("a.py", std::string(kBuggy) + "\ndef broken(:\n    pass\n");
  dir.write("m/n/o.py", kBuggy);
  dir.write("bad.py", "\xff\n");
  dir.write("ok.py", kClean);
  for (const char* args : {"check .", "check --format json .", "check --format json z.py m a.py ."}) {
    Result first = run(dir, args);
    Result second = run(dir, args);
    INFO(args);
    CHECK(first.code == 1);
    CHECK(first.out == second.out);
    CHECK(first.err == second.err);
  }
}
