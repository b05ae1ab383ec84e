// End-to-end tests of the `shardlint` executable: exit codes, stdout/stderr,
// the text and JSON formats, discovery, rule selection and bad input.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "TestSupport.h"

namespace fs = std::filesystem;
using nlohmann::json;
using shardlint::testing::shellQuote;
using shardlint::testing::readFile;

namespace {

// An FSDP1 script with one SL101 bug: the optimizer (line 6, column 7) is built
// over model.parameters() before FSDP(model) flattens them.
const char* const kBuggy = shardlint::testing::kBuggySL101;

// The same script done right: wrap first, then build the optimizer.
const char* const kClean =
    "import torch\n"
    "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
    "from mymodels import Net\n"
    "\n"
    "model = FSDP(Net())\n"
    "opt = torch.optim.AdamW(model.parameters())\n"
    "opt.step()\n";

// Inputs go under work(); the captured stderr lives in base(), outside the linted tree.
class TempDir : public shardlint::testing::TempDir {
 public:
  TempDir() : shardlint::testing::TempDir("shardlint-cli-") { fs::create_directories(work()); }

  const fs::path& base() const { return path(); }
  fs::path work() const { return path() / "w"; }

  // Writes `content` to work()/rel, creating parent folders.
  fs::path write(const std::string& rel, const std::string& content) const {
    return shardlint::testing::TempDir::write(fs::path("w") / rel, content);
  }
};

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs `shardlint <args>` in `cwd` (stdout is a pipe, so not a TTY). `env` is
// prepended as `NAME=value ...`; NO_COLOR from the caller's environment is dropped.
Result runIn(const fs::path& cwd, const std::string& args, const std::string& env = "",
             const fs::path& errFile = {}) {
  fs::path errPath = errFile.empty() ? cwd.parent_path() / "stderr.txt" : errFile;
  std::string cmd = "cd " + shellQuote(cwd.string()) + " && env -u NO_COLOR " + env + " " +
                    shellQuote(SHARDLINT_BINARY) + " " + args + " 2>" + shellQuote(errPath.string());
  shardlint::testing::ShellResult sh = shardlint::testing::runShell(cmd);
  Result r;
  r.code = sh.code;
  r.out = std::move(sh.out);
  r.err = readFile(errPath);
  return r;
}

Result run(const TempDir& dir, const std::string& args, const std::string& env = "") {
  return runIn(dir.work(), args, env, dir.base() / "stderr.txt");
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

json parseJson(const Result& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  json j;
  REQUIRE_NOTHROW(j = json::parse(r.out));
  return j;
}

std::set<std::string> reportedPaths(const json& j) {
  std::set<std::string> out;
  for (const auto& f : j.at("findings")) out.insert(f.at("path").get<std::string>());
  return out;
}

std::vector<std::string> codes(const json& j) {
  std::vector<std::string> out;
  for (const auto& f : j.at("findings")) out.push_back(f.at("code").get<std::string>());
  return out;
}

bool isValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

// Runs shardlint with stdout on a pseudo-terminal and returns what it wrote there.
// Returns false when no pty can be opened (then the caller skips).
bool runOnTty(const TempDir& dir, const std::string& args, const std::string& env, std::string& out) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0) return false;
  if (::grantpt(master) != 0 || ::unlockpt(master) != 0 || ::ptsname(master) == nullptr) {
    ::close(master);
    return false;
  }
  std::string slave = ::ptsname(master);
  std::string cmd = "cd " + shellQuote(dir.work().string()) + " && env -u NO_COLOR " + env + " " +
                    shellQuote(SHARDLINT_BINARY) + " " + args + " >" + shellQuote(slave) + " 2>/dev/null";
  int status = std::system(cmd.c_str());
  (void)status;
  char buf[4096];
  for (;;) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0 || !(p.revents & POLLIN)) break;
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(master);
  return true;
}

}  // namespace

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
  auto statLine = [](const Result& r, const std::string& key) {
    for (const auto& l : lines(r.err))
      if (l.find(key) != std::string::npos) return l;
    return std::string();
  };
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
      if (e.path().extension() == ".json") std::ofstream(e.path()) << "{\"format\": 1, \"files\": {\"x\": [";
    Result again = run(dir, "check . --stats", kDefaultCache);
    CHECK(again.code == 1);
    CHECK(again.out == cold.out);
    CHECK(statLine(again, "cache ").find("0 of 2 analysed") != std::string::npos);
    CHECK(statLine(run(dir, "check . --stats", kDefaultCache), "cache ").find("2 of 2 analysed") != std::string::npos);
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
