#include "driver/Suppressions.h"

#include <algorithm>
#include <cctype>

#include "driver/Linter.h"

namespace shardlint {

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iprefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// Codes separated by commas or spaces; stops at anything that is not a code/name character.
std::vector<std::string> codeList(std::string_view rest) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == ',' || rest[i] == '\t')) ++i;
    size_t start = i;
    while (i < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[i])) || rest[i] == '-' || rest[i] == '_'))
      ++i;
    if (i == start) break;
    out.emplace_back(rest.substr(start, i - start));
  }
  return out;
}

// "noqa", "noqa: A, B" -> true (all or codes); false when `s` is not a noqa.
bool parseNoqa(std::string_view s, bool& all, std::vector<std::string>& codes) {
  if (!iprefix(s, "noqa")) return false;
  std::string_view after = s.substr(4);
  std::string_view rest = after;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty() || rest.front() != ':') {
    if (!after.empty() && !std::isspace(static_cast<unsigned char>(after.front())) && after.front() != '#') return false;
    all = true;
    return true;
  }
  codes = codeList(rest.substr(1));
  all = codes.empty();
  return true;
}
}  // namespace

uint32_t Suppressions::nextCodeLine(uint32_t line) const {
  if (!file_) return line + 1;
  for (uint32_t l = line + 1; l < file_->index.lineCount(); ++l) {
    std::string_view t = trim(std::string_view(file_->text).substr(file_->index.lineStart(l),
                                                                   file_->index.lineEnd(l) - file_->index.lineStart(l)));
    if (!t.empty() && t.substr(0, marker_.size()) != marker_) return l;
  }
  return line + 1;
}

void Suppressions::addComment(std::string_view comment, uint32_t offset) {
  uint32_t line = file_ ? file_->index.lineOf(offset) : 0;
  bool ownLine = true;
  if (file_) {
    std::string_view before =
        std::string_view(file_->text).substr(file_->index.lineStart(line), offset - file_->index.lineStart(line));
    ownLine = before.find_first_not_of(" \t") == std::string_view::npos;
  }
  // A comment may hold several `#` sections: `# type: ignore # noqa: SL101`.
  size_t pos = 0;
  while ((pos = comment.find(marker_, pos)) != std::string_view::npos) {
    size_t hash = pos;
    pos += marker_.size();
    std::string_view body = trim(comment.substr(hash + marker_.size()));
    size_t end = comment.find(marker_, hash + marker_.size());
    std::string_view section = trim(comment.substr(hash, end == std::string_view::npos ? std::string_view::npos : end - hash));
    Directive d;
    d.range = {offset + static_cast<uint32_t>(hash), offset + static_cast<uint32_t>(hash + section.size())};
    d.text = std::string(section);
    d.line = line;
    if (iprefix(body, "shardlint:")) {
      std::string_view rest = trim(body.substr(10));
      if (iprefix(rest, "disable-file")) {
        rest = trim(rest.substr(12));
        if (!rest.empty() && rest.front() == '=') rest.remove_prefix(1);
        d.kind = Directive::Kind::File;
        d.codes = codeList(rest);
        d.all = d.codes.empty() || (d.codes.size() == 1 && d.codes[0] == "all");
        if (d.all) d.codes.clear();
      } else if (iprefix(rest, "disable-next-line") || iprefix(rest, "disable")) {
        bool next = iprefix(rest, "disable-next-line");
        rest = trim(rest.substr(next ? 17 : 7));
        if (!rest.empty() && rest.front() == '=') rest.remove_prefix(1);
        d.kind = Directive::Kind::Disable;
        d.codes = codeList(rest);
        d.all = d.codes.empty();
        if (next || ownLine) d.line = nextCodeLine(line);
      } else if (bool all = false; parseNoqa(rest, all, d.codes)) {
        d.all = all;
        d.kind = ownLine ? Directive::Kind::File : Directive::Kind::Disable;
      } else {
        continue;
      }
    } else if (bool all = false; parseNoqa(body, all, d.codes)) {
      d.all = all;
      d.kind = Directive::Kind::Noqa;
    } else {
      continue;
    }
    d.used.assign(d.codes.size(), false);
    directives_.push_back(std::move(d));
  }
}

bool Suppressions::mayBeDirective(std::string_view comment) {
  // ASCII case folding, inline (std::tolower is a call per byte, and this reads every comment of a file).
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  auto saysAt = [&](size_t i, std::string_view word) {  // `word` in lower case, its first letter at `i` already
    if (i + word.size() > comment.size()) return false;
    for (size_t k = 1; k < word.size(); ++k)
      if (lower(comment[i + k]) != word[k]) return false;
    return true;
  };
  for (size_t i = 0; i < comment.size(); ++i) {  // one pass for both words
    char c = lower(comment[i]);
    if ((c == 'n' && saysAt(i, "noqa")) || (c == 's' && saysAt(i, "shardlint"))) return true;
  }
  return false;
}

size_t hashCommentStart(std::string_view line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) return i;
  }
  return std::string_view::npos;
}

void Suppressions::addHashComments(const SourceFile& file) {
  for (uint32_t line = 0; line < file.index.lineCount(); ++line) {
    uint32_t begin = file.index.lineStart(line);
    std::string_view text = std::string_view(file.text).substr(begin, file.index.lineEnd(line) - begin);
    if (size_t at = hashCommentStart(text); at != std::string_view::npos)
      addComment(text.substr(at), begin + static_cast<uint32_t>(at));
  }
}

bool Suppressions::suppresses(const Diagnostic& diag, const RuleCatalog& catalog) {
  bool hit = false;
  for (auto& d : directives_) {
    if (d.kind != Directive::Kind::File && d.line != diag.location.start.line) continue;
    if (d.all) {
      d.usedAll = true;
      hit = true;
      continue;
    }
    for (size_t i = 0; i < d.codes.size(); ++i) {
      const RuleInfo* info = catalog.find(d.codes[i]);
      if (info && info->code == diag.code) {
        d.used[i] = true;
        hit = true;
      }
    }
  }
  return hit;
}

std::vector<Diagnostic> Suppressions::problems(const RuleCatalog& catalog, const RuleSelection& selection,
                                               bool includeNoqa) const {
  std::vector<Diagnostic> out;
  const RuleInfo* sl003 = catalog.find("SL003");
  if (!sl003 || !file_ || !selection.enabled(*sl003)) return out;
  auto report = [&](const Directive& d, std::string message) {
    out.push_back(makeDiagnostic(*sl003, makeLocation(*file_, d.range), std::move(message)));
  };
  for (const auto& d : directives_) {
    bool noqa = d.kind == Directive::Kind::Noqa;
    for (size_t i = 0; i < d.codes.size(); ++i) {
      const std::string& c = d.codes[i];
      const RuleInfo* info = catalog.find(c);
      bool ours = c.size() == 5 && (c[0] == 'S' || c[0] == 's') && (c[1] == 'L' || c[1] == 'l') &&
                  std::all_of(c.begin() + 2, c.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
      if (!info) {
        if (!noqa || ours)  // noqa also carries other tools' codes (E501): only ours are checked
          report(d, "`" + d.text + "` names `" + c + "`, which is not a shardlint rule (see `shardlint rules`)");
        continue;
      }
      if (d.used[i] || !selection.enabled(*info)) continue;  // a disabled rule cannot be used up
      if (noqa && !includeNoqa) continue;
      report(d, "`" + d.text + "` suppresses `" + std::string(info->code) + "`, which reports nothing here; remove it");
    }
    if (d.all && !d.usedAll && (!noqa || includeNoqa))
      report(d, "`" + d.text + "` suppresses nothing here; remove it");
  }
  return out;
}

}  // namespace shardlint
