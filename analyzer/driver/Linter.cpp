#include "driver/Linter.h"

#include "driver/Importers.h"
#include "driver/Discovery.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <tuple>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "core/Parallel.h"
#include "config/Markdown.h"
#include "driver/CxxLint.h"
#include "driver/Project.h"
#include "driver/ResultCache.h"
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

std::string absolutePathKey(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return (ec ? std::filesystem::path(path) : abs).lexically_normal().string();
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

Linter::Linter(const RuleCatalog& catalog, LintOptions options) : catalog_(catalog), options_(std::move(options)) {}

namespace {

// The pre-scan word groups that decide which Python files and modules matter to `r`, or none when
// the rule does not read Python (it checks only C++ units or configuration files).
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

// The comments of a Python tree, for suppressions: one look-up per `#` in the text (a comment
// starts with one) rather than a walk over every node.
void collectComments(const SourceFile& file, TSNode root, Suppressions& sup) {
  const auto& kinds = syntax::PyKinds::instance();
  std::string_view text = file.text;
  size_t pos = 0;
  while ((pos = text.find('#', pos)) != std::string_view::npos) {
    TSNode n = ts_node_descendant_for_byte_range(root, static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + 1));
    size_t next = pos + 1;
    if (!ts_node_is_null(n) && ts_node_child_count(n) == 0) {  // a leaf: a comment, or a string's text
      ByteRange r = syntax::rangeOf(n);
      if (kinds.kind(n) == syntax::Kind::comment && r.begin == pos) sup.addComment(file.slice(r), r.begin);
      next = std::max<size_t>(next, r.end);
    }
    pos = next;
  }
}

// Visits every node of the tree for the rules that ask for node kinds (Rule::nodeKinds).
void dispatchNodes(TSNode root, const std::function<void(syntax::Kind, TSNode)>& visit) {
  const auto& kinds = syntax::PyKinds::instance();
  syntax::walk(root, [&](TSNode n) {
    visit(kinds.kind(n), n);
    return true;
  });
}

// One analysis task: a linted file (the root) and the project modules its calls reach,
// from the run's ModuleTable (each parsed once per run, shared with the other tasks).
class Task final : public semantic::ModuleProvider {
 public:
  Task(const RuleCatalog& catalog, const LintOptions& options, const ProjectIndex* index, ModuleTable& table,
       const Facts* facts, semantic::SummaryCache* shared)
      : catalog_(catalog), options_(options), index_(index), table_(table), model_(catalog.makeCallModel()) {
    if (facts) model_->setFacts(*facts);
    session_ = std::make_unique<semantic::Session>(*model_, this, shared);
  }

  ModuleTable::Entry* root() const { return root_; }
  // No linted file still to be analysed imports this one: its summaries stay in this task.
  void setNotImported() { importedByOthers_ = false; }
  size_t sharedHits() const { return session_->sharedHits(); }

  std::vector<Diagnostic> run(const std::string& path, std::optional<std::string> text) {
    std::vector<Diagnostic> out;
    root_ = table_.loadRoot(path, index_, options_, std::move(text));
    if (!root_->parsed) {
      if (const RuleInfo* info = catalog_.find("SL002"); info && options_.selection.enabled(*info))
        out.push_back(skippedDiagnostic(*info, path,
                                        root_->problem.empty() ? "file skipped: the parser gave up on it"
                                                               : root_->problem));
      return out;
    }
    use(*root_->module);
    const SourceFile& file = *root_->file;
    TSNode treeRoot = root_->module->root();
    std::vector<Diagnostic> found;
    if (const RuleInfo* info = catalog_.find("SL001"); info && options_.selection.enabled(*info))
      if (auto d = syntaxDiagnostic(*info, file, treeRoot)) found.push_back(std::move(*d));

    std::vector<std::unique_ptr<Rule>> rules;
    for (auto& r : catalog_.makeRules())
      if (options_.selection.enabled(r->info())) rules.push_back(std::move(r));
    if (!importedByOthers_) session_->keepLocal(root_->module.get());
    semantic::FileAnalysis analysis(*root_->module, *session_);
    if (!rules.empty()) analysis.run();
    std::vector<Diagnostic> controls;
    RuleContext cx(table_, analysis, found, options_.controls ? &controls : nullptr);
    // Per-node-kind dispatch for the rules that ask for it; the comments for suppressions.
    std::vector<std::vector<Rule*>> table(static_cast<size_t>(syntax::Kind::Count));
    bool anyKinds = false;
    auto ownWords = [&](const Rule& r) {  // the file itself has a word of every pre-scan group
      for (const auto& group : r.prescanTokens())
        if (std::none_of(group.begin(), group.end(),
                         [&](std::string_view w) { return file.text.find(w) != std::string::npos; }))
          return false;
      return true;
    };
    for (auto& r : rules) {
      std::vector<syntax::Kind> kinds = r->nodeKinds();
      if (kinds.empty() || !ownWords(*r)) continue;
      for (syntax::Kind k : kinds) table[static_cast<size_t>(k)].push_back(r.get());
      anyKinds = true;
    }
    if (anyKinds)
      dispatchNodes(treeRoot, [&](syntax::Kind k, TSNode n) {
        for (Rule* r : table[static_cast<size_t>(k)]) r->onNode(cx, n);
      });
    Suppressions own(&file);
    collectComments(file, treeRoot, own);
    for (auto& r : rules) r->finish(cx);
    if (options_.controls) options_.controls->add(std::move(controls));
    // Where a limit cut the analysis short, the findings say so (SL002, as a note).
    if (const RuleInfo* info = catalog_.find("SL002"); info && options_.selection.enabled(*info))
      for (const auto& cut : session_->cuts()) {
        const SourceFile* at = table_.fileById(cut.site.file);
        if (!at) continue;
        Diagnostic d = makeDiagnostic(*info, makeLocation(*at, cut.site.range),
                                      cut.callee.empty()
                                          ? "analysis cut short: " + cut.why +
                                                "; what lies deeper was not followed and findings that depend on it "
                                                "may be missing"
                                          : "analysis cut short: the call of `" + cut.callee + "` was not followed (" +
                                                cut.why + "); findings that depend on what it does may be missing");
        d.severity = Severity::Info;
        found.push_back(std::move(d));
      }

    std::map<std::string, Suppressions> others;  // comments of the modules findings point into
    for (auto& d : found) {
      Suppressions* sup = &own;
      if (d.location.path != file.path) {
        auto it = others.find(d.location.path);
        if (it == others.end()) {
          Suppressions s;
          if (ModuleTable::Entry* e = table_.current(d.location.path); e && e->parsed && e->module) {
            s.setFile(e->file.get());
            collectComments(*e->file, e->module->root(), s);
          }
          it = others.emplace(d.location.path, std::move(s)).first;
        }
        sup = &it->second;
      }
      if (sup->suppresses(d, catalog_)) continue;
      out.push_back(std::move(d));
    }
    // SL003 for the linted file's own suppression comments.
    for (auto& d : own.problems(catalog_, options_.selection, options_.reportUnusedNoqa)) out.push_back(std::move(d));
    return out;
  }

  Found resolve(std::string_view qualname, const semantic::Module& from) override {
    return resolve(std::string(qualname), from, 0);
  }

  void use(const semantic::Module& module) override {
    if (module.fileId() == 0 || leased_.count(module.fileId())) return;
    if (ModuleTable::Entry* e = table_.byId(module.fileId())) {
      table_.lease(e);
      leased_.emplace(module.fileId(), e);
    }
  }

  ~Task() override {
    for (const auto& [id, e] : leased_) table_.unlease(e);
  }

  std::optional<std::string> dataFile(std::string_view spelled, const semantic::Module& from) override {
    namespace fs = std::filesystem;
    const ModuleTable::Entry* fromEntry = table_.byId(from.fileId());
    if (spelled.empty() || !fromEntry || spelled.find('\0') != std::string_view::npos) return std::nullopt;
    fs::path rel(spelled);
    if (rel.is_absolute() || rel.has_root_name()) return std::nullopt;  // not the project's file
    std::error_code ec;
    fs::path script = fs::absolute(fs::path(fromEntry->path), ec).parent_path().lexically_normal();
    if (ec) return std::nullopt;
    fs::path project = index_ ? index_->projectDirOf(fromEntry->path) : fs::path();
    if (!project.empty()) project = fs::absolute(project, ec).lexically_normal();
    const fs::path& top = project.empty() ? script : project;
    auto inside = [&](const fs::path& p) {
      auto [a, b] = std::mismatch(top.begin(), top.end(), p.begin(), p.end());
      return a == top.end() && b != p.end();
    };
    // Beside the file, then at the project's root: each place is a dependency, found or not.
    std::vector<const ModuleTable::Entry*> found;
    for (const fs::path& dir : {script, project}) {
      if (dir.empty()) continue;
      fs::path p = (dir / rel).lexically_normal();
      if (!inside(p)) continue;
      std::string path = index_ ? index_->displayOf(p.string()) : p.string();
      if (const ModuleTable::Entry* e = table_.loadData(path, options_, fromEntry))
        if (std::none_of(found.begin(), found.end(), [&](const ModuleTable::Entry* f) { return f == e; }))
          found.push_back(e);
    }
    if (found.size() != 1) return std::nullopt;  // none, or two different files: which one runs is unknown
    return found[0]->file->text;
  }

 private:
  static std::vector<std::string> split(const std::string& q) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= q.size()) {
      size_t dot = q.find('.', start);
      parts.push_back(q.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return parts;
  }

  // Depends only on (q, from): summaries computed through it are shared between tasks.
  Found resolve(const std::string& q, const semantic::Module& from, int depth) {
    if (!index_ || depth > 8 || q.empty() || q[0] == '.') return {};
    const std::string& own = from.moduleName();
    std::vector<std::string> parts = split(q);
    for (size_t k = parts.size() - 1; k >= 1; --k) {
      std::string module;
      for (size_t i = 0; i < k; ++i) module += (i ? "." : "") + parts[i];
      // A module's own ancestor packages (torch/nn/x.py calling `torch.zeros`) are library
      // plumbing, not helpers: not loaded (as in the pre-scan).
      if (own.size() > module.size() && own.compare(0, module.size(), module) == 0 && own[module.size()] == '.')
        return {};
      const ModuleTable::Entry* fromEntry = table_.byId(from.fileId());
      if (!fromEntry) return {};
      auto path = index_->findModule(module, fromEntry->path);
      if (!path) continue;
      ModuleTable::Entry* e = table_.loadModule(*path, index_, options_, table_.byId(from.fileId()));
      if (!e || !e->module) return {};
      return lookup(*e->module, std::vector<std::string>(parts.begin() + static_cast<long>(k), parts.end()), depth);
    }
    return {};
  }

  Found lookup(const semantic::Module& m, const std::vector<std::string>& rest, int depth) {
    if (rest.size() == 1) {
      if (const auto* f = m.topFunction(rest[0])) return {f, nullptr};
      if (const auto* c = m.topClass(rest[0])) return {nullptr, c};
    } else if (rest.size() == 2) {
      if (const auto* c = m.topClass(rest[0]))
        if (const auto* f = c->findMethod(rest[1])) return {f, nullptr};
    }
    std::string tail;
    for (size_t i = 1; i < rest.size(); ++i) tail += "." + rest[i];
    if (auto imported = m.importOf(rest[0])) return resolve(*imported + tail, m, depth + 1);  // a re-export
    for (const auto& star : m.starImports()) {  // `from helpers import *`
      Found f = resolve(star + "." + rest[0] + tail, m, depth + 1);
      if (f.function || f.cls) return f;
    }
    return {};
  }

  const RuleCatalog& catalog_;
  const LintOptions& options_;
  const ProjectIndex* index_;
  ModuleTable& table_;
  std::unique_ptr<semantic::CallModel> model_;
  std::unique_ptr<semantic::Session> session_;
  ModuleTable::Entry* root_ = nullptr;
  bool importedByOthers_ = true;
  std::map<uint32_t, ModuleTable::Entry*> leased_;  // modules whose trees this task reads
};

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

}  // namespace

std::string stoppedWhy(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return std::string("analysis stopped: out of memory (") + e.what() + ")";
  return std::string("analysis stopped: ") + e.what();
}

Diagnostic skippedDiagnostic(const RuleInfo& info, const std::string& path, std::string message) {
  SourceFile empty(path, "");
  return engineDiagnostic(info, empty, {0, 0}, std::move(message));
}

static bool isLaunchPath(const std::string& path) {
  std::filesystem::path p(path);
  std::string name = p.filename().string();
  return p.extension() == ".sh" || name == "Makefile" || name == "makefile" || name == "GNUmakefile";
}

void Linter::runConfigRules(ConfigContext& cx) const {
  for (auto& rule : catalog_.makeRules())
    if (rule->checksConfigs() && options_.selection.enabled(rule->info())) rule->checkConfig(cx);
}

void Linter::checkLaunchSettings(const SourceFile& file, const std::vector<LaunchLink>& links,
                                 std::vector<Diagnostic>& out,
                                 const std::vector<std::pair<std::string, uint32_t>>* directives) const {
  static const Facts noProject;
  std::vector<Diagnostic> found;
  std::vector<std::unique_ptr<Facts>> factStore;
  const Facts* project = nullptr;  // no project code to consult; the declared dependencies, when any
  for (const auto& link : links) {
    if (!link.settings.isMap()) continue;  // the command's own settings, checked like a config
    if (!project) project = withRequirements(file.path, &noProject, factStore);
    std::vector<config::YNode> docs{link.settings};
    ConfigContext cx(file, docs, found, project);
    runConfigRules(cx);
  }
  if (found.empty()) return;
  Suppressions sup(&file);
  sup.addHashComments(file);  // shell scripts and Makefiles use `#` comments like YAML
  if (directives)
    for (const auto& [comment, offset] : *directives) sup.addComment(comment, offset);
  for (auto& d : found)
    if (!sup.suppresses(d, catalog_)) out.push_back(std::move(d));
}

const Facts* Linter::withRequirements(const std::string& path, const Facts* base,
                                      std::vector<std::unique_ptr<Facts>>& store) const {
  if (catalog_.requirementPackages.empty()) return base;
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return base;
  const Requirements& declared = requirements_->forDirectory(abs.parent_path());
  Facts added;
  for (const auto& name : catalog_.requirementPackages) {
    auto it = declared.find(name);
    if (it == declared.end()) continue;
    std::string value;
    for (const auto& r : it->second)
      value += (value.empty() ? "" : "\n") + r.spec + "\t" +
               std::filesystem::path(r.file).lexically_relative(abs.parent_path()).generic_string() + ":" +
               std::to_string(r.line);
    added["requires:" + name] = std::move(value);
  }
  if (added.empty()) return base;
  if (base)
    for (const auto& [k, v] : *base) added.emplace(k, v);
  store.push_back(std::make_unique<Facts>(std::move(added)));
  return store.back().get();
}

bool Linter::mentionsConfigWord(std::string_view text) const {
  if (catalog_.configWords.empty()) return true;
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return std::any_of(catalog_.configWords.begin(), catalog_.configWords.end(),
                     [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

std::map<std::string, Facts> Linter::linkConfigs(const std::vector<std::string>& launchPaths,
                                                 std::map<std::string, Facts> configFacts,
                                                 std::vector<Diagnostic>* diagnostics,
                                                 const std::map<std::string, ProjectFiles>& projects) const {
  namespace fs = std::filesystem;
  std::vector<const Facts*> named;  // the named configs' (map nodes: the pointers stay valid)
  for (const auto& [path, f] : configFacts) named.push_back(&f);
  auto factsOfConfig = [&](const std::string& path) -> const Facts* {
    std::string key = absolutePathKey(path);
    auto it = configFacts.find(key);
    if (it != configFacts.end()) return &it->second;
    // A config outside the linted paths: read it for its facts only (its findings are not ours to report).
    ReadResult r = readSource(path, options_);
    Facts f;
    if (!r.skipped && !contentProblem(r.text, options_.maxFileBytes) && catalog_.configFacts) {
      SourceFile file(path, std::move(r.text));
      try {
        auto docs = config::parseYaml(file);
        f = catalog_.configFacts(file, docs);
      } catch (const config::YamlError&) {
      }
    }
    return &(configFacts[key] = std::move(f));
  };
  std::map<std::string, Facts> out;
  // 1. Launch commands in shell scripts and Makefiles name the script and its config.
  if (catalog_.launchLinks) {
    // The named launch scripts (their own settings are checked), then those of the linted scripts' projects.
    std::vector<std::pair<std::string, bool>> allLaunch;
    std::set<std::string> seen;
    for (const auto& lp : launchPaths)
      if (seen.insert(absolutePathKey(lp)).second) allLaunch.emplace_back(lp, true);
    for (const auto& [dir, files] : projects)
      for (const auto& lp : files.launch)
        if (seen.insert(absolutePathKey(lp)).second) allLaunch.emplace_back(lp, false);
    for (const auto& [lp, named] : allLaunch) {
      ReadResult r = readSource(lp, options_);
      if (r.skipped || contentProblem(r.text, options_.maxFileBytes)) continue;
      SourceFile file(lp, std::move(r.text));
      fs::path dir = fs::path(lp).parent_path();
      // Launch commands run from the repository root or the script's folder: try the
      // script's folder and its ancestors, then the current directory.
      auto locate = [&](const std::string& written) -> std::optional<std::string> {
        fs::path base = dir;
        for (int up = 0; up < 4; ++up) {
          fs::path p = (base / written).lexically_normal();
          std::error_code ec;
          if (fs::is_regular_file(p, ec)) return p.string();
          if (base.empty() || !base.has_parent_path() || base.parent_path() == base) break;
          base = base.parent_path();
        }
        std::error_code ec;
        if (fs::is_regular_file(written, ec)) return written;
        return std::nullopt;
      };
      std::vector<LaunchLink> links = catalog_.launchLinks(file);
      if (diagnostics && named) checkLaunchSettings(file, links, *diagnostics);
      for (const auto& link : links) {
        if (link.script.empty()) continue;
        auto script = locate(link.script);
        if (!script) continue;
        Facts merged;
        if (!link.configFile.empty())
          if (auto cfg = locate(link.configFile))
            if (const Facts* f = factsOfConfig(*cfg)) merged = *f;
        for (const auto& [k, v] : link.facts) merged[k] = v;  // flags override the file
        if (!merged.empty()) out[absolutePathKey(*script)] = std::move(merged);
      }
    }
  }
  // 2. Explicit configs apply to every script without its own link.
  const Facts* explicitConfig = nullptr;
  for (const auto& c : options_.accelerateConfigs)
    if (const Facts* f = factsOfConfig(c); f && !f->empty()) explicitConfig = f;
  if (explicitConfig) out[""] = *explicitConfig;
  // 3. Else a project's only accelerate FSDP config applies to its scripts: found in the project, not
  // among the named files, so that a script linted alone gets the same config. 4. Scripts in no
  // project: the only one among the named files.
  auto onlyOne = [](const std::vector<const Facts*>& found) -> const Facts* {
    const Facts* only = nullptr;
    int count = 0;
    for (const Facts* f : found)
      if (f && !f->empty()) only = f, ++count;
    return count == 1 ? only : nullptr;
  };
  if (const Facts* only = onlyOne(named)) out["named"] = *only;
  for (const auto& [dir, files] : projects) {
    std::vector<const Facts*> found;
    for (const auto& c : files.configs) {
      if (auto it = configFacts.find(absolutePathKey(c)); it != configFacts.end()) {
        found.push_back(&it->second);
        continue;
      }
      ReadResult r = readSource(c, options_);  // the config rules' words first: most files are not configs
      if (r.skipped || contentProblem(r.text, options_.maxFileBytes) || !mentionsConfigWord(r.text)) continue;
      found.push_back(factsOfConfig(c));
    }
    if (const Facts* only = onlyOne(found)) out["project:" + dir] = *only;
  }

  return out;
}

static bool isConfigPath(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

std::optional<Linter::ConfigDoc> Linter::readConfig(const std::string& path, std::string text, LintStats& stats,
                                                   Facts* facts) const {
  // Pre-scan: only files that mention a word the config rules need are parsed.
  if (!mentionsConfigWord(text)) {
    ++stats.filesSkipped;
    return std::nullopt;
  }
  ++stats.filesAnalysed;
  ++stats.filesParsed;
  ConfigDoc doc;
  doc.file = std::make_unique<SourceFile>(path, std::move(text));
  try {
    doc.docs = config::parseYaml(*doc.file);
  } catch (const config::YamlError& e) {
    if (const RuleInfo* info = catalog_.find("SL001"); info && options_.selection.enabled(*info))
      doc.found.push_back(engineDiagnostic(*info, *doc.file, {e.offset, e.offset},
                                           std::string("syntax error: ") + e.what() +
                                               "; the file could not be parsed, so its settings were not checked"));
  }
  if (!doc.docs.empty() && facts && catalog_.configFacts) *facts = catalog_.configFacts(*doc.file, doc.docs);
  return doc;
}

namespace {

bool isMarkdownPath(const std::string& path) { return std::filesystem::path(path).extension() == ".md"; }

// Whether some line of a block reads as a mapping entry (`key: value`, `"key": value`, `- key: value`,
// `{"key": value`):
// the blocks worth parsing as YAML.
bool looksLikeMapping(const std::vector<std::string_view>& lines) {
  for (std::string_view l : lines) {
    size_t i = l.find_first_not_of(" \t");
    if (i == std::string_view::npos) continue;
    if (l[i] == '-' && i + 1 < l.size() && l[i + 1] == ' ') i = l.find_first_not_of(" \t", i + 1);
    if (i != std::string_view::npos && l[i] == '{') i = l.find_first_not_of(" \t", i + 1);  // `{"key": ...}`
    if (i == std::string_view::npos) continue;
    char quote = l[i] == '"' || l[i] == '\'' ? l[i] : 0;
    if (quote) ++i;
    size_t start = i;
    while (i < l.size() && (std::isalnum(static_cast<unsigned char>(l[i])) || l[i] == '_' || l[i] == '-' || l[i] == '.'))
      ++i;
    if (i == start || (!std::isalpha(static_cast<unsigned char>(l[start])) && l[start] != '_')) continue;
    if (quote && (i >= l.size() || l[i++] != quote)) continue;
    if (i < l.size() && l[i] == ':' && (i + 1 == l.size() || l[i + 1] == ' ' || l[i + 1] == '\t' || l[i + 1] == '\r'))
      return true;
  }
  return false;
}

// `<!-- shardlint: disable=SL301 -->` (or `noqa`, `disable-file`, no codes: every rule) on the lines
// right above a fence: the whole block, as the `#` directive `# shardlint: disable-file=...` in it.
std::vector<std::pair<std::string, uint32_t>> htmlDirectives(std::string_view text, const std::vector<uint32_t>& starts,
                                                             uint32_t fenceLine) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (uint32_t l = fenceLine; l-- > 0;) {
    std::string_view line = config::spanLines(text, starts, {l, l + 1})[0];
    size_t open = line.find("<!--");
    size_t close = line.rfind("-->");
    if (open == std::string_view::npos || close == std::string_view::npos || close < open + 4 ||
        line.find_first_not_of(" \t") != open)
      break;
    std::string_view body = line.substr(open + 4, close - open - 4);
    size_t b = body.find_first_not_of(" \t");
    if (b == std::string_view::npos) break;
    body.remove_prefix(b);
    std::string low;
    for (char c : body.substr(0, 10)) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (low != "shardlint:") break;
    std::string_view rest = body.substr(10);
    size_t w = rest.find_first_not_of(" \t");
    rest.remove_prefix(w == std::string_view::npos ? rest.size() : w);
    size_t word = 0;
    while (word < rest.size() && (std::isalpha(static_cast<unsigned char>(rest[word])) || rest[word] == '-')) ++word;
    std::string directive(rest.substr(0, word));
    for (char& c : directive) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (directive != "disable" && directive != "disable-file" && directive != "disable-next-line" && directive != "noqa")
      break;
    rest.remove_prefix(word);
    size_t c = rest.find_first_not_of(" \t=:");
    std::string codes(c == std::string_view::npos ? std::string_view() : rest.substr(c));
    while (!codes.empty() && (codes.back() == ' ' || codes.back() == '\t')) codes.pop_back();
    out.emplace_back("# shardlint: disable-file" + (codes.empty() ? std::string() : "=" + codes),
                     starts[l] + static_cast<uint32_t>(open));
  }
  return out;
}

}  // namespace

std::vector<Linter::ConfigDoc> Linter::readMarkdown(const std::string& path, const std::string& text, LintStats& stats,
                                                    std::vector<Diagnostic>& out) const {
  std::vector<ConfigDoc> docs;
  // Byte pre-scan: a fence and a word the config rules need, else nothing is scanned.
  if (!config::mayHaveFences(text) || !mentionsConfigWord(text)) {
    ++stats.filesSkipped;
    return docs;
  }
  std::vector<config::FencedBlock> blocks = config::fencedBlocks(text);
  std::vector<uint32_t> starts = config::lineStarts(text);
  bool analysed = false;
  // One span parsed as YAML: a ConfigDoc when it holds documents.
  auto tryYaml = [&](config::LineSpan span, const std::vector<std::pair<std::string, uint32_t>>& directives) {
    ConfigDoc doc;
    doc.file = std::make_unique<SourceFile>(path, config::spanView(text, starts, span, true));
    try {
      doc.docs = config::parseYaml(*doc.file);
    } catch (const config::YamlError&) {
      return false;  // a partial or shell block: documentation, not a config
    }
    if (std::none_of(doc.docs.begin(), doc.docs.end(), [](const config::YNode& n) { return n.isMap(); })) return false;
    doc.directives = directives;
    docs.push_back(std::move(doc));
    analysed = true;
    return true;
  };
  for (const auto& b : blocks) {
    if (b.content.first >= b.content.end) continue;
    std::vector<std::string_view> lines = config::spanLines(text, starts, b.content);
    uint32_t from = starts[b.content.first];
    uint32_t to = b.content.end < starts.size() ? starts[b.content.end] : static_cast<uint32_t>(text.size());
    if (!mentionsConfigWord(std::string_view(text).substr(from, to - from))) continue;
    auto directives = htmlDirectives(text, starts, b.fenceLine);
    if (looksLikeMapping(lines) && tryYaml(b.content, directives)) continue;
    // Not a config itself: the configs a shell block writes (here-documents), and its launch commands.
    if (b.language == "python" || b.language == "py" || b.language == "yaml" || b.language == "yml" ||
        b.language == "json")
      continue;
    for (const auto& body : config::hereDocuments(text, starts, b.content))
      if (looksLikeMapping(config::spanLines(text, starts, body))) tryYaml(body, directives);
    if (catalog_.launchLinks) {
      SourceFile view(path, config::spanView(text, starts, b.content, true));
      std::vector<LaunchLink> links = catalog_.launchLinks(view);
      if (!links.empty()) {
        analysed = true;
        size_t before = out.size();
        checkLaunchSettings(view, links, out, &directives);
        for (size_t i = before; i < out.size(); ++i) out[i].fix.reset();  // no fixes in documentation
      }
    }
  }
  if (analysed) ++stats.filesAnalysed, stats.filesParsed += docs.size();
  else ++stats.filesSkipped;
  return docs;
}

void Linter::checkConfig(ConfigDoc& doc, std::vector<Diagnostic>& out, const Facts* project) const {
  if (!doc.docs.empty()) {
    ConfigContext cx(*doc.file, doc.docs, doc.found, project);
    runConfigRules(cx);
  }
  Suppressions sup(doc.file.get());
  sup.addHashComments(*doc.file);
  for (const auto& [comment, offset] : doc.directives) sup.addComment(comment, offset);
  bool markdown = isMarkdownPath(doc.file->path);
  for (auto& d : doc.found) {
    if (markdown) d.fix.reset();  // fixes edit configuration files, not the documentation showing one
    if (!sup.suppresses(d, catalog_)) out.push_back(std::move(d));
  }
  for (auto& d : sup.problems(catalog_, options_.selection, options_.reportUnusedNoqa)) out.push_back(std::move(d));
}

ModuleTable::Config Linter::tableConfig(bool retireRoots) const {
  ModuleTable::Config config;
  config.retireRoots = retireRoots;
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

std::vector<Diagnostic> Linter::lintFiles(const std::vector<std::string>& paths, LintStats* statsOut,
                                          ModuleTable* persistent) const {
  std::vector<Diagnostic> all;
  try {
    lintFilesInto(paths, statsOut, persistent, all);
  } catch (const std::exception& e) {
    // Not one file's failure (those are SL002 findings): the run failed. What was found so far
    // goes with the error, for the caller to write before it reports it.
    try {
      finalizeDiagnostics(all);
    } catch (const std::exception&) {
      all.clear();
    }
    throw LintInternalError(e.what(), std::move(all));
  }
  return all;
}

void Linter::lintFilesInto(const std::vector<std::string>& paths, LintStats* statsOut, ModuleTable* persistent,
                           std::vector<Diagnostic>& all) const {
  using Clock = std::chrono::steady_clock;
  LintStats stats;
  stats.filesSeen = paths.size();
  auto t0 = Clock::now();
  const RuleInfo* sl002 = catalog_.find("SL002");
  bool reportSkips = sl002 && options_.selection.enabled(*sl002);

  // ---- pre-scan: bytes only. Which words each file mentions, and what it imports.
  std::vector<std::unique_ptr<Rule>> rules;
  for (auto& r : catalog_.makeRules())
    if (options_.selection.enabled(r->info())) rules.push_back(std::move(r));
  std::vector<std::string_view> words;
  std::vector<std::vector<uint64_t>> ruleGroups;  // per rule: a mask per group
  bool alwaysRelevant = false;
  for (const auto& r : rules) {
    auto groups = pythonPrescan(*r);
    if (!groups) continue;
    if (groups->empty()) alwaysRelevant = true;
    std::vector<uint64_t> masks;
    for (const auto& g : *groups) {
      uint64_t m = 0;
      for (auto w : g) {
        auto it = std::find(words.begin(), words.end(), w);
        size_t bit = static_cast<size_t>(it - words.begin());
        if (it == words.end()) words.push_back(w);
        if (bit < 64) m |= uint64_t{1} << bit;
      }
      masks.push_back(m);
    }
    ruleGroups.push_back(std::move(masks));
  }
  // Words the settings make relevant (configured in-house optimizer / wrap names) count for every group.
  std::vector<std::string> extraWords;
  if (catalog_.factWords) extraWords = catalog_.factWords(options_.settingsFacts);
  auto maskOf = [&](std::string_view text) {
    uint64_t m = 0;
    for (size_t i = 0; i < words.size() && i < 64; ++i)
      if (text.find(words[i]) != std::string_view::npos) m |= uint64_t{1} << i;
    for (const auto& w : extraWords)
      if (text.find(w) != std::string_view::npos) m = ~uint64_t{0};
    return m;
  };

  // Configuration files take their own, simpler path; launch scripts are only read for links.
  std::vector<std::string> pyPaths, launchPaths, configPaths, cxxPaths, markdownPaths;
  for (const auto& p : paths) {
    if (isConfigPath(p)) configPaths.push_back(p);
    else if (isMarkdownPath(p)) markdownPaths.push_back(p);
    else if (isCxxPath(p)) cxxPaths.push_back(p);
    else if (isLaunchPath(p)) launchPaths.push_back(p);
    else pyPaths.push_back(p);
  }
  // Configuration files are read and parsed first (their facts configure the scripts);
  // their checks run after the Python analysis, with the project facts.
  std::vector<ConfigDoc> configDocs;
  std::map<std::string, Facts> configFacts;  // absolute path -> facts
  for (const auto& p : configPaths) {
    ReadResult r = readSource(p, options_);
    ++stats.filesRead;
    if (r.skipped || contentProblem(r.text, options_.maxFileBytes)) continue;  // not ours to report
    stats.bytesRead += r.text.size();
    Facts f;
    try {  // a failure parsing one configuration file is SL002 for it
      if (auto doc = readConfig(p, std::move(r.text), stats, &f)) configDocs.push_back(std::move(*doc));
    } catch (const std::exception& e) {
      if (reportSkips) all.push_back(skippedDiagnostic(*sl002, p, stoppedWhy(e)));
      continue;
    }
    if (!f.empty()) configFacts[absolutePathKey(p)] = std::move(f);
  }
  // Markdown files: the configs their fenced blocks document, checked like configuration files (they
  // configure no script).
  for (const auto& p : markdownPaths) {
    ReadResult r = readSource(p, options_);
    ++stats.filesRead;
    if (r.skipped || contentProblem(r.text, options_.maxFileBytes)) continue;  // not ours to report
    stats.bytesRead += r.text.size();
    try {
      for (auto& doc : readMarkdown(p, r.text, stats, all)) configDocs.push_back(std::move(doc));
    } catch (const std::exception& e) {
      if (reportSkips) all.push_back(skippedDiagnostic(*sl002, p, stoppedWhy(e)));
    }
  }
  ProjectIndex index(options_.roots);
  index.addFiles(pyPaths);
  // The launch scripts and configuration files of each linted Python file's project (one answer per
  // file: a script's config must not depend on which other files are named).
  std::map<std::string, ProjectFiles> projects;
  {
    std::set<std::string> dirs;
    for (const auto& p : pyPaths)
      if (auto d = index.projectDirOf(p); !d.empty()) dirs.insert(d.string());
    // A project larger than this is not searched (its scripts get only the configs named or linked by
    // the named launch scripts): the walk happens on every run, the editor's too.
    constexpr size_t kMaxProjectEntries = 20000;
    for (const auto& d : dirs) {
      DiscoveryResult found = discover({d}, kMaxProjectEntries);
      if (found.truncated) continue;
      ProjectFiles& pf = projects[d];
      for (const auto& f : found.files) {
        if (isLaunchPath(f)) pf.launch.push_back(f);
        else if (isConfigPath(f)) pf.configs.push_back(f);
        else if (!isCxxPath(f)) pf.python.push_back(f);
      }
    }
  }
  std::map<std::string, Facts> linked = linkConfigs(launchPaths, std::move(configFacts), &all, projects);
  struct Scanned {
    std::string path;
    std::string text;
    bool linted = false;
    bool importer = false;  // not linted: analysed for the findings it makes in linted files
    bool ok = false;
    uint64_t mask = 0;
    std::vector<size_t> imports;
    // Its own ancestor packages it imports from (`from . import x`), when they are linted or
    // imported too: left out of the relevance closure (`imports`), but its analysis may run
    // their code, so they count when deciding how long a tree is kept.
    std::vector<size_t> ancestors;
    int depth = 0;  // import steps from the nearest linted file
  };
  std::vector<Scanned> scanned;
  std::map<std::string, size_t> byPath;
  for (const auto& p : pyPaths) {
    if (byPath.count(p)) continue;
    byPath[p] = scanned.size();
    scanned.push_back({p, "", true, false, false, 0, {}, {}, 0});
  }
  // One answer per file: the project's files that import a linted file (and those that import them)
  // are analysed too, for the findings their flow makes in linted files (a class's file whose methods
  // a driver script calls in a telling order). Only files the run does not lint; bounded.
  unsigned jobs = options_.jobs ? options_.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::unique_ptr<ImportScanCache> ownScans;
  ImportScanCache& scans = persistent ? persistent->importScans() : *(ownScans = std::make_unique<ImportScanCache>());
  std::map<std::string, std::string> lintedSpelling;  // absolute key -> the path as linted
  for (const auto& p : pyPaths) lintedSpelling.emplace(absolutePathKey(p), p);
  {
    std::vector<std::string> candidates;
    for (const auto& [dir, pf] : projects) candidates.insert(candidates.end(), pf.python.begin(), pf.python.end());
    ImportersFound importers = findImporters(index, pyPaths, candidates, options_, scans, jobs);
    stats.importersTruncated = importers.truncated;
    for (const auto& found : importers.files) {
      std::string f = index.displayOf(found);
      if (byPath.count(f)) continue;
      byPath[f] = scanned.size();
      scanned.push_back({f, "", false, true, false, 0, {}, {}, 0});
    }
  }
  constexpr size_t kMaxExtraFiles = 4000;
  // Breadth first, a wave per import level: each wave's files are read, masked and scanned for
  // imports on `jobs` threads, then their imports are resolved in order (the same order, and so
  // the same result, as one file at a time).
  struct Read {
    ReadResult r;
    std::optional<std::string> problem;
    std::vector<std::string> imports;  // as spelled
    size_t bytes = 0;
  };
  for (size_t first = 0; first < scanned.size();) {
    size_t last = scanned.size();
    std::vector<Read> reads(last - first);
    parallelFor(reads.size(), jobs, [&](size_t k) {
      Scanned& sc = scanned[first + k];
      Read& rd = reads[k];
      try {
        rd.r = readSource(sc.path, options_);
        rd.problem = rd.r.skipped ? rd.r.skipped : contentProblem(rd.r.text, options_.maxFileBytes);
        if (rd.problem) return;
        rd.bytes = rd.r.text.size();
        sc.mask = maskOf(rd.r.text);
        if (sc.depth < 2) rd.imports = scanImports(rd.r.text);
        if (!sc.linted && !sc.importer) rd.r.text = std::string();  // only its mask and imports were wanted
      } catch (const std::exception& e) {  // (out of memory): this file is skipped, not the run
        rd = Read{};
        rd.problem = std::string("file skipped: ") + e.what();
      }
    });
    for (size_t i = first; i < last; ++i) {
      Read& rd = reads[i - first];
      ++stats.filesRead;
      if (rd.problem) {
        if (scanned[i].linted && reportSkips) all.push_back(skippedDiagnostic(*sl002, scanned[i].path, *rd.problem));
        continue;
      }
      stats.bytesRead += rd.bytes;
      scanned[i].ok = true;
      // Imports: for the relevance closure (two levels: only linted files' and their imports'
      // imports are needed), and to know which files others import.
      std::string ownModule = rd.imports.empty() ? std::string() : index.moduleOf(scanned[i].path).name;
      for (const auto& spelled : rd.imports) {
        auto name = index.absoluteName(scanned[i].path, spelled);
        if (!name) continue;
        auto file = index.findModule(*name, scanned[i].path);
        if (!file) continue;
        // A module's own ancestor packages (`import torch` inside torch/nn/...) say nothing about
        // which rules matter to this file; following them would make a whole library relevant.
        if (ownModule.size() > name->size() && ownModule.compare(0, name->size(), *name) == 0 &&
            ownModule[name->size()] == '.') {
          if (auto at = byPath.find(*file); at != byPath.end() && at->second != i)
            scanned[i].ancestors.push_back(at->second);
          continue;
        }
        auto [it, fresh] = byPath.emplace(*file, scanned.size());
        if (fresh) {
          if (scanned.size() >= pyPaths.size() + kMaxExtraFiles) {
            byPath.erase(it);
            continue;
          }
          scanned.push_back({*file, "", false, false, false, 0, {}, {}, scanned[i].depth + 1});
        }
        if (it->second != i) scanned[i].imports.push_back(it->second);
      }
      if (scanned[i].linted || scanned[i].importer) scanned[i].text = std::move(rd.r.text);
    }
    first = last;
  }
  // Words reachable through imports, two levels deep: a file's own helpers, and what a
  // package's __init__ or a helper re-exports. Deeper chains are library plumbing; following
  // them all makes a whole library relevant (every torch module imports its siblings).
  std::vector<uint64_t> closure(scanned.size());
  for (size_t i = 0; i < scanned.size(); ++i) closure[i] = scanned[i].mask;
  for (int level = 0; level < 2; ++level) {
    std::vector<uint64_t> next = closure;
    for (size_t i = 0; i < scanned.size(); ++i)
      for (size_t j : scanned[i].imports) next[i] |= closure[j];
    closure = std::move(next);
  }
  auto relevant = [&](uint64_t mask) {
    if (alwaysRelevant) return true;
    for (const auto& groups : ruleGroups) {
      bool all = true;
      for (uint64_t g : groups) all = all && (mask & g) != 0;
      if (all) return true;
    }
    return false;
  };
  std::vector<size_t> tasks;
  std::vector<const Facts*> taskFacts;
  std::vector<std::unique_ptr<Facts>> taskFactStore;
  for (size_t i = 0; i < scanned.size(); ++i) {
    if (!(scanned[i].linted || scanned[i].importer) || !scanned[i].ok) continue;
    auto f = linked.find(absolutePathKey(scanned[i].path));
    if (f == linked.end()) f = linked.find("");
    if (f == linked.end()) {
      auto dir = index.projectDirOf(scanned[i].path);
      f = linked.find(dir.empty() ? std::string("named") : "project:" + dir.string());
    }
    const Facts* facts = f == linked.end() ? nullptr : &f->second;
    if (!options_.settingsFacts.empty()) {  // merged into a per-task copy
      Facts merged = facts ? *facts : Facts{};
      for (const auto& [k, v] : options_.settingsFacts) merged.emplace(k, v);
      taskFactStore.push_back(std::make_unique<Facts>(std::move(merged)));
      facts = taskFactStore.back().get();
    }
    facts = withRequirements(scanned[i].path, facts, taskFactStore);
    // A script the facts (a linked config, settings) apply to is relevant when it names their words.
    bool configured = false;
    if (facts && catalog_.factWords)
      for (const auto& w : catalog_.factWords(*facts))
        configured = configured || scanned[i].text.find(w) != std::string::npos;
    if (relevant(closure[i]) || configured) {
      tasks.push_back(i);
      taskFacts.push_back(facts);
    }
    else {
      if (scanned[i].linted) ++stats.filesSkipped;
      std::string().swap(scanned[i].text);  // not analysed: its text is not needed again
    }
  }
  auto t1 = Clock::now();

  // ---- analysis: one task per relevant linted file, in parallel, over one module table.
  std::unique_ptr<ModuleTable> ownTable;
  ModuleTable* table = persistent;
  if (table) table->refresh(options_);
  else {
    ModuleTable::Config config = tableConfig(true);
    if (configDocs.empty()) config.outlineWant = nullptr;  // no config rule needs project facts
    table = (ownTable = std::make_unique<ModuleTable>(std::move(config))).get();
  }
  size_t parsesBefore = table->parses();
  std::string rootsKey;
  for (const auto& r : index.extraRoots()) rootsKey += r + "\n";  // the rest comes from each file alone
  // Source bytes of module trees kept between tasks (a tree is about 21x its text). On the dense
  // corpus at -j2, since objects keep their rarely set fields apart: 1.375 MB, 990-992 parses of 990
  // files at 125-128 MiB peak; 1.5 MB, 990 in every run at 129-134 MiB; 1.75 MB, 136-139 MiB;
  // scripts/bench/README.md, "Where the memory goes".
  constexpr size_t kModuleTreeBudget = size_t{3} << 19;  // 1.5 MB
  // The persistent cache: findings of files whose text and dependencies are unchanged.
  std::unique_ptr<ResultCache> cache;
  if (!options_.cacheDir.empty() && !persistent) {
    std::string key = options_.cacheKey + "\n" + options_.selection.describe() + "\nmax " +
                      std::to_string(options_.maxFileBytes) + (options_.reportUnusedNoqa ? " noqa" : "") + "\n";
    for (const auto& [k, v] : options_.settingsFacts) key += k + "=" + v + "\n";
    // Not the linted set: import roots come from each file and its project (one answer per file), and
    // a finding an importer makes in a file is never cached (the importer is analysed on every run).
    for (const auto& r : index.extraRoots()) key += "root " + r + "\n";
    cache = std::make_unique<ResultCache>(options_.cacheDir, key);
    cache->load();
  }
  std::mutex hashMu;
  std::map<std::string, uint64_t> hashes;
  auto hashOf = [&](const std::string& path) -> uint64_t {
    {
      std::lock_guard<std::mutex> lock(hashMu);
      if (auto it = hashes.find(path); it != hashes.end()) return it->second;
    }
    ReadResult r = readSource(path, options_);
    uint64_t h = r.skipped || contentProblem(r.text, options_.maxFileBytes) ? 0 : contentHash(r.text);
    std::lock_guard<std::mutex> lock(hashMu);
    return hashes[path] = h;
  };
  struct ToStore {
    uint64_t hash = 0;
    std::string facts;
    std::vector<std::pair<std::string, uint64_t>> deps;
    bool ready = false;
  };
  std::vector<ToStore> toStore(tasks.size());
  std::atomic<size_t> cacheHits{0};
  // Trees of linted files: freed when the file's own task and every task of a file that
  // imports it (per the pre-scan) have ended, unless some task used it as a module (then
  // shared summaries may point into it, and it stays for the run). A file some rule could
  // load as a module also waits for the tasks of files that import a package importing it (a
  // package __init__ re-exporting it); meanwhile its tree may be freed under the budget.
  std::mutex retireMu;
  // What a file's analysis may run: its imports and the ancestor packages it imports from.
  std::vector<std::vector<size_t>> uses(scanned.size());
  for (size_t i = 0; i < scanned.size(); ++i) {
    uses[i] = scanned[i].imports;
    uses[i].insert(uses[i].end(), scanned[i].ancestors.begin(), scanned[i].ancestors.end());
  }
  std::vector<int> pendingImporters(scanned.size(), 0);
  std::vector<char> ownDone(scanned.size(), 0);
  for (size_t i : tasks)
    for (size_t j : uses[i]) ++pendingImporters[j];
  // For each module, the tasks (their positions, ascending) whose files import it, directly or
  // through other project modules: a summary inlined in such a task's analysis may need the
  // module's tree again, so trimming frees first the trees needed again latest. An estimate:
  // the walk from one task stops after kReachLimit modules, and all walks after kNeedLimit
  // entries (a module beyond them only loses priority).
  constexpr size_t kReachLimit = 4096, kNeedLimit = size_t{1} << 21;
  std::vector<std::vector<uint32_t>> neededBy(scanned.size());
  {
    std::vector<size_t> seen(scanned.size(), 0), stack;
    size_t entries = 0;
    for (size_t t = 0; t < tasks.size() && entries < kNeedLimit; ++t) {
      size_t visited = 0;
      stack.assign(1, tasks[t]);
      seen[tasks[t]] = t + 1;
      while (!stack.empty() && visited < kReachLimit) {
        size_t j = stack.back();
        stack.pop_back();
        ++visited;
        neededBy[j].push_back(static_cast<uint32_t>(t));
        for (size_t k : uses[j])
          if (seen[k] != t + 1) seen[k] = t + 1, stack.push_back(k);
      }
      entries += visited;
    }
  }
  // For each task, the modules the packages its file imports import (`from .impl import f` in a
  // package __init__): its calls reach them through the re-export.
  std::vector<std::vector<uint32_t>> reexported(tasks.size());
  std::vector<int> pendingReexports(scanned.size(), 0);
  {
    std::vector<size_t> seen(scanned.size(), 0);
    auto isPackage = [&](size_t m) { return std::filesystem::path(scanned[m].path).filename() == "__init__.py"; };
    for (size_t t = 0; t < tasks.size(); ++t)
      for (size_t m : uses[tasks[t]])
        if (isPackage(m))
          for (size_t j : uses[m])
            if (seen[j] != t + 1) {
              seen[j] = t + 1;
              reexported[t].push_back(static_cast<uint32_t>(j));
              ++pendingReexports[j];
            }
  }
  std::vector<size_t> taskOf(scanned.size(), SIZE_MAX);
  for (size_t t = 0; t < tasks.size(); ++t) taskOf[tasks[t]] = t;
  std::atomic<size_t> next{0};  // the next task to start
  auto maybeRetire = [&](size_t j) {  // retireMu held
    if (!ownDone[j] || pendingImporters[j] > 0) return;
    ModuleTable::Entry* e = table->current(scanned[j].path);
    if (!e) return;
    if (pendingReexports[j] > 0 && e->readable && e->worthLoading) table->linger(e);  // a later task may load it
    else table->finishRoot(e);
  };
  auto taskEnded = [&](size_t i) {
    {
      std::lock_guard<std::mutex> lock(retireMu);
      ownDone[i] = 1;
      maybeRetire(i);
      for (size_t j : uses[i])
        if (--pendingImporters[j] == 0) maybeRetire(j);
      for (uint32_t j : reexported[taskOf[i]])
        if (--pendingReexports[j] == 0) maybeRetire(j);
    }
    // Trees of modules no task holds now, beyond a budget, are freed (parsed again if needed).
    if (!persistent)
      table->trimTrees(kModuleTreeBudget, [&](const std::string& path) -> size_t {
        auto it = byPath.find(path);
        if (it == byPath.end()) return SIZE_MAX;
        // Tasks start in order, at most `jobs` at a time: those from `running` on may still need it.
        size_t started = next.load(), running = started > jobs ? started - jobs : 0;
        const auto& need = neededBy[it->second];
        auto at = std::lower_bound(need.begin(), need.end(), running);
        return at == need.end() ? SIZE_MAX : *at;
      });
  };
  std::vector<std::vector<Diagnostic>> results(tasks.size());
  std::vector<size_t> shared(tasks.size(), 0);
  std::atomic<bool> failed{false};  // an error outside one file's analysis: the run stops
  std::string failure;
  std::mutex failureMu;
  auto stopRun = [&](size_t t, const char* what) {  // the shared tables themselves failed
    std::lock_guard<std::mutex> lock(failureMu);
    failed = true;
    try {
      failure = scanned[tasks[t]].path + ": " + what;
    } catch (...) {  // no memory left even for the message
    }
  };
  // A failure while analysing file t (out of memory, a limit, a bug the file's code reaches) stops
  // that file's analysis, not the run: SL002 for the file, which keeps none of its partial findings
  // (nor a cache entry), and the other tasks go on.
  auto containFailure = [&](size_t t, const std::exception* e) {
    try {
      results[t].clear();
      toStore[t] = ToStore{};
      if (reportSkips)
        results[t].push_back(skippedDiagnostic(*sl002, scanned[tasks[t]].path,
                                               e ? stoppedWhy(*e) : "analysis stopped: unknown exception"));
      taskEnded(tasks[t]);
    } catch (const std::exception& again) {
      stopRun(t, again.what());
    }
  };
  // An importer's findings: those located in linted files, under the path as linted (so that they
  // merge with the file's own).
  auto keepInLinted = [&](std::vector<Diagnostic>& found) {
    std::vector<Diagnostic> kept;
    for (auto& d : found) {
      auto it = lintedSpelling.find(absolutePathKey(d.location.path));
      if (it == lintedSpelling.end()) continue;
      d.location.path = it->second;
      kept.push_back(std::move(d));
    }
    found = std::move(kept);
  };
  auto worker = [&] {
    for (;;) {
      size_t t = next.fetch_add(1);
      if (t >= tasks.size() || failed) return;
      bool ended = false;  // taskEnded ran: a failure after it is not this file's
      try {
        // Summaries are shared by the tasks with the same facts and import roots.
        std::string facts;
        if (taskFacts[t])
          for (const auto& [k, v] : *taskFacts[t]) facts += k + "=" + v + "\n";
        std::string context = rootsKey + facts;
        Scanned& s = scanned[tasks[t]];
        uint64_t hash = 0;
        bool cached = cache && s.linted;  // an importer's findings are kept only where they are in linted files
        if (cached) {
          hash = contentHash(s.text);
          if (auto hit = cache->lookup(s.path, hash, facts, hashOf)) {
            results[t] = std::move(*hit);
            ++cacheHits;
            ended = true;
            taskEnded(tasks[t]);
            continue;
          }
        }
        Task task(catalog_, options_, &index, *table, taskFacts[t], &table->summaries(context));
        bool awaited;
        {
          std::lock_guard<std::mutex> lock(retireMu);
          awaited = pendingImporters[tasks[t]] > 0;
        }
        if (!awaited) task.setNotImported();
        results[t] = task.run(s.path, std::move(s.text));
        if (s.importer) keepInLinted(results[t]);
        shared[t] = task.sharedHits();
        if (cached) toStore[t] = ToStore{hash, facts, table->dependencyClosure(task.root()), true};
        ended = true;
        taskEnded(tasks[t]);
      } catch (const std::exception& e) {
        if (ended) stopRun(t, e.what());
        else containFailure(t, &e);
      } catch (...) {
        if (ended) stopRun(t, "unknown exception");
        else containFailure(t, nullptr);
      }
    }
  };
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(1, tasks.size())));
  if (jobs <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned j = 0; j < jobs; ++j) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }
  if (cache && !failed) {
    for (size_t t = 0; t < tasks.size(); ++t)
      if (toStore[t].ready)
        cache->store(scanned[tasks[t]].path, toStore[t].hash, toStore[t].facts, std::move(toStore[t].deps), results[t]);
    stats.cacheHits = cacheHits;
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    stats.modulesShared += shared[t];
    for (auto& d : results[t]) all.push_back(std::move(d));
  }
  if (failed) throw std::runtime_error(failure);  // with the other files' findings in `all`
  // ---- configuration checks, with the facts of the project's Python code (its classes,
  // the models it loads), from each file's one parse (outlines kept by the table).
  if (!configDocs.empty()) {
    Facts projectFacts;
    if (catalog_.projectFacts) {
      std::vector<ProjectFile> files;
      std::deque<syntax::Outline> fromCache;  // outlines the cache had (stable addresses)
      for (const auto& p : pyPaths) {
        uint64_t hash = 0;
        if (const syntax::Outline* o = table->outlineOf(p, &hash)) {  // parsed for the analysis
          if (cache) cache->storeOutline(p, hash, *o);
          files.push_back(ProjectFile{p, o});
          continue;
        }
        ModuleTable::Entry* e = table->readOnly(p, options_);
        if (!e->readable || e->parsed || !catalog_.projectFactsWant || !catalog_.projectFactsWant(e->file->text))
          continue;
        if (cache)
          if (auto o = cache->outline(p, e->hash)) {  // a warm run: no parse
            fromCache.push_back(std::move(*o));
            files.push_back(ProjectFile{p, &fromCache.back()});
            continue;
          }
        table->ensureParsed(e, &index, options_);
        table->finishRoot(e);  // only its outline was wanted
        const syntax::Outline* o = table->outlineOf(p);
        if (cache && o) cache->storeOutline(p, e->hash, *o);
        files.push_back(ProjectFile{p, o});
      }
      projectFacts = catalog_.projectFacts(files);
    }
    for (auto& doc : configDocs) {
      std::vector<Diagnostic> found;
      std::vector<std::unique_ptr<Facts>> configFactStore;  // this file's copy, freed after its checks
      try {  // a failure in one configuration file's checks is SL002 for it, as for a Python file
        // The project's code facts, with the dependencies declared for the file's folder.
        checkConfig(doc, found, withRequirements(doc.file->path, &projectFacts, configFactStore));
      } catch (const std::exception& e) {
        found.clear();
        if (reportSkips) found.push_back(skippedDiagnostic(*sl002, doc.file->path, stoppedWhy(e)));
      }
      for (auto& d : found) all.push_back(std::move(d));
    }
  }
  if (cache) stats.cacheProblem = cache->save();
  // C++ translation units (their own frontend; not cached).
  lintCxx(catalog_, options_, cxxPaths, all, stats);
  stats.filesParsed += table->parses() - parsesBefore;
  // Re-parses: a freed tree needed again (a race between a file's own task and another's use of it).
  stats.filesParsedOnce = stats.filesParsed - (persistent ? 0 : table->parses() - table->filesParsed());
  for (size_t i : tasks) (scanned[i].linted ? stats.filesAnalysed : stats.importersAnalysed) += 1;
  finalizeDiagnostics(all);
  auto t2 = Clock::now();
  stats.prescanSeconds = std::chrono::duration<double>(t1 - t0).count();
  stats.analysisSeconds = std::chrono::duration<double>(t2 - t1).count();
  if (statsOut) *statsOut = stats;
}

}  // namespace shardlint
