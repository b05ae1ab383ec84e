// The open documents: didOpen / didChange (incremental edits, the tree edited and re-parsed) / didSave
// / didClose, which documents need a lint, LSP positions in the negotiated encoding, and the file URIs
// and document kinds they come from.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "lsp/JsonRpc.h"
#include "lsp/ServerImpl.h"
#include "output/Emitters.h"
#include "syntax/TreeSitter.h"

namespace shardlint::lsp {

namespace fs = std::filesystem;

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

namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

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

namespace {

constexpr size_t kMaxDocumentBytes = size_t{1} << 30;  // byte offsets are 32-bit

}  // namespace

void Server::didOpen(const json& params) {
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

void Server::didChange(const json& params) {
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
  std::optional<CommentEdit> inComment;  // the one change, when it lies inside a comment
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
        if (changes.size() == 1) inComment = commentEdit(d, index, start, end, newText);
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
  if (inComment && moveFindings(d, *inComment)) return;
  markDirty(d.uri);
  othersDirty_ = true;
}

void Server::didSave(const json& params) {
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

void Server::didClose(const json& params) {
  std::string uri = params.at("textDocument").at("uri").get<std::string>();
  auto it = docs_.find(uri);
  if (it == docs_.end()) return;
  bool affectsOthers = differsFromDisk(it->second);
  docs_.erase(it);
  dirtySelf_.erase(std::remove(dirtySelf_.begin(), dirtySelf_.end(), uri), dirtySelf_.end());
  send(makeNotification("textDocument/publishDiagnostics", {{"uri", uri}, {"diagnostics", json::array()}}));
  othersDirty_ = othersDirty_ || affectsOthers;  // its unsaved text no longer overrides the file
}

bool Server::differsFromDisk(const Document& d) const {
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

void Server::markDirty(const std::string& uri) {
  if (std::find(dirtySelf_.begin(), dirtySelf_.end(), uri) == dirtySelf_.end()) dirtySelf_.push_back(uri);
}

void Server::reparse(Document& d, bool incremental) {
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
uint32_t Server::offsetOf(const LineIndex& index, const std::string& text, const json& pos) const {
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

TSPoint Server::pointOf(const LineIndex& index, uint32_t offset) {
  uint32_t line = index.lineOf(offset);
  return TSPoint{line, offset - index.lineStart(line)};
}

json Server::position(const LineCol& lc) const {
  return {{"line", lc.line}, {"character", encoding_ == Encoding::Utf8 ? lc.byteColumn : lc.utf16Column}};
}

std::string Server::uriFor(const std::string& path) const {
  std::string key = absolutePathKey(path);
  for (const auto& [uri, d] : docs_)
    if (d.path == key) return uri;  // the client's own spelling of an open document
  return output::fileUri(path);
}

}  // namespace shardlint::lsp
