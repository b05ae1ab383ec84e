// `shardlint server`: a scripted LSP client (LspClient.h) drives the built binary over pipes: capabilities,
// push and pull diagnostics, incremental edits in UTF-16 and UTF-8, Markdown and C++ documents, cross-file
// re-checks; and Neovim 0.7 acts as a real client. Code actions: test_lsp_code_actions.cpp; framing,
// protocol errors and lifecycle: test_lsp_robustness.cpp.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cxx/CxxFrontend.h"
#include "Fixtures.h"
#include "LspClient.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint::testing::lsp;

TEST_CASE("lsp: initialize advertises capabilities and negotiates the position encoding", "[lsp]") {
  SECTION("no encodings offered: utf-16") {
    LspProcess s;
    json result = s.initialize();
    const json& caps = result["capabilities"];
    CHECK(caps["positionEncoding"] == "utf-16");
    CHECK(caps["textDocumentSync"]["openClose"] == true);
    CHECK(caps["textDocumentSync"]["change"] == 2);
    CHECK(caps["textDocumentSync"]["save"]["includeText"] == false);
    CHECK(caps["diagnosticProvider"]["interFileDependencies"] == true);
    CHECK(caps["diagnosticProvider"]["workspaceDiagnostics"] == false);
    CHECK(caps["codeActionProvider"]["codeActionKinds"] == json::array({"quickfix", "source.fixAll.shardlint"}));
    CHECK(result["serverInfo"]["name"] == "shardlint");
    CHECK(!result["serverInfo"]["version"].get<std::string>().empty());
    CHECK(s.shutdownAndExit() == 0);
  }
  SECTION("utf-8 offered: utf-8") {
    LspProcess s;
    json result = s.initialize({{"general", {{"positionEncodings", {"utf-16", "utf-8"}}}}});
    CHECK(result["capabilities"]["positionEncoding"] == "utf-8");
    CHECK(s.shutdownAndExit() == 0);
  }
  SECTION("only utf-32 offered: the mandatory utf-16") {
    LspProcess s;
    json result = s.initialize({{"general", {{"positionEncodings", {"utf-32"}}}}});
    CHECK(result["capabilities"]["positionEncoding"] == "utf-16");
    CHECK(s.shutdownAndExit() == 0);
  }
}

TEST_CASE("lsp: pushed diagnostics follow incremental edits in UTF-16", "[lsp]") {
  TempDir dir;
  fs::path file = dir.write("train.py", kBuggy);
  std::string uri = uriOf(file);
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, kBuggy);
  json p = s.published(uri, 1);
  requireSl101At(p["diagnostics"], 7, 28);  // after the emoji: 28 UTF-16 units (27 code points)
  CHECK(p["diagnostics"][0]["range"]["end"] == pos(7, 74));
  CHECK(p["diagnostics"][0]["relatedInformation"][0]["location"]["uri"] == uri);

  // Typing after the emoji: the server must read UTF-16 positions (character 16 is `optimizer`).
  s.change(uri, 2, {LspProcess::edit(rangeOf(7, 16, 7, 16), "a = 0; ")});
  requireSl101At(s.published(uri, 2)["diagnostics"], 7, 35);

  // The fix, as an incremental edit: FSDP1 with use_orig_params=True keeps the parameters.
  s.change(uri, 3, {LspProcess::edit(rangeOf(8, 22, 8, 22), ", use_orig_params=True")});
  CHECK(s.published(uri, 3)["diagnostics"].empty());

  // Undo it: the finding is back.
  s.change(uri, 4, {LspProcess::edit(rangeOf(8, 22, 8, 44), "")});
  requireSl101At(s.published(uri, 4)["diagnostics"], 7, 35);

  // Several changes in one notification, each relative to the text after the previous one:
  // delete "a = 0; " again, then fix the bug by moving the wrap above the optimizer.
  s.change(uri, 5,
           {LspProcess::edit(rangeOf(7, 16, 7, 23), ""),
            LspProcess::edit(rangeOf(8, 0, 9, 0), ""),
            LspProcess::edit(rangeOf(7, 0, 7, 0), "    model = FSDP(model)\n")});
  CHECK(s.published(uri, 5)["diagnostics"].empty());

  // A whole-document change (no range) back to the bug.
  s.change(uri, 6, {{{"text", kBuggy}}});
  requireSl101At(s.published(uri, 6)["diagnostics"], 7, 28);

  // Newlines inserted above move the finding down.
  s.change(uri, 7, {LspProcess::edit(rangeOf(3, 0, 3, 0), "\n\n# two more lines\n")});
  requireSl101At(s.published(uri, 7)["diagnostics"], 10, 28);

  s.notify("textDocument/didSave", {{"textDocument", {{"uri", uri}}}});
  requireSl101At(s.published(uri, 7)["diagnostics"], 10, 28);

  s.notify("textDocument/didClose", {{"textDocument", {{"uri", uri}}}});
  CHECK(s.published(uri)["diagnostics"].empty());
  CHECK(s.shutdownAndExit() == 0);
}

TEST_CASE("lsp: positions in UTF-8 when negotiated", "[lsp]") {
  TempDir dir;
  fs::path file = dir.write("train.py", kBuggy);
  std::string uri = uriOf(file);
  LspProcess s;
  REQUIRE(s.initialize({{"general", {{"positionEncodings", {"utf-8"}}}}}, dir.path())["capabilities"]
                      ["positionEncoding"] == "utf-8");
  s.open(uri, kBuggy);
  json p = s.published(uri, 1);
  requireSl101At(p["diagnostics"], 7, 30);  // bytes: the emoji is 4
  CHECK(p["diagnostics"][0]["range"]["end"] == pos(7, 76));
  s.change(uri, 2, {LspProcess::edit(rangeOf(7, 18, 7, 18), "a = 0; ")});  // byte 18 is `optimizer`
  requireSl101At(s.published(uri, 2)["diagnostics"], 7, 37);
  CHECK(s.shutdownAndExit() == 0);
}

TEST_CASE("lsp: a Markdown document gets the findings `shardlint check` gives its config blocks", "[lsp][markdown]") {
  const fs::path fixtures = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "markdown";
  // The findings as (line, character, code), 0-based; the fixtures are ASCII, so UTF-16 is code points.
  auto found = [](const json& diagnostics) {
    std::vector<std::tuple<int, int, std::string>> out;
    for (const auto& d : diagnostics)
      out.emplace_back(d["range"]["start"]["line"].get<int>(), d["range"]["start"]["character"].get<int>(),
                       d["code"].get<std::string>());
    std::sort(out.begin(), out.end());
    return out;
  };
  auto expected = [](const std::string& text) {
    std::vector<std::tuple<int, int, std::string>> out;
    for (const auto& e : shardlint::testing::parseExpectations(text))
      out.emplace_back(static_cast<int>(e.line) - 1, static_cast<int>(e.column) - 1, e.code);
    std::sort(out.begin(), out.end());
    return out;
  };
  TempDir dir;
  SECTION("open, edit, code actions") {
    std::string trainer = shardlint::testing::readFile(fixtures / "SL309_readme_trainer_configs.md");
    std::string accelerate = shardlint::testing::readFile(fixtures / "SL302_readme_accelerate_fsdp2.md");
    std::string uri = uriOf(dir.write("README.md", trainer));
    LspProcess s;
    s.initialize({}, dir.path());
    s.open(uri, trainer, 1, "markdown");
    json p = s.published(uri, 1);
    REQUIRE(!p["diagnostics"].empty());
    CHECK(found(p["diagnostics"]) == expected(trainer));
    CHECK(p["diagnostics"][0]["source"] == "shardlint");
    // No fixes and no suppression comments are offered in documentation.
    s.request(30, "textDocument/codeAction",
              {{"textDocument", {{"uri", uri}}},
               {"range", p["diagnostics"][0]["range"]},
               {"context", {{"diagnostics", json::array({p["diagnostics"][0]})}}}});
    CHECK(s.response(30)["result"].empty());
    // Edits: another README's findings, then a block fixed in place.
    s.change(uri, 2, {{{"text", accelerate}}});
    CHECK(found(s.published(uri, 2)["diagnostics"]) == expected(accelerate));
    std::string typo = "  fsdp_auto_warp_policy: TRANSFORMER_BASED_WRAP\n";
    size_t at = accelerate.find(typo);
    REQUIRE(at != std::string::npos);
    int line = static_cast<int>(std::count(accelerate.begin(), accelerate.begin() + static_cast<long>(at), '\n'));
    s.change(uri, 3, {LspProcess::edit(rangeOf(line, 12, line, 16), "wrap")});  // auto_warp -> auto_wrap
    auto now = found(s.published(uri, 3)["diagnostics"]);
    auto before = expected(accelerate);
    REQUIRE(now.size() + 1 == before.size());
    CHECK(std::none_of(now.begin(), now.end(), [](const auto& f) { return std::get<2>(f) == "SL301"; }));
    // Prose without a config: nothing.
    s.change(uri, 4, {{{"text", "# Notes\n\nNothing to configure.\n"}}});
    CHECK(s.published(uri, 4)["diagnostics"].empty());
    CHECK(s.shutdownAndExit() == 0);
  }
  SECTION("`markdown = false` in the settings: not linted") {
    dir.write(".shardlint.toml", "markdown = false\n");
    std::string accelerate = shardlint::testing::readFile(fixtures / "SL302_readme_accelerate_fsdp2.md");
    std::string uri = uriOf(dir.write("README.md", accelerate));
    LspProcess s;
    s.initialize({}, dir.path());
    s.open(uri, accelerate, 1, "markdown");
    CHECK(s.published(uri, 1)["diagnostics"].empty());
    CHECK(s.shutdownAndExit() == 0);
  }
}

TEST_CASE("lsp: pull diagnostics when the client supports them", "[lsp]") {
  TempDir dir;
  std::string uri = uriOf(dir.write("train.py", kBuggy));
  LspProcess s;
  s.initialize({{"textDocument", {{"diagnostic", {{"dynamicRegistration", false}}}}}}, dir.path());
  s.open(uri, kBuggy);
  s.request(20, "textDocument/diagnostic", {{"textDocument", {{"uri", uri}}}});
  json r = s.response(20);
  CHECK(r["result"]["kind"] == "full");
  requireSl101At(r["result"]["items"], 7, 28);
  // Pull mode: nothing is pushed for the document.
  for (const auto& m : s.received) CHECK(m.value("method", "") != "textDocument/publishDiagnostics");

  s.change(uri, 2, {LspProcess::edit(rangeOf(8, 22, 8, 22), ", use_orig_params=True")});
  s.request(21, "textDocument/diagnostic", {{"textDocument", {{"uri", uri}}}});
  CHECK(s.response(21)["result"]["items"].empty());
  CHECK(s.shutdownAndExit() == 0);
}

// A script whose optimizer comes from a helper module's build_optimizer (SL101 once that builds one).
const std::string kHelpers =
    "import torch\n"
    "\n"
    "\n"
    "def build_optimizer(model):\n"
    "    return torch.optim.AdamW(model.parameters(), lr=1e-3)\n";
const std::string kTrainWithHelper =
    "import torch\n"
    "import torch.nn as nn\n"
    "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
    "\n"
    "from helpers import build_optimizer\n"
    "\n"
    "\n"
    "def main():\n"
    "    model = nn.Linear(8, 8)\n"
    "    optimizer = build_optimizer(model)\n"
    "    model = FSDP(model)\n"
    "    model(torch.randn(2, 8)).sum().backward()\n"
    "    optimizer.step()\n";

TEST_CASE("lsp: editing a helper module re-checks the open files that import it", "[lsp]") {
  TempDir dir;
  const std::string& helpers = kHelpers;
  const std::string& train = kTrainWithHelper;
  std::string helpersUri = uriOf(dir.write("helpers.py", helpers));
  std::string trainUri = uriOf(dir.write("train.py", train));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(trainUri, train);
  json d = s.published(trainUri, 1)["diagnostics"];
  REQUIRE(d.size() == 1);
  CHECK(d[0]["code"] == "SL101");
  CHECK(d[0]["range"]["start"] == pos(9, 16));
  bool notesHelper = false;
  for (const auto& n : d[0]["relatedInformation"]) notesHelper = notesHelper || n["location"]["uri"] == helpersUri;
  CHECK(notesHelper);
  s.open(helpersUri, helpers);
  CHECK(s.published(helpersUri, 1)["diagnostics"].empty());

  // The helper stops building an optimizer (unsaved): train.py's finding goes away.
  s.change(helpersUri, 2, {LspProcess::edit(rangeOf(4, 11, 4, 57), "None")});
  CHECK(s.published(helpersUri, 2)["diagnostics"].empty());
  CHECK(s.published(trainUri, 1)["diagnostics"].empty());

  // And comes back with the helper's optimizer.
  s.change(helpersUri, 3, {LspProcess::edit(rangeOf(4, 11, 4, 15), "torch.optim.AdamW(model.parameters(), lr=1e-3)")});
  CHECK(s.published(helpersUri, 3)["diagnostics"].empty());
  CHECK(s.published(trainUri, 1)["diagnostics"].size() == 1);
  CHECK(s.shutdownAndExit() == 0);
}

// The index stays warm between lints; a helper changed on disk (not open in the editor) is
// noticed by its modification time, and what depends on it is analysed again.
TEST_CASE("lsp: the warm index notices a helper changed on disk", "[lsp]") {
  TempDir dir;
  const std::string train =
      "import torch\n"
      "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
      "from helpers import build_optimizer\n"
      "model = torch.nn.Linear(8, 8)\n"
      "optimizer = build_optimizer(model)\n"
      "model = FSDP(model)\n"
      "optimizer.step()\n";
  fs::path helpers = dir.write("helpers.py",
                               "import torch\ndef build_optimizer(model):\n"
                               "    return torch.optim.AdamW(model.parameters())\n");
  std::string trainUri = uriOf(dir.write("train.py", train));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(trainUri, train);
  CHECK(s.published(trainUri, 1)["diagnostics"].size() == 1);
  // Edits to the script alone: the helper's analysis is reused, the finding stays.
  s.change(trainUri, 2, {LspProcess::edit(rangeOf(6, 16, 6, 16), " ")});
  CHECK(s.published(trainUri, 2)["diagnostics"].size() == 1);
  // The helper is fixed on disk; the next lint sees it.
  dir.write("helpers.py", "import torch\ndef build_optimizer(model):\n    return None\n");
  fs::last_write_time(helpers, fs::last_write_time(helpers) + std::chrono::seconds(2));
  s.change(trainUri, 3, {LspProcess::edit(rangeOf(6, 16, 6, 17), "")});
  CHECK(s.published(trainUri, 3)["diagnostics"].empty());
  CHECK(s.shutdownAndExit() == 0);
}

TEST_CASE("lsp: the warm index notices a YAML file the script loads changed on disk", "[lsp]") {
  TempDir dir;
  const std::string train =
      "import torch\n"
      "from omegaconf import OmegaConf\n"
      "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
      "cfg = OmegaConf.load(\"train.yaml\")\n"
      "model = torch.nn.Linear(8, 8)\n"
      "optimizer = torch.optim.AdamW(model.parameters())\n"
      "model = FSDP(model, use_orig_params=cfg.fsdp.use_orig_params)\n"
      "optimizer.step()\n";
  fs::path yaml = dir.write("train.yaml", "fsdp:\n  use_orig_params: false\n");
  std::string trainUri = uriOf(dir.write("train.py", train));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(trainUri, train);
  CHECK(s.published(trainUri, 1)["diagnostics"].size() == 1);
  // The file is changed on disk; the next lint of the script sees it.
  dir.write("train.yaml", "fsdp:\n  use_orig_params: true\n");
  fs::last_write_time(yaml, fs::last_write_time(yaml) + std::chrono::seconds(2));
  s.change(trainUri, 2, {LspProcess::edit(rangeOf(7, 16, 7, 16), " ")});
  CHECK(s.published(trainUri, 2)["diagnostics"].empty());
  CHECK(s.shutdownAndExit() == 0);
}

TEST_CASE("lsp: Neovim 0.7 shows the diagnostics", "[lsp][nvim]") {
  if (std::system("command -v nvim >/dev/null 2>&1") != 0)
    FAIL("nvim is not installed: run scripts/setup.sh (it installs Debian's `neovim` package) or "
         "`apt-get install neovim`; this test uses Neovim as a real LSP client");
  TempDir dir;
  fs::path fixture = dir.write("train.py", kBuggy);
  fs::path out = dir.path() / "diagnostics.txt";
  fs::path script = fs::path(SHARDLINT_SOURCE_DIR) / "tests" / "nvim" / "check_diagnostics.lua";
  REQUIRE(fs::exists(script));
  std::string cmd = "cd '" + dir.path().string() + "' && SHARDLINT_BINARY='" SHARDLINT_BINARY "' SHARDLINT_FIXTURE='" +
                    fixture.string() + "' SHARDLINT_OUT='" + out.string() +
                    "' timeout 60 nvim --headless --clean -c 'luafile " + script.string() + "' >'" +
                    (dir.path() / "nvim.log").string() + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  std::stringstream log;
  log << std::ifstream(dir.path() / "nvim.log").rdbuf();
  INFO("nvim exit status " << rc << "\noutput:\n" << text.str() << "\nnvim log:\n" << log.str());
  REQUIRE(WIFEXITED(rc));
  CHECK(WEXITSTATUS(rc) == 0);
  // Neovim converts the UTF-16 character 28 to byte column 30 of the buffer line.
  CHECK(text.str().find("7:30 SL101 optimizer is built from the parameters of `model` before FSDP1") !=
        std::string::npos);
}

// C++ documents go through the C++ frontend; their quick fixes write `//` comments.
TEST_CASE("lsp: C++ diagnostics and their `// noqa` quick fix", "[lsp][cxx]") {
  if (!shardlint::cxx::available()) return;
  TempDir dir;
  dir.write("include/torch/mini.h",
            "#pragma once\n#include <vector>\nnamespace torch { struct Tensor {}; namespace nn { struct Module {\n"
            "  std::vector<Tensor> parameters() const { return {}; }\n"
            "  Tensor register_parameter(const char*, Tensor t) { return t; } }; }\n"
            "namespace optim { struct SGD { SGD(std::vector<Tensor>, double) {} void step() {} }; } }\n");
  dir.write("compile_flags.txt", "-I" + (dir.path() / "include").string() + "\n");
  const std::string text =
      "#include <torch/mini.h>\n// optim register_module\nint main() {\n  torch::nn::Module net;\n"
      "  torch::optim::SGD opt(net.parameters(), 0.1);\n  net.register_parameter(\"w\", torch::Tensor{});\n"
      "  opt.step();\n}\n";
  std::string uri = uriOf(dir.write("train.cpp", text));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, text);
  json diags = s.published(uri, 1)["diagnostics"];
  REQUIRE(diags.size() == 1);
  CHECK(diags[0]["code"] == "SL501");
  CHECK(diags[0]["range"]["start"] == json({{"line", 4}, {"character", 20}}));
  s.request(5, "textDocument/codeAction",
            {{"textDocument", {{"uri", uri}}},
             {"range", diags[0]["range"]},
             {"context", {{"diagnostics", json::array({diags[0]})}}}});
  json actions = s.response(5)["result"];
  REQUIRE(actions.size() == 2);
  CHECK(actions[0]["title"] == "Suppress SL501 on this line (// noqa: SL501)");
  json edit = actions[0]["edit"]["changes"][uri][0];
  CHECK(edit["newText"] == "  // noqa: SL501");
  CHECK(actions[1]["edit"]["changes"][uri][0]["newText"] == "// shardlint: noqa: SL501\n");
  s.change(uri, 2, {{{"range", edit["range"]}, {"text", edit["newText"]}}});
  CHECK(s.published(uri, 2)["diagnostics"].empty());
  CHECK(s.shutdownAndExit() == 0);
}

// After an edit the server publishes a fast pass (the file's own analysis, the project files that import
// it left out) and, when the input is idle, the full pass with those importers. A finding only an
// importer's flow makes in the file is kept in the fast pass's results, and moved by the full pass.
TEST_CASE("lsp: findings an importer makes in the edited file survive the fast pass", "[lsp]") {
  TempDir dir;
  dir.write("pyproject.toml", "[project]\nname = \"p\"\n");
  dir.write("pkg/__init__.py", "from .trainer import Trainer\n");
  const std::string trainer =
      "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\n\n"
      "class Trainer:\n    def __init__(self, model):\n        self.model = model\n"
      "        self.opt = torch.optim.AdamW(self.model.parameters())\n\n"
      "    def setup(self):\n        self.model = FSDP(self.model)\n\n"
      "    def fit(self):\n        self.opt.step()\n";
  dir.write("scripts/train.py",
            "import torch\nfrom pkg import Trainer\n\n\ndef main():\n    t = Trainer(torch.nn.Linear(2, 2))\n"
            "    t.setup()\n    t.fit()\n\n\nmain()\n");
  std::string uri = uriOf(dir.write("pkg/trainer.py", trainer));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, trainer);
  auto withFinding = [&](int version, int line) {
    return s.waitFor(
        [&](const json& m) {
          if (m.value("method", "") != "textDocument/publishDiagnostics" || m["params"]["uri"] != uri ||
              m["params"]["version"] != version)
            return false;
          const json& d = m["params"]["diagnostics"];
          return d.size() == 1 && d[0]["code"] == "SL101" && d[0]["range"]["start"]["line"] == line;
        },
        "the importer's SL101 in version " + std::to_string(version))["params"];
  };
  withFinding(1, 7);  // the full pass, with scripts/train.py as the file's importer
  // A comment appended: the first publication of version 2 (the fast pass) already has the finding.
  s.change(uri, 2, {LspProcess::edit(rangeOf(13, 23, 13, 23), "  # step")});
  json first = s.published(uri, 2);
  REQUIRE(first["diagnostics"].size() == 1);
  CHECK(first["diagnostics"][0]["code"] == "SL101");
  // A line inserted above it: the full pass moves the finding to its new line.
  s.change(uri, 3, {LspProcess::edit(rangeOf(0, 0, 0, 0), "\n")});
  withFinding(3, 8);
  CHECK(s.shutdownAndExit() == 0);
}

namespace {

// The first and last lines of the edited scripts below: imports, and a training loop after the wrap.
const std::string kImports =
    "import torch\nimport torch.nn as nn\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n";
const std::string kLoop =
    "    for _ in range(10):\n        model(torch.randn(2, 8)).sum().backward()\n        optimizer.step()\n";

// A server that traces (SHARDLINT_LSP_TRACE) into a file, with `text` open as train.py and its first diagnostics.
struct TracedScript {
  TempDir dir;
  fs::path trace = dir.path() / "trace.log";
  std::string uri;
  LspProcess s{trace};
  json first;
  explicit TracedScript(const std::string& text) : uri(uriOf(dir.write("train.py", text))) {
    s.initialize({}, dir.path());
    s.open(uri, text);
    first = s.published(uri, 1)["diagnostics"];
  }
  // How many trace lines so far say `what`.
  size_t count(const std::string& what) const {
    std::string log = shardlint::testing::readFile(trace);
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  }
};

}  // namespace

// Typing inside a comment changes nothing the analysis reads, unless the comment is or becomes a suppression
// directive or gains or loses a pre-scan word: the findings are moved over the edit and published without a
// lint (the trace says which), and are what a lint of the new text gives.
TEST_CASE("lsp: an edit inside a comment moves the findings instead of linting again", "[lsp]") {
  // kBuggy with a comment on line 3 and trailing comments on lines 7 (after the SL101 finding, which ends at
  // UTF-16 column 74) and 8 (the wrap).
  const std::string text =
      kImports +
      "# The model, then its optimizer.\n"
      "\n"
      "def main():\n"
      "    model = nn.Linear(8, 8)\n"
      "    tag = \"\xF0\x9F\x9A\x80\"; optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # the optimizer\n"
      "    model = FSDP(model)  # wrapped \xF0\x9F\x9A\x80 here\n"
      + kLoop;
  TracedScript t(text);
  LspProcess& s = t.s;
  const std::string& uri = t.uri;
  const json first = t.first;
  requireSl101At(first, 7, 28);
  auto moved = [&] { return t.count("moved over a comment edit"); };
  auto linted = [&] { return t.count(", fast pass"); };
  size_t lints = linted();

  // Words typed into the comment above, and into the wrap's comment after a non-ASCII character: moved.
  s.change(uri, 2, {LspProcess::edit(rangeOf(3, 1, 3, 1), " Words")});
  CHECK(s.published(uri, 2)["diagnostics"] == first);
  s.change(uri, 3, {LspProcess::edit(rangeOf(8, 38, 8, 38), "x \xC3\xA9 ")});
  CHECK(s.published(uri, 3)["diagnostics"] == first);
  CHECK(moved() == 2);
  CHECK(linted() == lints);

  // The optimizer's comment made a suppression directive, and back: linted both times.
  s.change(uri, 4, {LspProcess::edit(rangeOf(7, 78, 7, 91), "noqa: SL101")});
  CHECK(s.published(uri, 4)["diagnostics"].empty());
  s.change(uri, 5, {LspProcess::edit(rangeOf(7, 78, 7, 89), "the optimizer")});
  CHECK(s.published(uri, 5)["diagnostics"] == first);
  CHECK(linted() == lints + 2);

  // A pre-scan word typed into a comment may change which rules look at the file: linted.
  s.change(uri, 6, {LspProcess::edit(rangeOf(3, 8, 3, 8), "fully_shard ")});
  CHECK(s.published(uri, 6)["diagnostics"] == first);
  CHECK(linted() == lints + 3);

  // A line break typed into a comment moves the lines below: linted, the finding one line down.
  s.change(uri, 7, {LspProcess::edit(rangeOf(3, 1, 3, 1), "\n#")});
  requireSl101At(s.published(uri, 7)["diagnostics"], 8, 28);
  CHECK(linted() == lints + 4);

  // After a lint, a comment edit is moved again; two changes in one notification are linted.
  s.change(uri, 8, {LspProcess::edit(rangeOf(9, 38, 9, 40), "")});
  json last = s.published(uri, 8)["diagnostics"];
  requireSl101At(last, 8, 28);
  CHECK(moved() == 3);
  s.change(uri, 9, {LspProcess::edit(rangeOf(9, 38, 9, 38), "y"), LspProcess::edit(rangeOf(9, 38, 9, 39), "")});
  CHECK(s.published(uri, 9)["diagnostics"] == last);
  CHECK(moved() == 3);
  CHECK(linted() == lints + 5);

  // What a fresh lint of the same text gives (the document closed and opened again).
  s.notify("textDocument/didClose", {{"textDocument", {{"uri", uri}}}});
  CHECK(s.published(uri)["diagnostics"].empty());
  const std::string now =
      kImports +
      "#\n"
      "# Words fully_shard The model, then its optimizer.\n"
      "\n"
      "def main():\n"
      "    model = nn.Linear(8, 8)\n"
      "    tag = \"\xF0\x9F\x9A\x80\"; optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # the optimizer\n"
      "    model = FSDP(model)  # wrapped \xF0\x9F\x9A\x80 \xC3\xA9 here\n"
      + kLoop;
  s.open(uri, now, 10);
  CHECK(s.published(uri, 10)["diagnostics"] == last);
  CHECK(s.shutdownAndExit() == 0);
}

// A docstring is inert like a comment, unless an edit types or deletes a quote or backslash (the string could
// end elsewhere), makes it one word as a whole (a mention of a name), or the string is not a docstring.
TEST_CASE("lsp: an edit inside a docstring moves the findings; quotes and one-word docstrings are linted", "[lsp]") {
  const std::string text =
      kImports +
      "\n"
      "\n"
      "def main():\n"
      "    \"\"\"Train the model.\"\"\"; x = \"not a docstring\"\n"
      "    model = nn.Linear(8, 8)\n"
      "    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
      "    model = FSDP(model)\n"
      + kLoop;
  TracedScript t(text);
  requireSl101At(t.first, 8, 16);
  size_t lints = t.count(", fast pass");
  // Words typed into the docstring: moved.
  t.s.change(t.uri, 2, {LspProcess::edit(rangeOf(6, 13, 6, 13), " tiny")});
  CHECK(t.s.published(t.uri, 2)["diagnostics"] == t.first);
  CHECK(t.count("moved over a comment edit") == 1);
  CHECK(t.count(", fast pass") == lints);
  // The string after it on the same line is no docstring: linted.
  t.s.change(t.uri, 3, {LspProcess::edit(rangeOf(6, 39, 6, 39), "x")});
  CHECK(t.s.published(t.uri, 3)["diagnostics"] == t.first);
  CHECK(t.count(", fast pass") == lints + 1);
  // A quote typed into the docstring, and deleted: linted both times.
  t.s.change(t.uri, 4, {LspProcess::edit(rangeOf(6, 8, 6, 8), "'")});
  CHECK(t.s.published(t.uri, 4)["diagnostics"] == t.first);
  t.s.change(t.uri, 5, {LspProcess::edit(rangeOf(6, 8, 6, 9), "")});
  CHECK(t.s.published(t.uri, 5)["diagnostics"] == t.first);
  CHECK(t.count(", fast pass") == lints + 3);
  // The docstring made one word: linted.
  t.s.change(t.uri, 6, {LspProcess::edit(rangeOf(6, 12, 6, 28), "")});
  CHECK(t.s.published(t.uri, 6)["diagnostics"] == t.first);
  CHECK(t.count(", fast pass") == lints + 4);
  CHECK(t.count("moved over a comment edit") == 1);
  CHECK(t.s.shutdownAndExit() == 0);
}

// The folder listings import resolution reads are kept between edits for a short while; a module created
// on disk is seen as soon as the client reports it.
TEST_CASE("lsp: a helper module created on disk is imported after the client reports it", "[lsp]") {
  TempDir dir;
  const std::string& train = kTrainWithHelper;
  std::string uri = uriOf(dir.write("train.py", train));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, train);
  CHECK(s.published(uri, 1)["diagnostics"].empty());  // no helpers.py: what it builds is unknown
  s.change(uri, 2, {LspProcess::edit(rangeOf(12, 20, 12, 20), "  # step")});
  CHECK(s.published(uri, 2)["diagnostics"].empty());
  dir.write("helpers.py", kHelpers);
  s.notify("workspace/didChangeWatchedFiles", {{"changes", {{{"uri", uriOf(dir.path() / "helpers.py")}, {"type", 1}}}}});
  s.change(uri, 3, {LspProcess::edit(rangeOf(12, 28, 12, 28), "!")});
  json d = s.published(uri, 3)["diagnostics"];
  REQUIRE(d.size() == 1);
  CHECK(d[0]["code"] == "SL101");
  CHECK(s.shutdownAndExit() == 0);
}

// An accelerate training script whose optimizer is prepared with the model (SL402 under an FSDP1 config
// with use_orig_params false), and that config.
namespace {
const std::string kPreparedTrain =
    "import torch\nfrom accelerate import Accelerator\n\n\ndef main(model):\n"
    "    accelerator = Accelerator()\n    opt = torch.optim.AdamW(model.parameters())\n"
    "    model, opt = accelerator.prepare(model, opt)\n    opt.step()\n";
void writeFsdp1Config(TempDir& dir) {
  dir.write("configs/fsdp1.yaml",
            "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 1\n  fsdp_use_orig_params: false\n");
}
}  // namespace

// The server keeps a project's walk (its launch scripts and configs) for a few seconds between lints; a
// file the client reports created (workspace/didChangeWatchedFiles) is seen at the next lint.
TEST_CASE("lsp: a launch script and config created on disk are seen after the client reports them", "[lsp]") {
  TempDir dir;
  dir.write("pyproject.toml", "[project]\nname = \"p\"\n");
  const std::string& train = kPreparedTrain;
  std::string uri = uriOf(dir.write("train.py", train));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, train);
  CHECK(s.published(uri, 1)["diagnostics"].empty());
  writeFsdp1Config(dir);
  dir.write("scripts/run.sh", "accelerate launch --config_file configs/fsdp1.yaml train.py\n");
  s.notify("workspace/didChangeWatchedFiles",
           {{"changes", {{{"uri", uriOf(dir.path() / "configs/fsdp1.yaml")}, {"type", 1}},
                         {{"uri", uriOf(dir.path() / "scripts/run.sh")}, {"type", 1}}}}});
  s.change(uri, 2, {LspProcess::edit(rangeOf(8, 14, 8, 14), "  # step")});
  json d = s.published(uri, 2)["diagnostics"];
  REQUIRE(d.size() == 1);
  CHECK(d[0]["code"] == "SL402");
  CHECK(s.shutdownAndExit() == 0);
}

// A launch script read only for its links is kept by its stamp between edits (PrescanCache::launchTargets):
// one changed on disk is read again, so the link it no longer makes is gone at the next lint.
TEST_CASE("lsp: a launch script changed on disk is read again", "[lsp]") {
  TempDir dir;
  dir.write("pyproject.toml", "[project]\nname = \"p\"\n");
  const std::string& train = kPreparedTrain;
  writeFsdp1Config(dir);
  dir.write("configs/fsdp2.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n");
  dir.write("scripts/run.sh", "accelerate launch --config_file configs/fsdp1.yaml train.py\n");
  std::string uri = uriOf(dir.write("train.py", train));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, train);
  json d = s.published(uri, 1)["diagnostics"];
  REQUIRE(d.size() == 1);
  CHECK(d[0]["code"] == "SL402");
  // An edit: the same link, from the kept launch targets.
  s.change(uri, 2, {LspProcess::edit(rangeOf(8, 14, 8, 14), "  # step")});
  d = s.published(uri, 2)["diagnostics"];
  REQUIRE(d.size() == 1);
  CHECK(d[0]["code"] == "SL402");
  dir.write("scripts/run.sh", "# FSDP2 re-points the optimizer\naccelerate launch --config_file configs/fsdp2.yaml train.py\n");
  s.notify("workspace/didChangeWatchedFiles",
           {{"changes", {{{"uri", uriOf(dir.path() / "scripts/run.sh")}, {"type", 2}}}}});
  s.change(uri, 3, {LspProcess::edit(rangeOf(8, 14, 8, 14), " again")});
  CHECK(s.published(uri, 3)["diagnostics"].empty());
  CHECK(s.shutdownAndExit() == 0);
}
