// Edits inside one comment or docstring: the document's findings are moved over the edit instead of being made
// again.
//
// Nothing the analysis reads is in a comment's text but three things, each checked here on both sides of the
// edit: suppression directives (`# noqa`, `# shardlint: ...`: a comment that is or becomes one is linted
// again), the pre-scan's words (which rules look at the file: the comment's mask must stay as it was) and the
// comment itself as text a finding quotes (a message or a fix holding it). A docstring (a plain string that is
// a module's, class's or function's first statement) is the same but for one more: a string that is one word
// as a whole names something (syntax::codeWordCounts), so a docstring that is or becomes one is linted again;
// and the edit must type or delete no quote or backslash, so that the string stays the same string. The tree is
// the same but for the comment's length (no line break is typed or deleted), so every place after the edit on
// its line moves by the edit's length and nothing else moves. The module table and the analyses it keeps still
// hold the text linted last; the next lint diffs against that text, as after any edit. A comment edit does not
// look at the disk: a module changed there that the client did not report (workspace/didChangeWatchedFiles) is
// seen at the next lint, as between two lints.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "driver/Suppressions.h"
#include "lsp/ServerImpl.h"
#include "syntax/TreeSitter.h"

namespace shardlint::lsp {

namespace {

// UTF-8 bytes -> (code points, UTF-16 code units): the two other column units of LineCol.
std::pair<int64_t, int64_t> columnsOf(std::string_view s) {
  int64_t cp = 0, u16 = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) == 0x80) continue;
    ++cp;
    u16 += c >= 0xF0 ? 2 : 1;
  }
  return {cp, u16};
}

// Calls f(location, text) for each place of a finding (its own, its notes', its fix's edits'), with the
// text that goes with the place (the message, the note's, the edit's replacement).
template <class D, class F>
void eachPlace(D& x, F&& f) {
  f(x.location, x.message);
  for (auto& n : x.notes) f(n.location, n.message);
  if (x.fix)
    for (auto& ed : x.fix->edits) f(ed.location, ed.text);
}

// A string's text between its quotes is one word (syntax::codeWordCounts counts it as a mention).
bool oneWord(std::string_view body) {
  return !body.empty() && std::all_of(body.begin(), body.end(), [](char c) { return syntax::isWordByte(c); });
}

struct Inert {
  ByteRange range;  // the comment, or the docstring's text between its quotes
  bool docstring = false;
};

// The comment (syntax::commentAround), or the text between the quotes of the docstring, that holds the bytes
// [begin, end), if one does. A docstring: a string with no prefix that makes it formatted (`f`, `t`), alone in
// an expression statement that comes first in a module or a block, comments aside.
std::optional<Inert> inertAround(TSNode root, std::string_view text, uint32_t begin, uint32_t end) {
  if (auto c = syntax::commentAround(root, begin, end)) return Inert{*c, false};
  const auto& kinds = syntax::PyKinds::instance();
  TSNode s = ts_node_descendant_for_byte_range(root, begin, end);
  while (!ts_node_is_null(s) && kinds.kind(s) != syntax::Kind::string) s = ts_node_parent(s);
  if (ts_node_is_null(s) || ts_node_child_count(s) < 2) return std::nullopt;
  TSNode stmt = ts_node_parent(s);
  if (ts_node_is_null(stmt) || kinds.kind(stmt) != syntax::Kind::expression_statement || ts_node_named_child_count(stmt) != 1)
    return std::nullopt;
  TSNode body = ts_node_parent(stmt);
  if (ts_node_is_null(body) || (kinds.kind(body) != syntax::Kind::module && kinds.kind(body) != syntax::Kind::block))
    return std::nullopt;
  for (uint32_t i = 0, n = ts_node_named_child_count(body); i < n; ++i) {
    TSNode first = ts_node_named_child(body, i);
    if (kinds.kind(first) == syntax::Kind::comment) continue;
    if (!ts_node_eq(first, stmt)) return std::nullopt;
    break;
  }
  TSNode open = ts_node_child(s, 0), close = ts_node_child(s, ts_node_child_count(s) - 1);
  if (std::string_view(ts_node_type(open)) != "string_start" || std::string_view(ts_node_type(close)) != "string_end")
    return std::nullopt;
  for (uint32_t i = 0, n = ts_node_child_count(s); i < n; ++i)
    if (std::string_view(ts_node_type(ts_node_child(s, i))) == "interpolation") return std::nullopt;
  for (char c : syntax::textOf(open, text))
    if (c == 'f' || c == 'F' || c == 't' || c == 'T') return std::nullopt;
  ByteRange inside{ts_node_end_byte(open), ts_node_start_byte(close)};
  if (begin < inside.begin || end > inside.end || ts_node_has_error(s)) return std::nullopt;
  return Inert{inside, true};
}

}  // namespace

std::optional<CommentEdit> Server::commentEdit(const Document& d, const LineIndex& index, uint32_t begin,
                                               uint32_t end, const std::string& text) const {
  // Not when its findings are due to be made again anyway: it changed in this batch, or something else did
  // (another document, a file on disk the client reported, the settings) and its re-check has not run.
  if (d.kind != DocKind::Python || !d.tree || d.treeFromView || !d.linted || othersDirty_ ||
      othersPending_.count(d.uri) || std::find(dirtySelf_.begin(), dirtySelf_.end(), d.uri) != dirtySelf_.end() ||
      text.find_first_of("\r\n") != std::string::npos)
    return std::nullopt;
  auto comment = inertAround(ts_tree_root_node(d.tree.get()), d.text, begin, end);
  if (!comment) return std::nullopt;
  if (comment->docstring && (text.find_first_of("\"'\\") != std::string::npos ||
                             d.text.substr(begin, end - begin).find_first_of("\"'\\") != std::string::npos))
    return std::nullopt;
  CommentEdit e;
  e.begin = begin;
  e.oldEnd = end;
  e.newEnd = begin + static_cast<uint32_t>(text.size());
  e.comment = comment->range;
  e.docstring = comment->docstring;
  e.line = index.lineOf(begin);
  e.oldComment = d.text.substr(comment->range.begin, comment->range.end - comment->range.begin);
  auto [cpOld, u16Old] = columnsOf(std::string_view(d.text).substr(begin, end - begin));
  auto [cpNew, u16New] = columnsOf(text);
  e.codepoints = cpNew - cpOld;
  e.utf16 = u16New - u16Old;
  return e;
}

bool Server::moveFindings(Document& d, const CommentEdit& e) {
  if (!d.tree) return false;
  const int64_t delta = static_cast<int64_t>(e.newEnd) - static_cast<int64_t>(e.oldEnd);
  auto now = inertAround(ts_tree_root_node(d.tree.get()), d.text, e.begin, e.newEnd);
  if (!now || now->docstring != e.docstring || now->range.begin != e.comment.begin ||
      static_cast<int64_t>(now->range.end) != e.comment.end + delta)
    return false;
  std::string_view comment = std::string_view(d.text).substr(now->range.begin, now->range.end - now->range.begin);
  if (Suppressions::mayBeDirective(e.oldComment) || Suppressions::mayBeDirective(comment)) return false;
  if (e.docstring && (oneWord(e.oldComment) || oneWord(comment))) return false;
  if (!prescanMask_) prescanMask_ = Linter(catalog_, base_).prescanMask();
  if (prescanMask_(e.oldComment) != prescanMask_(comment)) return false;

  // Not when a finding quotes the comment (its message or a fix's text) or has a place inside the changed bytes.
  auto mine = [&](const Location& l) { return absolutePathKey(l.path) == d.path; };
  auto inside = [&](uint32_t p) { return p > e.begin && p < e.oldEnd; };
  auto movable = [&](const Diagnostic& x) {
    bool ok = true;
    eachPlace(x, [&](const Location& l, const std::string& text) {
      ok = ok && text.find(e.oldComment) == std::string::npos &&
           !(mine(l) && (inside(l.range.begin) || inside(l.range.end)));
    });
    return ok;
  };
  for (const auto* list : {&d.findings, &d.own, &d.viaImporters})
    if (!std::all_of(list->begin(), list->end(), movable)) return false;

  auto movePoint = [&](uint32_t& offset, LineCol& lc) {
    if (offset < e.oldEnd) return;
    offset = static_cast<uint32_t>(offset + delta);
    if (lc.line != e.line) return;
    lc.byteColumn = static_cast<uint32_t>(lc.byteColumn + delta);
    lc.codepointColumn = static_cast<uint32_t>(lc.codepointColumn + e.codepoints);
    lc.utf16Column = static_cast<uint32_t>(lc.utf16Column + e.utf16);
  };
  for (auto* list : {&d.findings, &d.own, &d.viaImporters})
    for (auto& x : *list)
      eachPlace(x, [&](Location& l, const std::string&) {
        if (!mine(l)) return;
        movePoint(l.range.begin, l.start);
        movePoint(l.range.end, l.end);
      });
  d.diagnostics = toLsp(d.findings);
  // Another document's finding that points into this one (a note) is re-checked, as after any edit.
  for (const auto& [uri, other] : docs_)
    if (uri != d.uri)
      for (const auto& x : other.findings)
        if (mine(x.location) || std::any_of(x.notes.begin(), x.notes.end(), [&](const Note& n) { return mine(n.location); }))
          othersDirty_ = true;
  if (std::find(moved_.begin(), moved_.end(), d.uri) == moved_.end()) moved_.push_back(d.uri);
  if (trace_) std::fprintf(stderr, "shardlint server: findings of %s moved over a comment edit\n", d.path.c_str());
  return true;
}

}  // namespace shardlint::lsp
