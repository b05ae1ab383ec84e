// The scripted LSP client the `shardlint server` tests share: `shardlint server` on pipes (LspProcess), with
// the SL101 script they edit and the JSON helpers for positions, ranges and requests.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "TestSupport.h"

namespace shardlint::testing::lsp {

namespace fs = std::filesystem;
using nlohmann::json;


inline constexpr int kWaitSeconds = 10;  // every wait for the server is bounded

// SL101 on line 7 (0-based): the optimizer is built before FSDP(model). The emoji before the
// finding is 1 code point, 2 UTF-16 code units and 4 UTF-8 bytes, so the finding starts at
// UTF-16 character 28 and UTF-8 byte 30.
inline const char* const kBuggy =
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

inline std::string uriOf(const fs::path& p) { return "file://" + p.lexically_normal().string(); }

inline json pos(int line, int character) { return {{"line", line}, {"character", character}}; }
inline json rangeOf(int l1, int c1, int l2, int c2) { return {{"start", pos(l1, c1)}, {"end", pos(l2, c2)}}; }

// `shardlint server` on pipes, spawned with pipe() + fork() + execve().
class LspProcess {
 public:
  // `traceFile`: the server runs with SHARDLINT_LSP_TRACE=1 and its stderr (the trace lines) goes to that file.
  explicit LspProcess(const fs::path& traceFile = {}) {
    ::signal(SIGPIPE, SIG_IGN);  // a dead server must fail a test, not kill the test binary
    // Prepared before fork(): the child only calls async-signal-safe functions.
    int traceFd = traceFile.empty() ? -1 : ::open(traceFile.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (!traceFile.empty()) REQUIRE(traceFd >= 0);
    std::vector<std::string> envStrings;
    for (char** e = environ; *e; ++e) envStrings.emplace_back(*e);
    if (traceFd >= 0) envStrings.emplace_back("SHARDLINT_LSP_TRACE=1");
    std::vector<char*> envp;
    for (auto& e : envStrings) envp.push_back(e.data());
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>(SHARDLINT_BINARY), const_cast<char*>("server"), nullptr};
    int toChild[2], fromChild[2];
    REQUIRE(::pipe2(toChild, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(fromChild, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(toChild[0], STDIN_FILENO);
      ::dup2(fromChild[1], STDOUT_FILENO);
      // SHARDLINT_TEST_SERVER_STDERR set: the server's stderr (its SHARDLINT_LSP_TRACE lines) is kept.
      int devnull = ::getenv("SHARDLINT_TEST_SERVER_STDERR") ? -1 : ::open("/dev/null", O_WRONLY);
      if (traceFd >= 0) devnull = traceFd;
      if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
      ::execve(SHARDLINT_BINARY, argv, envp.data());
      ::_exit(127);
    }
    ::close(toChild[0]);
    ::close(fromChild[1]);
    if (traceFd >= 0) ::close(traceFd);
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

inline json makeRequestJson(const json& id, const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

inline void requireSl101At(const json& diagnostics, int line, int character) {
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


}  // namespace shardlint::testing::lsp
