// End-to-end tests of the `shardlint` executable: exit codes, usage errors, paths and discovery, rule
// selection, bad input and the `rules` / `rule` commands. Output formats: test_cli_output.cpp; project-wide
// settings, baselines and the cache: test_cli_project.cpp.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "CliSupport.h"

namespace fs = std::filesystem;
using nlohmann::json;
using shardlint::testing::shellQuote;
using namespace shardlint::testing::cli;

// ------------------------------------------------------------------ exit codes and usage errors

TEST_CASE("cli: a clean file exits 0 with a summary", "[cli]") {
  TempDir dir;
  dir.write("train.py", kClean);
  dir.write("other.py", "x = 1\n");
  Result r = run(dir, "check train.py");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "No findings in 1 file.\n");
  CHECK(r.err.empty());

  Result all = run(dir, "check .");
  CHECK(all.code == 0);
  CHECK(all.out == "No findings in 2 files.\n");
}

TEST_CASE("cli: a buggy file exits 1 and reports SL101 at the optimizer", "[cli]") {
  TempDir dir;
  dir.write("train.py", kBuggy);
  Result r = run(dir, "check train.py");
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  auto ls = lines(r.out);
  REQUIRE(!ls.empty());
  CHECK(ls.front().rfind("train.py:6:7: error: ", 0) == 0);
}

TEST_CASE("cli: usage errors exit 2 with a message on stderr", "[cli]") {
  TempDir dir;
  dir.write("train.py", kBuggy);

  SECTION("missing path") {
    Result r = run(dir, "check does_not_exist.py");
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("does_not_exist.py") != std::string::npos);
  }
  SECTION("missing path next to an existing one") {
    Result r = run(dir, "check train.py does_not_exist");
    CHECK(r.code == 2);
    CHECK(r.err.find("does_not_exist") != std::string::npos);
  }
  SECTION("unknown --select") {
    Result r = run(dir, "check --select XYZ train.py");
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("XYZ") != std::string::npos);
  }
  SECTION("unknown --ignore") {
    Result r = run(dir, "check --ignore SL9 train.py");
    CHECK(r.code == 2);
    CHECK(r.err.find("SL9") != std::string::npos);
  }
  SECTION("unknown --format") {
    Result r = run(dir, "check --format xml train.py");
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("xml") != std::string::npos);
  }
  SECTION("unknown rule") {
    Result r = run(dir, "rule NOPE");
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("NOPE") != std::string::npos);
  }
  SECTION("no subcommand") {
    Result r = run(dir, "");
    CHECK(r.code == 2);
    CHECK(!r.err.empty());
  }
}

TEST_CASE("cli: --version and --help exit 0", "[cli]") {
  TempDir dir;
  Result v = run(dir, "--version");
  CHECK(v.code == 0);
  CHECK(v.out.rfind("shardlint ", 0) == 0);
  CHECK(v.err.empty());

  Result h = run(dir, "--help");
  CHECK(h.code == 0);
  CHECK(h.out.find("check") != std::string::npos);

  Result hc = run(dir, "check --help");
  CHECK(hc.code == 0);
  CHECK(hc.out.find("--select") != std::string::npos);
}
// ------------------------------------------------------------------ paths and discovery

TEST_CASE("cli: paths are reported as the user gave them", "[cli]") {
  TempDir dir;
  dir.write("sub/train.py", kBuggy);
  dir.write("train.py", kBuggy);

  CHECK(reportedPaths(parseJson(run(dir, "check --format json sub/"))) == std::set<std::string>{"sub/train.py"});
  CHECK(reportedPaths(parseJson(run(dir, "check --format json sub"))) == std::set<std::string>{"sub/train.py"});
  CHECK(reportedPaths(parseJson(run(dir, "check --format json sub/train.py"))) ==
        std::set<std::string>{"sub/train.py"});
  CHECK(reportedPaths(parseJson(run(dir, "check --format json ."))) ==
        std::set<std::string>{"sub/train.py", "train.py"});
  // No path means the current directory.
  CHECK(reportedPaths(parseJson(run(dir, "check --format json"))) ==
        std::set<std::string>{"sub/train.py", "train.py"});
  // From inside sub/, the parent is `..`.
  Result up = runIn(dir.work() / "sub", "check --format json ..", "", dir.base() / "stderr.txt");
  CHECK(reportedPaths(parseJson(up)) == std::set<std::string>{"../sub/train.py", "../train.py"});
  // An absolute path stays absolute.
  std::string abs = (dir.work() / "sub").string();
  CHECK(reportedPaths(parseJson(run(dir, "check --format json " + shellQuote(abs)))) ==
        std::set<std::string>{abs + "/train.py"});

  Result t = run(dir, "check sub/");
  CHECK(t.out.rfind("sub/train.py:6:7: error: ", 0) == 0);
  CHECK(t.out.find("  sub/train.py:7:9: note: ") != std::string::npos);
}

TEST_CASE("cli: discovery skips tool, VCS, build and hidden folders", "[cli]") {
  TempDir dir;
  dir.write("train.py", kBuggy);
  dir.write("pkg/deep/model.py", kBuggy);
  for (const char* skipped : {".git/hooks/x.py", ".venv/lib/x.py", "venv/x.py", "node_modules/pkg/x.py",
                              "build/lib/x.py", "__pycache__/x.py", ".hidden/x.py", "pkg/.cache/x.py",
                              "pkg/__pycache__/x.py", "env/x.py", "dist/x.py", "mypkg.egg-info/x.py"})
    dir.write(skipped, kBuggy);
  dir.write("myenv/pyvenv.cfg", "home = /usr/bin\n");  // a virtual environment under any name
  dir.write("myenv/lib/x.py", kBuggy);
  dir.write("script", kBuggy);      // no .py suffix: not discovered
  dir.write("notes.txt", kBuggy);  // not Python

  json j = parseJson(run(dir, "check --format json ."));
  CHECK(reportedPaths(j) == std::set<std::string>{"pkg/deep/model.py", "train.py"});
  CHECK(j["summary"]["files_checked"] == 2);

  SECTION("a file given explicitly is linted without a .py suffix") {
    Result r = run(dir, "check --format json script");
    CHECK(r.code == 1);
    json e = parseJson(r);
    CHECK(reportedPaths(e) == std::set<std::string>{"script"});
    CHECK(codes(e) == std::vector<std::string>{"SL101"});
  }
  SECTION("a file given explicitly inside a skipped folder is linted") {
    Result r = run(dir, "check --format json build/lib/x.py");
    CHECK(r.code == 1);
    CHECK(reportedPaths(parseJson(r)) == std::set<std::string>{"build/lib/x.py"});
  }
}

// ------------------------------------------------------------------ --select / --ignore

TEST_CASE("cli: --select and --ignore", "[cli]") {
  TempDir dir;
  dir.write("train.py", kBuggy);
  auto codesFor = [&](const std::string& opts) {
    // The path goes first here; `--select CODE PATH` is covered below.
    Result r = run(dir, "check train.py --format json " + opts);
    INFO(opts << ": " << r.err);
    CHECK((r.code == 0 || r.code == 1));
    json j = parseJson(r);
    CHECK(r.code == (j["findings"].empty() ? 0 : 1));
    return codes(j);
  };
  const std::vector<std::string> none, sl101 = {"SL101"};
  CHECK(codesFor("") == sl101);
  CHECK(codesFor("--select SL102") == none);
  CHECK(codesFor("--select SL101") == sl101);
  CHECK(codesFor("--select sl101") == sl101);
  CHECK(codesFor("--select SL102,SL101") == sl101);
  CHECK(codesFor("--select SL102 --select SL101") == sl101);
  CHECK(codesFor("--select optimizer-before-wrap") == sl101);
  CHECK(codesFor("--ignore SL1") == none);
  CHECK(codesFor("--ignore SL101") == none);
  CHECK(codesFor("--ignore optimizer-before-wrap") == none);
  CHECK(codesFor("--ignore SL102") == sl101);
  // The more specific selector wins.
  CHECK(codesFor("--select SL101 --ignore SL1") == sl101);
  CHECK(codesFor("--select SL1 --ignore SL101") == none);

  Result text = run(dir, "check train.py --select SL102");
  CHECK(text.code == 0);
  CHECK(text.out == "No findings in 1 file.\n");
  Result sep = run(dir, "check --select SL102 -- train.py");
  CHECK(sep.code == 0);
  CHECK(sep.out == "No findings in 1 file.\n");
}

TEST_CASE("cli: --select/--ignore take one list each, then paths follow", "[cli]") {
  // The README documents `--select LIST` as "comma-separated or repeated", and its own example is
  // `--select SL101 --ignore SL1`; but the options swallow every following positional argument, so
  // `check --select SL102 train.py` fails with "unknown rule selector `train.py`" (exit 2).
  TempDir dir;
  dir.write("train.py", kBuggy);
  for (const char* args : {"check --select SL102 train.py", "check --select=SL102 train.py",
                           "check --ignore SL1 train.py", "check --ignore=optimizer-before-wrap train.py"}) {
    Result r = run(dir, args);
    INFO(args << " -> " << r.err);
    CHECK(r.code == 0);
    CHECK(r.out == "No findings in 1 file.\n");
  }
  Result keep = run(dir, "check --select SL101 --ignore SL1 train.py");
  INFO(keep.err);
  CHECK(keep.code == 1);
  CHECK(keep.out.find("[SL101 optimizer-before-wrap]") != std::string::npos);
}

// ------------------------------------------------------------------ bad input

TEST_CASE("cli: bad input becomes SL001/SL002 findings, not crashes", "[cli]") {
  TempDir dir;
  auto single = [&](const std::string& file) {
    Result r = run(dir, "check --format json " + shellQuote(file));
    INFO(file << ": " << r.out << r.err);
    CHECK(r.code == 1);
    json j = parseJson(r);
    REQUIRE(j["findings"].size() == 1);
    return j["findings"][0];
  };

  SECTION("invalid UTF-8") {
    dir.write("bad.py", "x = \"\xff\xfe\"\nopt = 1\n");
    json f = single("bad.py");
    CHECK(f["code"] == "SL002");
    CHECK(f["name"] == "file-skipped");
    CHECK(f["line"] == 1);
    CHECK(f["column"] == 1);
    CHECK(f["message"].get<std::string>().find("not valid UTF-8") != std::string::npos);
    Result t = run(dir, "check bad.py");
    CHECK(t.code == 1);
    CHECK(t.out.rfind("bad.py:1:1: error: ", 0) == 0);
  }
  SECTION("truncated UTF-8 sequence at the end of the file") {
    dir.write("trunc.py", "x = 1  # caf\xC3");
    json f = single("trunc.py");
    CHECK(f["code"] == "SL002");
    CHECK(f["message"].get<std::string>().find("not valid UTF-8") != std::string::npos);
  }
  SECTION("NUL byte") {
    dir.write("nul.py", std::string("x = 1\n\0y = 2\n", 13));
    json f = single("nul.py");
    CHECK(f["code"] == "SL002");
    CHECK(f["line"] == 1);
    CHECK(f["column"] == 1);
    CHECK(f["message"].get<std::string>().find("NUL") != std::string::npos);
  }
  SECTION("larger than 2 MiB") {
    std::string big;
    big.reserve(2u * 1024u * 1024u + 64u);
    while (big.size() <= 2u * 1024u * 1024u) big += "x = 1\n";
    dir.write("big.py", big);
    json f = single("big.py");
    CHECK(f["code"] == "SL002");
    CHECK(f["message"].get<std::string>().find("larger") != std::string::npos);
  }
  SECTION("exactly 2 MiB is still linted") {
    std::string big(2u * 1024u * 1024u, ' ');
    std::string head = "x = 1\n#";
    big.replace(0, head.size(), head);
    big.back() = '\n';
    dir.write("edge.py", big);
    Result r = run(dir, "check --format json edge.py");
    CHECK(r.code == 0);
    CHECK(parseJson(r)["findings"].empty());
  }
  SECTION("syntax error: SL001 at the first error, analysis continues") {
    dir.write("syn.py", std::string(kBuggy) + "\ndef broken(:\n    pass\n\ndef worse(:\n    pass\n");
    Result r = run(dir, "check --format json syn.py");
    CHECK(r.code == 1);
    json j = parseJson(r);
    CHECK(codes(j) == std::vector<std::string>{"SL101", "SL001"});
    REQUIRE(j["findings"].size() == 2);
    const json& e = j["findings"][1];
    CHECK(e["name"] == "syntax-error");
    CHECK(e["line"] == 10);  // the first of the two errors
    CHECK(e["message"].get<std::string>().find("syntax error") != std::string::npos);
    CHECK(j["findings"][0]["line"] == 6);
  }
  SECTION("unreadable file") {
    if (::geteuid() == 0) {
      WARN("running as root, which can read a mode-000 file; skipping");
      return;
    }
    fs::path p = dir.write("locked.py", kBuggy);
    fs::permissions(p, fs::perms::none);
    json f = single("locked.py");
    CHECK(f["code"] == "SL002");
    CHECK(f["line"] == 1);
    CHECK(f["column"] == 1);
  }
  SECTION("bad files do not stop the others") {
    dir.write("a_bad.py", "\xff\n");
    dir.write("b_train.py", kBuggy);
    Result r = run(dir, "check --format json .");
    CHECK(r.code == 1);
    json j = parseJson(r);
    CHECK(codes(j) == std::vector<std::string>{"SL002", "SL101"});
    CHECK(j["summary"]["files_checked"] == 2);
  }
  SECTION("an empty file is clean") {
    dir.write("empty.py", "");
    Result r = run(dir, "check empty.py");
    CHECK(r.code == 0);
  }
}

TEST_CASE("cli: SL001 messages stay valid UTF-8 when quoting non-ASCII source", "[cli]") {
  // The "unexpected `...`" excerpt is cut at 20 code points, never inside a
  // multi-byte character. (The file names an optimizer and FSDP so that the
  // pre-scan sends it to analysis, where SL001 is reported.)
  TempDir dir;
  dir.write("syn.py", "import torch.optim\nimport torch.distributed.fsdp\nx = 1 \xC3\xA9\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"
                      "\xE2\x82\xAC\xE2\x82\xAC 2\n");
  Result r = run(dir, "check syn.py");
  CHECK(r.code == 1);
  CHECK(r.out.find("SL001") != std::string::npos);
  CHECK(isValidUtf8(r.out));
  Result j = run(dir, "check --format json syn.py");
  json parsed = parseJson(j);
  REQUIRE(parsed["findings"].size() == 1);
  // The JSON writer replaces invalid bytes with U+FFFD instead of failing; none should be needed.
  CHECK(parsed["findings"][0]["message"].get<std::string>().find("\xEF\xBF\xBD") == std::string::npos);
}

// ------------------------------------------------------------------ rules / rule

TEST_CASE("cli: rules and rule", "[cli]") {
  TempDir dir;
  Result list = run(dir, "rules");
  CHECK(list.code == 0);
  for (const char* code : {"SL001", "SL002", "SL101", "SL102", "SL103"}) {
    INFO(code);
    CHECK(list.out.find(std::string(code) + " ") != std::string::npos);
  }
  CHECK(list.out.find("optimizer-before-wrap") != std::string::npos);

  Result byCode = run(dir, "rule SL101");
  Result byName = run(dir, "rule optimizer-before-wrap");
  Result lower = run(dir, "rule sl101");
  CHECK(byCode.code == 0);
  CHECK(byName.code == 0);
  CHECK(lower.code == 0);
  CHECK(byCode.out.rfind("# SL101 optimizer-before-wrap", 0) == 0);
  CHECK(byCode.out == byName.out);
  CHECK(byCode.out == lower.out);
  CHECK(!byCode.out.empty());
  CHECK(byCode.out.back() == '\n');

  for (const char* code : {"SL001", "SL002", "SL102", "SL103"}) {
    Result r = run(dir, std::string("rule ") + code);
    INFO(code);
    CHECK(r.code == 0);
    CHECK(r.out.rfind(std::string("# ") + code + " ", 0) == 0);
  }
}
