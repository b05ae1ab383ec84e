// Linting the open documents through the same Linter as `shardlint check` (the open buffers as
// overlays, the warm module table): each changed document at once, then the other open documents
// (their results may depend on the edit), pushed as publishDiagnostics or pulled
// (textDocument/diagnostic).
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "driver/Settings.h"
#include "lsp/JsonRpc.h"
#include "lsp/ServerImpl.h"
#include "output/Emitters.h"

namespace shardlint::lsp {

namespace fs = std::filesystem;

// The Diagnostic as `writeLspJson` writes it, in the negotiated encoding.
json Server::toLsp(const Diagnostic& d) const {
  const RuleInfo* info = catalog_.find(d.code);
  return output::lspDiagnostic(d, info && info->code == d.code ? info : nullptr, encoding_ == Encoding::Utf8,
                               [&](const std::string& p) { return uriFor(p); });
}

LintOptions Server::optionsWithOverlays() const {
  LintOptions o = base_;
  for (const auto& [uri, d] : docs_) {
    o.overlays[d.path] = d.text;
    if (d.tree) o.parsedTrees[d.path] = d.tree.get();
  }
  return o;
}

// The document's findings as LSP diagnostics; `findings` (when given) gets the same findings,
// index for index.
json Server::lint(const Document& d, const Linter& linter, std::vector<Diagnostic>* findings) {
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

void Server::publish(const Document& d) {
  json params = {{"uri", d.uri}, {"diagnostics", d.diagnostics}};
  if (!d.version.is_null()) params["version"] = d.version;
  send(makeNotification("textDocument/publishDiagnostics", params));
}

// One lint per changed document per batch, published at once. Then the other open documents
// (a helper module edit changes its dependents' findings), published only when their results
// changed; those re-checks yield to new input, so typing is never queued behind them, unless
// `complete` (a request needs every result to be current).
void Server::flush(bool complete) {
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

json Server::pullDiagnostics(const json& params) {
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

}  // namespace shardlint::lsp
