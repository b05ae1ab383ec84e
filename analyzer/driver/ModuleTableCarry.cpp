// A language server's summaries from one lint of a file to the next (ModuleTable::keepSummaries,
// seedSummaries): the edited file's functions that an edit left as they were keep their summaries, moved
// onto the new text, instead of being analysed again on every keystroke.
//
// A summary of a function is made from the function's own text and decorators, the texts of the functions
// it calls (Summary::calls), the module's definitions and imports (how its names resolve:
// Interp::lookupName; a class's methods, bases and fields; parameters and their defaults) and the modules
// and data files it reaches (the entry's dependencies). Not from the module's other statements: a summary
// sees module globals as placeholders. It holds places (Origins) in its file and pointers to definitions.
// So one moves when:
// - the file was dropped by refresh() for a change of its own text, and nothing it depends on (transitively)
//   changed; a module that depends on the file (an import cycle) lost its summaries but kept its definitions
//   (refresh() keeps the module of one whose text did not change): a summary that mentions them moves, and one
//   whose result came through a changed function of the file mentions that function (Summary::calls);
// - the texts before and after the edit parse without errors;
// - the changed bytes lie in one comment on both sides (then no definition changed), or else every function
//   whose text with its decorators touches them has changed, with everything defined inside it;
// - every other definition is the same on both sides (names, parameters, defaults, classes' bases, methods
//   and fields, the module's imports), at the same place after the edit;
// - the function has not changed, and its summary mentions no changed definition and no place in the
//   changed bytes (semantic::moveSummary).
// Places in the file move by the edit's length; definitions are matched in source order.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driver/ModuleTable.h"
#include "driver/Linter.h"
#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

using semantic::ClassDef;
using semantic::FunctionDef;
using semantic::Module;

std::shared_ptr<const semantic::FileAnalysis> ModuleTable::keepSummaries(
    Entry* root, const semantic::SummaryCache* context, std::vector<std::shared_ptr<const semantic::Summary>> summaries,
    std::shared_ptr<const semantic::FileAnalysis> analysis, uint64_t listingChanges) {
  if (config_.retireRoots || !root) return analysis;  // a one-shot run analyses each file once
  std::lock_guard<std::mutex> lock(mu_);
  if (root->retired) return analysis;
  Carry& c = carries_[root->key];
  std::shared_ptr<const semantic::FileAnalysis> replaced = std::move(c.analysis);
  c = Carry();
  c.from = root;
  c.context = context;
  c.summaries = std::move(summaries);
  c.analysis = std::move(analysis);
  c.listingChanges = listingChanges;
  return replaced;
}

namespace {
// Whether something `e` depends on, transitively, is in `changed` (`e` itself left out).
bool dependsOnChanged(const ModuleTable::Entry* e, const std::set<ModuleTable::Entry*>& changed) {
  std::set<const ModuleTable::Entry*> seen{e};
  std::vector<const ModuleTable::Entry*> work{e};
  while (!work.empty()) {
    const ModuleTable::Entry* x = work.back();
    work.pop_back();
    for (ModuleTable::Entry* d : x->deps) {
      if (!seen.insert(d).second) continue;
      if (changed.count(d)) return true;
      work.push_back(d);
    }
  }
  return false;
}
}  // namespace

std::vector<ModuleTable::Entry*> ModuleTable::carryOnRefresh(const std::set<Entry*>& stale,
                                                              const std::set<Entry*>& changed) {
  std::vector<Entry*> carried;
  for (auto it = carries_.begin(); it != carries_.end();) {
    Carry& c = it->second;
    // A moved one served the lint after the last refresh; one still waiting goes on while its entry is current.
    bool keep = !c.moved && !stale.count(c.from);
    // Dropped for its own text, and nothing it depends on (a module it reads, transitively) changed: its
    // summaries were made from that text alone. (What depends on it, and so was dropped too, has the same
    // text: a summary that mentions its old definitions does not move.)
    if (!keep && !c.moved && changed.count(c.from) && !dependsOnChanged(c.from, changed)) {
      carried.push_back(c.from);
      c.deps = c.from->deps;
      c.deps.erase(c.from);
      keep = true;
    }
    if (keep) ++it;
    else it = carries_.erase(it);
  }
  return carried;
}

void ModuleTable::leaveForCarry(Entry* e, const std::vector<Entry*>& carried, std::map<Entry*, Carry>& left,
                                Carry::Dead& dead) {
  dead.files.insert(e->id);
  if (e->module) {
    for (const auto& f : e->module->functions()) dead.defs.insert(f.get());
    for (const auto& k : e->module->classes()) dead.defs.insert(k.get());
  }
  if (std::find(carried.begin(), carried.end(), e) == carried.end()) return;
  Carry& into = left[e];
  into.file = std::move(e->file);
  into.tree = std::move(e->tree);
  into.module = std::move(e->module);
}

void ModuleTable::finishCarry(std::map<Entry*, Carry> left, const std::shared_ptr<const Carry::Dead>& dead) {
  for (auto& [e, l] : left) {
    auto it = carries_.find(e->key);
    if (it == carries_.end() || it->second.from != e) continue;
    Carry& c = it->second;
    if (!l.file || !l.tree || !l.module) {  // its tree was freed: what the summaries were made from is gone
      carries_.erase(it);
      continue;
    }
    c.moved = true;
    c.file = std::move(l.file);
    c.tree = std::move(l.tree);
    c.module = std::move(l.module);
    c.dead = dead;
  }
}

namespace {

// Where the texts before and after an edit differ: [begin, oldEnd) became [begin, newEnd).
struct TextEdit {
  uint32_t begin = 0, oldEnd = 0, newEnd = 0;
  int64_t delta() const { return static_cast<int64_t>(newEnd) - static_cast<int64_t>(oldEnd); }
  // The place `x` before the edit is `y` after it.
  bool samePoint(uint32_t x, uint32_t y) const {
    return (x <= begin && y == x) || (x >= oldEnd && static_cast<int64_t>(y) == x + delta());
  }
  // A definition's span after the edit (one around the changed bytes grows with it).
  bool sameSpan(ByteRange before, ByteRange after) const {
    return samePoint(before.begin, after.begin) && samePoint(before.end, after.end);
  }
};

TextEdit diff(std::string_view a, std::string_view b) {
  ChangedSpan c = changedSpan(a, b);
  return TextEdit{static_cast<uint32_t>(c.begin), static_cast<uint32_t>(c.oldEnd), static_cast<uint32_t>(c.newEnd)};
}

// The functions an edit changed, as the ranges of their texts with their decorators (whatever is defined in
// one changed too), on both sides: those whose text touches the changed bytes (ends included) on either
// side, and their counterparts on the other (the same name at the same place, moved by the edit).
void changedFunctions(const Module& before, const Module& after, const TextEdit& edit, std::vector<ByteRange>& inBefore,
                      std::vector<ByteRange>& inAfter) {
  auto touches = [](ByteRange x, uint32_t begin, uint32_t end) { return x.begin <= end && begin <= x.end; };
  auto mark = [&](const Module& m, uint32_t end, const Module& other, bool forward) {
    for (const auto& f : m.functions()) {
      ByteRange x = f->extent;
      if (!touches(x, edit.begin, end)) continue;
      (forward ? inBefore : inAfter).push_back(x);
      for (const auto& g : other.functions())
        if (g->qualname == f->qualname &&
            (forward ? edit.samePoint(f->span.begin, g->span.begin) : edit.samePoint(g->span.begin, f->span.begin)))
          (forward ? inAfter : inBefore).push_back(g->extent);
    }
  };
  mark(before, edit.oldEnd, after, true);
  mark(after, edit.newEnd, before, false);
}

std::string qualOf(const ClassDef* c) { return c ? c->qualname : std::string(); }
std::string qualOf(const FunctionDef* f) { return f ? f->qualname : std::string(); }

bool sameFunction(const FunctionDef& a, const FunctionDef& b, const TextEdit& edit) {
  return a.qualname == b.qualname && a.name == b.name && a.params == b.params && a.defaults == b.defaults &&
         a.isStatic == b.isStatic && a.nested == b.nested && qualOf(a.cls) == qualOf(b.cls) &&
         edit.sameSpan(a.span, b.span);
}

bool sameClass(const ClassDef& a, const ClassDef& b, const TextEdit& edit) {
  if (a.qualname != b.qualname || a.name != b.name || a.bases != b.bases || a.dataclass != b.dataclass ||
      a.fields != b.fields || a.localBases.size() != b.localBases.size() || a.methods.size() != b.methods.size() ||
      !edit.sameSpan(a.span, b.span))
    return false;
  for (size_t i = 0; i < a.localBases.size(); ++i)
    if (qualOf(a.localBases[i]) != qualOf(b.localBases[i])) return false;
  for (auto x = a.methods.begin(), y = b.methods.begin(); x != a.methods.end(); ++x, ++y)
    if (x->first != y->first || qualOf(x->second) != qualOf(y->second)) return false;
  return true;
}

// Pairs the definitions outside the changed functions' texts (`changedBefore`, `changedAfter`) in source
// order, each pair the same; the changed ones map to null. False when the two texts' definitions differ.
template <class Def, class Same>
bool pairDefs(const std::vector<std::unique_ptr<Def>>& before, const std::vector<std::unique_ptr<Def>>& after,
              const std::vector<ByteRange>& changedBefore, const std::vector<ByteRange>& changedAfter,
              const TextEdit& edit, Same same, std::unordered_map<const void*, const void*>& into) {
  auto inside = [](const std::vector<ByteRange>& changed, ByteRange s) {
    return std::any_of(changed.begin(), changed.end(),
                       [&](const ByteRange& c) { return c.begin <= s.begin && s.end <= c.end; });
  };
  size_t j = 0;
  for (const auto& d : before) {
    if (inside(changedBefore, d->span)) {
      into[d.get()] = nullptr;
      continue;
    }
    while (j < after.size() && inside(changedAfter, after[j]->span)) ++j;
    if (j == after.size() || !same(*d, *after[j], edit)) return false;
    into[d.get()] = after[j++].get();
  }
  while (j < after.size() && inside(changedAfter, after[j]->span)) ++j;
  return j == after.size();
}

}  // namespace

void ModuleTable::seedSummaries(Entry* root, const semantic::SummaryCache* context, semantic::Session& session,
                                const LintOptions& options, semantic::FileAnalysis* analysis) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = root ? carries_.find(root->key) : carries_.end();
  if (it == carries_.end() || it->second.context != context || !root->module || !root->tree) return;
  Carry& c = it->second;
  // A module created or deleted since: an import the kept analysis could not resolve may resolve now.
  if (c.listingChanges != listingHistory_->changes.load()) return;
  if (c.from == root) {  // the same text again (the server's second pass): every summary and arm holds
    for (const auto& s : c.summaries) session.seed(s);
    if (analysis && c.analysis) {
      semantic::FileAnalysis::ArmSeed seed;
      seed.previous = c.analysis;
      seed.move.fromFile = seed.move.toFile = root->module->fileId();
      analysis->seedArms(std::move(seed));
    }
    return;
  }
  if (!c.moved) return;
  const Module& before = *c.module;
  const Module& after = *root->module;
  if (before.moduleName() != after.moduleName() || before.isPackage() != after.isPackage() ||
      before.imports() != after.imports() || before.starImports() != after.starImports() ||
      ts_node_has_error(c.tree.root()) || ts_node_has_error(root->tree.root()))
    return;
  TextEdit edit = diff(c.file->text, root->file->text);
  std::vector<ByteRange> changedBefore, changedAfter;
  std::optional<ByteRange> cb = syntax::commentAround(c.tree.root(), edit.begin, edit.oldEnd);
  std::optional<ByteRange> ca = cb ? syntax::commentAround(root->tree.root(), edit.begin, edit.newEnd) : std::nullopt;
  if (!cb || !ca || !edit.sameSpan(*cb, *ca)) changedFunctions(before, after, edit, changedBefore, changedAfter);
  semantic::SummaryMove move;
  if (!pairDefs(before.functions(), after.functions(), changedBefore, changedAfter, edit, sameFunction, move.defs) ||
      !pairDefs(before.classes(), after.classes(), changedBefore, changedAfter, edit, sameClass, move.defs))
    return;
  move.fromFile = before.fileId();
  move.toFile = after.fileId();
  move.editBegin = edit.begin;
  move.oldEnd = edit.oldEnd;
  move.newEnd = edit.newEnd;
  move.firstMoved = edit.begin;
  move.deadDefs = &c.dead->defs;
  for (uint32_t f : c.dead->files) {
    if (f >= move.deadFiles.size()) move.deadFiles.resize(f + 1);
    move.deadFiles[f] = true;
  }
  std::vector<std::shared_ptr<const semantic::Summary>> summaries = std::move(c.summaries);  // used up here
  // Those that cannot move (the edited functions' and their callers') are freed after the diagnostics are
  // out, when the lint has a disposal.
  std::vector<std::shared_ptr<const semantic::Summary>> dropped;
  for (auto& s : summaries)
    if (auto moved = semantic::moveSummary(std::move(s), move, options.disposal ? &dropped : nullptr))
      session.seed(std::move(moved));
  if (!dropped.empty())
    options.disposal->keep(std::make_shared<std::vector<std::shared_ptr<const semantic::Summary>>>(std::move(dropped)));
  // The analysis's arms, when the edit left the module's own statements as they were: it lies in one
  // comment, or within the texts of functions it changed on both sides.
  auto within = [](const std::vector<ByteRange>& changed, uint32_t begin, uint32_t end) {
    return std::any_of(changed.begin(), changed.end(),
                       [&](const ByteRange& r) { return r.begin <= begin && end <= r.end; });
  };
  bool inComment = cb && ca && edit.sameSpan(*cb, *ca);
  bool inFunctions = within(changedBefore, edit.begin, edit.oldEnd) && within(changedAfter, edit.begin, edit.newEnd);
  if (analysis && c.analysis && (inComment || inFunctions)) {
    semantic::FileAnalysis::ArmSeed seed;
    seed.previous = std::move(c.analysis);  // used up here
    seed.move = move;
    analysis->seedArms(std::move(seed));
  }
  // What the summaries were made from, as the analysis that made them recorded it (a retired entry by the
  // current one, read now), so that a change of it shows in refresh().
  std::vector<Entry*> unread;
  for (Entry* d : c.deps) {
    Entry* now = d->retired ? entryFor(d->path) : d;
    if (now == root) continue;
    root->deps.insert(now);
    if (!now->read) unread.push_back(now);
  }
  lock.unlock();
  for (Entry* e : unread) {
    std::lock_guard<std::mutex> el(e->mu);
    readLocked(e, options, std::nullopt);
  }
}

}  // namespace shardlint
