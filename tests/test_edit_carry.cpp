// A language server's edits: the summaries of the functions an edit left as they were are carried over to
// the next lint (driver/ModuleTableCarry.cpp). Each edit's findings must be exactly those of a fresh
// analysis of the new text, and the summaries must be carried where the edit allows it.
#include <algorithm>
#include <cstdint>
#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "Registry.h"
#include "TestSupport.h"
#include "driver/Linter.h"
#include "driver/ModuleTable.h"
#include "semantic/Model.h"
#include "semantic/Summaries.h"

namespace {

const char* const kScript = R"(import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def build_optimizer(model, lr):
    # the optimizer over the model's parameters
    params = model.parameters()
    return torch.optim.AdamW(params, lr=lr)


def wrap(model):
    return FSDP(model)


def helper(x):
    y = x + 1
    return y


class Trainer:
    def __init__(self, model):
        self.model = model

    def fit(self, steps):
        opt = build_optimizer(self.model, 0.1)
        self.model = wrap(self.model)
        for _ in range(steps):
            opt.step()


def main():
    model = torch.nn.Linear(2, 2)
    opt = build_optimizer(model, 0.1)
    model = wrap(model)
    for step in range(3):
        loss = model(torch.randn(2)).sum()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::vector<std::string> rendered(const std::vector<shardlint::Diagnostic>& found) {
  std::vector<std::string> out;
  for (const auto& d : found)
    out.push_back(d.code + " " + std::to_string(d.location.start.line + 1) + ":" +
                  std::to_string(d.location.start.codepointColumn + 1) + "-" + std::to_string(d.location.end.line + 1) +
                  ":" + std::to_string(d.location.end.codepointColumn + 1) + " " + d.message);
  std::sort(out.begin(), out.end());
  return out;
}

struct Editor {
  shardlint::LintOptions options;
  shardlint::ModuleTable table;
  std::string path;
  explicit Editor(std::string p)
      : table(shardlint::Linter(shardlint::rules::catalog(), shardlint::LintOptions()).tableConfig(false)),
        path(std::move(p)) {}
  std::vector<std::string> lint(const std::string& text, size_t* carried, size_t* arms = nullptr,
                                size_t* direct = nullptr) {
    options.overlays[shardlint::absolutePathKey(path)] = text;
    shardlint::Linter linter(shardlint::rules::catalog(), options);
    shardlint::LintStats stats;
    auto found = linter.lintFiles({path}, &stats, &table);
    if (carried) *carried = stats.summariesCarried;
    if (arms) *arms = stats.armsCarried;
    if (direct) *direct = stats.directRuns;
    return rendered(found);
  }
};

std::vector<std::string> fresh(const std::string& path, const std::string& text) {
  return Editor(path).lint(text, nullptr);
}

// One edit of a test of functions run directly: `from` replaced by `to`, `direct` functions run directly after it.
struct DirectStep {
  const char* what;
  std::string from, to;
  size_t direct;
};

// Applies the steps to `text` in turn: after each, the findings are a fresh analysis's and as many functions as
// the step says ran directly.
void checkDirectSteps(Editor& editor, const std::string& path, std::string text, const std::vector<DirectStep>& steps) {
  size_t carried = 0, direct = 0;
  for (const DirectStep& step : steps) {
    INFO(step.what);
    text = replaced(text, step.from, step.to);
    std::vector<std::string> got = editor.lint(text, &carried, nullptr, &direct);
    CHECK(got == fresh(path, text));
    CHECK(direct == step.direct);
  }
}

// Writes `script` as `name` in a fresh folder, lints it once (nothing known yet: nothing runs directly; `sl101`:
// its one finding is SL101, else the findings are a fresh analysis's), then applies the steps (checkDirectSteps).
void checkDirectScript(const char* folder, const char* name, const std::string& script, bool sl101,
                       const std::vector<DirectStep>& steps) {
  shardlint::testing::TempDir dir(folder);
  std::string path = dir.write(name, script).string();
  Editor editor(path);
  size_t carried = 0, direct = 0;
  std::vector<std::string> first = editor.lint(script, &carried, nullptr, &direct);
  if (sl101) {
    REQUIRE(first.size() == 1);  // SL101: the optimizer is built before the wrap
    CHECK(first[0].rfind("SL101 ", 0) == 0);
  } else {
    CHECK(first == fresh(path, script));
  }
  CHECK(direct == 0);
  checkDirectSteps(editor, path, script, steps);
}

}  // namespace

TEST_CASE("editor: summaries carried over an edit give the findings a fresh analysis gives", "[lsp][carry]") {
  shardlint::testing::TempDir dir("shardlint-carry-");
  std::string path = dir.write("train.py", kScript).string();
  Editor editor(path);
  size_t carried = 0;
  std::vector<std::string> first = editor.lint(kScript, &carried);
  REQUIRE_FALSE(first.empty());  // the script's optimizer is built before the wrap
  CHECK(carried == 0);
  CHECK(first == fresh(path, kScript));

  // Each step edits the text the step before left.
  struct Step {
    const char* what;
    std::string from, to;
    bool carries;
  };
  const std::vector<Step> steps = {
      {"the same text again", "", "", true},
      {"a comment", "# the optimizer over", "# the AdamW optimizer over", true},
      {"an unrelated function's body, longer (every later place moves)", "y = x + 1", "y = x + 100000", true},
      {"a body the findings depend on", "return FSDP(model)", "return model", true},
      {"that body back", "return model", "return FSDP(model)", true},
      {"a method's body", "self.model = model\n", "self.model = model\n        self.steps = 0\n", true},
      {"a line above every function (module level)", "import torch\n", "import torch\nimport os\n", false},
      {"a syntax error", "y = x + 100000", "y = (x + ", false},
      {"the error mended", "y = (x + ", "y = x + 2", false},
      {"a function's parameters", "def helper(x):", "def helper(x, z=0):", true},
      {"a body the findings depend on, shorter", "opt = build_optimizer(model, 0.1)\n    model = wrap(model)",
       "model = wrap(model)\n    opt = build_optimizer(model, 0.1)", true},
  };
  std::string text = kScript;
  for (const Step& step : steps) {
    INFO(step.what);
    if (!step.from.empty()) text = replaced(text, step.from, step.to);
    std::vector<std::string> got = editor.lint(text, &carried);
    CHECK(got == fresh(path, text));
    if (step.carries) CHECK(carried > 0);
    else CHECK(carried == 0);
  }
}

TEST_CASE("editor: a script's main whose summary depends on the module runs directly after an edit inside it",
          "[lsp][carry]") {
  // `main` calls the module's `model`, so its summary depends on the caller and the module body's call
  // interprets its body anyway: after an edit, that call runs it without computing the summary first
  // (FileAnalysis::run). The findings stay a fresh analysis's.
  const std::string script = R"(import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

model = torch.nn.Linear(2, 2)


def helper(x):
    return x + 1


def main():
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    wrapped = FSDP(model)
    for step in range(3):
        model(torch.randn(2)).sum().backward()
        opt.step()
    return wrapped


if __name__ == "__main__":
    main()
)";
  // First, nothing known yet: main's summary is computed.
  const std::vector<DirectStep> steps = {
      {"a line typed in main", "    for step in range(3):", "    steps = 3\n    for step in range(steps):", 1},
      {"main's wrap moved before the optimizer (the finding goes)",
       "    opt = torch.optim.AdamW(model.parameters(), lr=0.1)\n    wrapped = FSDP(model)",
       "    wrapped = FSDP(model)\n    opt = torch.optim.AdamW(wrapped.parameters(), lr=0.1)", 1},
      {"and back", "    wrapped = FSDP(model)\n    opt = torch.optim.AdamW(wrapped.parameters(), lr=0.1)",
       "    opt = torch.optim.AdamW(model.parameters(), lr=0.1)\n    wrapped = FSDP(model)", 1},
      // main unchanged: its summary is computed (and tells it still depends on the module), then carried.
      {"another function's body", "return x + 1", "return x + 2", 0},
      {"main no longer calls the module's model", "        model(torch", "        wrapped(torch", 1},
      {"another function's body again", "return x + 2", "return x + 3", 0},
      {"main again: its summary said it no longer depends on the module", "    steps = 3\n", "    steps = 4\n", 0},
  };
  checkDirectScript("shardlint-direct-", "train.py", script, true, steps);
}

TEST_CASE("editor: a constructor that ran in its own arm runs again after an edit it reaches, without its summary",
          "[lsp][carry]") {
  // Nothing here instantiates Trainer: its `__init__` runs in its own arm, which the summary of `__init__`
  // decided (it has domain facts). An edit of `_build`, which `__init__` calls on self, leaves that summary
  // behind; the arm runs again without computing it first (FileAnalysis::run). The findings stay a fresh
  // analysis's.
  const std::string script = R"(import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def helper(x):
    return x + 1


class Trainer:
    def __init__(self, model):
        self.opt = self._build(model)
        self.model = FSDP(model)

    def _build(self, model):
        lr = 0.1
        return torch.optim.AdamW(model.parameters(), lr=lr)

    def fit(self, steps):
        for _ in range(steps):
            self.opt.step()
)";
  const std::vector<DirectStep> steps = {
      {"a line typed in _build", "        lr = 0.1\n", "        lr = 0.1\n        lr = lr * 2\n", 1},
      {"another function's body (the arm is taken as it was)", "return x + 1", "return x + 2", 1},
      {"the wrap moved before the optimizer (the finding goes)",
       "        self.opt = self._build(model)\n        self.model = FSDP(model)",
       "        self.model = FSDP(model)\n        self.opt = self._build(self.model)", 1},
      {"_build builds another optimizer", "torch.optim.AdamW(model", "torch.optim.SGD(model", 1},
      {"the wrap moved back after it (the finding comes back)",
       "        self.model = FSDP(model)\n        self.opt = self._build(self.model)",
       "        self.opt = self._build(model)\n        self.model = FSDP(model)", 1},
  };
  checkDirectScript("shardlint-construct-", "trainer.py", script, true, steps);
}

TEST_CASE("editor: a helper whose summary depends on its caller runs directly from an arm after an edit it reaches",
          "[lsp][carry]") {
  // `prepare` calls its parameter `build`, so its summary depends on the caller, and the arm of `entry` (a
  // function nothing here calls) interprets its body anyway. After an edit of `prepare` or of a function its
  // summary calls (`params_of`), which its summary could not be carried over, that call runs it without
  // computing the summary first; after an edit elsewhere the summary is computed (and carried from then on).
  const std::string script = R"(import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def params_of(model):
    return model.parameters()


def make_opt(params):
    return torch.optim.AdamW(params, lr=0.1)


def unrelated(x):
    return x + 1


def prepare(model, build):
    opt = build(params_of(model))
    wrapped = FSDP(model)
    return opt, wrapped


def entry(model):
    return prepare(model, make_opt)
)";
  // First, nothing known yet: prepare's summary is computed.
  const std::vector<DirectStep> steps = {
      {"a line typed in prepare", "    wrapped = FSDP(model)\n", "    wrapped = FSDP(model)\n    steps = 3\n", 1},
      {"the function prepare's summary calls", "    return model.parameters()",
       "    params = model.parameters()\n    return params", 1},
      {"prepare's wrap moved before the optimizer", "    opt = build(params_of(model))\n    wrapped = FSDP(model)",
       "    wrapped = FSDP(model)\n    opt = build(params_of(wrapped))", 1},
      {"and back", "    wrapped = FSDP(model)\n    opt = build(params_of(wrapped))",
       "    opt = build(params_of(model))\n    wrapped = FSDP(model)", 1},
      // Neither prepare nor what it calls changed: its summary is computed again, and tells it still depends on
      // the caller.
      {"another function's body", "return x + 1", "return x + 2", 0},
      {"the function prepare's summary calls again", "    params = model.parameters()",
       "    params = list(model.parameters())", 1},
      {"prepare no longer calls its parameter", "    opt = build(params_of(model))",
       "    opt = make_opt(params_of(model))", 1},
      {"another function's body again", "return x + 2", "return x + 3", 0},
      {"prepare again: its summary said it no longer depends on the caller", "    steps = 3\n", "    steps = 4\n", 0},
  };
  checkDirectScript("shardlint-direct-arm-", "train.py", script, false, steps);
}

TEST_CASE("editor: a disposal keeps each analysis until it is released; the findings do not change", "[lsp][carry]") {
  // The language server frees the fast pass's analysis after it has published the diagnostics
  // (LintOptions::disposal); the next edit's lint and its carry run with the last one still kept or freed.
  shardlint::testing::TempDir dir("shardlint-disposal-");
  std::string path = dir.write("train.py", kScript).string();
  Editor editor(path);
  auto disposal = std::make_shared<shardlint::Disposal>();
  editor.options.disposal = disposal;
  size_t carried = 0;
  std::vector<std::string> first = editor.lint(kScript, &carried);
  CHECK(first == fresh(path, kScript));
  CHECK(disposal->size() == 1);  // the one linted file's analysis
  std::string text = replaced(kScript, "y = x + 1", "y = x + 100000");
  CHECK(editor.lint(text, &carried) == fresh(path, text));  // the first analysis still kept
  CHECK(carried > 0);
  // This analysis, and the first one, which it took its arms from (the table held it till then).
  CHECK(disposal->size() == 3);
  disposal->release();
  CHECK(disposal->size() == 0);
  text = replaced(text, "return FSDP(model)", "return model");
  CHECK(editor.lint(text, &carried) == fresh(path, text));
  CHECK(carried > 0);
  // This analysis, the one before, and the kept summaries the edit of `wrap` left unable to move (freed
  // after the diagnostics are out, not while the lint runs).
  CHECK(disposal->size() == 3);
}

TEST_CASE("module table: an old walk, listings and index are kept while no folder they looked into changed",
          "[unit][index]") {
  // The language server's walk of a project and its import lookups are checked after a while by the stamps of
  // the folders they listed or probed, not made again: kept while those are unchanged, dropped when a file
  // was created in one of them.
  shardlint::testing::TempDir dir("shardlint-walk-");
  std::string train = dir.write("train.py", "import helpers\n").string();
  dir.write("pkg/__init__.py", "");
  dir.write("pkg/mod.py", "x = 1\n");
  dir.write(".git/HEAD", "");  // the repository's top: the index looks no further up (/tmp changes all the time)
  std::string root = dir.path().string();
  // Folders changed a while ago (a folder changed within the last second counts as changing).
  auto settle = [&] {
    auto past = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(10);
    std::filesystem::last_write_time(dir.path(), past);
    std::filesystem::last_write_time(dir.path() / "pkg", past);
  };
  settle();
  shardlint::ModuleTable table(shardlint::ModuleTable::Config{});
  shardlint::DiscoveryResult found = shardlint::discover({root}, 1000);
  CHECK(found.folders.size() == 2);  // the root and pkg/
  shardlint::ModuleTable::ProjectWalk walk;
  walk.files.python = found.files;
  walk.folders = found.folders;
  walk.takenNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
  table.storeWalk(root, walk);
  auto index = table.projectIndex({}, {train});
  CHECK(!index->findModuleFile("helpers", train));  // lists the root folder
  auto share = table.listings();
  table.expireWalks();
  REQUIRE(table.walk(root));  // nothing changed: kept
  CHECK(table.walk(root)->files.python == found.files);
  CHECK(table.listings() == share);
  CHECK(table.projectIndex({}, {train}) == index);
  // A module created in a folder the walk and the lookup listed: both are made again.
  dir.write("helpers.py", "def f():\n    pass\n");
  table.expireWalks();
  CHECK(!table.walk(root));
  CHECK(table.listings() != share);
  auto fresh = table.projectIndex({}, {train});
  CHECK(fresh != index);
  CHECK(fresh->findModuleFile("helpers", train));
  // In a folder only the walk listed (pkg/): the walk is made again.
  settle();
  shardlint::ModuleTable::ProjectWalk again;
  again.folders = shardlint::discover({root}, 1000).folders;
  again.takenNs = walk.takenNs + 1;
  table.storeWalk(root, again);
  table.expireWalks();
  CHECK(table.walk(root));
  dir.write("pkg/other.py", "");
  table.expireWalks();
  CHECK(!table.walk(root));
  // A folder changed just before the walk: not trusted by its stamp.
  shardlint::ModuleTable::ProjectWalk recent;
  recent.folders = shardlint::discover({root}, 1000).folders;
  recent.takenNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  table.storeWalk(root, recent);
  table.expireWalks();
  CHECK(!table.walk(root));
}

TEST_CASE("module table: a file read from text handed in is dropped by refresh only when its file changes", "[unit][index]") {
  // The language server's pre-scan reads an importer and hands its text to the table; the entry records the
  // file's time when the file still holds that text, so the next refresh keeps it.
  shardlint::testing::TempDir dir("shardlint-handed-");
  const std::string text = "def f(x):\n    return x\n";
  std::string path = dir.write("helper.py", text).string(), other = dir.write("other.py", text).string();
  shardlint::ModuleTable::Config config;
  config.retireRoots = false;
  shardlint::ModuleTable table(config);
  shardlint::LintOptions options;
  auto* same = table.loadRoot(path, nullptr, options, text);
  REQUIRE(same->parsed);
  CHECK(table.refresh(options) == 0);
  CHECK(table.current(path) == same);
  // Text that is not the file's (it changed after the pre-scan read it): dropped at the next refresh.
  auto* stale = table.loadRoot(other, nullptr, options, std::string("def g():\n    pass\n"));
  REQUIRE(stale->parsed);
  CHECK(table.refresh(options) == 1);
  CHECK(table.current(other) == nullptr);
  CHECK(table.current(path) == same);
}

TEST_CASE("editor: edits of the fixture scripts give a fresh analysis's findings, summaries carried or not", "[lsp][carry]") {
  // Every second Python fixture (by path) that defines functions, copied to a temporary folder, edited the
  // way typing does: a character typed after an identifier in an indented line and deleted, that line
  // duplicated, a line removed, a comment typed at the end of a line. After each edit the carried lint
  // must say what a fresh one says.
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "python"))
    if (e.is_regular_file() && e.path().extension() == ".py") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  shardlint::testing::TempDir dir("shardlint-carry-fixtures-");
  std::mt19937 rng(34);
  size_t carriedAll = 0, armsAll = 0, states = 0;
  for (size_t k = 0; k < files.size(); k += 2) {
    std::string text = shardlint::testing::readFile(files[k]);
    if (text.find("\ndef ") == std::string::npos && text.find("    def ") == std::string::npos) continue;
    std::vector<size_t> starts{0};  // of indented, non-blank lines
    std::vector<size_t> lines{0};
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') lines.push_back(i + 1);
    for (size_t s : lines)
      if (s + 4 < text.size() && text.compare(s, 4, "    ") == 0 && text[s + 4] != ' ' && text[s + 4] != '\n')
        starts.push_back(s);
    if (starts.size() < 2) continue;
    size_t at = starts[1 + rng() % (starts.size() - 1)];
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) continue;
    std::string line = text.substr(at, eol - at + 1);
    size_t ident = line.find_first_of(" (=.:,", 4);
    if (ident == std::string::npos) ident = line.size() - 1;
    std::string path = dir.write(files[k].filename().string(), text).string();
    INFO(files[k].string());
    Editor editor(path);
    editor.lint(text, nullptr);
    std::vector<std::string> edits = {
        text.substr(0, at + ident) + "_" + text.substr(at + ident),  // typed
        text,                                                        // deleted
        text.substr(0, eol + 1) + line + text.substr(eol + 1),       // the line duplicated
        text,
        text.substr(0, at) + text.substr(eol + 1),                               // the line removed
        text.substr(0, eol) + "  # typed" + text.substr(eol),                    // a comment typed
        text.substr(0, eol) + "  # typed more" + text.substr(eol),
    };
    for (const std::string& edited : edits) {
      size_t carried = 0, arms = 0;
      std::vector<std::string> got = editor.lint(edited, &carried, &arms);
      CHECK(got == fresh(path, edited));
      carriedAll += carried;
      armsAll += arms;
      ++states;
    }
  }
  CHECK(states > 100);
  CHECK(carriedAll > 0);
  CHECK(armsAll > 0);
  WARN(states << " edited states, " << carriedAll << " summaries and " << armsAll << " arms carried over");
}

namespace {

// Functions nothing calls (test methods, a trainer class nothing instantiates here): each analysed in its own
// arm after the module body; the findings come from those arms.
const char* const kArms = R"(import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

LR = 0.1


def make_model():
    return torch.nn.Linear(2, 2)


class TestTraining:
    def test_optimizer_first(self):
        model = make_model()
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        model = FSDP(model)
        opt.step()

    def test_wrap_first(self):
        model = FSDP(make_model())
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        opt.step()

    def test_helper_only(self):
        x = torch.randn(2)
        # a comment inside a method
        return x * 2


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.AdamW(self.model.parameters())

    def fit(self):
        self.model = FSDP(self.model)
        self.opt.step()
)";

}  // namespace

TEST_CASE("editor: arms an edit left as they were are taken from the analysis before it", "[lsp][carry]") {
  // FileAnalysis records each exclusive arm; the next analysis of the edited file takes those whose functions,
  // and the functions they use, did not change, when the edit left the module's own statements alone.
  shardlint::testing::TempDir dir("shardlint-arms-");
  std::string path = dir.write("test_train.py", kArms).string();
  Editor editor(path);
  size_t carried = 0, arms = 0;
  std::vector<std::string> first = editor.lint(kArms, &carried, &arms);
  REQUIRE_FALSE(first.empty());  // test_optimizer_first and the trainer build the optimizer before the wrap
  CHECK(arms == 0);
  CHECK(first == fresh(path, kArms));
  struct Step {
    const char* what;
    std::string from, to;
    bool carries;  // some arm is taken
  };
  const std::vector<Step> steps = {
      {"the same text again", "", "", true},
      {"a comment inside a method", "# a comment inside", "# the comment inside", true},
      {"a body no finding depends on", "return x * 2", "return x * 3", true},
      {"a body a finding depends on", "model = FSDP(model)\n        opt.step()", "opt.step()", true},
      {"that body back", "opt.step()\n\n    def test_wrap_first",
       "model = FSDP(model)\n        opt.step()\n\n    def test_wrap_first", true},
      {"the order in a body changed",
       "model = FSDP(make_model())\n        opt = torch.optim.SGD(model.parameters(), lr=LR)",
       "model = make_model()\n        opt = torch.optim.SGD(model.parameters(), lr=LR)\n"
       "        model = FSDP(model)",
       true},
      {"a function every test uses", "return torch.nn.Linear(2, 2)", "return torch.nn.Linear(4, 4)", true},
      {"a module-level statement", "LR = 0.1", "LR = 0.2", false},
      {"a character typed into a name and deleted (1)", "x = torch.randn(2)", "x_ = torch.randn(2)", true},
      {"a character typed into a name and deleted (2)", "x_ = torch.randn(2)", "x = torch.randn(2)", true},
      {"the constructor's body", "self.model = model\n", "self.model = model\n        self.steps = 0\n", true},
      {"a syntax error", "return x * 3", "return (x * ", false},
      {"the error mended", "return (x * ", "return x * 4", false},
  };
  std::string text = kArms;
  for (const Step& step : steps) {
    INFO(step.what);
    if (!step.from.empty()) text = replaced(text, step.from, step.to);
    std::vector<std::string> got = editor.lint(text, &carried, &arms);
    CHECK(got == fresh(path, text));
    if (step.carries) CHECK(arms > 0);
    else CHECK(arms == 0);
  }
}

TEST_CASE("editor: an arm that changes one of the module body's objects runs again, and so do the arms after it",
          "[lsp][carry]") {
  // `test_keep` stores the module's MODEL on another object, which gives MODEL an owner: the module body's objects
  // are no longer as the body left them, so that arm and every arm after it run again after an edit (FileAnalysis
  // compares the body's objects, copied when the first arm runs, after each arm). Without that store, the arms
  // the edit left as they were are taken.
  const std::string script = R"(import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

MODEL = torch.nn.Linear(2, 2)


class Holder:
    pass


def test_keep():
    h = Holder()
    h.model = MODEL
    return h


def test_other():
    opt = torch.optim.SGD(MODEL.parameters(), lr=0.1)
    wrapped = FSDP(MODEL)
    return opt, wrapped
)";
  for (bool stores : {true, false}) {
    INFO((stores ? "test_keep stores MODEL" : "test_keep does not store MODEL"));
    std::string text = stores ? script : replaced(script, "    h.model = MODEL\n", "");
    shardlint::testing::TempDir dir("shardlint-body-changed-");
    std::string path = dir.write("test_train.py", text).string();
    Editor editor(path);
    size_t carried = 0, arms = 0;
    CHECK(editor.lint(text, &carried, &arms) == fresh(path, text));
    const std::pair<const char*, const char*> edits[] = {{"lr=0.1", "lr=0.2"}, {"lr=0.2", "lr=0.1"}};
    for (const auto& [from, to] : edits) {
      text = replaced(text, from, to);
      CHECK(editor.lint(text, &carried, &arms) == fresh(path, text));
      if (stores) CHECK(arms == 0);
      else CHECK(arms > 0);
    }
  }
}

TEST_CASE("editor: arms that use a module importing the edited file (an import cycle) are taken after an edit",
          "[lsp][carry]") {
  // helpers.py imports train.py inside a function: an edit of train.py drops helpers.py's summaries (they may
  // come through train.py's functions) but keeps its definitions (ModuleTable::refresh), so the arms that call
  // build_optimizer are taken after an edit of a function they do not reach, and run again after an edit of
  // make_params, which build_optimizer calls.
  shardlint::testing::TempDir dir("shardlint-cycle-");
  dir.write("helpers.py", R"(import torch


def build_optimizer(model):
    from train import make_params

    return torch.optim.AdamW(make_params(model), lr=0.1)
)");
  std::string text = R"(import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from helpers import build_optimizer


def make_params(model):
    return model.parameters()


def scale(x):
    return x * 2


def test_optimizer_first():
    model = torch.nn.Linear(2, 2)
    opt = build_optimizer(model)
    model = FSDP(model)
    opt.step()


def test_optimizer_first_again():
    model = torch.nn.Linear(4, 4)
    opt = build_optimizer(model)
    model = FSDP(model)
    opt.step()
)";
  std::string path = dir.write("train.py", text).string();
  Editor editor(path);
  size_t carried = 0, arms = 0;
  std::vector<std::string> first = editor.lint(text, &carried, &arms);
  CHECK(first == fresh(path, text));
  REQUIRE(first.size() == 2);  // each test builds the optimizer (through helpers.py) before the wrap
  struct Step {
    const char* what;
    std::string from, to;
    size_t arms;  // arms taken, of four: make_params, scale and the two tests, each nothing in train.py calls
    size_t findings;
  };
  const std::vector<Step> steps = {
      {"a function neither test reaches", "return x * 2", "return x * 3", 3, 2},
      {"make_params, which helpers.py's build_optimizer calls: no parameter of the model",
       "return model.parameters()", "return [torch.zeros(2)]", 1, 0},
      {"that function again", "return x * 3", "return x * 4", 3, 0},
      {"make_params back", "return [torch.zeros(2)]", "return model.parameters()", 1, 2},
  };
  for (const Step& step : steps) {
    INFO(step.what);
    text = replaced(text, step.from, step.to);
    std::vector<std::string> got = editor.lint(text, &carried, &arms);
    CHECK(got == fresh(path, text));
    CHECK(got.size() == step.findings);
    CHECK(arms == step.arms);
  }
}

TEST_CASE("moving a summary or an arm: an annotation that spells a place at or past the edit stops it",
          "[unit][carry]") {
  using shardlint::semantic::spellsPlaceFrom;
  CHECK(spellsPlaceFrom("3:1200-1240", 1000));
  CHECK(spellsPlaceFrom("3:1200-1240", 1240));
  CHECK_FALSE(spellsPlaceFrom("3:1200-1240", 1241));
  CHECK(spellsPlaceFrom("x@1500", 1500));  // a number at the end of the text
  CHECK_FALSE(spellsPlaceFrom("fsdp2", 100));
  CHECK_FALSE(spellsPlaceFrom("", 0));
  CHECK(spellsPlaceFrom("0", 0));
  CHECK(spellsPlaceFrom("123456789012345678901234567890", UINT32_MAX));  // a huge number counts
  CHECK_FALSE(spellsPlaceFrom("4294967294", UINT32_MAX));
}

TEST_CASE("store: forgetting the interning of an arm's objects keeps the module body's", "[unit][carry]") {
  shardlint::semantic::Store st;
  st.objects.resize(4);
  auto& memo = st.memo();
  memo.refs["torch.nn"] = 0;
  memo.refs["torch.optim.AdamW"] = 2;
  memo.literals["s:fsdp"] = 1;
  memo.literals["True"] = 3;
  memo.derived[{0, ".Linear"}] = 2;
  memo.defs[&st] = 3;
  st.forgetInterned(2);
  CHECK(memo.refs.size() == 1);
  CHECK(memo.refs.count("torch.nn") == 1);
  CHECK(memo.literals.size() == 1);
  CHECK(memo.literals.count("s:fsdp") == 1);
  CHECK(memo.derived.empty());
  CHECK(memo.defs.empty());
  CHECK(st.objects.size() == 4);  // the objects stay
}

namespace {
// `count` test functions (`# case K` in each), each running `body`, then building an optimizer before
// `model = WRAP` and stepping it (SL101).
std::string testFunctions(int count, const std::string& body, const std::string& wrap) {
  std::string text;
  for (int k = 0; k < count; ++k)
    text += "def test_case_" + std::to_string(k) + "():\n    # case " + std::to_string(k) + "\n" + body +
            "    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.AdamW(model.parameters())\n    model = " + wrap +
            "\n    opt.step()\n\n\n";
  return text;
}
}  // namespace

TEST_CASE("editor: an arm a limit cut short is taken only where its limit checks answer as they did",
          "[lsp][carry]") {
  // Forty test functions, each instantiating a helper's summary of 150 objects five times: past the file's
  // object limit (kMaxFileObjects), the later arms' copies are refused. Such an arm is taken from the analysis
  // before an edit only when each copy it let in still fits and each it refused still does not, where the
  // objects, work and copies before it stand now (FileAnalysis::limitsAlike).
  std::string text = "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\n\n"
                     "def make_tensors():\n";
  for (int i = 0; i < 150; ++i) text += "    t" + std::to_string(i) + " = torch.randn(" + std::to_string(i + 1) + ")\n";
  text += "    return t0\n\n\n";
  std::string five;
  for (int c = 0; c < 5; ++c) five += "    x" + std::to_string(c) + " = make_tensors()\n";
  text += testFunctions(40, five, "FSDP(model)");
  shardlint::testing::TempDir dir("shardlint-limited-");
  std::string path = dir.write("test_many.py", text).string();
  Editor editor(path);
  size_t carried = 0, arms = 0;
  REQUIRE(editor.lint(text, &carried, &arms) == fresh(path, text));
  // The same text: every arm is taken, those a limit cut short too.
  REQUIRE(editor.lint(text, &carried, &arms) == fresh(path, text));
  size_t all = arms;
  CHECK(all >= 40);
  // A comment in the last test: everything before every arm is as it was.
  std::string commented = replaced(text, "# case 39", "# case thirty-nine");
  CHECK(editor.lint(commented, &carried, &arms) == fresh(path, commented));
  CHECK(arms == all);
  // The first test makes one more copy: it runs again, and so does the arm the file's limit first cut short
  // (more of its copies are refused now); those no limit touched are taken, and so are those whose every
  // copy was refused before and still is.
  std::string more = replaced(commented, "x4 = make_tensors()\n", "x4 = make_tensors()\n    x5 = make_tensors()\n");
  CHECK(editor.lint(more, &carried, &arms) == fresh(path, more));
  CHECK(arms + 1 < all);
  CHECK(arms + 4 > all);
  // And back: the first test runs again; the others are taken where they stand as before.
  CHECK(editor.lint(commented, &carried, &arms) == fresh(path, commented));
  CHECK(arms > 0);
}

TEST_CASE("editor: an arm past the inlining budget is taken when each work budget check answers as it did",
          "[lsp][carry]") {
  // Sixty test functions of a thousand statements each, each wrapping its model through a helper whose summary
  // depends on its caller (the wrap reads its parameter): past the task's inlining budget (Budget::kInlineBudget
  // statements) the later tests use the helper's summary instead of running it, and their arms are limited.
  // An edit that adds a statement to the first test moves every later arm's start by one statement: those
  // started past the inlining budget (and ending short of the work budget) still answer every check as they
  // did, and are taken; the one that crosses the budget runs again.
  std::string text = "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\n\n"
                     "def wrap(m, flag):\n    return FSDP(m, use_orig_params=flag)\n\n\n";
  std::string thousand;
  for (int c = 0; c < 1000; ++c) thousand += "    v" + std::to_string(c) + " = " + std::to_string(c) + "\n";
  text += testFunctions(60, thousand, "wrap(model, False)");
  shardlint::testing::TempDir dir("shardlint-worked-");
  std::string path = dir.write("test_long.py", text).string();
  Editor editor(path);
  size_t carried = 0, arms = 0;
  std::vector<std::string> first = fresh(path, text);
  // SL101 in the tests before the budget; past it the helper's summary leaves use_orig_params unknown.
  CHECK(first.size() > 10);
  CHECK(first.size() < 60);
  REQUIRE(editor.lint(text, &carried, &arms) == first);
  REQUIRE(editor.lint(text, &carried, &arms) == first);
  size_t all = arms;
  CHECK(all >= 60);
  std::string more = replaced(text, "    # case 0\n", "    # case 0\n    extra = 1\n");
  CHECK(editor.lint(more, &carried, &arms) == fresh(path, more));
  CHECK(arms + 1 < all);  // the first test and the one crossing the budget ran again
  CHECK(arms + 4 > all);  // the tests past it were taken
  CHECK(editor.lint(text, &carried, &arms) == first);
  CHECK(arms + 4 > all);
}
