// One analysis task: a linted file's tree, semantic pass, rule walk with per-node-kind dispatch,
// rule `finish` and suppressions (Task::run), and the project modules its calls reach, loaded lazily
// from the run's ModuleTable (the semantic::ModuleProvider side). Declared in LinterImpl.h.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <vector>

#include "driver/LinterImpl.h"
#include "driver/Suppressions.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

namespace {

// The comments of a Python tree, for suppressions: one look-up per `#` in the text (a comment
// starts with one) rather than a walk over every node.
void collectComments(const SourceFile& file, TSNode root, Suppressions& sup) {
  const auto& kinds = syntax::PyKinds::instance();
  std::string_view text = file.text;
  size_t pos = 0;
  while ((pos = text.find('#', pos)) != std::string_view::npos) {
    // The tree is asked only about a `#` whose line may be a directive after it (Suppressions::mayBeDirective).
    size_t eol = text.find('\n', pos);
    std::string_view rest = text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    if (!Suppressions::mayBeDirective(rest)) {
      pos = eol == std::string_view::npos ? text.size() : eol;
      continue;
    }
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

// A task's rules and its file's analysis (declared in this order: the analysis is freed first).
struct Work {
  std::vector<std::unique_ptr<Rule>> rules;
  std::unique_ptr<semantic::FileAnalysis> analysis;
};

// Visits every node of the tree for the rules that ask for node kinds (Rule::nodeKinds).
void dispatchNodes(TSNode root, const std::function<void(syntax::Kind, TSNode)>& visit) {
  const auto& kinds = syntax::PyKinds::instance();
  syntax::walk(root, [&](TSNode n) {
    visit(kinds.kind(n), n);
    return true;
  });
}

}  // namespace

Task::Task(const RuleCatalog& catalog, const LintOptions& options, const ProjectIndex* index, ModuleTable& table,
           const Facts* facts, semantic::SummaryCache* shared)
    : catalog_(catalog), options_(options), index_(index), table_(table), model_(catalog.makeCallModel()), shared_(shared) {
  if (facts) model_->setFacts(*facts);
  session_ = std::make_unique<semantic::Session>(*model_, this, shared);
}

std::vector<Diagnostic> Task::run(const std::string& path, std::optional<std::string> text) {
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

  // The rules and the analysis, on the heap: LintOptions::disposal may keep them past this task.
  auto work = std::make_shared<Work>();
  std::vector<std::unique_ptr<Rule>>& rules = work->rules;
  rules = selectedRules(catalog_, options_);
  if (!importedByOthers_) session_->keepLocal(root_->module.get());
  work->analysis = std::make_unique<semantic::FileAnalysis>(*root_->module, *session_);
  semantic::FileAnalysis& analysis = *work->analysis;
  std::shared_ptr<const semantic::FileAnalysis> earlier;  // an analysis before this one, freed with this one
  if (!rules.empty()) {
    bool keep = carry_ && table_.keepsAnalyses();
    if (keep) analysis.recordArms();
    uint64_t listingChanges = table_.listingChanges();
    table_.seedSummaries(root_, shared_, *session_, options_, &analysis);
    analysis.run();
    earlier = analysis.takePrevious();
    armsCarried_ = analysis.armsReused();
    if (carry_) {
      std::shared_ptr<const semantic::FileAnalysis> kept;  // shares the rules' and analysis' lifetime (`work`)
      if (keep) kept = std::shared_ptr<const semantic::FileAnalysis>(work, work->analysis.get());
      auto replaced = table_.keepSummaries(root_, shared_, session_->pureSummariesOf(root_->module.get()),
                                           std::move(kept), listingChanges);
      if (!earlier) earlier = std::move(replaced);
    }
  }
  std::vector<Diagnostic> controls;
  RuleContext cx(table_, analysis, found, options_.controls ? &controls : nullptr);
  // Per-node-kind dispatch for the rules that ask for it; the comments for suppressions. A rule that
  // names the callees it wants (Rule::callNames) sees only their calls: each call's callee is read
  // once, and looked up among every such rule's names before any rule's own list.
  struct Wanted {
    Rule* rule;
    std::vector<std::string_view> callees;  // empty: every node of the kind
  };
  std::vector<std::vector<Wanted>> table(static_cast<size_t>(syntax::Kind::Count));
  std::unordered_set<std::string_view> anyCallee;
  bool anyKinds = false;
  auto hasWord = [&](std::string_view w) {
    if (ownWordList_) {
      auto it = std::find(ownWordList_->begin(), ownWordList_->end(), w);
      size_t bit = static_cast<size_t>(it - ownWordList_->begin());
      if (it != ownWordList_->end() && bit < 64) return ((ownMask_ >> bit) & 1) != 0;
    }
    return file.text.find(w) != std::string::npos;
  };
  auto ownWords = [&](const Rule& r) {  // the file itself has a word of every pre-scan group
    for (const auto& group : r.prescanTokens())
      if (std::none_of(group.begin(), group.end(), hasWord)) return false;
    return true;
  };
  for (auto& r : rules) {
    std::vector<syntax::Kind> kinds = r->nodeKinds();
    if (kinds.empty() || !ownWords(*r)) continue;
    std::vector<std::string_view> callees = r->callNames();
    anyCallee.insert(callees.begin(), callees.end());
    for (syntax::Kind k : kinds)
      table[static_cast<size_t>(k)].push_back({r.get(), k == syntax::Kind::call ? callees : std::vector<std::string_view>{}});
    anyKinds = true;
  }
  // When every rule that asks wants only some callees' calls, those calls are found by their names.
  bool onlyNamedCalls = true;
  for (size_t k = 0; k < table.size(); ++k)
    for (const Wanted& w : table[k])
      onlyNamedCalls = onlyNamedCalls && k == static_cast<size_t>(syntax::Kind::call) && !w.callees.empty();
  auto visit = [&](syntax::Kind k, TSNode n) {
    std::optional<std::string_view> callee;  // read on first need
    for (const Wanted& w : table[static_cast<size_t>(k)]) {
      if (!w.callees.empty()) {
        if (!callee) callee = syntax::calleeLastName(n, file.text);
        if (!anyCallee.count(*callee) || std::find(w.callees.begin(), w.callees.end(), *callee) == w.callees.end())
          continue;
      }
      w.rule->onNode(cx, n);
    }
  };
  if (anyKinds && onlyNamedCalls) {
    for (TSNode call : syntax::callsNamed(treeRoot, file.text, anyCallee)) visit(syntax::Kind::call, call);
  } else if (anyKinds) {
    dispatchNodes(treeRoot, visit);
  }
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
  if (options_.disposal) {
    options_.disposal->keep(std::move(work));
    if (earlier) options_.disposal->keep(std::const_pointer_cast<semantic::FileAnalysis>(std::move(earlier)));
  }
  return out;
}

Task::Found Task::resolve(std::string_view qualname, const semantic::Module& from) {
  return resolve(std::string(qualname), from, 0);
}

void Task::use(const semantic::Module& module) {
  if (module.fileId() == 0 || leased_.count(module.fileId())) return;
  if (ModuleTable::Entry* e = table_.byId(module.fileId())) {
    table_.lease(e);
    leased_.emplace(module.fileId(), e);
  }
}

Task::~Task() {
  for (const auto& [id, e] : leased_) table_.unlease(e);
}

std::optional<std::string> Task::dataFile(std::string_view spelled, const semantic::Module& from) {
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

std::vector<std::string> Task::split(const std::string& q) {
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
Task::Found Task::resolve(const std::string& q, const semantic::Module& from, int depth) {
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

Task::Found Task::lookup(const semantic::Module& m, const std::vector<std::string>& rest, int depth) {
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

}  // namespace shardlint
