// The linter's entry points and what its files share: rule look-up and --select/--ignore, one text
// linted alone (lintText, syntaxFindings, dumpModel), the module table's configuration, and the
// helpers of the driver's Linter files (LinterImpl.h). The project run (lintFiles) is in LintFiles.cpp,
// one file's analysis task in LinterTask.cpp, configuration files and launch scripts in LinterConfigs.cpp.
#include "driver/Linter.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <system_error>
#include <tuple>

#include <unistd.h>

#include "driver/CxxLint.h"
#include "driver/LinterImpl.h"
#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

// ------------------------------------------------------------------ RuleContext / RuleCatalog

const SourceFile& RuleContext::file(uint32_t id) const {
  const SourceFile* f = modules_.fileById(id);
  return f ? *f : analysis_.file();  // id 0: an origin with no place
}

void RuleContext::report(const RuleInfo& info, const semantic::Site& primary, std::string message,
                         std::vector<Note> notes, std::optional<Fix> fix) {
  out_.push_back(makeDiagnostic(info, locate(primary), std::move(message), std::move(notes)));
  // No fixes in a file that does not parse (like Ruff): what the parser recovered may not be what
  // the author meant, and an edit there could land in the wrong place.
  if (!ts_node_has_error(root())) out_.back().fix = std::move(fix);
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

std::string RuleSelection::describe() const {
  std::string out = "select";
  for (const auto& s : select_) out += " " + s;
  out += "; ignore";
  for (const auto& s : ignore_) out += " " + s;
  return out;
}

bool RuleSelection::enabled(const RuleInfo& info) const {
  int bestSelect = 0, bestIgnore = 0;
  for (const auto& s : select_) bestSelect = std::max(bestSelect, specificity(s, info));
  for (const auto& s : ignore_) bestIgnore = std::max(bestIgnore, specificity(s, info));
  return bestSelect > 0 && bestSelect > bestIgnore;
}

// ------------------------------------------------------------------ Linter

namespace {

// An absolute path with no empty, `.` or `..` component: already what lexically_normal() gives.
bool normalAbsolute(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '/') continue;
    size_t j = i + 1;
    if (j == p.size()) return true;  // a trailing separator is kept by lexically_normal too
    if (p[j] == '/') return false;
    if (p[j] == '.') {
      size_t k = j + 1;
      if (k == p.size() || p[k] == '/') return false;
      if (p[k] == '.' && (k + 1 == p.size() || p[k + 1] == '/')) return false;
    }
  }
  return true;
}

}  // namespace

namespace {

// absolutePathKey, with the working folder from `cwd()` when it is needed.
template <class Cwd>
std::string absoluteKey(const std::string& path, Cwd&& cwd) {
  if (normalAbsolute(path)) return path;  // the common case, without a getcwd() and a path split
  // A relative path of plain names (after any leading "./"), under a working folder that is itself
  // normal: joined by string, as absolute() and lexically_normal() would join it.
  size_t from = 0;
  while (path.compare(from, 2, "./") == 0) {
    from += 2;
    while (from < path.size() && path[from] == '/') ++from;
  }
  if (from < path.size() && path[0] != '/') {
    std::string joined;
    if (std::optional<std::string> dir = cwd(); dir && !dir->empty()) {
      joined.reserve(dir->size() + 1 + path.size() - from);
      joined.append(*dir);
      if (joined.back() != '/') joined.push_back('/');
      joined.append(path, from, std::string::npos);
      if (normalAbsolute(joined)) return joined;
    }
  }
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return (ec ? std::filesystem::path(path) : abs).lexically_normal().string();
}

}  // namespace

std::string absolutePathKey(const std::string& path) {
  return absoluteKey(path, []() -> std::optional<std::string> {
    char buf[4096];
    if (!::getcwd(buf, sizeof buf)) return std::nullopt;
    return std::string(buf);
  });
}

std::string absolutePathKey(const std::string& path, const std::string& cwd) {
  return absoluteKey(path, [&]() -> std::optional<std::string> { return cwd; });
}

std::string parentKey(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return std::string();
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

std::string_view lastNameOf(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string moduleNameFor(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  return stem.empty() ? std::string("__main__") : stem;
}

std::string dumpModel(const std::string& path, std::string text, const RuleCatalog& catalog) {
  if (isCxxPath(path)) return dumpCxxModel(path, std::move(text), catalog);
  SourceFile file(path, std::move(text));
  syntax::Parser parser;
  syntax::Tree tree = parser.parse(file.text);
  if (!tree) return "parse failed\n";
  auto model = catalog.makeCallModel();
  semantic::Module module(file, tree.root(), moduleNameFor(path));
  semantic::Session session(*model);
  semantic::FileAnalysis analysis(module, session);
  analysis.run();
  std::string out;
  for (const auto& root : analysis.roots()) out += "== root " + root.name + "\n" + root.store->dump();
  return out;
}

Linter::Linter(const RuleCatalog& catalog, LintOptions options)
    : catalog_(catalog),
      options_(std::move(options)),
      requirements_(options_.requirements ? options_.requirements : std::make_shared<RequirementsIndex>()) {}

std::optional<std::vector<std::vector<std::string_view>>> pythonPrescan(const Rule& r) {
  if (!r.checksPython()) return std::nullopt;
  return r.prescanTokens();
}

Diagnostic engineDiagnostic(const RuleInfo& info, const SourceFile& file, ByteRange range, std::string message) {
  return makeDiagnostic(info, makeLocation(file, range), std::move(message));
}

std::optional<Diagnostic> syntaxDiagnostic(const RuleInfo& info, const SourceFile& file, TSNode root) {
  auto err = syntax::firstSyntaxError(root);
  if (!err) return std::nullopt;
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
  return engineDiagnostic(info, file, r,
                          "syntax error: " + what +
                              "; the file could not be parsed completely, analysis continued on what parsed");
}

void finalizeDiagnostics(std::vector<Diagnostic>& all) {
  // Deterministic order and no duplicates (a helper reached from two files reports once).
  std::stable_sort(all.begin(), all.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.location.path, a.location.start.line, a.location.start.codepointColumn, a.code, a.message) <
           std::tie(b.location.path, b.location.start.line, b.location.start.codepointColumn, b.code, b.message);
  });
  std::vector<Diagnostic> unique;
  for (auto& d : all) {
    if (!unique.empty()) {
      const Diagnostic& p = unique.back();
      if (p.code == d.code && p.location.path == d.location.path && p.location.range.begin == d.location.range.begin &&
          p.location.range.end == d.location.range.end)
        continue;
    }
    unique.push_back(std::move(d));
  }
  all = std::move(unique);
}

std::string stoppedWhy(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return std::string("analysis stopped: out of memory (") + e.what() + ")";
  return std::string("analysis stopped: ") + e.what();
}

Diagnostic skippedDiagnostic(const RuleInfo& info, const std::string& path, std::string message) {
  SourceFile empty(path, "");
  return engineDiagnostic(info, empty, {0, 0}, std::move(message));
}

ModuleTable::Config Linter::tableConfig(bool retireRoots) const {
  ModuleTable::Config config;
  config.retireRoots = retireRoots;
  // A one-shot run keeps fewer summaries than a language server, which reuses them on every edit.
  if (retireRoots) config.summaryItems = semantic::SummaryCache::kOneShotItems;
  // A module worth loading for its summaries mentions some pre-scan word (an optimizer,
  // a wrap) or the configured extra names; words of Python rules without groups make all
  // qualify (a rule that checks only C++ or configuration files says nothing about modules).
  auto words = std::make_shared<std::vector<std::string>>();
  bool anyText = false;
  for (const auto& r : catalog_.makeRules()) {
    auto groups = pythonPrescan(*r);
    if (!groups) continue;
    if (groups->empty() && !r->checksConfigs()) anyText = true;
    for (const auto& g : *groups)
      for (auto w : g) words->emplace_back(w);
  }
  if (catalog_.factWords)
    for (auto& w : catalog_.factWords(options_.settingsFacts)) words->push_back(std::move(w));
  if (!anyText)
    config.worthLoading = [words](std::string_view text) {
      for (const auto& w : *words)
        if (text.find(w) != std::string_view::npos) return true;
      // The engine's own value sources: a module that declares dataclass fields or argparse
      // options holds the defaults a caller's flags may come from (`cfg.use_orig_params`), one that
      // loads a YAML file (`def load_config(): return OmegaConf.load(...)`) the file's values.
      for (std::string_view w : {"dataclass", "add_argument", "OmegaConf", "safe_load", "yaml.load", "full_load"})
        if (text.find(w) != std::string_view::npos) return true;
      return false;
    };
  config.outlineWant = catalog_.projectFactsWant;
  config.outline = catalog_.projectOutline;
  return config;
}

std::vector<Diagnostic> lintWithOverlays(const RuleCatalog& catalog, LintOptions base,
                                         const std::vector<std::string>& files,
                                         const std::map<std::string, std::string>& texts) {
  for (const auto& [path, text] : texts) base.overlays[absolutePathKey(path)] = text;
  return Linter(catalog, std::move(base)).lintFiles(files);
}

std::vector<Diagnostic> Linter::lintText(const std::string& path, std::string text) const {
  std::vector<Diagnostic> out;
  if (isMarkdownPath(path) && contentProblem(text, options_.maxFileBytes)) return out;  // documentation: not ours
  if (auto problem = contentProblem(text, options_.maxFileBytes)) {
    if (const RuleInfo* info = catalog_.find("SL002"); info && options_.selection.enabled(*info))
      out.push_back(skippedDiagnostic(*info, path, *problem));
    return out;
  }
  if (isLaunchPath(path)) {
    SourceFile file(path, std::move(text));
    if (catalog_.launchLinks) checkLaunchSettings(file, catalog_.launchLinks(file), out);
    finalizeDiagnostics(out);
    return out;
  }
  if (isCxxPath(path)) {
    LintOptions one = options_;
    one.overlays[absolutePathKey(path)] = std::move(text);
    LintStats ignored;
    lintCxx(catalog_, one, {path}, out, ignored);
    finalizeDiagnostics(out);
    return out;
  }
  if (isMarkdownPath(path)) {
    LintStats ignored;
    Facts noProject;
    std::vector<std::unique_ptr<Facts>> factStore;
    for (auto& doc : readMarkdown(path, text, ignored, out))
      checkConfig(doc, out, withRequirements(path, &noProject, factStore));
    finalizeDiagnostics(out);
    return out;
  }
  if (isConfigPath(path)) {
    LintStats ignored;
    Facts noProject;  // a single file: no project code to consult, only its declared dependencies
    std::vector<std::unique_ptr<Facts>> factStore;
    if (auto doc = readConfig(path, std::move(text), ignored, nullptr))
      checkConfig(*doc, out, withRequirements(path, &noProject, factStore));
    finalizeDiagnostics(out);
    return out;
  }
  ModuleTable table(tableConfig(false));
  std::vector<std::unique_ptr<Facts>> factStore;
  Task task(catalog_, options_, nullptr, table,
            withRequirements(path, options_.settingsFacts.empty() ? nullptr : &options_.settingsFacts, factStore),
            nullptr);
  out = task.run(path, std::move(text));
  finalizeDiagnostics(out);
  return out;
}

std::vector<Diagnostic> Linter::syntaxFindings(const std::string& path, std::string text) const {
  std::vector<Diagnostic> out;
  const RuleInfo* sl001 = catalog_.find("SL001");
  const RuleInfo* sl002 = catalog_.find("SL002");
  if (auto problem = contentProblem(text, options_.maxFileBytes)) {
    if (sl002) out.push_back(skippedDiagnostic(*sl002, path, *problem));
    return out;
  }
  SourceFile file(path, std::move(text));
  thread_local syntax::Parser parser;
  syntax::Tree tree = parser.parse(file.text);
  if (!tree) {
    if (sl002) out.push_back(skippedDiagnostic(*sl002, path, "file skipped: the parser gave up on it"));
    return out;
  }
  if (sl001)
    if (auto d = syntaxDiagnostic(*sl001, file, tree.root())) out.push_back(std::move(*d));
  return out;
}

}  // namespace shardlint
