// `shardlint server` robustness: protocol errors, hostile input, framing, request ids, floods of edits, the
// lifecycle (shutdown, exit codes, end of input) and cancellation.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "LspClient.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardlint::testing::lsp;

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
