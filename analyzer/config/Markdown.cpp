#include "config/Markdown.h"

#include <cctype>

namespace shardlint::config {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A fence line: indentation (at most 3 spaces), the fence character and the run's length; false otherwise.
bool fenceOf(std::string_view line, char& ch, size_t& run, size_t& after) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ' && i < 4) ++i;
  if (i > 3 || i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  ch = line[i];
  size_t start = i;
  while (i < line.size() && line[i] == ch) ++i;
  run = i - start;
  after = i;
  return run >= 3;
}

std::string_view lineAt(std::string_view text, const std::vector<uint32_t>& starts, uint32_t l) {
  uint32_t b = starts[l];
  uint32_t e = l + 1 < starts.size() ? starts[l + 1] : static_cast<uint32_t>(text.size());
  std::string_view s = text.substr(b, e - b);
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

}  // namespace

bool mayHaveFences(std::string_view text) {
  return text.find("```") != std::string_view::npos || text.find("~~~") != std::string_view::npos;
}

std::vector<uint32_t> lineStarts(std::string_view text) {
  std::vector<uint32_t> starts{0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' && i + 1 < text.size()) starts.push_back(static_cast<uint32_t>(i + 1));
  return starts;
}

std::vector<std::string_view> spanLines(std::string_view text, const std::vector<uint32_t>& starts, LineSpan span) {
  std::vector<std::string_view> out;
  for (uint32_t l = span.first; l < span.end && l < starts.size(); ++l) out.push_back(lineAt(text, starts, l));
  return out;
}

std::vector<FencedBlock> fencedBlocks(std::string_view text) {
  std::vector<FencedBlock> out;
  if (!mayHaveFences(text)) return out;
  std::vector<uint32_t> starts = lineStarts(text);
  uint32_t n = static_cast<uint32_t>(starts.size());
  for (uint32_t l = 0; l < n; ++l) {
    std::string_view line = lineAt(text, starts, l);
    char ch = 0;
    size_t run = 0, after = 0;
    if (!fenceOf(line, ch, run, after)) continue;
    std::string_view info = trim(line.substr(after));
    if (ch == '`' && info.find('`') != std::string_view::npos) continue;  // inline code, not a fence
    FencedBlock b;
    b.info = std::string(info);
    std::string_view word = info.substr(0, info.find_first_of(" \t,"));
    while (!word.empty() && (word.front() == '{' || word.front() == '.')) word.remove_prefix(1);
    while (!word.empty() && word.back() == '}') word.remove_suffix(1);
    for (char c : word) b.language += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    b.fenceLine = l;
    b.fenceOffset = starts[l];
    b.content.first = l + 1;
    b.content.end = n;
    for (uint32_t k = l + 1; k < n; ++k) {
      std::string_view cl = lineAt(text, starts, k);
      char c2 = 0;
      size_t run2 = 0, after2 = 0;
      if (fenceOf(cl, c2, run2, after2) && c2 == ch && run2 >= run && trim(cl.substr(after2)).empty()) {
        b.content.end = k;
        b.closed = true;
        break;
      }
    }
    l = b.content.end;  // the closing fence (or the end)
    out.push_back(std::move(b));
  }
  return out;
}

bool isPlaceholderLine(std::string_view line) {
  std::string_view t = trim(line);
  if (!t.empty() && t.front() == '#') t = trim(t.substr(1));
  if (t == "\xE2\x80\xA6") return true;  // U+2026 HORIZONTAL ELLIPSIS
  if (t.size() < 3) return false;
  for (char c : t)
    if (c != '.') return false;
  return true;
}

std::string spanView(std::string_view text, const std::vector<uint32_t>& starts, LineSpan span, bool dropPlaceholders) {
  uint32_t endOffset = span.end < starts.size() ? starts[span.end] : static_cast<uint32_t>(text.size());
  std::string out(text.substr(0, endOffset));
  auto blank = [&](uint32_t from, uint32_t to) {
    for (uint32_t i = from; i < to && i < out.size(); ++i)
      if (out[i] != '\n' && out[i] != '\r') out[i] = ' ';
  };
  uint32_t firstOffset = span.first < starts.size() ? starts[span.first] : endOffset;
  blank(0, firstOffset);
  if (dropPlaceholders)
    for (uint32_t l = span.first; l < span.end && l < starts.size(); ++l)
      if (isPlaceholderLine(lineAt(text, starts, l)))
        blank(starts[l], l + 1 < starts.size() ? starts[l + 1] : endOffset);
  return out;
}

std::vector<LineSpan> hereDocuments(std::string_view text, const std::vector<uint32_t>& starts, LineSpan span) {
  std::vector<LineSpan> out;
  for (uint32_t l = span.first; l < span.end && l < starts.size(); ++l) {
    std::string_view line = lineAt(text, starts, l);
    size_t at = line.find("<<");
    if (at == std::string_view::npos || line.compare(at, 3, "<<<") == 0) continue;  // `<<<` is a here-string
    size_t i = at + 2;
    if (i < line.size() && line[i] == '-') ++i;  // `<<-`
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    char quote = 0;
    if (i < line.size() && (line[i] == '\'' || line[i] == '"')) quote = line[i++];
    size_t start = i;
    while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) ++i;
    if (i == start || (quote && (i >= line.size() || line[i] != quote))) continue;
    std::string_view delim = line.substr(start, i - start);
    LineSpan body{l + 1, span.end};
    for (uint32_t k = l + 1; k < span.end && k < starts.size(); ++k) {
      std::string_view cl = lineAt(text, starts, k);
      if (trim(cl) == delim) {  // indented delimiters too: documentation indents whole commands
        body.end = k;
        break;
      }
    }
    out.push_back(body);
    l = body.end;
  }
  return out;
}

}  // namespace shardlint::config
