// Linting the open documents through the same Linter as `shardlint check` (the open buffers as
// overlays, the warm module table): each changed document at once, then the other open documents
// (their results may depend on the edit), pushed as publishDiagnostics or pulled
// (textDocument/diagnostic).
#include <algorithm>
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
  o.requirements = requirements_;
  for (const auto& [uri, d] : docs_) {
    o.overlays[d.path] = d.text;
    if (d.tree) o.parsedTrees[d.path] = d.tree.get();
  }
  return o;
}

// The document's findings (those in other files are reported with them); `pass` names the pass in
// the trace.
std::vector<Diagnostic> Server::lintFindings(const Document& d, const Linter& linter, const char* pass) {
  std::vector<Diagnostic> mine;
  if (d.kind == DocKind::Other || excluded(d.path)) return mine;
  if (d.kind == DocKind::Markdown && !config_.markdown.value_or(true)) return mine;  // `markdown = false`
  auto t0 = std::chrono::steady_clock::now();
  if (!table_) table_ = std::make_unique<ModuleTable>(Linter(catalog_, base_).tableConfig(false));
  LintStats stats;
  std::vector<Diagnostic> all = linter.lintFiles({d.path}, &stats, table_.get());
  applyFindingSettings(catalog_, config_, all,
                       [&](const std::string& p) { return settingsPath(absolutePathKey(p)); });
  for (auto& diag : all)
    if (absolutePathKey(diag.location.path) == d.path) mine.push_back(std::move(diag));
  if (trace_)
    std::fprintf(stderr,
                 "shardlint server: lint of %s: %.2f ms, %zu diagnostics, %zu summaries carried over, %zu arms, "
                 "%zu run directly%s%s\n",
                 d.path.c_str(),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                 mine.size(), stats.summariesCarried, stats.armsCarried, stats.directRuns, *pass ? ", " : "", pass);
  return mine;
}

json Server::toLsp(const std::vector<Diagnostic>& findings) const {
  json out = json::array();
  for (const auto& diag : findings) out.push_back(toLsp(diag));
  return out;
}

// The document's findings as LSP diagnostics; `findings` (when given) gets the same findings,
// index for index.
json Server::lint(const Document& d, const Linter& linter, std::vector<Diagnostic>* findings) {
  std::vector<Diagnostic> mine = lintFindings(d, linter, "");
  json out = toLsp(mine);
  if (findings) *findings = std::move(mine);
  return out;
}

void Server::publish(const Document& d) {
  json params = {{"uri", d.uri}, {"diagnostics", d.diagnostics}};
  if (!d.version.is_null()) params["version"] = d.version;
  send(makeNotification("textDocument/publishDiagnostics", params));
}

namespace {

// The same finding: rule, place and message (its fix follows from them).
bool sameFinding(const Diagnostic& a, const Diagnostic& b) {
  return a.code == b.code && a.location.range.begin == b.location.range.begin &&
         a.location.range.end == b.location.range.end && a.message == b.message;
}

bool contains(const std::vector<Diagnostic>& in, const Diagnostic& d) {
  return std::any_of(in.begin(), in.end(), [&](const Diagnostic& x) { return sameFinding(x, d); });
}

// `base` with the findings of `more` it does not have, in output order.
std::vector<Diagnostic> merged(std::vector<Diagnostic> base, const std::vector<Diagnostic>& more) {
  for (const auto& m : more)
    if (!contains(base, m)) base.push_back(m);
  sortDiagnostics(base);
  return base;
}

}  // namespace

// One lint per changed document per batch, published at once: the fast pass, the file's own analysis
// (the project modules it imports included, the files that import it left out), with the findings the
// last importers pass made in it kept. Then, when the input is idle: the importers pass of each changed
// document (only the project files that import it, for the findings their flow makes in it), then a
// re-check of the other open documents (a helper module edit changes its dependents' findings); both
// published only when the results changed. Those passes give way to new input (LintOptions::interrupted,
// before each file's analysis) and run again later, so typing is never queued behind them, unless
// `complete` (a request needs every result to be current).
void Server::flush(bool complete) {
  if (dirtySelf_.empty() && moved_.empty() && !othersDirty_ && othersPending_.empty() && fullPending_.empty()) return;
  std::vector<std::string> self = std::move(dirtySelf_);
  dirtySelf_.clear();
  // Documents whose findings comment edits moved (ServerComments.cpp), unless a later edit made them due for
  // a lint.
  for (const auto& uri : moved_) {
    auto it = docs_.find(uri);
    if (it != docs_.end() && !pullMode_ && std::find(self.begin(), self.end(), uri) == self.end()) publish(it->second);
  }
  moved_.clear();
  if (othersDirty_) {
    for (const auto& [uri, d] : docs_) othersPending_.insert(uri);
    othersDirty_ = false;
  }
  requirements_->revalidate();
  LintOptions options = optionsWithOverlays();
  // Each analysis is freed once its results are out: the fast pass's before the first background pass,
  // each background pass's before the next, the last when this flush returns.
  auto disposal = std::make_shared<Disposal>();
  options.disposal = disposal;
  options.importers = false;
  Linter fast(catalog_, options);
  options.importers = true;
  // The background passes give way to new input: stopped before their next file, run again later.
  if (!complete) options.interrupted = [this] { return !queue_.empty() || reader_.inputPending(); };
  Linter linter(catalog_, options);
  options.lintedFiles = false;
  Linter importers(catalog_, std::move(options));
  for (const auto& uri : self) {
    auto it = docs_.find(uri);
    if (it == docs_.end()) continue;
    othersPending_.erase(uri);
    Document& d = it->second;
    try {
      d.own = lintFindings(d, fast, "fast pass");
      d.findings = merged(d.own, d.viaImporters);
      d.diagnostics = toLsp(d.findings);
      if (std::find(fullPending_.begin(), fullPending_.end(), uri) == fullPending_.end()) fullPending_.push_back(uri);
    } catch (const std::exception& e) {
      log(1, "internal error while linting " + d.path + ": " + e.what());
    }
    d.linted = true;
    if (!pullMode_) publish(d);
  }
  while (!fullPending_.empty() || !othersPending_.empty()) {
    disposal->release();  // the last pass's analysis (at the first, the fast pass's: its diagnostics are out)
    if (!complete && (!queue_.empty() || reader_.inputPending())) return;  // back here when the input is idle again
    std::string uri;
    // An edited document's importers pass, or a re-check (all its findings; also when another document
    // changed after its fast pass, whose findings may then be out of date).
    bool edited = !fullPending_.empty(), recheck = true;
    if (edited) {
      uri = fullPending_.front();
      fullPending_.erase(fullPending_.begin());
      recheck = othersPending_.erase(uri) > 0;
    } else {
      uri = *othersPending_.begin();
      othersPending_.erase(othersPending_.begin());
    }
    auto it = docs_.find(uri);
    if (it == docs_.end()) continue;
    Document& d = it->second;
    std::vector<Diagnostic> full;
    try {
      if (!recheck) {  // its own findings are the fast pass's: only the importers' are added
        full = merged(d.own, lintFindings(d, importers, "importers pass"));
      } else {
        full = lintFindings(d, linter, "re-check");
      }
    } catch (const LintInterrupted&) {  // new input: this pass again when the input is idle
      if (edited) fullPending_.insert(fullPending_.begin(), uri);
      if (recheck) othersPending_.insert(uri);
      if (trace_) std::fprintf(stderr, "shardlint server: pass over %s interrupted by new input\n", d.path.c_str());
      return;
    } catch (const std::exception& e) {
      log(1, "internal error while linting " + d.path + ": " + e.what());
      continue;
    }
    d.viaImporters.clear();
    for (const auto& f : full)
      if (!contains(d.own, f)) d.viaImporters.push_back(f);
    json fresh = toLsp(full);
    if (d.linted && fresh == d.diagnostics) continue;
    d.diagnostics = std::move(fresh);
    d.findings = std::move(full);
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
  requirements_->revalidate();
  Linter linter(catalog_, optionsWithOverlays());
  return {{"kind", "full"}, {"items", lint(d, linter)}};
}

}  // namespace shardlint::lsp
