// `shardlint server`: the message loop (a batch of edits is linted when the input goes idle), the
// input read ahead for cancellations and newer edits, JSON-RPC dispatch, the lifecycle (`initialize`,
// capabilities, watched files) and the settings; the entry points of lsp/Server.h. The Server class is
// declared in ServerImpl.h, its documents, lints and code actions are in the other Server*.cpp files.
#include "lsp/Server.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "driver/Config.h"
#include "driver/Linter.h"
#include "driver/ResultCache.h"
#include "driver/Settings.h"
#include "lsp/JsonRpc.h"
#include "lsp/ServerImpl.h"
#include "syntax/TreeSitter.h"

#ifndef SHARDLINT_VERSION
#define SHARDLINT_VERSION "0.0.0"
#endif

namespace shardlint::lsp {

namespace fs = std::filesystem;

Server::Server(const RuleCatalog& catalog, int inFd, int outFd)
    : catalog_(catalog), reader_(inFd), writer_(outFd), trace_(std::getenv("SHARDLINT_LSP_TRACE") != nullptr) {
  parser_.reset(ts_parser_new());
  ts_parser_set_language(parser_.get(), syntax::PyKinds::instance().language());
  // Each edit's analysis asks about the nodes the one before it asked about (syntax/TreeSitter.h).
  syntax::rememberChildren(true);
}

int Server::run() {
  for (;;) {
    Incoming in;
    if (!queue_.empty()) {
      in = std::move(queue_.front());
      queue_.pop_front();
    } else {
      bool pending = !dirtySelf_.empty() || !moved_.empty() || othersDirty_ || !othersPending_.empty();
      in = readIncoming(pending ? 0 : -1);
    }
    switch (in.status) {
      case MessageReader::Status::Timeout:
        // Input is idle: lint what this batch of changes touched. After a failure, drop the
        // work rather than retry it forever.
        if (!guarded([&] { flush(); })) {
          dirtySelf_.clear();
          moved_.clear();
          othersDirty_ = false;
          othersPending_.clear();
        }
        continue;
      case MessageReader::Status::Eof:
        return shutdown_ ? 0 : 1;
      case MessageReader::Status::Malformed:
        send(makeError(nullptr, kParseError, "Parse error: " + in.error));
        continue;
      case MessageReader::Status::Message:
        if (!in.error.empty()) {
          send(makeError(nullptr, kParseError, "Parse error: invalid JSON: " + in.error));
          continue;
        }
        handleMessage(in.msg);
        if (exit_) return shutdown_ ? 0 : 1;
        continue;
    }
  }
}

Server::Incoming Server::readIncoming(int timeoutMs) {
  MessageReader::Result r = reader_.next(timeoutMs);
  Incoming in;
  in.status = r.status;
  in.error = std::move(r.error);
  if (r.status == MessageReader::Status::Message) {
    in.bytes = r.body.size();
    try {
      in.msg = json::parse(r.body);
    } catch (const std::exception& e) {
      in.error = e.what();
      if (in.error.empty()) in.error = "unreadable";
    }
  }
  return in;
}

// Reads what the client has already sent (without waiting) into queue_, so that a request
// can see a `$/cancelRequest` for it, or a newer edit of its document, that came after it.
// Bounded: at most kMaxLookahead messages or kMaxLookaheadBytes of them are held.
void Server::lookAhead() {
  size_t bytes = 0;
  for (const auto& q : queue_) bytes += q.bytes;
  while (queue_.size() < kMaxLookahead && bytes < kMaxLookaheadBytes) {
    if (!queue_.empty() && queue_.back().status == MessageReader::Status::Eof) return;
    Incoming in = readIncoming(0);
    if (in.status == MessageReader::Status::Timeout) return;
    bytes += in.bytes;
    queue_.push_back(std::move(in));
  }
}

// The queued notification `method` whose params satisfy `pred`, or queue_.end().
template <class Pred>
std::deque<Server::Incoming>::iterator Server::findQueued(std::initializer_list<const char*> methods, Pred&& pred) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->status != MessageReader::Status::Message || !it->error.empty() || !it->msg.is_object()) continue;
    if (it->msg.contains("id")) continue;
    auto m = it->msg.find("method");
    if (m == it->msg.end() || !m->is_string()) continue;
    auto p = it->msg.find("params");
    if (p == it->msg.end() || !p->is_object()) continue;
    for (const char* name : methods)
      if (*m == name && pred(*p)) return it;
  }
  return queue_.end();
}

// Before serving request `id`: RequestCancelled when the client has already cancelled it;
// ContentModified when `uri` (the document the result is about, if any) has a newer change
// or was closed after the request, when `positional` (the request's positions and
// diagnostics refer to the version it was sent for).
void Server::checkStillWanted(const json& id, const json& params, bool positional) {
  lookAhead();
  auto cancel = findQueued({"$/cancelRequest"}, [&](const json& p) { return p.contains("id") && p["id"] == id; });
  if (cancel != queue_.end()) {
    queue_.erase(cancel);
    throw RpcError(kRequestCancelled, "request cancelled");
  }
  if (!positional || !params.is_object()) return;
  auto td = params.find("textDocument");
  if (td == params.end() || !td->is_object() || !td->contains("uri")) return;
  const json uri = (*td)["uri"];
  auto newer = findQueued({"textDocument/didChange", "textDocument/didClose"}, [&](const json& p) {
    auto t = p.find("textDocument");
    return t != p.end() && t->is_object() && t->contains("uri") && (*t)["uri"] == uri;
  });
  if (newer != queue_.end())
    throw RpcError(kContentModified, "the document changed after the request was sent");
}

void Server::log(int type, const std::string& message) {
  send(makeNotification("window/logMessage", {{"type", type}, {"message", "shardlint: " + message}}));
}

// Runs f; an exception is logged to the client instead of ending the server. False after one.
template <class F>
bool Server::guarded(F&& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    try {
      log(1, std::string("internal error: ") + e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  return false;
}

void Server::handleMessage(const json& msg) {
  try {
    dispatch(msg);
  } catch (const std::exception& e) {
    guarded([&] { log(1, std::string("internal error: ") + e.what()); });
  } catch (...) {
  }
}

void Server::dispatch(const json& msg) {
  if (!msg.is_object()) {
    send(makeError(nullptr, kInvalidRequest,
                   msg.is_array() ? "Invalid Request: batches are not supported" : "Invalid Request: not an object"));
    return;
  }
  if (auto v = msg.find("jsonrpc"); v != msg.end() && *v != "2.0") {
    send(makeError(nullptr, kInvalidRequest, "Invalid Request: `jsonrpc` must be \"2.0\""));
    return;
  }
  bool hasId = msg.contains("id");
  json id = hasId ? msg["id"] : json(nullptr);
  if (hasId && !(id.is_string() || id.is_number_integer() || id.is_number_unsigned() || id.is_null())) {
    send(makeError(nullptr, kInvalidRequest, "Invalid Request: `id` must be a number or a string"));
    return;
  }
  auto method = msg.find("method");
  if (method == msg.end() || !method->is_string()) {
    if (hasId && (msg.contains("result") || msg.contains("error"))) return;  // a reply to one of our requests
    send(makeError(id, kInvalidRequest, "Invalid Request: no `method`"));
    return;
  }
  json params = msg.contains("params") ? msg["params"] : json::object();
  if (hasId) handleRequest(id, method->get<std::string>(), params);
  else guarded([&] { handleNotification(method->get<std::string>(), params); });
}

void Server::handleRequest(const json& id, const std::string& method, const json& params) {
  try {
    if (method == "initialize") {
      if (initialized_) throw RpcError(kInvalidRequest, "initialize was already received");
      send(makeResponse(id, initialize(params)));
      return;
    }
    if (!initialized_)
      throw RpcError(kServerNotInitialized, "the server is not initialized (send `initialize` first)");
    if (shutdown_) throw RpcError(kInvalidRequest, "the server is shutting down");
    if (method == "shutdown") {
      shutdown_ = true;
      send(makeResponse(id, nullptr));
      return;
    }
    if (method == "textDocument/diagnostic") {
      checkStillWanted(id, params, false);
      flush(true);
      send(makeResponse(id, pullDiagnostics(params)));
      return;
    }
    if (method == "textDocument/codeAction") {
      checkStillWanted(id, params, true);
      flush(true);
      send(makeResponse(id, codeActions(params)));
      return;
    }
    throw RpcError(kMethodNotFound, "method not found: " + method);
  } catch (const RpcError& e) {
    send(makeError(id, e.code, e.what()));
  } catch (const json::exception& e) {
    send(makeError(id, kInvalidParams, std::string("invalid params: ") + e.what()));
  } catch (const std::exception& e) {
    send(makeError(id, kInternalError, std::string("internal error: ") + e.what()));
  } catch (...) {
    send(makeError(id, kInternalError, "internal error"));
  }
}

void Server::handleNotification(const std::string& method, const json& params) {
  if (method == "exit") {
    exit_ = true;
    return;
  }
  if (!initialized_ || shutdown_) return;  // dropped, as the protocol asks
  if (method == "initialized") registerWatchers();
  else if (method == "textDocument/didOpen") didOpen(params);
  else if (method == "textDocument/didChange") didChange(params);
  else if (method == "textDocument/didSave") didSave(params);
  else if (method == "textDocument/didClose") didClose(params);
  else if (method == "workspace/didChangeConfiguration") reloadSettings(true);
  else if (method == "workspace/didChangeWatchedFiles") didChangeWatchedFiles(params);
  // `$/cancelRequest` is read ahead by the requests it cancels (checkStillWanted); one for a
  // request already answered, `$/setTrace` and unknown notifications are ignored.
}

json Server::initialize(const json& params) {
  if (!params.is_object()) throw RpcError(kInvalidParams, "initialize: params must be an object");
  const json caps = params.value("capabilities", json::object());
  auto at = [](const json& j, std::initializer_list<const char*> keys) -> const json* {
    const json* cur = &j;
    for (const char* k : keys) {
      if (!cur->is_object()) return nullptr;
      auto it = cur->find(k);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    }
    return cur;
  };
  if (const json* encs = at(caps, {"general", "positionEncodings"}); encs && encs->is_array())
    for (const auto& e : *encs)
      if (e.is_string() && e.get<std::string>() == "utf-8") encoding_ = Encoding::Utf8;
  if (const json* d = at(caps, {"textDocument", "diagnostic"}); d && d->is_object()) pullMode_ = true;
  if (const json* r = at(caps, {"workspace", "diagnostics", "refreshSupport"}); r && r->is_boolean())
    refreshSupport_ = r->get<bool>();
  if (const json* w = at(caps, {"workspace", "didChangeWatchedFiles", "dynamicRegistration"}); w && w->is_boolean())
    watchRegistration_ = w->get<bool>();

  // The project root: the first workspace folder, else rootUri, else rootPath, else the current directory.
  std::optional<std::string> root;
  if (auto wf = params.find("workspaceFolders"); wf != params.end() && wf->is_array())
    for (const auto& f : *wf)
      if (!root && f.is_object() && f.contains("uri") && f["uri"].is_string())
        root = uriToPath(f["uri"].get<std::string>());
  if (!root)
    if (auto ru = params.find("rootUri"); ru != params.end() && ru->is_string())
      root = uriToPath(ru->get<std::string>());
  if (!root)
    if (auto rp = params.find("rootPath"); rp != params.end() && rp->is_string() && !rp->get<std::string>().empty())
      root = absolutePathKey(rp->get<std::string>());
  std::error_code ec;
  root_ = root ? *root : absolutePathKey(fs::current_path(ec).string());
  reloadSettings(false);
  initialized_ = true;

  json capabilities = {
      {"positionEncoding", encoding_ == Encoding::Utf8 ? "utf-8" : "utf-16"},
      {"textDocumentSync", {{"openClose", true}, {"change", 2}, {"save", {{"includeText", false}}}}},
      {"diagnosticProvider",
       {{"identifier", "shardlint"}, {"interFileDependencies", true}, {"workspaceDiagnostics", false}}},
      {"codeActionProvider", {{"codeActionKinds", json::array({"quickfix", kFixAllKind})}}},
  };
  return {{"capabilities", capabilities}, {"serverInfo", {{"name", "shardlint"}, {"version", SHARDLINT_VERSION}}}};
}

void Server::registerWatchers() {
  if (!watchRegistration_) return;
  json watchers = json::array();
  for (const char* g : {"**/pyproject.toml", "**/.shardlint.toml", "**/*.{yaml,yml}"})
    watchers.push_back({{"globPattern", g}});
  send(makeRequest("shardlint/" + std::to_string(++requestSeq_), "client/registerCapability",
                   {{"registrations", json::array({{{"id", "shardlint-watched-files"},
                                                    {"method", "workspace/didChangeWatchedFiles"},
                                                    {"registerOptions", {{"watchers", watchers}}}}})}}));
}

// loadConfig from the root, mapped to LintOptions the way `shardlint check` does.
void Server::reloadSettings(bool relint) {
  LintOptions options;
  options.jobs = 1;  // one file per lint; no thread pool
  FileConfig cfg;
  try {
    cfg = loadConfig(root_, std::nullopt);
    SettingsOverrides one;
    one.jobs = 1;  // one file per lint; no thread pool
    options = lintOptionsFrom(catalog_, cfg, one);
  } catch (const std::exception& e) {
    // Keep linting with the defaults; tell the user why their settings were not used.
    send(makeNotification("window/showMessage",
                          {{"type", 1}, {"message", std::string("shardlint: configuration error: ") + e.what()}}));
    options = LintOptions{};
    options.jobs = 1;
    cfg = FileConfig{};
  }
  // Precompiled headers for C++ documents (a LibTorch unit parses in about half the time with
  // one): in the cache folder `shardlint check` uses by default.
  if (const char* env = std::getenv("SHARDLINT_CACHE_DIR"); env && *env) options.pchCacheDir = env;
  else if (!root_.empty())
    options.pchCacheDir =
        ((cfg.path ? cfg.path->parent_path() : std::filesystem::path(root_)) / ".shardlint_cache").string();
  options.cacheKey = std::string("shardlint ") + SHARDLINT_VERSION + " " + executableFingerprint();
  base_ = std::move(options);
  prescanMask_ = nullptr;
  config_ = std::move(cfg);
  // The project index stays warm between edits: each lint re-reads only what changed (and
  // what depends on it). New settings (rules, extra names) start a fresh one.
  table_ = std::make_unique<ModuleTable>(Linter(catalog_, base_).tableConfig(/*retireRoots=*/false));
  if (relint) othersDirty_ = true;
}

void Server::didChangeWatchedFiles(const json& params) {
  bool settings = false;
  for (const auto& c : params.value("changes", json::array())) {
    std::string uri = c.value("uri", "");
    std::string name = fs::path(uri).filename().string();
    if (name == "pyproject.toml" || name == ".shardlint.toml") settings = true;
  }
  if (settings) reloadSettings(true);
  if (table_) table_->forgetWalks();  // a file created or deleted changes a project's files
  othersDirty_ = true;  // a config or module on disk may change any open document's results
}

// The path as the settings see it (relative to the root when inside it), for globs.
std::string Server::settingsPath(const std::string& path) const {
  fs::path rel = fs::path(path).lexically_relative(root_);
  std::string s = rel.generic_string();
  if (s.empty() || s.rfind("..", 0) == 0) return fs::path(path).generic_string();
  return s;
}

int runServer(const RuleCatalog& catalog, int inFd, int outFd) {
  Server server(catalog, inFd, outFd);
  return server.run();
}

int runStdioServer(const RuleCatalog& catalog) {
  ::signal(SIGPIPE, SIG_IGN);
  std::fflush(stdout);
  int protocolOut = ::dup(STDOUT_FILENO);
  if (protocolOut < 0) protocolOut = STDOUT_FILENO;
  else ::dup2(STDERR_FILENO, STDOUT_FILENO);  // stray writes to stdout cannot corrupt the stream
  return runServer(catalog, STDIN_FILENO, protocolOut);
}

}  // namespace shardlint::lsp
