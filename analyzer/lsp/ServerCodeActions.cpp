// Code actions: a finding's own fix, `noqa` suppressions on the line or for the whole file (quick fixes),
// and "fix all safe shardlint findings" on the document, to a fixed point as `check --fix` applies them.
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driver/Fixer.h"
#include "driver/Settings.h"
#include "driver/Suppressions.h"
#include "lsp/ServerImpl.h"
#include "syntax/TreeSitter.h"

namespace shardlint::lsp {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

json Server::codeActions(const json& params) {
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
json Server::fixEdit(const Document& d, const LineIndex& index, const std::vector<const Fix*>& fixes) const {
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

bool Server::sameRange(const json& a, const json& b) {
  try {
    for (const char* end : {"start", "end"})
      for (const char* k : {"line", "character"})
        if (a.at(end).at(k).get<int64_t>() != b.at(end).at(k).get<int64_t>()) return false;
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

json Server::edit(const Document& d, const LineIndex& index, uint32_t offset, const std::string& text) const {
  json pos = position(index.resolve(offset));
  return {{"changes", {{d.uri, json::array({{{"range", {{"start", pos}, {"end", pos}}}, {"newText", text}}})}}}};
}

// `  # noqa: CODE` at the end of the line, or `, CODE` added to the line's `# noqa: ...`.
json Server::lineAction(const Document& d, const LineIndex& index, const json& diag, const std::string& code,
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
json Server::fileAction(const Document& d, const LineIndex& index, const json& diag, const std::string& code) const {
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

}  // namespace shardlint::lsp
