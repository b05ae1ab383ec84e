#include "lsp/Server.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/SourceFile.h"
#include "driver/Config.h"
#include "driver/Settings.h"
#include "driver/Fixer.h"
#include "driver/Linter.h"
#include "driver/ResultCache.h"
#include "lsp/JsonRpc.h"
#include "output/Emitters.h"
#include "syntax/TreeSitter.h"

#ifndef SHARDLINT_VERSION
#define SHARDLINT_VERSION "0.0.0"
#endif

namespace shardlint::lsp {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A request that cannot be served; becomes a JSON-RPC error response.
struct RpcError : std::runtime_error {
  RpcError(int c, const std::string& m) : std::runtime_error(m), code(c) {}
  int code;
};

enum class Encoding { Utf16, Utf8 };
enum class DocKind { Python, Config, Launch, Cxx, Markdown, Other };

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

DocKind kindOf(const std::string& path, const std::string& languageId) {
  fs::path p(path);
  std::string ext = lower(p.extension().string()), name = p.filename().string();
  if (ext == ".yaml" || ext == ".yml" || ext == ".json") return DocKind::Config;
  if (ext == ".sh" || name == "Makefile" || name == "makefile" || name == "GNUmakefile") return DocKind::Launch;
  if (ext == ".cpp" || ext == ".cc" || ext == ".cxx") return DocKind::Cxx;
  if (ext == ".md") return DocKind::Markdown;  // the configs its fenced blocks show (`shardlint check`'s rule)
  if (ext == ".py" || ext == ".pyi" || languageId == "python") return DocKind::Python;
  return DocKind::Other;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `file:///a/b%20c.py` -> `/a/b c.py`; nullopt for other schemes.
std::optional<std::string> uriToPath(const std::string& uri) {
  if (lower(uri.substr(0, 7)) != "file://") return std::nullopt;
  std::string rest = uri.substr(7);
  size_t slash = rest.find('/');  // skip an authority (`file://localhost/...`)
  if (slash == std::string::npos) return std::nullopt;
  rest = rest.substr(slash);
  std::string out;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && hexValue(rest[i + 1]) >= 0 && hexValue(rest[i + 2]) >= 0) {
      out += static_cast<char>(hexValue(rest[i + 1]) * 16 + hexValue(rest[i + 2]));
      i += 2;
    } else if (rest[i] == '?' || rest[i] == '#') {
      break;
    } else {
      out += rest[i];
    }
  }
  if (out.empty() || out.find('\0') != std::string::npos) return std::nullopt;
  return absolutePathKey(out);
}

bool iprefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// In text[b, e) (one line's comment): the offset just after the last code of a
// `# noqa: CODES` section, or npos.
size_t noqaCodesEnd(std::string_view text, size_t b, size_t e) {
  for (size_t pos = b; pos < e; ++pos) {
    // `#`, or the second `/` of `//` (C++)
    if (text[pos] != '#' && !(text[pos] == '/' && pos > b && text[pos - 1] == '/')) continue;
    size_t i = pos + 1;
    while (i < e && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (!iprefix(text.substr(i, e - i), "noqa")) continue;
    i += 4;
    while (i < e && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= e || text[i] != ':') continue;
    ++i;
    size_t last = std::string_view::npos;
    for (;;) {
      while (i < e && (text[i] == ' ' || text[i] == ',' || text[i] == '\t')) ++i;
      size_t start = i;
      while (i < e && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '-' || text[i] == '_')) ++i;
      if (i == start) break;
      last = i;
    }
    if (last != std::string_view::npos) return last;
  }
  return std::string_view::npos;
}

bool isEncodingLine(std::string_view line) {  // PEP 263
  size_t i = line.find_first_not_of(" \t\f");
  if (i == std::string_view::npos || line[i] != '#') return false;
  size_t at = line.find("coding", i);
  return at != std::string_view::npos && at + 6 < line.size() && (line[at + 6] == ':' || line[at + 6] == '=');
}

using TreePtr = std::unique_ptr<TSTree, syntax::TreeDeleter>;

constexpr size_t kMaxDocumentBytes = size_t{1} << 30;  // byte offsets are 32-bit

struct Document {
  std::string uri;
  std::string path;  // absolute, lexically normal
  std::string languageId;
  DocKind kind = DocKind::Other;
  json version;  // integer (or null)
  std::string text;
  TreePtr tree;  // Python documents: the tree for `text`, re-parsed incrementally
  bool treeFromView = false;  // parsed from syntax::lineBreakView(text): the next parse starts afresh
  json diagnostics = json::array();
  std::vector<Diagnostic> findings;  // what `diagnostics` was made from, index for index (their fixes)
  bool linted = false;
};

// The code action kind of "fix all safe shardlint findings" (like ESLint's and Ruff's).
constexpr const char* kFixAllKind = "source.fixAll.shardlint";

class Server {
 public:
  Server(const RuleCatalog& catalog, int inFd, int outFd)
      : catalog_(catalog), reader_(inFd), writer_(outFd), trace_(std::getenv("SHARDLINT_LSP_TRACE") != nullptr) {
    parser_.reset(ts_parser_new());
    ts_parser_set_language(parser_.get(), syntax::PyKinds::instance().language());
  }

  int run() {
    for (;;) {
      Incoming in;
      if (!queue_.empty()) {
        in = std::move(queue_.front());
        queue_.pop_front();
      } else {
        bool pending = !dirtySelf_.empty() || othersDirty_ || !othersPending_.empty();
        in = readIncoming(pending ? 0 : -1);
      }
      switch (in.status) {
        case MessageReader::Status::Timeout:
          // Input is idle: lint what this batch of changes touched. After a failure, drop the
          // work rather than retry it forever.
          if (!guarded([&] { flush(); })) {
            dirtySelf_.clear();
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

 private:
  // ---- input -------------------------------------------------------------------------------
  // One message from the client, its JSON parsed (`error` says why not, for a Message).
  struct Incoming {
    MessageReader::Status status = MessageReader::Status::Eof;
    std::string error;
    json msg;
    size_t bytes = 0;
  };

  Incoming readIncoming(int timeoutMs) {
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
  static constexpr size_t kMaxLookahead = 1024;
  static constexpr size_t kMaxLookaheadBytes = size_t{64} << 20;
  void lookAhead() {
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
  std::deque<Incoming>::iterator findQueued(std::initializer_list<const char*> methods, Pred&& pred) {
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
  void checkStillWanted(const json& id, const json& params, bool positional) {
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

  // ---- messages -------------------------------------------------------------------------
  void send(const json& msg) { writer_.send(msg); }

  void log(int type, const std::string& message) {
    send(makeNotification("window/logMessage", {{"type", type}, {"message", "shardlint: " + message}}));
  }

  // Runs f; an exception is logged to the client instead of ending the server. False after one.
  template <class F>
  bool guarded(F&& f) {
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

  void handleMessage(const json& msg) {
    try {
      dispatch(msg);
    } catch (const std::exception& e) {
      guarded([&] { log(1, std::string("internal error: ") + e.what()); });
    } catch (...) {
    }
  }

  void dispatch(const json& msg) {
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

  void handleRequest(const json& id, const std::string& method, const json& params) {
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

  void handleNotification(const std::string& method, const json& params) {
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

  // ---- lifecycle -------------------------------------------------------------------------
  json initialize(const json& params) {
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

  void registerWatchers() {
    if (!watchRegistration_) return;
    json watchers = json::array();
    for (const char* g : {"**/pyproject.toml", "**/.shardlint.toml", "**/*.{yaml,yml}"})
      watchers.push_back({{"globPattern", g}});
    send(makeRequest("shardlint/" + std::to_string(++requestSeq_), "client/registerCapability",
                     {{"registrations", json::array({{{"id", "shardlint-watched-files"},
                                                      {"method", "workspace/didChangeWatchedFiles"},
                                                      {"registerOptions", {{"watchers", watchers}}}}})}}));
  }

  // ---- configuration -----------------------------------------------------------------------
  // loadConfig from the root, mapped to LintOptions the way `shardlint check` does.
  void reloadSettings(bool relint) {
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
    config_ = std::move(cfg);
    // The project index stays warm between edits: each lint re-reads only what changed (and
    // what depends on it). New settings (rules, extra names) start a fresh one.
    table_ = std::make_unique<ModuleTable>(Linter(catalog_, base_).tableConfig(/*retireRoots=*/false));
    if (relint) othersDirty_ = true;
  }

  void didChangeWatchedFiles(const json& params) {
    bool settings = false;
    for (const auto& c : params.value("changes", json::array())) {
      std::string uri = c.value("uri", "");
      std::string name = fs::path(uri).filename().string();
      if (name == "pyproject.toml" || name == ".shardlint.toml") settings = true;
    }
    if (settings) reloadSettings(true);
    othersDirty_ = true;  // a config or module on disk may change any open document's results
  }

  // The path as the settings see it (relative to the root when inside it), for globs.
  std::string settingsPath(const std::string& path) const {
    fs::path rel = fs::path(path).lexically_relative(root_);
    std::string s = rel.generic_string();
    if (s.empty() || s.rfind("..", 0) == 0) return fs::path(path).generic_string();
    return s;
  }

  bool excluded(const std::string& path) const { return isExcluded(config_, settingsPath(path)); }


  // ---- documents ---------------------------------------------------------------------------
  void didOpen(const json& params) {
    const json& td = params.at("textDocument");
    std::string uri = td.at("uri").get<std::string>();
    auto path = uriToPath(uri);
    if (!path) return;  // untitled buffers and other schemes: nothing on disk to lint as a project
    docs_.erase(uri);
    Document& d = docs_[uri];
    d.uri = uri;
    d.path = *path;
    d.languageId = td.value("languageId", "");
    d.kind = kindOf(d.path, d.languageId);
    d.version = td.contains("version") ? td["version"] : json(nullptr);
    d.text = td.at("text").get<std::string>();
    if (d.kind == DocKind::Python) reparse(d, false);
    markDirty(uri);
    othersDirty_ = othersDirty_ || differsFromDisk(d);
  }

  void didChange(const json& params) {
    const json& td = params.at("textDocument");
    auto it = docs_.find(td.at("uri").get<std::string>());
    if (it == docs_.end()) return;
    Document& d = it->second;
    const json& changes = params.at("contentChanges");
    // Check the shapes first, so a bad change cannot leave the text half edited.
    if (!changes.is_array()) throw RpcError(kInvalidParams, "didChange: contentChanges must be an array");
    for (const auto& change : changes) {
      if (!change.at("text").is_string()) throw RpcError(kInvalidParams, "didChange: `text` must be a string");
      if (change.contains("range"))
        for (const char* end : {"start", "end"})
          for (const char* k : {"line", "character"})
            if (!change["range"].at(end).at(k).is_number_integer())
              throw RpcError(kInvalidParams, "didChange: positions must be integers");
    }
    if (td.contains("version")) d.version = td["version"];
    bool incremental = true;
    try {
      for (const auto& change : changes) {
        const std::string& newText = change["text"].get_ref<const std::string&>();
        if (d.text.size() + newText.size() > kMaxDocumentBytes)
          throw RpcError(kInvalidParams, "didChange: the document would exceed 1 GiB");
        if (!change.contains("range")) {  // the whole document
          d.text = newText;
          incremental = false;
          continue;
        }
        LineIndex index(d.text);
        uint32_t start = offsetOf(index, d.text, change["range"]["start"]);
        uint32_t end = offsetOf(index, d.text, change["range"]["end"]);
        if (end < start) std::swap(start, end);
        if (d.tree && incremental) {
          TSInputEdit edit{};
          edit.start_byte = start;
          edit.old_end_byte = end;
          edit.new_end_byte = start + static_cast<uint32_t>(newText.size());
          edit.start_point = pointOf(index, start);
          edit.old_end_point = pointOf(index, end);
          TSPoint p = edit.start_point;  // new end: the start advanced over the inserted text
          size_t lastNl = newText.rfind('\n');
          if (lastNl == std::string::npos) {
            p.column += static_cast<uint32_t>(newText.size());
          } else {
            p.row += static_cast<uint32_t>(std::count(newText.begin(), newText.end(), '\n'));
            p.column = static_cast<uint32_t>(newText.size() - lastNl - 1);
          }
          edit.new_end_point = p;
          ts_tree_edit(d.tree.get(), &edit);
        }
        d.text.replace(start, end - start, newText);
      }
    } catch (...) {
      incremental = false;  // the tree may not match the text any more: parse from scratch
      if (d.kind == DocKind::Python) reparse(d, false);
      markDirty(d.uri);
      othersDirty_ = true;
      throw;
    }
    if (d.kind == DocKind::Python) reparse(d, incremental);
    markDirty(d.uri);
    othersDirty_ = true;
  }

  void didSave(const json& params) {
    const json& td = params.at("textDocument");
    auto it = docs_.find(td.at("uri").get<std::string>());
    if (it == docs_.end()) return;
    Document& d = it->second;
    if (params.contains("text") && params["text"].is_string() && params["text"].get<std::string>() != d.text) {
      d.text = params["text"].get<std::string>();
      if (d.kind == DocKind::Python) reparse(d, false);
      othersDirty_ = true;
    }
    markDirty(d.uri);
  }

  void didClose(const json& params) {
    std::string uri = params.at("textDocument").at("uri").get<std::string>();
    auto it = docs_.find(uri);
    if (it == docs_.end()) return;
    bool affectsOthers = differsFromDisk(it->second);
    docs_.erase(it);
    dirtySelf_.erase(std::remove(dirtySelf_.begin(), dirtySelf_.end(), uri), dirtySelf_.end());
    send(makeNotification("textDocument/publishDiagnostics", {{"uri", uri}, {"diagnostics", json::array()}}));
    othersDirty_ = othersDirty_ || affectsOthers;  // its unsaved text no longer overrides the file
  }

  bool differsFromDisk(const Document& d) const {
    std::error_code ec;
    auto size = fs::file_size(d.path, ec);
    if (ec || size != d.text.size()) return true;
    std::FILE* f = std::fopen(d.path.c_str(), "rb");
    if (!f) return true;
    std::string disk(d.text.size(), '\0');
    size_t n = std::fread(disk.data(), 1, disk.size(), f);
    std::fclose(f);
    return n != disk.size() || disk != d.text;
  }

  void markDirty(const std::string& uri) {
    if (std::find(dirtySelf_.begin(), dirtySelf_.end(), uri) == dirtySelf_.end()) dirtySelf_.push_back(uri);
  }

  void reparse(Document& d, bool incremental) {
    auto t0 = std::chrono::steady_clock::now();
    TSTree* old = incremental && !d.treeFromView ? d.tree.get() : nullptr;
    TSTree* fresh = syntax::parsePython(parser_.get(), old, d.text, &d.treeFromView);
    d.tree.reset(fresh);  // null when parsing failed: the linter parses the text itself
    if (trace_)
      std::fprintf(stderr, "shardlint server: %s parse of %s: %.2f ms\n", incremental ? "incremental" : "full",
                   d.path.c_str(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }

  // Byte offset of an LSP Position (in the negotiated encoding), clamped to the document.
  uint32_t offsetOf(const LineIndex& index, const std::string& text, const json& pos) const {
    int64_t line = std::max<int64_t>(0, pos.at("line").get<int64_t>());
    int64_t ch = std::max<int64_t>(0, pos.at("character").get<int64_t>());
    if (line >= index.lineCount()) return static_cast<uint32_t>(text.size());
    uint32_t l = static_cast<uint32_t>(line);
    uint32_t c = static_cast<uint32_t>(std::min<int64_t>(ch, UINT32_MAX));
    if (encoding_ == Encoding::Utf16) return index.offsetOfUtf16(l, c);
    uint32_t begin = index.lineStart(l);
    uint32_t at = begin + std::min<uint32_t>(c, index.lineEnd(l) - begin);
    while (at > begin && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;  // not inside a character
    return at;
  }

  static TSPoint pointOf(const LineIndex& index, uint32_t offset) {
    uint32_t line = index.lineOf(offset);
    return TSPoint{line, offset - index.lineStart(line)};
  }

  json position(const LineCol& lc) const {
    return {{"line", lc.line}, {"character", encoding_ == Encoding::Utf8 ? lc.byteColumn : lc.utf16Column}};
  }

  std::string uriFor(const std::string& path) const {
    std::string key = absolutePathKey(path);
    for (const auto& [uri, d] : docs_)
      if (d.path == key) return uri;  // the client's own spelling of an open document
    return output::fileUri(path);
  }

  // ---- linting -----------------------------------------------------------------------------
  // The Diagnostic as `writeLspJson` writes it, in the negotiated encoding.
  json toLsp(const Diagnostic& d) const {
    const RuleInfo* info = catalog_.find(d.code);
    return output::lspDiagnostic(d, info && info->code == d.code ? info : nullptr, encoding_ == Encoding::Utf8,
                                 [&](const std::string& p) { return uriFor(p); });
  }

  LintOptions optionsWithOverlays() const {
    LintOptions o = base_;
    for (const auto& [uri, d] : docs_) {
      o.overlays[d.path] = d.text;
      if (d.tree) o.parsedTrees[d.path] = d.tree.get();
    }
    return o;
  }

  // The document's findings as LSP diagnostics; `findings` (when given) gets the same findings,
  // index for index.
  json lint(const Document& d, const Linter& linter, std::vector<Diagnostic>* findings = nullptr) {
    json out = json::array();
    if (findings) findings->clear();
    if (d.kind == DocKind::Other || excluded(d.path)) return out;
    if (d.kind == DocKind::Markdown && !config_.markdown.value_or(true)) return out;  // `markdown = false`
    auto t0 = std::chrono::steady_clock::now();
    if (!table_) table_ = std::make_unique<ModuleTable>(Linter(catalog_, base_).tableConfig(false));
    std::vector<Diagnostic> all = linter.lintFiles({d.path}, nullptr, table_.get());
    applyFindingSettings(catalog_, config_, all,
                         [&](const std::string& p) { return settingsPath(absolutePathKey(p)); });
    for (auto& diag : all) {
      if (absolutePathKey(diag.location.path) != d.path) continue;  // reported with the file it points into
      out.push_back(toLsp(diag));
      if (findings) findings->push_back(std::move(diag));
    }
    if (trace_)
      std::fprintf(stderr, "shardlint server: lint of %s: %.2f ms, %zu diagnostics\n", d.path.c_str(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                   out.size());
    return out;
  }

  void publish(const Document& d) {
    json params = {{"uri", d.uri}, {"diagnostics", d.diagnostics}};
    if (!d.version.is_null()) params["version"] = d.version;
    send(makeNotification("textDocument/publishDiagnostics", params));
  }

  // One lint per changed document per batch, published at once. Then the other open documents
  // (a helper module edit changes its dependents' findings), published only when their results
  // changed; those re-checks yield to new input, so typing is never queued behind them, unless
  // `complete` (a request needs every result to be current).
  void flush(bool complete = false) {
    if (dirtySelf_.empty() && !othersDirty_ && othersPending_.empty()) return;
    std::vector<std::string> self = std::move(dirtySelf_);
    dirtySelf_.clear();
    if (othersDirty_) {
      for (const auto& [uri, d] : docs_) othersPending_.insert(uri);
      othersDirty_ = false;
    }
    Linter linter(catalog_, optionsWithOverlays());
    for (const auto& uri : self) {
      auto it = docs_.find(uri);
      if (it == docs_.end()) continue;
      othersPending_.erase(uri);
      Document& d = it->second;
      try {
        d.diagnostics = lint(d, linter, &d.findings);
      } catch (const std::exception& e) {
        log(1, "internal error while linting " + d.path + ": " + e.what());
      }
      d.linted = true;
      if (!pullMode_) publish(d);
    }
    while (!othersPending_.empty()) {
      if (!complete && (!queue_.empty() || reader_.inputPending())) return;  // back here when the input is idle again
      std::string uri = *othersPending_.begin();
      othersPending_.erase(othersPending_.begin());
      auto it = docs_.find(uri);
      if (it == docs_.end()) continue;
      Document& d = it->second;
      json fresh;
      try {
        fresh = lint(d, linter, &d.findings);
      } catch (const std::exception& e) {
        log(1, "internal error while linting " + d.path + ": " + e.what());
        continue;
      }
      if (d.linted && fresh == d.diagnostics) continue;
      d.diagnostics = std::move(fresh);
      d.linted = true;
      othersChanged_ = true;
      if (!pullMode_) publish(d);
    }
    if (othersChanged_ && pullMode_ && refreshSupport_)
      send({{"jsonrpc", "2.0"}, {"id", "shardlint/" + std::to_string(++requestSeq_)},
            {"method", "workspace/diagnostic/refresh"}});
    othersChanged_ = false;
  }

  json pullDiagnostics(const json& params) {
    std::string uri = params.at("textDocument").at("uri").get<std::string>();
    auto it = docs_.find(uri);
    if (it != docs_.end()) return {{"kind", "full"}, {"items", it->second.diagnostics}};
    // Not open: lint the file on disk (with the open documents as overlays).
    Document d;
    auto path = uriToPath(uri);
    if (!path) return {{"kind", "full"}, {"items", json::array()}};
    std::error_code ec;
    if (!fs::is_regular_file(*path, ec)) return {{"kind", "full"}, {"items", json::array()}};
    d.uri = uri;
    d.path = *path;
    d.kind = kindOf(d.path, "");
    Linter linter(catalog_, optionsWithOverlays());
    return {{"kind", "full"}, {"items", lint(d, linter)}};
  }

  // ---- code actions ------------------------------------------------------------------------
  json codeActions(const json& params) {
    json actions = json::array();
    std::string uri = params.at("textDocument").at("uri").get<std::string>();
    auto it = docs_.find(uri);
    if (it == docs_.end()) return actions;
    const Document& d = it->second;
    const json context = params.value("context", json::object());
    // Kinds asked for: quick fixes (a finding's fix, then suppressions) and "fix all".
    bool quick = true, fixAll = true;
    if (auto only = context.find("only"); only != context.end() && only->is_array()) {
      quick = fixAll = false;
      for (const auto& k : *only) {
        if (!k.is_string()) continue;
        std::string kind = k.get<std::string>();
        quick = quick || kind == "quickfix" || kind.empty();
        fixAll = fixAll || kind == "source" || kind == "source.fixAll" || kind == kFixAllKind;
      }
    }
    // Markdown: findings have no fixes, and a suppression comment belongs in a block, not at the file's top.
    if (d.kind == DocKind::Other || d.kind == DocKind::Markdown) return actions;
    LineIndex index(d.text);
    if (quick) {
      // JSON has no comments: no suppressions there.
      bool comments = lower(fs::path(d.path).extension().string()) != ".json";
      std::set<std::pair<std::string, uint32_t>> lineDone;
      std::set<std::string> fileDone;
      for (const auto& cd : context.value("diagnostics", json::array())) {
        if (!cd.is_object() || !cd.contains("code") || !cd.contains("range")) continue;
        if (cd.contains("source") && cd["source"] != "shardlint") continue;
        const json code = cd["code"];
        if (!code.is_string()) continue;
        size_t ours = d.diagnostics.size();
        for (size_t i = 0; i < d.diagnostics.size(); ++i)
          if (d.diagnostics[i]["code"] == code && sameRange(d.diagnostics[i]["range"], cd["range"])) ours = i;
        if (ours == d.diagnostics.size()) continue;
        const json& diag = d.diagnostics[ours];
        if (ours < d.findings.size() && d.findings[ours].fix)
          if (json edit = fixEdit(d, index, {&*d.findings[ours].fix}); !edit.is_null()) {
            const Fix& fix = *d.findings[ours].fix;
            actions.push_back({{"title", fix.title + (fix.applicability == Applicability::Safe ? "" : " (unsafe)")},
                               {"kind", "quickfix"},
                               {"diagnostics", json::array({diag})},
                               {"isPreferred", fix.applicability == Applicability::Safe},
                               {"edit", edit}});
          }
        if (!comments) continue;
        std::string c = code.get<std::string>();
        uint32_t line = diag["range"]["start"]["line"].get<uint32_t>();
        if (line >= index.lineCount()) continue;
        if (lineDone.insert({c, line}).second) actions.push_back(lineAction(d, index, diag, c, line));
        if (fileDone.insert(c).second) actions.push_back(fileAction(d, index, diag, c));
      }
    }
    if (fixAll) {
      // Every safe fix of the document, to a fixed point, as `shardlint check --fix` applies them.
      std::vector<Diagnostic> first = d.findings;
      auto relint = [&](const std::map<std::string, std::string>& texts) {
        std::vector<Diagnostic> found = lintWithOverlays(catalog_, optionsWithOverlays(), {d.path}, texts);
        applyFindingSettings(catalog_, config_, found,
                             [&](const std::string& p) { return settingsPath(absolutePathKey(p)); });
        return found;
      };
      // The document's text is the editor's, not the disk's.
      FixRun run = fixToFixedPoint(first, /*unsafe=*/false, relint, 4, {{d.path, d.text}});
      auto changed = run.changed.find(d.path);
      if (changed != run.changed.end()) {
        json whole = {{"start", position(index.resolve(0))},
                      {"end", position(index.resolve(static_cast<uint32_t>(d.text.size())))}};
        actions.push_back({{"title", "Fix all safe shardlint findings (" + std::to_string(run.fixed) + ")"},
                           {"kind", kFixAllKind},
                           {"edit", {{"changes", {{d.uri, json::array({{{"range", whole},
                                                                          {"newText", changed->second.second}}})}}}}}});
      }
    }
    return actions;
  }

  // The workspace edit of `fixes` found in document `d`. An edit in `d` is placed by its bytes in the
  // editor's text; one in another file (SL402 edits the linked config) by its own line and column,
  // which the lint computed from that file's open buffer or its text on disk. Null when an edit
  // does not fit `d`.
  json fixEdit(const Document& d, const LineIndex& index, const std::vector<const Fix*>& fixes) const {
    json changes = json::object();
    for (const Fix* fix : fixes)
      for (const auto& e : fix->edits) {
        json range;
        std::string uri;
        if (absolutePathKey(e.location.path) == d.path) {
          if (e.location.range.end > d.text.size()) return nullptr;
          range = {{"start", position(index.resolve(e.location.range.begin))},
                   {"end", position(index.resolve(e.location.range.end))}};
          uri = d.uri;
        } else {
          range = {{"start", position(e.location.start)}, {"end", position(e.location.end)}};
          uri = uriFor(e.location.path);
        }
        changes[uri].push_back({{"range", range}, {"newText", e.text}});
      }
    return {{"changes", changes}};
  }

  static bool sameRange(const json& a, const json& b) {
    try {
      for (const char* end : {"start", "end"})
        for (const char* k : {"line", "character"})
          if (a.at(end).at(k).get<int64_t>() != b.at(end).at(k).get<int64_t>()) return false;
      return true;
    } catch (const json::exception&) {
      return false;
    }
  }

  json edit(const Document& d, const LineIndex& index, uint32_t offset, const std::string& text) const {
    json pos = position(index.resolve(offset));
    return {{"changes", {{d.uri, json::array({{{"range", {{"start", pos}, {"end", pos}}}, {"newText", text}}})}}}};
  }

  // `  # noqa: CODE` at the end of the line, or `, CODE` added to the line's `# noqa: ...`.
  json lineAction(const Document& d, const LineIndex& index, const json& diag, const std::string& code,
                  uint32_t line) const {
    uint32_t begin = index.lineStart(line), end = index.lineEnd(line);
    std::string_view text(d.text);
    size_t comment = std::string_view::npos;
    if (d.kind == DocKind::Python && d.tree) {
      if (end > begin) {
        TSNode n = ts_node_descendant_for_byte_range(ts_tree_root_node(d.tree.get()), end - 1, end);
        if (syntax::PyKinds::instance().kind(n) == syntax::Kind::comment && ts_node_start_byte(n) >= begin)
          comment = ts_node_start_byte(n);
      }
    } else if (d.kind == DocKind::Cxx) {
      // C++: a `// noqa: ...` already at the end of the line gets the code; otherwise a new one.
      std::string_view lineText = text.substr(begin, end - begin);
      if (size_t at = lineText.rfind("// noqa"); at != std::string_view::npos) comment = begin + at;
    } else if (size_t at = hashCommentStart(text.substr(begin, end - begin)); at != std::string_view::npos) {
      comment = begin + at;
    }
    size_t codesEnd = comment == std::string_view::npos ? std::string_view::npos : noqaCodesEnd(text, comment, end);
    std::string marker = d.kind == DocKind::Cxx ? "//" : "#";
    json action = {{"title", "Suppress " + code + " on this line (" + marker + " noqa: " + code + ")"},
                   {"kind", "quickfix"},
                   {"diagnostics", json::array({diag})}};
    if (codesEnd != std::string_view::npos)
      action["edit"] = edit(d, index, static_cast<uint32_t>(codesEnd), ", " + code);
    else
      action["edit"] = edit(d, index, end, "  " + marker + " noqa: " + code);
    return action;
  }

  // `# shardlint: noqa: CODE` on a line of its own at the top (after a shebang / encoding line).
  json fileAction(const Document& d, const LineIndex& index, const json& diag, const std::string& code) const {
    auto lineText = [&](uint32_t l) {
      return std::string_view(d.text).substr(index.lineStart(l), index.lineEnd(l) - index.lineStart(l));
    };
    uint32_t line = 0;
    if (line < index.lineCount() && lineText(line).rfind("#!", 0) == 0) ++line;
    if (d.kind == DocKind::Python)
      for (uint32_t l = line; l < 2 && l < index.lineCount(); ++l)
        if (isEncodingLine(lineText(l))) line = l + 1;
    std::string comment = (d.kind == DocKind::Cxx ? "// shardlint: noqa: " : "# shardlint: noqa: ") + code;
    json action = {{"title", "Suppress " + code + " in this file"},
                   {"kind", "quickfix"},
                   {"diagnostics", json::array({diag})}};
    if (line < index.lineCount())
      action["edit"] = edit(d, index, index.lineStart(line), comment + "\n");
    else  // the shebang or encoding line is the last line and has no newline
      action["edit"] = edit(d, index, static_cast<uint32_t>(d.text.size()), "\n" + comment + "\n");
    return action;
  }

  const RuleCatalog& catalog_;
  MessageReader reader_;
  std::deque<Incoming> queue_;  // read ahead, not handled yet (see lookAhead)
  MessageWriter writer_;
  bool trace_ = false;
  std::unique_ptr<TSParser, syntax::ParserDeleter> parser_;

  bool initialized_ = false, shutdown_ = false, exit_ = false;
  Encoding encoding_ = Encoding::Utf16;
  bool pullMode_ = false, refreshSupport_ = false, watchRegistration_ = false;
  long requestSeq_ = 0;

  std::string root_;
  LintOptions base_;
  std::unique_ptr<ModuleTable> table_;  // the warm project index (parsed modules, shared summaries)
  FileConfig config_;

  std::map<std::string, Document> docs_;  // by URI
  std::vector<std::string> dirtySelf_;    // documents changed in this batch, in order
  bool othersDirty_ = false;              // the other open documents need a re-check too
  std::set<std::string> othersPending_;   // ... and these have not been re-checked yet
  bool othersChanged_ = false;            // a re-check changed results (pull mode: ask for a refresh)
};

}  // namespace

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
