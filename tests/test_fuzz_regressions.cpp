// The fuzz targets' entries (tests/fuzz/FuzzTargets.h) in the normal test suite: every input a
// fuzz run found a bug with (tests/fuzz/regressions/<target>/) and a handful of seeds go through
// the same functions the libFuzzer binaries call. A regression shows as a crash of this binary
// (or a sanitizer report in a sanitizer build).
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "TestSupport.h"
#include "fuzz/FuzzTargets.h"

namespace fs = std::filesystem;
using shardlint::fuzz::Target;

namespace {

const fs::path kSource = SHARDLINT_SOURCE_DIR;

int run(const Target& t, const std::string& input) {
  return t.entry(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

const Target& target(const std::string& name) {
  for (const auto& t : shardlint::fuzz::targets())
    if (t.name == name) return t;
  FAIL("no fuzz target " << name);
  throw;  // not reached
}

std::vector<fs::path> filesIn(const fs::path& dir, const std::vector<std::string>& exts, size_t most) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() &&
        (exts.empty() || std::find(exts.begin(), exts.end(), e.path().extension().string()) != exts.end()))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  if (out.size() > most) out.resize(most);
  return out;
}

std::string frame(const std::string& body) { return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body; }

}  // namespace

TEST_CASE("every saved fuzz regression input runs cleanly through its target", "[fuzz]") {
  size_t count = 0;
  for (const auto& t : shardlint::fuzz::targets()) {
    for (const auto& p : filesIn(kSource / "tests/fuzz/regressions" / t.name, {}, 100000)) {
      if (p.filename() == "README.md") continue;
      INFO(t.name << ": " << p.string());
      CHECK(run(t, shardlint::testing::readFile(p)) == 0);
      ++count;
    }
  }
  SUCCEED(count << " regression inputs");
}

TEST_CASE("degenerate inputs run cleanly through every fuzz target", "[fuzz]") {
  for (const auto& t : shardlint::fuzz::targets())
    for (const std::string& input : {std::string(), std::string(1, '\0'), std::string("\xff\xfe"), std::string("\n\n"),
                                     std::string("### \n### ..\n### a/b/c/d/e.py\nimport a\n")}) {
      INFO(t.name);
      CHECK(run(t, input) == 0);
    }
}

TEST_CASE("a handful of seeds run cleanly through the fuzz targets", "[fuzz]") {
  for (const auto& p : filesIn(kSource / "fixtures/python", {".py"}, 6)) CHECK(run(target("python"), shardlint::testing::readFile(p)) == 0);
  for (const auto& p : filesIn(kSource / "fixtures/config", {".yaml", ".yml"}, 4)) CHECK(run(target("yaml"), shardlint::testing::readFile(p)) == 0);
  for (const auto& p : filesIn(kSource / "fixtures/config", {".json"}, 4)) CHECK(run(target("json"), shardlint::testing::readFile(p)) == 0);
  CHECK(run(target("settings"), shardlint::testing::readFile(kSource / "fixtures/projects/src_layout_reexport/pyproject.toml")) == 0);
  CHECK(run(target("settings"), "select = [\"SL1\"]\nignore = [\"SL102\"]\nexclude = [\"**/gen/*.py\"]\n"
                                "optimizers = [\"helpers.make_optimizer\"]\nfsdp-version = 2\n"
                                "[per-file-ignores]\n\"src/**\" = [\"SL101\"]\n[severity]\nSL301 = \"info\"\n") == 0);
  CHECK(run(target("settings"), "[tool.shardlint]\nselect = [\"NOPE\"]\n") == 0);
  // An LSP session: the server answers, lints on the pull request and ends at `exit`, without
  // waiting for more input.
  std::string session =
      frame(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"rootUri":"file:///nonexistent/shardlint-fuzz","capabilities":{"textDocument":{"diagnostic":{}}}}})") +
      frame(R"({"jsonrpc":"2.0","method":"initialized","params":{}})") +
      frame(R"({"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///nonexistent/shardlint-fuzz/train.py","languageId":"python","version":1,"text":"import torch\nopt = torch.optim.AdamW(model.parameters())\nmodel = FSDP(model)\n"}}})") +
      frame(R"({"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":{"uri":"file:///nonexistent/shardlint-fuzz/train.py","version":2},"contentChanges":[{"range":{"start":{"line":0,"character":0},"end":{"line":0,"character":0}},"text":"# x\n"}]}})") +
      frame(R"({"jsonrpc":"2.0","id":2,"method":"textDocument/diagnostic","params":{"textDocument":{"uri":"file:///nonexistent/shardlint-fuzz/train.py"}}})") +
      frame(R"({"jsonrpc":"2.0","id":3,"method":"shutdown"})") + frame(R"({"jsonrpc":"2.0","method":"exit"})");
  CHECK(run(target("lsp"), session) == 0);
  CHECK(run(target("lsp"), session.substr(0, session.size() / 2)) == 0);  // the input ends mid-message
  CHECK(run(target("project"), "### train.py\nimport torch\nfrom helpers import build\nopt = build(model)\nmodel = FSDP(model)\n"
                               "### helpers.py\nimport torch\ndef build(m):\n    return torch.optim.AdamW(m.parameters())\n"
                               "### fsdp.yaml\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n") == 0);
}

TEST_CASE("the project fuzz target splits its input into named files", "[fuzz]") {
  auto files = shardlint::fuzz::splitProject("a = 1\n### pkg/../x.py\nb\n### /etc/passwd\n### \nc\n### pkg/x.py\nd\n");
  REQUIRE(files.size() == 4);
  CHECK(files[0] == std::pair<std::string, std::string>{"train.py", "a = 1\n"});
  CHECK(files[1] == std::pair<std::string, std::string>{"pkg/x.py", "d\n"});  // the later text wins
  CHECK(files[2].first == "etc/passwd");  // always relative
  CHECK(files[3] == std::pair<std::string, std::string>{"m3.py", "c\n"});
  CHECK(shardlint::fuzz::splitProject("").size() == 1);
  CHECK(shardlint::fuzz::splitProject("### a/b/c/d/e.py\nx\n")[0].first == "c/d/e.py");
}
