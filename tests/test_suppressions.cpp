#include <cstdio>
// In-process tests of `# noqa` suppressions and of rule selection (--select/--ignore).
#include <algorithm>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "Registry.h"
#include "driver/Linter.h"
#include "driver/Suppressions.h"

using shardlint::Diagnostic;
using shardlint::Linter;
using shardlint::LintOptions;
using shardlint::RuleSelection;

namespace {

// An FSDP1 script whose SL101 finding is on line 6 (0-based 5). `sameLine` is
// appended to the optimizer line, `header` goes before everything, `footer` after.
std::string script(const std::string& sameLine = "", const std::string& header = "",
                   const std::string& footer = "") {
  return header +
         "import torch\n"
         "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
         "from mymodels import Net\n"
         "\n"
         "model = Net()\n"
         "opt = torch.optim.AdamW(model.parameters())" +
         sameLine +
         "\n"
         "model = FSDP(model)\n"
         "opt.step()\n" +
         footer;
}

std::vector<std::string> codesOf(const std::vector<Diagnostic>& diags) {
  std::vector<std::string> out;
  for (const auto& d : diags) out.push_back(d.code);
  return out;
}

std::vector<std::string> lint(const std::string& src) {
  Linter linter(shardlint::rules::catalog(), {});
  return codesOf(linter.lintText("t.py", src));
}

const std::vector<std::string> kNone;
const std::vector<std::string> kSL101 = {"SL101"};

}  // namespace

TEST_CASE("suppressions: the unsuppressed script reports SL101 on line 6", "[suppressions]") {
  Linter linter(shardlint::rules::catalog(), {});
  auto diags = linter.lintText("t.py", script());
  REQUIRE(codesOf(diags) == kSL101);
  CHECK(diags[0].location.start.line == 5);
  CHECK(diags[0].location.start.codepointColumn == 6);
}

TEST_CASE("suppressions: # noqa on the finding's line", "[suppressions]") {
  CHECK(lint(script("  # noqa")) == kNone);
  CHECK(lint(script("  #noqa")) == kNone);
  CHECK(lint(script("  # noqa: SL101")) == kNone);
  CHECK(lint(script("  # noqa : SL101")) == kNone);
  CHECK(lint(script("  # noqa: SL102")) == kSL101);
  CHECK(lint(script("  # noqa:SL101,SL103")) == kNone);
  CHECK(lint(script("  # noqa: SL102, SL101")) == kNone);
  CHECK(lint(script("  # noqa: sl101")) == kNone);
  CHECK(lint(script("  # noqa: optimizer-before-wrap")) == kNone);
  CHECK(lint(script("  # noqa: stray-param-group")) == kSL101);
  CHECK(lint(script("  # NOQA")) == kNone);
  CHECK(lint(script("  # NoQa: SL101")) == kNone);
  CHECK(lint(script("  # type: ignore # noqa: SL101")) == kNone);
  CHECK(lint(script("  # type: ignore # noqa: SL102")) == kSL101);
  CHECK(lint(script("  # noqa: SL101 -- optimizer is rebuilt later")) == kNone);
  // Not noqa directives.
  CHECK(lint(script("  # noqanything")) == kSL101);
  CHECK(lint(script("  # see noqa docs")) == kSL101);
}

TEST_CASE("suppressions: a noqa elsewhere does not silence", "[suppressions]") {
  // On the line before / after the finding.
  CHECK(lint(script("", "", "# noqa\n")) == kSL101);
  std::string before = script();
  before.replace(before.find("model = Net()\n"), 14, "model = Net()  # noqa\n");
  CHECK(lint(before) == kSL101);
  std::string after = script();
  after.replace(after.find("model = FSDP(model)\n"), 20, "model = FSDP(model)  # noqa\n");
  CHECK(lint(after) == kSL101);
  // A plain `# noqa` on its own line is a line directive, not a file directive.
  CHECK(lint(script("", "# noqa\n")) == kSL101);
}

TEST_CASE("suppressions: # shardlint: noqa on its own line silences the file", "[suppressions]") {
  CHECK(lint(script("", "# shardlint: noqa\n")) == kNone);
  CHECK(lint(script("", "", "# shardlint: noqa\n")) == kNone);
  CHECK(lint(script("", "# shardlint: noqa: SL101\n")) == kNone);
  CHECK(lint(script("", "# shardlint: noqa: optimizer-before-wrap\n")) == kNone);
  // SL102 does not fire here, so the directive is unused: SL003 says so (it is a warning).
  CHECK(lint(script("", "# shardlint: noqa: SL102\n")) == std::vector<std::string>{"SL003", "SL101"});
  CHECK(lint(script("", "    # shardlint: noqa\n")) == kNone);  // indented, but still alone on its line
  CHECK(lint(script("", "", "def f():\n    # shardlint: noqa\n    pass\n")) == kNone);
}

TEST_CASE("suppressions: noqa text that is not a comment does not silence", "[suppressions]") {
  CHECK(lint(script("; s = \"# noqa\"")) == kSL101);
  CHECK(lint(script("; s = '# noqa: SL101'")) == kSL101);
  CHECK(lint(script("", "\"\"\"\n# shardlint: noqa\n\"\"\"\n")) == kSL101);
  CHECK(lint(script("", "", "s = '''\n# shardlint: noqa\n'''\n")) == kSL101);
  CHECK(lint(script("; s = f\"{'#'} # noqa\"")) == kSL101);
  // A `#` in a string before the real comment on the same line.
  CHECK(lint(script("; s = '#' + \"##\"  # noqa: SL101")) == kNone);
  CHECK(lint(script("; s = f\"#{1}#\"  # noqa")) == kNone);
}

TEST_CASE("suppressions: noqa also applies to engine findings", "[suppressions]") {
  const std::string broken = "def broken(:\n    pass\n";
  CHECK(lint(script("", "", broken)) == std::vector<std::string>{"SL101", "SL001"});
  CHECK(lint(script("", "# shardlint: noqa: SL001\n", broken)) == kSL101);
  CHECK(lint(script("", "", "def broken(:  # noqa: SL001\n    pass\n")) == kSL101);
  CHECK(lint(script("  # noqa", "", broken)) == std::vector<std::string>{"SL001"});
}

// ------------------------------------------------------------------ RuleSelection

namespace {
const shardlint::RuleInfo& info(const char* code) {
  const auto* i = shardlint::rules::catalog().find(code);
  REQUIRE(i != nullptr);
  return *i;
}

std::vector<std::string> enabledCodes(const RuleSelection& sel) {
  std::vector<std::string> out;
  for (const auto& i : shardlint::rules::catalog().infos)
    if (sel.enabled(i)) out.emplace_back(i.code);
  return out;
}
}  // namespace

TEST_CASE("suppressions: disable / disable-file directives and SL003", "[suppressions]") {
  const char* bug =
      "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nfrom nets import Net\n"
      "model = Net()\nopt = torch.optim.AdamW(model.parameters())%s\nmodel = FSDP(model)\nopt.step()\n";
  auto codes = [&](const std::string& trailing, const std::string& header = "", bool noqaToo = false) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, bug, trailing.c_str());
    shardlint::LintOptions o;
    o.reportUnusedNoqa = noqaToo;
    shardlint::Linter linter(shardlint::rules::catalog(), o);
    std::vector<std::string> out;
    for (const auto& d : linter.lintText("t.py", header + buf)) out.push_back(d.code);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(codes("  # shardlint: disable=SL101").empty());
  CHECK(codes("  # shardlint: disable=optimizer-before-wrap,SL102") == V{"SL003"});  // SL102 unused
  CHECK(codes("", "# shardlint: disable-file=SL101\n").empty());
  CHECK(codes("", "# shardlint: disable-file=SL103\n") == V{"SL003", "SL101"});
  CHECK(codes("  # shardlint: disable=SL999") == V{"SL101", "SL003"});  // unknown rule
  CHECK(codes("  # noqa: E501") == V{"SL101"});                        // another tool's code: not ours
  CHECK(codes("  # noqa: SL101, SL103").empty());                      // unused noqa codes: off by default
  CHECK(codes("  # noqa: SL101, SL103", "", true) == V{"SL003"});      // ... unless asked for
  // On its own line, `disable` covers the next line of code (comments and blank lines skipped).
  std::string own = "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
                    "from nets import Net\nmodel = Net()\n# shardlint: disable=SL101\n\n# why: measured\n"
                    "opt = torch.optim.AdamW(model.parameters())\nmodel = FSDP(model)\nopt.step()\n";
  shardlint::Linter linter(shardlint::rules::catalog(), {});
  CHECK(linter.lintText("t.py", own).empty());
}

TEST_CASE("suppressions: RuleSelection", "[suppressions]") {
  const auto& catalog = shardlint::rules::catalog();
  std::vector<std::string> all;
  for (const auto& i : catalog.infos) all.emplace_back(i.code);
  auto allBut = [&](std::initializer_list<const char*> drop) {
    std::vector<std::string> out;
    for (const auto& c : all)
      if (std::none_of(drop.begin(), drop.end(), [&](const char* d) { return c == d; })) out.push_back(c);
    return out;
  };
  REQUIRE(enabledCodes(RuleSelection()) == all);
  CHECK(enabledCodes(RuleSelection(catalog, {}, {})) == all);

  SECTION("by code") {
    CHECK(enabledCodes(RuleSelection(catalog, {"SL101"}, {})) == std::vector<std::string>{"SL101"});
    CHECK(enabledCodes(RuleSelection(catalog, {"sl102"}, {})) == std::vector<std::string>{"SL102"});
    CHECK(enabledCodes(RuleSelection(catalog, {"SL101", "SL103"}, {})) == std::vector<std::string>{"SL101", "SL103"});
    CHECK(enabledCodes(RuleSelection(catalog, {}, {"SL101"})) == allBut({"SL101"}));
  }
  SECTION("by name") {
    RuleSelection sel(catalog, {"optimizer-before-wrap"}, {});
    CHECK(sel.enabled(info("SL101")));
    CHECK_FALSE(sel.enabled(info("SL102")));
    CHECK(enabledCodes(RuleSelection(catalog, {}, {"unsharded-params"})) == allBut({"SL103"}));
  }
  SECTION("by prefix") {
    CHECK(enabledCodes(RuleSelection(catalog, {"SL1"}, {})) ==
          std::vector<std::string>{"SL101", "SL102", "SL103", "SL104", "SL105", "SL106"});
    CHECK(enabledCodes(RuleSelection(catalog, {"SL0"}, {})) == std::vector<std::string>{"SL001", "SL002", "SL003"});
    CHECK(enabledCodes(RuleSelection(catalog, {"SL10"}, {})) ==
          std::vector<std::string>{"SL101", "SL102", "SL103", "SL104", "SL105", "SL106"});
    CHECK(enabledCodes(RuleSelection(catalog, {}, {"SL1"})) == allBut({"SL101", "SL102", "SL103", "SL104", "SL105", "SL106"}));
  }
  SECTION("the more specific selector wins") {
    CHECK(enabledCodes(RuleSelection(catalog, {"SL101"}, {"SL1"})) == std::vector<std::string>{"SL101"});
    CHECK(enabledCodes(RuleSelection(catalog, {"SL1"}, {"SL101"})) ==
          std::vector<std::string>{"SL102", "SL103", "SL104", "SL105", "SL106"});
    CHECK(enabledCodes(RuleSelection(catalog, {"SL101"}, {"SL101"})).empty());  // a tie: ignore wins
  }
  SECTION("an unknown selector throws std::invalid_argument") {
    CHECK_THROWS_AS(RuleSelection(catalog, {"XYZ"}, {}), std::invalid_argument);
    CHECK_THROWS_AS(RuleSelection(catalog, {}, {"XYZ"}), std::invalid_argument);
    CHECK_THROWS_AS(RuleSelection(catalog, {"SL9"}, {}), std::invalid_argument);
    CHECK_THROWS_AS(RuleSelection(catalog, {"SL1011"}, {}), std::invalid_argument);
    CHECK_THROWS_AS(RuleSelection(catalog, {"SL101", "no-such-rule"}, {}), std::invalid_argument);
    CHECK_THROWS_WITH(RuleSelection(catalog, {"XYZ"}, {}), Catch::Contains("XYZ"));
  }
  SECTION("the Linter honours the selection") {
    LintOptions only102;
    only102.selection = RuleSelection(catalog, {"SL102"}, {});
    Linter linter(catalog, only102);
    CHECK(linter.lintText("t.py", script()).empty());
    LintOptions ignoreName;
    ignoreName.selection = RuleSelection(catalog, {}, {"optimizer-before-wrap"});
    CHECK(Linter(catalog, ignoreName).lintText("t.py", script()).empty());
    LintOptions select101;
    select101.selection = RuleSelection(catalog, {"SL101"}, {"SL1"});
    CHECK(codesOf(Linter(catalog, select101).lintText("t.py", script())) == kSL101);
  }
}

TEST_CASE("suppressions: only a comment that says noqa or shardlint is looked up, in any case", "[suppressions]") {
  // A `#` in a string before the comment, in upper or mixed case, after an ordinary comment section.
  CHECK(lint(script("  # NoQA: SL101")) == kNone);
  CHECK(lint(script("  # SHARDLINT: disable=SL101")) == kNone);
  CHECK(lint(script(" if '#' else None  # noqa: SL101")) == kNone);
  CHECK(lint(script("  # type: ignore # noqa: SL101")) == kNone);
  // An ordinary comment, and a directive inside a string (not a comment): the finding stays.
  CHECK(lint(script("  # the optimizer, built early")) == kSL101);
  CHECK(lint(script(" if '# noqa: SL101' else None")) == kSL101);
  CHECK(lint(script("", "", "s = '''\n# noqa\n'''\n")) == kSL101);
}

TEST_CASE("suppressions: mayBeDirective says whether a comment can be one", "[suppressions]") {
  using shardlint::Suppressions;
  CHECK(Suppressions::mayBeDirective("# noqa"));
  CHECK(Suppressions::mayBeDirective("# NoQA: SL101"));
  CHECK(Suppressions::mayBeDirective("# ShardLint: disable=SL101"));
  CHECK(Suppressions::mayBeDirective("# type: ignore # noqa: SL101"));
  CHECK_FALSE(Suppressions::mayBeDirective("# the optimizer, built early"));
  CHECK_FALSE(Suppressions::mayBeDirective("# noq a"));
  CHECK_FALSE(Suppressions::mayBeDirective(""));
}
