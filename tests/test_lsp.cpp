// `shardlint server`: a scripted LSP client drives the built binary over pipes (framing,
// lifecycle, push and pull diagnostics, incremental edits in UTF-16 and UTF-8, code actions,
// cross-file re-checks, protocol errors), and Neovim 0.7 acts as a real client.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cxx/CxxFrontend.h"
#include "Fixtures.h"
#include "TestSupport.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kWaitSeconds = 10;  // every wait for the server is bounded

// SL101 on line 7 (0-based): the optimizer is built before FSDP(model). The emoji before the
// finding is 1 code point, 2 UTF-16 code units and 4 UTF-8 bytes, so the finding starts at
// UTF-16 character 28 and UTF-8 byte 30.
const char* const kBuggy =
    "import torch\n"
    "import torch.nn as nn\n"
    "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
    "\n"
    "\n"
    "def main():\n"
    "    model = nn.Linear(8, 8)\n"
    "    tag = \"\xF0\x9F\x9A\x80\"; optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
    "    model = FSDP(model)\n"
    "    for _ in range(10):\n"
    "        model(torch.randn(2, 8)).sum().backward()\n"
    "        optimizer.step()\n";

struct TempDir : shardlint::testing::TempDir {
  TempDir() : shardlint::testing::TempDir("shardlint-lsp-") {}
};

std::string uriOf(const fs::path& p) { return "file://" + p.lexically_normal().string(); }

json pos(int line, int character) { return {{"line", line}, {"character", character}}; }
json rangeOf(int l1, int c1, int l2, int c2) { return {{"start", pos(l1, c1)}, {"end", pos(l2, c2)}}; }

// `shardlint server` on pipes, spawned with pipe() + fork() + execl().
class LspProcess {
 public:
  LspProcess() {
    ::signal(SIGPIPE, SIG_IGN);  // a dead server must fail a test, not kill the test binary
    int toChild[2], fromChild[2];
    REQUIRE(::pipe2(toChild, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(fromChild, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(toChild[0], STDIN_FILENO);
      ::dup2(fromChild[1], STDOUT_FILENO);
      int devnull = ::getenv("SHARDLINT_TEST_SERVER_STDERR") ? -1 : ::open("/dev/null", O_WRONLY);
      if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
      ::execl(SHARDLINT_BINARY, SHARDLINT_BINARY, "server", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(toChild[0]);
    ::close(fromChild[1]);
    in_ = toChild[1];
    out_ = fromChild[0];
  }
  ~LspProcess() {
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  LspProcess(const LspProcess&) = delete;
  LspProcess& operator=(const LspProcess&) = delete;

  void sendRaw(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(in_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      REQUIRE(n > 0);
      done += static_cast<size_t>(n);
    }
  }
  // The end of the server's input (as when the client dies).
  void closeInput() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  // Reads whatever the server has already written, without waiting.
  void drain() {
    while (next(std::chrono::steady_clock::now())) {
    }
  }
  void sendBody(const std::string& body) {
    sendRaw("Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  void send(const json& msg) { sendBody(msg.dump()); }
  void request(int id, const std::string& method, json params = json::object()) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
  }
  void notify(const std::string& method, json params = json::object()) {
    send({{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
  }

  // The next message, or nullopt when none arrives before the deadline (or the server is gone).
  std::optional<json> next(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      size_t headerEnd = buf_.find("\r\n\r\n");
      if (headerEnd != std::string::npos) {
        std::string headers = buf_.substr(0, headerEnd);
        size_t at = headers.find("Content-Length: ");
        REQUIRE(at != std::string::npos);
        size_t length = std::stoul(headers.substr(at + 16));
        if (buf_.size() >= headerEnd + 4 + length) {
          std::string body = buf_.substr(headerEnd + 4, length);
          buf_.erase(0, headerEnd + 4 + length);
          received.push_back(json::parse(body));
          return received.back();
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      int rc = ::poll(&p, 1, static_cast<int>(left.count()));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) return std::nullopt;
      char chunk[65536];
      ssize_t n = ::read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  json waitFor(const std::function<bool(const json&)>& pred, const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kWaitSeconds);
    for (;;) {
      auto m = next(deadline);
      if (!m) FAIL("no " << what << " from `shardlint server` within " << kWaitSeconds << " s");
      if (pred(*m)) return *m;
    }
  }
  json response(int id) {
    return waitFor([&](const json& m) { return m.contains("id") && m["id"] == id && !m.contains("method"); },
                   "response to request " + std::to_string(id));
  }
  // The error response (id null) to a message the server could not read.
  json nullIdError() {
    return waitFor([](const json& m) { return m.contains("id") && m["id"].is_null() && m.contains("error"); },
                   "error response with id null");
  }
  json published(const std::string& uri, std::optional<int> version = std::nullopt) {
    return waitFor(
        [&](const json& m) {
          return m.value("method", "") == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri &&
                 (!version || (m["params"].contains("version") && m["params"]["version"] == *version));
        },
        "publishDiagnostics for " + uri)["params"];
  }

  json initialize(json capabilities = json::object(), const fs::path& root = {}) {
    json params = {{"processId", ::getpid()}, {"capabilities", std::move(capabilities)}};
    params["rootUri"] = root.empty() ? json(nullptr) : json(uriOf(root));
    request(1, "initialize", params);
    json r = response(1);
    REQUIRE(r.contains("result"));
    notify("initialized");
    return r["result"];
  }
  void open(const std::string& uri, const std::string& text, int version = 1, const std::string& languageId = "python") {
    notify("textDocument/didOpen",
           {{"textDocument", {{"uri", uri}, {"languageId", languageId}, {"version", version}, {"text", text}}}});
  }
  void change(const std::string& uri, int version, json changes) {
    notify("textDocument/didChange",
           {{"textDocument", {{"uri", uri}, {"version", version}}}, {"contentChanges", std::move(changes)}});
  }
  static json edit(json range, const std::string& text) { return {{"range", std::move(range)}, {"text", text}}; }

  // Exit status after `exit`, or -1 when the server does not exit within the limit.
  int exitStatus() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kWaitSeconds);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  int shutdownAndExit(int id = 99) {
    request(id, "shutdown");
    json r = response(id);
    CHECK(r.contains("result"));
    CHECK(r["result"].is_null());
    notify("exit");
    return exitStatus();
  }

  std::vector<json> received;  // every message read, in order

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int in_ = -1, out_ = -1;
  std::string buf_;
};

json makeRequestJson(const json& id, const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

void requireSl101At(const json& diagnostics, int line, int character) {
  REQUIRE(diagnostics.size() == 1);
  const json& d = diagnostics[0];
  CHECK(d["code"] == "SL101");
  CHECK(d["source"] == "shardlint");
  CHECK(d["severity"] == 1);
  CHECK(d["range"]["start"] == pos(line, character));
  CHECK(d["range"]["start"]["line"] == d["range"]["end"]["line"]);
  CHECK(d["message"].get<std::string>().find("FSDP") != std::string::npos);
  CHECK(d["codeDescription"]["href"].get<std::string>().find("SL101_optimizer_before_wrap.md") != std::string::npos);
  REQUIRE(d.contains("relatedInformation"));
  CHECK(d["relatedInformation"].size() == 2);
}

}  // namespace

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

TEST_CASE("lsp: editing a helper module re-checks the open files that import it", "[lsp]") {
  TempDir dir;
  const std::string helpers =
      "import torch\n"
      "\n"
      "\n"
      "def build_optimizer(model):\n"
      "    return torch.optim.AdamW(model.parameters(), lr=1e-3)\n";
  const std::string train =
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

TEST_CASE("lsp: protocol errors get error responses and the server keeps running", "[lsp]") {
  LspProcess s;
  // A request before initialize.
  s.request(1, "textDocument/diagnostic", {{"textDocument", {{"uri", "file:///x.py"}}}});
  json r = s.response(1);
  CHECK(r["error"]["code"] == -32002);

  // A malformed Content-Length: a parse error (id null); the server then skips to the next
  // `Content-Length`, so the `{}` after it is dropped.
  s.sendRaw("Content-Length: abc\r\n\r\n{}");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  // Well framed, but not JSON.
  s.sendBody("{\"jsonrpc\": \"2.0\", \"id\": 7, ");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  // A header line without a colon.
  s.sendRaw("this is not a header\r\n\r\n");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  // JSON, but not a request.
  s.sendBody("[1, 2, 3]");
  CHECK(s.nullIdError()["error"]["code"] == -32600);

  // The server still answers: initialize works (a Content-Type header is tolerated).
  json init = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "initialize"}, {"params", {{"capabilities", json::object()}}}};
  std::string body = init.dump();
  s.sendRaw("Content-Length: " + std::to_string(body.size()) +
            "\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body);
  CHECK(s.response(2).contains("result"));
  s.notify("initialized");

  // Unknown request -> method not found; unknown notifications and $/cancelRequest are ignored.
  s.request(3, "shardlint/noSuchMethod");
  CHECK(s.response(3)["error"]["code"] == -32601);
  s.notify("shardlint/noSuchNotification", {{"x", 1}});
  s.notify("$/cancelRequest", {{"id", 3}});
  // Bad params -> invalid params; a change to a document that is not open is ignored.
  s.request(4, "textDocument/codeAction", {{"textDocument", 42}});
  CHECK(s.response(4)["error"]["code"] == -32602);
  s.change("file:///not/open.py", 2, {LspProcess::edit(rangeOf(0, 0, 0, 0), "x")});
  s.request(5, "initialize", {{"capabilities", json::object()}});  // twice
  CHECK(s.response(5)["error"]["code"] == -32600);
  size_t before = s.received.size();
  s.request(6, "textDocument/diagnostic", {{"textDocument", {{"uri", "file:///not/open.py"}}}});
  json r6 = s.response(6);
  CHECK(r6["result"]["items"].empty());
  // Nothing but the response came back for the ignored notifications.
  for (size_t i = before; i + 1 < s.received.size(); ++i) CHECK(!s.received[i].contains("error"));

  // After shutdown, requests are invalid; exit then ends with 0.
  s.request(7, "shutdown");
  CHECK(s.response(7)["result"].is_null());
  s.request(8, "textDocument/diagnostic", {{"textDocument", {{"uri", "file:///x.py"}}}});
  CHECK(s.response(8)["error"]["code"] == -32600);
  s.notify("exit");
  CHECK(s.exitStatus() == 0);
}

TEST_CASE("lsp: exit without shutdown exits with 1", "[lsp]") {
  LspProcess s;
  s.initialize();
  s.notify("exit");
  CHECK(s.exitStatus() == 1);
}

TEST_CASE("lsp: hostile input does not crash the server", "[lsp]") {
  TempDir dir;
  std::string uri = uriOf(dir.write("train.py", kBuggy));
  LspProcess s;
  s.sendRaw(std::string(20000, 'x') + "\n");  // an endless header line
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  s.sendRaw("\r\n\r\nContent-Length: 99999999999999\r\n\r\n");  // too long: a parse error
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  s.sendBody(std::string(100000, '[') + std::string(100000, ']'));  // deep nesting
  s.sendBody("\"just a string\"");
  s.sendBody("{\"id\": {\"an\": \"object\"}, \"method\": \"initialize\"}");
  s.sendBody("{\"id\": 1.5, \"method\": 3}");
  s.initialize({}, dir.path());
  s.open(uri, kBuggy);
  requireSl101At(s.published(uri, 1)["diagnostics"], 7, 28);
  // Positions past the end of lines and of the document, reversed ranges, negative numbers.
  s.change(uri, 2, {LspProcess::edit(rangeOf(7, 1000, 7, 2000), ""), LspProcess::edit(rangeOf(500, 0, 400, 3), "\n"),
                    LspProcess::edit(rangeOf(-1, -5, 0, 0), "")});
  s.published(uri, 2);
  s.change(uri, 3, {{{"range", "nonsense"}, {"text", 5}}});
  s.change(uri, 4, {{{"text", std::string("\0 binary\n", 9)}}});  // NUL: SL002
  json p = s.published(uri, 4);
  CHECK(p["diagnostics"].size() <= 1);
  s.request(30, "textDocument/codeAction",
            {{"textDocument", {{"uri", uri}}}, {"range", rangeOf(0, 0, 0, 0)}, {"context", {{"diagnostics", 3}}}});
  s.response(30);
  CHECK(s.shutdownAndExit() == 0);
}

// ---- robustness: framing, ids, floods, lifecycle, cancellation -------------------------------

TEST_CASE("lsp: truncated and oversized Content-Length, garbage between messages", "[lsp]") {
  LspProcess s;
  s.initialize();
  auto alive = [&](int id) { CHECK(s.response(id)["error"]["code"] == -32601); };
  auto ask = [&](int id) { s.request(id, "shardlint/noSuchMethod"); };

  // Above the 256 MiB cap: a parse error at once, before any body byte is stored or awaited.
  s.sendRaw("Content-Length: 268435457\r\n\r\n");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  ask(2);
  alive(2);
  // Negative, non-numeric, conflicting lengths.
  s.sendRaw("Content-Length: -5\r\n\r\n");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  s.sendRaw("Content-Length: 2\r\ncontent-length: 3\r\n\r\n{}");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  ask(3);
  alive(3);

  // Garbage between messages: lines, binary bytes, and garbage glued to the next header.
  // (One parse error per stretch of garbage: the reader then skips to the next header quietly.)
  s.sendRaw("garbage garbage\r\n\r\n");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  s.sendRaw(std::string("\x01\x02\xff\xfe binary\n", 12));
  ask(31);
  alive(31);
  s.sendRaw(std::string("\x01\x02\xff\xfe binary\n", 12));
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  ask(32);
  alive(32);
  s.sendRaw("\"x\":{}}");  // no newline: the next message's header line starts with it
  ask(4);
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  alive(4);  // the header is found inside the garbage line

  // Truncated: the body is shorter than its Content-Length, so the next message's start fills
  // it (invalid JSON: -32700); the reader then finds the header after it.
  json r5 = {{"jsonrpc", "2.0"}, {"id", 5}, {"method", "shardlint/noSuchMethod"}};
  s.sendRaw("Content-Length: 40\r\n\r\n{\"jsonrpc\":");
  s.send(r5);  // consumed by the truncated message
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  ask(6);
  alive(6);

  // Invalid JSON, and JSON that is not a request.
  s.sendBody("{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": ");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  s.sendBody("{'single': 'quotes'}");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  s.sendBody("");
  CHECK(s.nullIdError()["error"]["code"] == -32700);
  s.sendBody("42");
  CHECK(s.nullIdError()["error"]["code"] == -32600);
  s.sendBody("{\"jsonrpc\": \"1.0\", \"id\": 8, \"method\": \"shutdown\"}");
  CHECK(s.nullIdError()["error"]["code"] == -32600);
  ask(9);
  alive(9);

  // A truncated message at the end of the input: the server exits (1: no shutdown), no hang.
  s.sendRaw("Content-Length: 1000\r\n\r\n{\"jsonrpc\": \"2.0\"");
  s.closeInput();
  CHECK(s.exitStatus() == 1);
}

TEST_CASE("lsp: request ids of every JSON type", "[lsp]") {
  LspProcess s;
  s.initialize();
  auto withId = [](const json& id) {
    return json{{"jsonrpc", "2.0"}, {"id", id}, {"method", "shardlint/noSuchMethod"}};
  };
  // Valid ids (number, string, null) come back unchanged with the error of the method.
  for (const json& id : {json(7), json(0), json(-3), json(4294967296LL), json("seven"), json(""), json(nullptr)}) {
    INFO("id " << id.dump());
    s.send(withId(id));
    json r = s.waitFor([&](const json& m) { return m.contains("id") && m["id"] == id && m.contains("error"); },
                       "response to id " + id.dump());
    CHECK(r["error"]["code"] == -32601);
  }
  // Invalid ids (bool, object, array, fractional number): Invalid Request with id null.
  for (const json& id : {json(true), json(false), json({{"a", 1}}), json::array({1}), json(1.5)}) {
    INFO("id " << id.dump());
    s.send(withId(id));
    CHECK(s.nullIdError()["error"]["code"] == -32600);
  }
  // An id but no method: Invalid Request, answered with that id.
  s.send({{"jsonrpc", "2.0"}, {"id", 12}, {"method", 5}});
  CHECK(s.response(12)["error"]["code"] == -32600);
  CHECK(s.shutdownAndExit() == 0);
}

TEST_CASE("lsp: 1,000 rapid didChange notifications, and one for a document that is not open", "[lsp]") {
  TempDir dir;
  std::string text = std::string(kBuggy) + "# tail\n";  // line 12: a comment the edits extend
  std::string uri = uriOf(dir.write("train.py", text));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, text);
  requireSl101At(s.published(uri, 1)["diagnostics"], 7, 28);
  // In batches of 20 written at once; what the server sends meanwhile is read between batches
  // (so neither side blocks on a full pipe).
  std::string batch;
  for (int i = 0; i < 1000; ++i) {
    json msg = {{"jsonrpc", "2.0"},
                {"method", "textDocument/didChange"},
                {"params",
                 {{"textDocument", {{"uri", uri}, {"version", i + 2}}},
                  {"contentChanges", json::array({LspProcess::edit(rangeOf(12, 6 + i, 12, 6 + i), "x")})}}}};
    std::string body = msg.dump();
    batch += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (i % 20 == 19) {
      s.sendRaw(batch);
      batch.clear();
      s.drain();
    }
  }
  requireSl101At(s.published(uri, 1001)["diagnostics"], 7, 28);
  size_t publishes = 0;
  for (const auto& m : s.received)
    if (m.value("method", "") == "textDocument/publishDiagnostics") ++publishes;
  CHECK(publishes <= 1001);  // one per batch of edits that arrived together, never more than one per edit
  // The text is what the 1,000 edits made of it.
  s.request(2, "textDocument/codeAction",
            {{"textDocument", {{"uri", uri}}}, {"range", rangeOf(12, 0, 12, 0)}, {"context", {{"diagnostics", json::array()}}}});
  CHECK(s.response(2).contains("result"));
  s.request(3, "textDocument/diagnostic", {{"textDocument", {{"uri", uri}}}});
  CHECK(s.response(3)["result"]["items"].size() == 1);

  // A didChange for a document that was never opened: ignored (no error, no diagnostics).
  std::string other = uriOf(dir.path() / "other.py");
  s.change(other, 2, {LspProcess::edit(rangeOf(0, 0, 0, 0), "import torch\n")});
  s.change(other, 3, {{{"text", "x = 1\n"}}});
  s.request(4, "textDocument/diagnostic", {{"textDocument", {{"uri", other}}}});
  CHECK(s.response(4)["result"]["items"].empty());
  for (const auto& m : s.received) {
    CHECK(!m.contains("error"));
    if (m.value("method", "") == "textDocument/publishDiagnostics") CHECK(m["params"]["uri"] != other);
  }
  CHECK(s.shutdownAndExit() == 0);
}

TEST_CASE("lsp: lifecycle: requests after shutdown, exit codes, end of input", "[lsp]") {
  SECTION("exit after shutdown: 0; requests in between are invalid") {
    LspProcess s;
    s.initialize();
    s.request(2, "shutdown");
    CHECK(s.response(2)["result"].is_null());
    s.request(3, "shutdown");
    CHECK(s.response(3)["error"]["code"] == -32600);
    s.request(4, "textDocument/codeAction", {{"textDocument", {{"uri", "file:///x.py"}}}});
    CHECK(s.response(4)["error"]["code"] == -32600);
    s.notify("exit");
    CHECK(s.exitStatus() == 0);
  }
  SECTION("exit without shutdown: 1") {
    LspProcess s;
    s.initialize();
    s.notify("exit");
    CHECK(s.exitStatus() == 1);
  }
  SECTION("exit before initialize: 1") {
    LspProcess s;
    s.notify("exit");
    CHECK(s.exitStatus() == 1);
  }
  SECTION("the input ends without exit: 1, or 0 after shutdown") {
    LspProcess a;
    a.initialize();
    a.closeInput();
    CHECK(a.exitStatus() == 1);
    LspProcess b;
    b.initialize();
    b.request(2, "shutdown");
    b.response(2);
    b.closeInput();
    CHECK(b.exitStatus() == 0);
  }
}

TEST_CASE("lsp: cancelled and superseded requests while an analysis runs", "[lsp]") {
  TempDir dir;
  // A large file, so that its analysis is running (or queued) when the requests arrive.
  std::string text = kBuggy;
  for (int i = 0; i < 1200; ++i)
    text += "\n\ndef helper_" + std::to_string(i) + "(x):\n    y = x * " + std::to_string(i) + "\n    return y + 1\n";
  std::string uri = uriOf(dir.write("train.py", text));
  LspProcess s;
  s.initialize({}, dir.path());
  s.open(uri, text);
  // Request and cancellation written at once (one pipe write, atomic): the server sees the
  // cancellation before it starts on the request.
  auto frame = [](const json& m) {
    std::string body = m.dump();
    return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  json diag10 = makeRequestJson(10, "textDocument/diagnostic", {{"textDocument", {{"uri", uri}}}});
  json cancel10 = {{"jsonrpc", "2.0"}, {"method", "$/cancelRequest"}, {"params", {{"id", 10}}}};
  s.sendRaw(frame(diag10) + frame(cancel10));
  json r10 = s.response(10);
  CHECK(r10["error"]["code"] == -32800);
  // A string id is cancelled the same way.
  json diagS = makeRequestJson("req-s", "textDocument/diagnostic", {{"textDocument", {{"uri", uri}}}});
  s.sendRaw(frame(diagS) + frame({{"jsonrpc", "2.0"}, {"method", "$/cancelRequest"}, {"params", {{"id", "req-s"}}}}));
  CHECK(s.waitFor([](const json& m) { return m.contains("id") && m["id"] == "req-s"; }, "response to req-s")["error"]["code"] ==
        -32800);

  // A code action whose document has a newer change already queued: ContentModified (its
  // positions refer to the older text).
  json action11 = makeRequestJson(
      11, "textDocument/codeAction",
      {{"textDocument", {{"uri", uri}}}, {"range", rangeOf(7, 0, 7, 0)}, {"context", {{"diagnostics", json::array()}}}});
  json change = {{"jsonrpc", "2.0"},
                 {"method", "textDocument/didChange"},
                 {"params",
                  {{"textDocument", {{"uri", uri}, {"version", 2}}},
                   {"contentChanges", json::array({LspProcess::edit(rangeOf(0, 0, 0, 0), "# edited\n")})}}}};
  s.sendRaw(frame(action11) + frame(change));
  CHECK(s.response(11)["error"]["code"] == -32801);

  // Not cancelled: answered, with the newest version's findings (the finding moved down a line).
  s.request(12, "textDocument/diagnostic", {{"textDocument", {{"uri", uri}}}});
  json r12 = s.response(12);
  REQUIRE(r12.contains("result"));
  bool sl101AtLine8 = false;
  for (const auto& d : r12["result"]["items"])
    if (d["code"] == "SL101" && d["range"]["start"]["line"] == 8) sl101AtLine8 = true;
  CHECK(sl101AtLine8);
  // Cancelling a request already answered, or one never sent: ignored.
  s.notify("$/cancelRequest", {{"id", 12}});
  s.notify("$/cancelRequest", {{"id", 999}});
  s.notify("$/cancelRequest", {{"id", json::array()}});
  s.request(13, "shardlint/noSuchMethod");
  CHECK(s.response(13)["error"]["code"] == -32601);
  for (const auto& m : s.received)
    if (m.contains("id") && (m["id"] == 12 || m["id"] == 999)) CHECK(!m.contains("error"));
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
