// Internal to the language server's files: the Server class (one client, its open documents and their
// findings) and what its parts share. Server.cpp holds the message loop, lifecycle and configuration,
// ServerDocuments.cpp the open documents, ServerLinting.cpp the lints and their publication,
// ServerCodeActions.cpp the quick fixes, suppressions and fix-all. The interface is lsp/Server.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
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
#include "driver/Linter.h"
#include "driver/Settings.h"
#include "lsp/JsonRpc.h"
#include "syntax/TreeSitter.h"

namespace shardlint::lsp {

using nlohmann::json;

// A request that cannot be served; becomes a JSON-RPC error response.
struct RpcError : std::runtime_error {
  RpcError(int c, const std::string& m) : std::runtime_error(m), code(c) {}
  int code;
};

enum class Encoding { Utf16, Utf8 };
enum class DocKind { Python, Config, Launch, Cxx, Markdown, Other };

std::string lower(std::string s);

DocKind kindOf(const std::string& path, const std::string& languageId);

// `file:///a/b%20c.py` -> `/a/b c.py`; nullopt for other schemes.
std::optional<std::string> uriToPath(const std::string& uri);

using TreePtr = std::unique_ptr<TSTree, syntax::TreeDeleter>;

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
  // The fast pass after an edit analyses this file alone; the project files that import it are
  // analysed when the input is idle (the importers pass, LintOptions::importers). `own` is the last
  // fast pass's findings, `viaImporters` the findings in this file that only the importers made (kept
  // in the fast pass's results until the next importers pass or re-check replaces them).
  std::vector<Diagnostic> own;
  std::vector<Diagnostic> viaImporters;
};

// One edit that lies inside a comment or docstring of a linted document and types no line break
// (Server::commentEdit).
struct CommentEdit {
  uint32_t begin = 0, oldEnd = 0, newEnd = 0;  // the changed bytes, before and after
  ByteRange comment;                           // the comment, or the docstring's text, before the edit
  bool docstring = false;
  std::string oldComment;                      // its text
  uint32_t line = 0;                           // its line
  int64_t codepoints = 0, utf16 = 0;           // the edit's length in the other column units
};

// The code action kind of "fix all safe shardlint findings" (like ESLint's and Ruff's).
constexpr const char* kFixAllKind = "source.fixAll.shardlint";

class Server {
 public:
  Server(const RuleCatalog& catalog, int inFd, int outFd);

  int run();

 private:
  // ---- input (Server.cpp) ------------------------------------------------------------------
  // One message from the client, its JSON parsed (`error` says why not, for a Message).
  struct Incoming {
    MessageReader::Status status = MessageReader::Status::Eof;
    std::string error;
    json msg;
    size_t bytes = 0;
  };

  Incoming readIncoming(int timeoutMs);
  // lookAhead's bounds.
  static constexpr size_t kMaxLookahead = 1024;
  static constexpr size_t kMaxLookaheadBytes = size_t{64} << 20;
  void lookAhead();
  template <class Pred>
  std::deque<Incoming>::iterator findQueued(std::initializer_list<const char*> methods, Pred&& pred);
  void checkStillWanted(const json& id, const json& params, bool positional);

  // ---- messages (Server.cpp) ---------------------------------------------------------------
  void send(const json& msg) { writer_.send(msg); }
  void log(int type, const std::string& message);
  template <class F>
  bool guarded(F&& f);
  void handleMessage(const json& msg);
  void dispatch(const json& msg);
  void handleRequest(const json& id, const std::string& method, const json& params);
  void handleNotification(const std::string& method, const json& params);

  // ---- lifecycle (Server.cpp) --------------------------------------------------------------
  json initialize(const json& params);
  void registerWatchers();

  // ---- configuration (Server.cpp) ----------------------------------------------------------
  void reloadSettings(bool relint);
  void didChangeWatchedFiles(const json& params);
  std::string settingsPath(const std::string& path) const;
  bool excluded(const std::string& path) const { return isExcluded(config_, settingsPath(path)); }

  // ---- documents (ServerDocuments.cpp) -----------------------------------------------------
  void didOpen(const json& params);
  void didChange(const json& params);
  void didSave(const json& params);
  void didClose(const json& params);
  bool differsFromDisk(const Document& d) const;
  void markDirty(const std::string& uri);
  void reparse(Document& d, bool incremental);
  uint32_t offsetOf(const LineIndex& index, const std::string& text, const json& pos) const;
  static TSPoint pointOf(const LineIndex& index, uint32_t offset);
  json position(const LineCol& lc) const;
  std::string uriFor(const std::string& path) const;

  // ---- edits inside a comment (ServerComments.cpp) -----------------------------------------
  // Before an edit of [begin, end) to `text` is applied: the edit, when it is the only one of its
  // notification and lies inside a comment or docstring of a document linted and not changed since.
  std::optional<CommentEdit> commentEdit(const Document& d, const LineIndex& index, uint32_t begin, uint32_t end,
                                         const std::string& text) const;
  // After it is applied and the document re-parsed: whether the analysis cannot have changed (the comment
  // or docstring is one still, and makes or unmakes no directive, no pre-scan word and no one-word
  // docstring); then its findings are moved
  // over the edit and the document is due to be published (moved_) instead of linted.
  bool moveFindings(Document& d, const CommentEdit& e);

  // ---- linting (ServerLinting.cpp) ---------------------------------------------------------
  json toLsp(const Diagnostic& d) const;
  LintOptions optionsWithOverlays() const;
  std::vector<Diagnostic> lintFindings(const Document& d, const Linter& linter, const char* pass);
  json lint(const Document& d, const Linter& linter, std::vector<Diagnostic>* findings = nullptr);
  json toLsp(const std::vector<Diagnostic>& findings) const;
  void publish(const Document& d);
  void flush(bool complete = false);
  json pullDiagnostics(const json& params);

  // ---- code actions (ServerCodeActions.cpp) ------------------------------------------------
  json codeActions(const json& params);
  json fixEdit(const Document& d, const LineIndex& index, const std::vector<const Fix*>& fixes) const;
  static bool sameRange(const json& a, const json& b);
  json edit(const Document& d, const LineIndex& index, uint32_t offset, const std::string& text) const;
  json lineAction(const Document& d, const LineIndex& index, const json& diag, const std::string& code,
                  uint32_t line) const;
  json fileAction(const Document& d, const LineIndex& index, const json& diag, const std::string& code) const;

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
  std::function<uint64_t(std::string_view)> prescanMask_;  // base_'s (Linter::prescanMask); made when first needed
  std::unique_ptr<ModuleTable> table_;  // the warm project index (parsed modules, shared summaries)
  // The projects' declared requirements, read once and checked against the disk before each lint.
  std::shared_ptr<RequirementsIndex> requirements_ = std::make_shared<RequirementsIndex>();
  FileConfig config_;

  std::map<std::string, Document> docs_;  // by URI
  std::vector<std::string> dirtySelf_;    // documents changed in this batch, in order
  std::vector<std::string> moved_;        // documents whose findings comment edits moved: to publish
  bool othersDirty_ = false;              // the other open documents need a re-check too
  std::set<std::string> othersPending_;   // ... and these have not been re-checked yet
  std::vector<std::string> fullPending_;  // edited documents whose importers pass is due
  bool othersChanged_ = false;            // a re-check changed results (pull mode: ask for a refresh)
};

}  // namespace shardlint::lsp
