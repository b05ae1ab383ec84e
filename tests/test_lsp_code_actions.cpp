// `shardlint server` code actions: a finding's fix as a preferred quick fix, fix-all, and `noqa` suppressions.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "LspClient.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint::testing::lsp;

TEST_CASE("lsp: a finding's fix is a preferred quick fix, and fix-all applies every safe one", "[lsp][fixes]") {
  TempDir dir;
  LspProcess s;
  s.initialize({}, dir.path());
  const fs::path fixtures = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "config";
  auto actions = [&](int id, const std::string& uri, const json& context, const json& range) {
    s.request(id, "textDocument/codeAction", {{"textDocument", {{"uri", uri}}}, {"range", range}, {"context", context}});
    json r = s.response(id);
    REQUIRE(r.contains("result"));
    return r["result"];
  };

  SECTION("the quick fix comes first, marked preferred, and applying it clears the finding") {
    std::string text = shardlint::testing::readFile(fixtures / "SL303_accelerate_space_after_comma.yaml");
    std::string uri = uriOf(dir.write("accelerate.yaml", text));
    s.open(uri, text);
    json diag = s.published(uri, 1)["diagnostics"][0];
    CHECK(diag["code"] == "SL303");
    json got = actions(20, uri, {{"diagnostics", json::array({diag})}}, diag["range"]);
    REQUIRE(got.size() == 4);  // the fix, the two suppressions, and (no `only` given) fix-all
    CHECK(got[3]["kind"] == "source.fixAll.shardlint");
    CHECK(got[0]["title"] == "Write `Qwen2VLDecoderLayer,Qwen2VLVisionBlock`");
    CHECK(got[0]["kind"] == "quickfix");
    CHECK(got[0]["isPreferred"] == true);
    json edits = got[0]["edit"]["changes"][uri];
    REQUIRE(edits.size() == 1);
    CHECK(edits[0]["newText"] == "Qwen2VLDecoderLayer,Qwen2VLVisionBlock");
    s.change(uri, 2, {{{"range", edits[0]["range"]}, {"text", edits[0]["newText"]}}});
    CHECK(s.published(uri, 2)["diagnostics"].empty());
  }

  SECTION("an unsafe fix is offered, not preferred") {
    std::string text = shardlint::testing::readFile(fixtures / "SL301_accelerate_typo.yaml");
    std::string uri = uriOf(dir.write("typo.yaml", text));
    s.open(uri, text);
    json diag = s.published(uri, 1)["diagnostics"][0];
    json got = actions(21, uri, {{"diagnostics", json::array({diag})}, {"only", json::array({"quickfix"})}},
                       diag["range"]);
    REQUIRE(!got.empty());
    CHECK(got[0]["title"] == "Rename `fsdp_offload_param` to `fsdp_offload_params` (unsafe)");
    CHECK(got[0]["isPreferred"] == false);
  }

  SECTION("source.fixAll.shardlint: one edit with every safe fix, the unsafe finding left") {
    std::string text = shardlint::testing::readFile(fixtures / "SL302_fsdp2_fsdp1_leftovers.yaml");
    std::string uri = uriOf(dir.write("leftovers.yaml", text));
    s.open(uri, text);
    REQUIRE(s.published(uri, 1)["diagnostics"].size() == 3);
    json got = actions(22, uri, {{"diagnostics", json::array()}, {"only", json::array({"source.fixAll"})}},
                       rangeOf(0, 0, 0, 0));
    REQUIRE(got.size() == 1);
    CHECK(got[0]["kind"] == "source.fixAll.shardlint");
    CHECK(got[0]["title"] == "Fix all safe shardlint findings (2)");
    json edits = got[0]["edit"]["changes"][uri];
    REQUIRE(edits.size() == 1);
    s.change(uri, 2, {{{"range", edits[0]["range"]}, {"text", edits[0]["newText"]}}});
    json left = s.published(uri, 2)["diagnostics"];
    REQUIRE(left.size() == 1);  // fsdp_sharding_strategy: its fix is unsafe
    CHECK(left[0]["code"] == "SL302");
    // Asking for quick fixes only gives no fix-all.
    json quickOnly = actions(23, uri, {{"diagnostics", json::array()}, {"only", json::array({"quickfix"})}},
                             rangeOf(0, 0, 0, 0));
    CHECK(quickOnly.empty());
  }

  SECTION("a fix in another file: SL402's quick fix edits the accelerate config the script is launched with") {
    const fs::path project = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "projects" / "accelerate_launch_config";
    const fs::path ws = dir.path() / "ws";
    for (const char* rel : {"train.py", "configs/fsdp1.yaml"})
      dir.write(fs::path("ws") / rel, shardlint::testing::readFile(project / rel));
    // The editor lints the open script alone: the config is linked by the settings, not a launch script.
    dir.write("ws/.shardlint.toml", "accelerate-config = \"configs/fsdp1.yaml\"\n");
    LspProcess w;
    w.initialize({}, ws);
    std::string trainUri = uriOf(ws / "train.py"), configUri = uriOf(ws / "configs" / "fsdp1.yaml");
    w.open(trainUri, shardlint::testing::readFile(project / "train.py"));
    json diag = w.published(trainUri, 1)["diagnostics"][0];
    CHECK(diag["code"] == "SL402");
    w.request(24, "textDocument/codeAction",
              {{"textDocument", {{"uri", trainUri}}},
               {"range", diag["range"]},
               {"context", {{"diagnostics", json::array({diag})}, {"only", json::array({"quickfix"})}}}});
    json got = w.response(24)["result"];
    REQUIRE(!got.empty());
    CHECK(got[0]["title"] == "Set `use_orig_params` to true in fsdp1.yaml (unsafe)");
    CHECK(got[0]["isPreferred"] == false);
    json changes = got[0]["edit"]["changes"];
    REQUIRE(changes.size() == 1);
    REQUIRE(changes.contains(configUri));
    // `  fsdp_use_orig_params: false` is line 13 of the config: the value is replaced.
    CHECK(changes[configUri] == json::array({{{"range", rangeOf(12, 24, 12, 29)}, {"newText", "true"}}}));
    CHECK(w.shutdownAndExit() == 0);
  }
  CHECK(s.shutdownAndExit() == 0);
}

TEST_CASE("lsp: code actions suppress a finding with noqa comments", "[lsp]") {
  TempDir dir;
  LspProcess s;
  s.initialize({}, dir.path());

  auto actionsFor = [&](int id, const std::string& uri, const json& diag) {
    s.request(id, "textDocument/codeAction",
              {{"textDocument", {{"uri", uri}}},
               {"range", diag["range"]},
               {"context", {{"diagnostics", json::array({diag})}}}});
    json r = s.response(id);
    REQUIRE(r.contains("result"));
    return r["result"];
  };
  auto onlyEdit = [](const json& action, const std::string& uri) {
    REQUIRE(action["edit"]["changes"].contains(uri));
    REQUIRE(action["edit"]["changes"][uri].size() == 1);
    return action["edit"]["changes"][uri][0];
  };

  SECTION("a new noqa comment at the end of the line, or a file-level one at the top") {
    std::string uri = uriOf(dir.write("train.py", kBuggy));
    s.open(uri, kBuggy);
    json diag = s.published(uri, 1)["diagnostics"][0];
    json actions = actionsFor(10, uri, diag);
    REQUIRE(actions.size() == 2);
    CHECK(actions[0]["title"] == "Suppress SL101 on this line (# noqa: SL101)");
    CHECK(actions[0]["kind"] == "quickfix");
    CHECK(actions[0]["diagnostics"][0]["code"] == "SL101");
    json lineEdit = onlyEdit(actions[0], uri);
    CHECK(lineEdit["range"] == rangeOf(7, 74, 7, 74));  // the end of the line, in UTF-16
    CHECK(lineEdit["newText"] == "  # noqa: SL101");
    CHECK(actions[1]["title"] == "Suppress SL101 in this file");
    json fileEdit = onlyEdit(actions[1], uri);
    CHECK(fileEdit["range"] == rangeOf(0, 0, 0, 0));
    CHECK(fileEdit["newText"] == "# shardlint: noqa: SL101\n");

    // Applying the line edit silences the finding.
    s.change(uri, 2, {{{"range", lineEdit["range"]}, {"text", lineEdit["newText"]}}});
    CHECK(s.published(uri, 2)["diagnostics"].empty());

    // A diagnostic the server did not publish (stale range) gets no action.
    json stale = diag;
    stale["range"] = rangeOf(3, 0, 3, 5);
    CHECK(actionsFor(11, uri, stale).empty());
  }

  SECTION("an existing noqa comment gets the code appended") {
    std::string text = kBuggy;
    std::string line = "lr=1e-3)\n";
    text.replace(text.find(line), line.size(), "lr=1e-3)  # noqa: SL102 (reviewed)\n");
    std::string uri = uriOf(dir.write("noqa.py", text));
    s.open(uri, text);
    json diag = s.published(uri, 1)["diagnostics"][0];
    json actions = actionsFor(12, uri, diag);
    REQUIRE(actions.size() == 2);
    json lineEdit = onlyEdit(actions[0], uri);
    CHECK(lineEdit["range"] == rangeOf(7, 89, 7, 89));  // right after `SL102`
    CHECK(lineEdit["newText"] == ", SL101");
    s.change(uri, 2, {{{"range", lineEdit["range"]}, {"text", lineEdit["newText"]}}});
    CHECK(s.published(uri, 2)["diagnostics"].empty());
  }

  SECTION("the file-level comment goes below a shebang and an encoding line") {
    std::string text = std::string("#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n") + kBuggy;
    std::string uri = uriOf(dir.write("script.py", text));
    s.open(uri, text);
    json diag = s.published(uri, 1)["diagnostics"][0];
    json actions = actionsFor(13, uri, diag);
    REQUIRE(actions.size() == 2);
    json fileEdit = onlyEdit(actions[1], uri);
    CHECK(fileEdit["range"] == rangeOf(2, 0, 2, 0));
    s.change(uri, 2, {{{"range", fileEdit["range"]}, {"text", fileEdit["newText"]}}});
    CHECK(s.published(uri, 2)["diagnostics"].empty());
  }
  CHECK(s.shutdownAndExit() == 0);
}
