#include "driver/Linter.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

// ------------------------------------------------------------------ RuleContext / RuleCatalog

void RuleContext::report(const RuleInfo& info, const semantic::Site& primary, std::string message,
                         std::vector<Note> notes) {
  Diagnostic d;
  d.code = std::string(info.code);
  d.name = std::string(info.name);
  d.severity = info.severity;
  d.location = locate(primary);
  d.message = std::move(message);
  d.notes = std::move(notes);
  out_.push_back(std::move(d));
}

const RuleInfo* RuleCatalog::find(std::string_view codeOrName) const {
  for (const auto& i : infos) {
    if (i.name == codeOrName) return &i;
    if (i.code.size() == codeOrName.size() &&
        std::equal(i.code.begin(), i.code.end(), codeOrName.begin(),
                   [](char a, char b) { return std::toupper(static_cast<unsigned char>(a)) ==
                                               std::toupper(static_cast<unsigned char>(b)); }))
      return &i;
  }
  return nullptr;
}

// ------------------------------------------------------------------ selection

static std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

int RuleSelection::specificity(const std::string& selector, const RuleInfo& info) {
  if (selector == "ALL") return 1;
  if (selector == info.name) return 1000;
  std::string s = upper(selector);
  if (s.size() <= info.code.size() && info.code.substr(0, s.size()) == s) return 1 + static_cast<int>(s.size());
  return 0;
}

RuleSelection::RuleSelection(const RuleCatalog& catalog, std::vector<std::string> select,
                             std::vector<std::string> ignore)
    : select_(select.empty() ? std::vector<std::string>{"ALL"} : std::move(select)), ignore_(std::move(ignore)) {
  for (const auto* list : {&select_, &ignore_}) {
    for (const auto& sel : *list) {
      bool any = std::any_of(catalog.infos.begin(), catalog.infos.end(),
                             [&](const RuleInfo& i) { return specificity(sel, i) > 0; });
      if (!any) throw std::invalid_argument("unknown rule selector `" + sel + "` (see `shardlint rules`)");
    }
  }
}

bool RuleSelection::enabled(const RuleInfo& info) const {
  int bestSelect = 0, bestIgnore = 0;
  for (const auto& s : select_) bestSelect = std::max(bestSelect, specificity(s, info));
  for (const auto& s : ignore_) bestIgnore = std::max(bestIgnore, specificity(s, info));
  return bestSelect > 0 && bestSelect > bestIgnore;
}

// ------------------------------------------------------------------ suppressions

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequalsPrefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// Parses "noqa", "noqa: A1, B2" at the start of `s`. Returns false if s is not a noqa directive.
bool parseNoqa(std::string_view s, Suppressions::Line& out) {
  if (!iequalsPrefix(s, "noqa")) return false;
  s.remove_prefix(4);
  std::string_view rest = s;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty() || rest.front() != ':') {
    if (!s.empty() && !std::isspace(static_cast<unsigned char>(s.front())) && s.front() != '#') return false;
    out.all = true;
    return true;
  }
  rest.remove_prefix(1);
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == ',' || rest[i] == '\t')) ++i;
    size_t start = i;
    while (i < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[i])) || rest[i] == '-' || rest[i] == '_'))
      ++i;
    if (i == start) break;
    out.codes.emplace_back(rest.substr(start, i - start));
  }
  if (out.codes.empty()) out.all = true;
  return true;
}
}  // namespace

void Suppressions::addComment(std::string_view comment, uint32_t line, bool ownLine) {
  // A comment may hold several `#` sections: `# type: ignore # noqa: SL101`.
  size_t pos = 0;
  while ((pos = comment.find('#', pos)) != std::string_view::npos) {
    std::string_view body = trim(comment.substr(pos + 1));
    ++pos;
    if (ownLine && iequalsPrefix(body, "shardlint:")) {
      Line l;
      if (parseNoqa(trim(body.substr(10)), l)) {
        fileLevel = true;
        file.all = file.all || l.all;
        file.codes.insert(file.codes.end(), l.codes.begin(), l.codes.end());
      }
      continue;
    }
    Line l;
    if (parseNoqa(body, l)) lines.emplace_back(line, std::move(l));
  }
}

bool Suppressions::suppresses(const Diagnostic& d, const RuleCatalog& catalog) const {
  auto matches = [&](const Line& l) {
    if (l.all) return true;
    for (const auto& c : l.codes) {
      const RuleInfo* info = catalog.find(c);
      if (info && info->code == d.code) return true;
    }
    return false;
  };
  if (fileLevel && matches(file)) return true;
  for (const auto& [line, l] : lines)
    if (line == d.location.start.line && matches(l)) return true;
  return false;
}

// ------------------------------------------------------------------ Linter

std::string moduleNameFor(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  return stem.empty() ? std::string("__main__") : stem;
}

std::string dumpModel(const std::string& path, std::string text, const RuleCatalog& catalog) {
  SourceFile file(path, std::move(text));
  syntax::Parser parser;
  syntax::Tree tree = parser.parse(file.text);
  if (!tree) return "parse failed\n";
  auto model = catalog.makeCallModel();
  semantic::FileAnalysis analysis(file, tree.root(), *model, moduleNameFor(path));
  analysis.run();
  std::string out;
  for (const auto& root : analysis.roots()) out += "== root " + root.name + "\n" + root.store->dump();
  return out;
}

Linter::Linter(const RuleCatalog& catalog, LintOptions options) : catalog_(catalog), options_(std::move(options)) {}

void Linter::report(std::vector<Diagnostic>& out, const SourceFile& file, std::string_view code, ByteRange range,
                    std::string message) const {
  const RuleInfo* info = catalog_.find(code);
  if (!info || !options_.selection.enabled(*info)) return;
  Diagnostic d;
  d.code = std::string(info->code);
  d.name = std::string(info->name);
  d.severity = info->severity;
  d.location = makeLocation(file, range);
  d.message = std::move(message);
  out.push_back(std::move(d));
}

std::vector<Diagnostic> Linter::lintPath(const std::string& path) const {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  std::vector<Diagnostic> out;
  SourceFile empty(path, "");
  if (ec) {
    report(out, empty, "SL002", {0, 0}, "file skipped: cannot read it (" + ec.message() + ")");
    return out;
  }
  if (size > options_.maxFileBytes) {
    report(out, empty, "SL002", {0, 0},
           "file skipped: it is " + std::to_string(size) + " bytes, larger than the limit of " +
               std::to_string(options_.maxFileBytes) + " bytes");
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    report(out, empty, "SL002", {0, 0}, "file skipped: cannot open it for reading");
    return out;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    report(out, empty, "SL002", {0, 0}, "file skipped: read error");
    return out;
  }
  return lintText(path, ss.str());
}

std::vector<Diagnostic> Linter::lintText(const std::string& path, std::string text) const {
  std::vector<Diagnostic> out;
  if (text.find('\0') != std::string::npos) {
    SourceFile empty(path, "");
    report(out, empty, "SL002", {0, 0}, "file skipped: it contains NUL bytes (binary file)");
    return out;
  }
  if (!isValidUtf8(text)) {
    SourceFile empty(path, "");
    report(out, empty, "SL002", {0, 0}, "file skipped: it is not valid UTF-8");
    return out;
  }
  if (text.size() > options_.maxFileBytes) {
    SourceFile empty(path, "");
    report(out, empty, "SL002", {0, 0}, "file skipped: larger than the size limit");
    return out;
  }
  SourceFile file(path, std::move(text));
  thread_local syntax::Parser parser;
  syntax::Tree tree = parser.parse(file.text);
  if (!tree) {
    report(out, file, "SL002", {0, 0}, "file skipped: the parser gave up on it");
    return out;
  }
  TSNode root = tree.root();
  if (auto err = syntax::firstSyntaxError(root)) {
    ByteRange r = syntax::rangeOf(*err);
    uint32_t line = file.index.lineOf(r.begin);
    r.end = std::min(r.end, file.index.lineEnd(line));
    if (r.end < r.begin) r.end = r.begin;
    // Quote at most 20 code points of the offending text, never splitting a character.
    std::string_view bad = file.slice(r);
    size_t cut = 0;
    for (int cps = 0; cut < bad.size() && cps < 20; ++cps) {
      ++cut;
      while (cut < bad.size() && (static_cast<unsigned char>(bad[cut]) & 0xC0) == 0x80) ++cut;
    }
    std::string what = ts_node_is_missing(*err) ? "missing `" + std::string(ts_node_type(*err)) + "`"
                                                : "unexpected `" + std::string(bad.substr(0, cut)) + "`";
    report(out, file, "SL001", r,
           "syntax error: " + what + "; the file could not be parsed completely, analysis continued on what parsed");
  }

  std::vector<std::unique_ptr<Rule>> rules;
  for (auto& r : catalog_.makeRules())
    if (options_.selection.enabled(r->info())) rules.push_back(std::move(r));
  auto model = catalog_.makeCallModel();
  semantic::FileAnalysis analysis(file, root, *model, moduleNameFor(path));
  std::vector<Diagnostic> found;
  RuleContext cx({&file}, root, analysis, found);
  bool anyApplies = std::any_of(rules.begin(), rules.end(), [&](const auto& r) { return r->mayApply(file.text); });
  if (!anyApplies) rules.clear();
  if (!rules.empty()) analysis.run();

  // One walk: per-node-kind dispatch plus comment collection for suppressions.
  const auto& kinds = syntax::PyKinds::instance();
  std::vector<std::vector<Rule*>> table(static_cast<size_t>(syntax::Kind::Count));
  for (auto& r : rules)
    for (syntax::Kind k : r->nodeKinds()) table[static_cast<size_t>(k)].push_back(r.get());
  Suppressions sup;
  TSTreeCursor cur = ts_tree_cursor_new(root);
  for (;;) {
    TSNode n = ts_tree_cursor_current_node(&cur);
    syntax::Kind k = kinds.kind(n);
    if (k == syntax::Kind::comment) {
      ByteRange r = syntax::rangeOf(n);
      uint32_t line = file.index.lineOf(r.begin);
      std::string_view before = std::string_view(file.text).substr(file.index.lineStart(line),
                                                                   r.begin - file.index.lineStart(line));
      bool ownLine = before.find_first_not_of(" \t") == std::string_view::npos;
      sup.addComment(file.slice(r), line, ownLine);
    }
    for (Rule* r : table[static_cast<size_t>(k)]) r->onNode(cx, n);
    if (ts_tree_cursor_goto_first_child(&cur)) continue;
    bool moved = false;
    while (!moved) {
      if (ts_tree_cursor_goto_next_sibling(&cur)) moved = true;
      else if (!ts_tree_cursor_goto_parent(&cur)) break;
    }
    if (!moved) break;
  }
  ts_tree_cursor_delete(&cur);
  for (auto& r : rules) r->finish(cx);

  // Deduplicate (a helper reached from two roots reports once) and apply suppressions.
  std::set<std::tuple<std::string, uint32_t, uint32_t, std::string>> seen;
  for (auto& d : found) {
    if (!seen.insert({d.code, d.location.range.begin, d.location.range.end, d.message}).second) continue;
    out.push_back(std::move(d));
  }
  out.erase(std::remove_if(out.begin(), out.end(), [&](const Diagnostic& d) { return sup.suppresses(d, catalog_); }),
            out.end());
  sortDiagnostics(out);
  return out;
}

}  // namespace shardlint
