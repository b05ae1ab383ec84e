// FileAnalysis (semantic/Interpreter.h): one linted file's analysis. The module body, then the classes
// a framework drives (their hooks in its order), the constructors nothing here runs (with a trainer
// class's lifecycle after them) and the functions nothing here calls, each in its own exclusive arm.
#include "semantic/Interpreter.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "semantic/InterpreterImpl.h"
#include "syntax/CodeWords.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

namespace {

// ---- a trainer class's lifecycle (FileAnalysis::run): what its methods read and assign on `self`

// What one method's body does with `self` (FileAnalysis::SelfSets), with the method.
struct SelfUse {
  const FunctionDef* def = nullptr;
  std::shared_ptr<const FileAnalysis::SelfSets> sets;
  const std::set<std::string>& mentioned() const { return sets->mentioned; }
  const std::set<std::string>& assigned() const { return sets->assigned; }
};

void selfTargets(TSNode target, std::string_view self, std::string_view src, std::set<std::string>& out) {
  if (ts_node_is_null(target)) return;
  Kind k = kindOf(target);
  if (k == Kind::attribute) {
    TSNode obj = syntax::field(target, "object");
    if (kindOf(obj) == Kind::identifier && syntax::textOf(obj, src) == self)
      out.emplace(syntax::textOf(syntax::field(target, "attribute"), src));
  } else if (k == Kind::pattern_list || k == Kind::tuple_pattern || k == Kind::list_pattern || k == Kind::tuple ||
             k == Kind::list || k == Kind::parenthesized_expression || k == Kind::list_splat_pattern ||
             k == Kind::list_splat || k == Kind::expression_list) {
    for (TSNode c : syntax::namedChildren(target)) selfTargets(c, self, src, out);
  }
}

// `args` followed by an unknown argument (an Arg object numbered by its place) for each parameter of `f`
// from the `from`-th on: how an arm calls a function nothing here calls.
std::vector<ValueSet> withUnknownArgs(Interp& in, Store& st, const FunctionDef& f, const Origin& origin, size_t from,
                                      std::vector<ValueSet> args) {
  for (size_t i = from; i < f.params.size(); ++i) {
    ObjId id = in.newObject(ObjKind::Arg, f.params[i], origin);
    st.obj(id).argIndex = static_cast<int>(i);
    args.push_back({id});
  }
  return args;
}

template <class T>
void sortUnique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// Read from the method's syntax: a walk of its whole body.
FileAnalysis::SelfSets selfSetsOf(const FunctionDef& def) {
  FileAnalysis::SelfSets u;
  if (def.params.empty() || !def.owner) return u;
  std::string_view src = def.owner->file().text, self = def.params[0];
  syntax::walk(syntax::field(def.node, "body"), [&](TSNode n) {
    Kind k = kindOf(n);
    if (k == Kind::attribute) {
      TSNode obj = syntax::field(n, "object");
      if (kindOf(obj) == Kind::identifier && syntax::textOf(obj, src) == self)
        u.mentioned.emplace(syntax::textOf(syntax::field(n, "attribute"), src));
    } else if (k == Kind::assignment || k == Kind::augmented_assignment) {
      selfTargets(syntax::field(n, "left"), self, src, u.assigned);
    }
    return true;
  });
  return u;
}

// A method the lifecycle does not run on its own: a classmethod, a property (getter or setter).
bool decoratedAway(const FunctionDef& def) {
  TSNode parent = ts_node_parent(def.node);
  if (ts_node_is_null(parent) || kindOf(parent) != Kind::decorated_definition) return false;
  std::string_view src = def.owner->file().text;
  for (TSNode d : syntax::namedChildren(parent)) {
    if (kindOf(d) != Kind::decorator) continue;
    std::string_view t = syntax::textOf(d, src);
    for (std::string_view w : {"classmethod", "property", ".setter", ".deleter", "staticmethod"})
      if (t.find(w) != std::string_view::npos) return true;
  }
  return false;
}


}  // namespace

// ---------------------------------------------------------------- FileAnalysis

void FileAnalysis::run() {
  Frame frame;
  frame.isModule = true;
  Interp in(module_, session_, moduleStore_, frame);
  // How often the code mentions each word (syntax::codeWordCounts: not in comments, docstrings or other
  // strings), counted once per file on first use: a name mentioned once is mentioned only where it is defined.
  // A language server's analysis reads the text span by span, each unchanged span's counts remembered from
  // the edit before.
  std::optional<std::unordered_map<std::string_view, int>> wordCounts;
  auto mentions = [&](const FunctionDef& f) {
    if (!wordCounts) {
      std::unordered_set<std::string_view> names;  // only the functions' names are asked about
      for (const auto& g : module_.functions()) names.insert(g->name);
      wordCounts = recordArms_ ? syntax::codeWordCountsBySpans(module_.root(), module_.file().text, names)
                               : syntax::codeWordCounts(module_.file().text, &names);
    }
    auto it = wordCounts->find(f.name);
    return it == wordCounts->end() ? 0 : it->second;
  };
  // A language server's edit inside `main` of a script (`if __name__ == "__main__": main()`), or inside a helper
  // that a function nothing calls (`entry`, in its own arm) calls: when the analysis before the edit found the
  // function's summary depends on its caller (or ran it directly), its one call here, from the module body or an
  // arm, interprets it at once instead of computing its summary first only to learn that (a plain function of
  // this file, which nothing else imports, mentioned where it is defined and once more: that call is its only
  // one). Only a function the edit changed, or one whose summary called a function the edit changed (its summary
  // could not be carried over): for another, the summary is computed (once: then carried), which also tells
  // whether it still depends on the caller.
  if (const FileAnalysis* before = seed_.previous.get(); before && recordArms_ && !before->inContext_.empty()) {
    std::unordered_set<const void*> unchanged;
    for (const auto& [from, to] : seed_.move.defs)
      if (to) unchanged.insert(to);
    std::unordered_set<std::string_view> changed;
    for (const auto& f : module_.functions())
      if (!unchanged.count(f.get())) changed.insert(f->qualname);
    std::unordered_set<const FunctionDef*> direct;
    for (const auto& f : module_.functions()) {
      if (f->nested || f->cls || !session_.mayRelease(f.get())) continue;
      auto known = before->inContext_.find(f->qualname);
      if (known == before->inContext_.end()) continue;
      bool reaches = changed.count(f->qualname) > 0 ||
                     std::any_of(known->second.begin(), known->second.end(),
                                 [&](const std::string& callee) { return changed.count(callee) > 0; });
      if (reaches && mentions(*f) == 2) direct.insert(f.get());
    }
    session_.runDirectly(std::move(direct));
  }
  {
    Session::Recording body;
    if (recordArms_) session_.record(&body);
    in.execBlock(module_.root());
    session_.record(nullptr);
    sortUnique(body.reads);
    bodyReads_ = std::move(body.reads);
  }
  int construct = moduleStore_.constructs++;
  int index = 0;
  bodyMark_ = markOf();
  prepareSeed();
  // The exclusive arms below each start from what the module body left: the objects it made, found again
  // by their names (the store's interning), its attribute stores, and the store's object limit
  // (kMaxStoreObjects counts the body's objects and the arm's own). What one arm makes is never found by
  // another: they exclude each other. The arms share the task's work budget, the file's object limit
  // (kMaxFileObjects) and the calls they make (a callee marked called is not given an arm of its own).
  // `kind` and `key` name the arm (ArmRecord); one the seed holds is taken from there when it may be.
  const EnvMap bodyAttrs = frame.attrs;
  bool bodySnapshot = false;
  auto inArm = [&](char kind, const void* key, std::vector<const void*> members, auto&& body) {
    ArmRecord made;
    made.kind = kind;
    made.key = key;
    made.members = std::move(members);
    if (const ArmRecord* old = seededArm(kind, key); old && replayArm(*old, index, made)) {
      ++index;
      ++armsReused_;
      if (recordArms_) arms_.push_back(std::move(made));
      return;
    }
    size_t first = moduleStore_.objects.size();
    moduleStore_.uncounted = first - bodyMark_.objects;
    Session::Recording rec;
    if (recordArms_) {
      // The module body's objects as it left them, to tell whether this arm changes one (bodyObjectsChanged): taken
      // when the first arm runs (no arm taken from the seed changes one), so that an analysis whose arms are all
      // taken, or that has none, does not copy the module body's part of the store.
      if (!bodySnapshot) {
        bodyObjects_.assign(moduleStore_.objects.begin(),
                            moduleStore_.objects.begin() + static_cast<std::ptrdiff_t>(bodyMark_.objects));
        bodySnapshot = true;
      }
      made.begin = markOf();
      made.workBefore = session_.budget().work;
      made.copiedBefore = session_.budget().copied;
      session_.record(&rec);
    }
    body();
    if (recordArms_) {
      session_.record(nullptr);
      made.end = markOf();
      made.workAfter = session_.budget().work;
      made.copiedAfter = session_.budget().copied;
      bool changed = bodyObjectsChanged();
      made.reusable = !bodyChanged_ && !changed;
      made.limited = rec.limitHits > 0;
      made.fileChecks = rec.fileChecks;
      bodyChanged_ = bodyChanged_ || changed;
      sortUnique(rec.reads);
      sortUnique(rec.called);
      made.reads = std::move(rec.reads);
      made.called = std::move(rec.called);
      made.cuts = std::move(rec.cuts);
      arms_.push_back(std::move(made));
    }
    moduleStore_.forgetInterned(static_cast<ObjId>(first));
    frame.attrs = bodyAttrs;
    frame.arm = -1;
  };
  // A function nothing here calls, in its own exclusive arm: parameters unknown, module globals as they
  // stand at the end of the module body.
  // A summary that depends on no caller (nor on what module globals hold) and was not cut short is what an
  // interpretation of the body in place would make: it is put into the arm instead of running the body again.
  auto ownArm = [&](const FunctionDef& f, const Summary* s) {
    inArm('f', &f, {}, [&] {
      frame.arm = in.openArm(construct, index++, false);
      frame.reachable = true;
      Origin origin{module_.fileId(), syntax::rangeOf(syntax::field(f.node, "name")), {}};
      std::vector<ValueSet> args = withUnknownArgs(in, moduleStore_, f, origin, 0, {});
      if (s && !s->contextDependent && !s->truncated && in.fits(*s) && session_.summary(&f) == s) {
        ValueSet result;
        in.instantiate(*s, args, Origin{}, result, false);
      } else {
        in.analyzeInPlace(f, args);
      }
    });
  };
  auto mentionedOnce = [&](const FunctionDef& f) { return mentions(f) == 1; };
  // What a framework or the language calls on its own: a class's framework hooks (the framework's run
  // below calls them), constructors and special methods (`__enter__`).
  std::set<const FunctionDef*> calledByOthers;
  for (const auto& c : module_.classes())
    for (const auto& name : session_.model().frameworkOrder(c->allBases()))
      if (const FunctionDef* f = c->findMethod(name)) calledByOthers.insert(f);
  auto special = [](const std::string& n) {
    return n.size() > 4 && n.compare(0, 2, "__") == 0 && n.compare(n.size() - 2, 2, "__") == 0;
  };
  // Every function's summary, which also tells which functions something calls, except for a function
  // whose name the file mentions only where it defines it (a test method): nothing here can call it, so
  // it is analysed in place at once, in its own arm (the calls it makes mark their callees called, as
  // its summary's would), instead of computing a summary only to interpret its body again later.
  std::set<const FunctionDef*> armed;
  std::vector<const FunctionDef*> notYetRun;
  // A language server's edit of a class whose constructor ran in its own arm before (constructed_), and whose
  // `__init__` summary could not be carried over (it depends on the edited function): the summary would only
  // decide again whether the arm runs (below), and computing it costs as much as the arm, which runs anyway.
  std::unordered_set<const FunctionDef*> constructAgain;
  if (recordArms_ && seed_.previous && !seed_.previous->constructed_.empty())
    for (const auto& c : module_.classes())
      if (auto own = c->methods.find("__init__");
          own != c->methods.end() && seed_.previous->constructed_.count(c->qualname) && !session_.atHand(own->second))
        constructAgain.insert(own->second);
  for (const auto& f : module_.functions()) {
    if (constructAgain.count(f.get())) continue;
    if (!f->nested && session_.mayRelease(f.get()) && !session_.called(f.get()) && !calledByOthers.count(f.get()) &&
        !special(f->name) && mentionedOnce(*f)) {
      ownArm(*f, nullptr);
      armed.insert(f.get());
      continue;
    }
    // One run directly is not asked for a summary: what it calls is marked called when its call runs it (the
    // module body's ran already; an arm's may come later in this loop: one nothing called by then is asked below).
    if (session_.runsDirectly(f.get())) {
      if (!session_.called(f.get())) notYetRun.push_back(f.get());
      continue;
    }
    session_.summary(f.get());
  }
  for (const FunctionDef* f : notYetRun)
    if (!session_.called(f)) session_.summary(f);
  // Classes a framework drives: their hooks run in the framework's order on one instance.
  std::set<const FunctionDef*> driven;
  for (const auto& c : module_.classes()) {
    std::vector<const FunctionDef*> hooks;
    for (const auto& name : session_.model().frameworkOrder(c->allBases()))
      if (const FunctionDef* f = c->findMethod(name); f && !session_.called(f)) hooks.push_back(f);
    if (hooks.empty()) continue;
    // The instance is constructed before the framework calls any hook.
    if (const FunctionDef* init = c->findMethod("__init__"))
      hooks.insert(hooks.begin(), init);
    inArm('d', c.get(), std::vector<const void*>(hooks.begin(), hooks.end()), [&] {
      frame.arm = in.openArm(construct, index++, false);
      frame.reachable = true;
      Origin origin{module_.fileId(), syntax::rangeOf(syntax::field(c->node, "name")), {}};
      ObjId self = in.newObject(ObjKind::Arg, "self", origin);
      moduleStore_.obj(self).argIndex = 0;
      moduleStore_.obj(self).cls = c.get();
      for (const FunctionDef* f : hooks) in.analyzeInPlace(*f, withUnknownArgs(in, moduleStore_, *f, origin, 1, {{self}}));
    });
    driven.insert(hooks.begin(), hooks.end());
  }
  // Classes whose constructor nothing here runs (instantiated in another file, through a registry, by
  // Hydra): `__init__` runs on a fresh instance of the class, in its own arm, its other parameters
  // unknown, so the methods it calls on `self` and the base-class `__init__` it reaches through
  // `super()` run in its order. No other method runs after it: nothing here says in which order they do.
  for (const auto& c : module_.classes()) {
    auto own = c->methods.find("__init__");
    if (own == c->methods.end()) continue;
    const FunctionDef* init = own->second;
    if (init->nested || init->isStatic || init->params.empty() || session_.called(init) || driven.count(init))
      continue;
    // The summary only decides whether the arm runs (an arm without domain facts tells the rules nothing).
    if (!constructAgain.count(init) || session_.atHand(init)) {
      const Summary* s = session_.summary(init);
      if (!s || (!s->contextDependent && !s->hasDomainFacts && !s->truncated)) continue;
    } else {
      session_.noteDirectRun();
    }
    if (recordArms_) constructed_.insert(c->qualname);
    inArm('c', c.get(), {}, [&] {
      frame.arm = in.openArm(construct, index++, false);
      frame.reachable = true;
      Origin origin{module_.fileId(), syntax::rangeOf(syntax::field(c->node, "name")), {}};
      ObjId self = in.newObject(ObjKind::Instance, c->qualname, origin);
      moduleStore_.obj(self).cls = c.get();
      std::vector<ValueSet> args = withUnknownArgs(in, moduleStore_, *init, origin, 1, {{self}});
      size_t eventsBefore = moduleStore_.events.size(), objectsBefore = moduleStore_.objects.size();
      in.analyzeInPlace(*init, args);
      bool constructorActs = std::any_of(moduleStore_.events.begin() + static_cast<std::ptrdiff_t>(eventsBefore),
                                         moduleStore_.events.end(),
                                         [](const Event& e) { return e.kind == EventKind::Domain; });
      // Only a constructor that acts (a domain event) or makes what the model calls an anchor (an
      // optimizer) gives the later methods something to say; other classes (most of a model zoo's) skip the
      // lifecycle and the summaries of their public methods.
      bool anchored = constructorActs;
      for (size_t i = objectsBefore; !anchored && i < moduleStore_.objects.size(); ++i)
        anchored = session_.model().lifecycleAnchor(moduleStore_.objects[i]);
      if (frame.reachable && anchored) runLifecycle(in, frame, *c, self, origin, constructorActs);
    });
    driven.insert(init);
  }
  for (const auto& f : module_.functions()) {
    if (f->nested || armed.count(f.get()) || session_.called(f.get()) || driven.count(f.get())) continue;
    const Summary* s = session_.summary(f.get());
    if (!s || (!s->contextDependent && !s->hasDomainFacts && !s->truncated)) continue;
    ownArm(*f, s);
  }
  bodyObjects_ = std::vector<Obj>();  // only the arms above compare with it
  // For the next edit: the plain functions whose summary depends on the caller, or that ran directly here, with
  // what their summaries called.
  if (recordArms_)
    for (const auto& f : module_.functions()) {
      if (f->nested || f->cls) continue;
      if (const Summary* s = session_.known(f.get())) {
        if (!s->contextDependent) continue;
        std::vector<std::string>& calls = inContext_[f->qualname];
        for (const FunctionDef* c : s->calls) calls.push_back(c->qualname);
      } else if (session_.called(f.get()) && session_.runsDirectly(f.get())) {
        inContext_[f->qualname] = seed_.previous->inContext_.at(f->qualname);  // runsDirectly: the one before had it
      }
    }
}

void FileAnalysis::runLifecycle(Interp& in, Frame& frame, const ClassDef& cls, ObjId self, const Origin& origin,
                                bool constructorActs) {
  // The class's methods and its project bases' (another module's through the module provider), the
  // class's own first; `byName` is the one a call on the instance runs.
  std::vector<const ClassDef*> chain;
  std::function<void(const ClassDef&, int)> collect = [&](const ClassDef& c, int depth) {
    if (std::find(chain.begin(), chain.end(), &c) != chain.end()) return;
    chain.push_back(&c);
    if (depth >= 8) return;
    for (const std::string& q : c.bases) {
      const ClassDef* base = nullptr;
      for (const ClassDef* b : c.localBases)
        if (b->qualname == q) base = b;
      if (!base && session_.provider() && !session_.opaque(q) && c.owner)
        base = session_.provider()->resolve(q, *c.owner).cls;
      if (base && base != &c) collect(*base, depth + 1);
    }
  };
  collect(cls, 0);
  std::map<std::string, const FunctionDef*, std::less<>> byName;
  std::vector<SelfUse> uses;
  Session::Recording* rec = session_.recording();
  for (const ClassDef* c : chain) {
    if (c->owner && c->owner != &module_ && session_.provider()) session_.provider()->use(*c->owner);
    for (const auto& [name, def] : c->methods) {
      if (def->nested || def->isStatic || def->params.empty()) continue;
      byName.emplace(name, def);
      uses.push_back({def, selfSets(*def)});  // the method's text (and its decorators, decoratedAway) is read
      if (rec) rec->reads.push_back(def);
    }
  }
  // Construction: every `__init__` of the chain, and the private helpers (`_build_optimizer`) that only
  // construction names on `self`. What any other method assigns on `self` (`self.optimizer = ...` in a
  // `setup_optimizers()`) has an unknown value when another method starts: nothing here says in which
  // order they run, so each method starts with those attributes unknown.
  std::set<const FunctionDef*> construction;
  for (const SelfUse& u : uses)
    if (u.def->name == "__init__") construction.insert(u.def);
  for (bool grew = true; grew;) {
    grew = false;
    for (const SelfUse& u : uses) {
      const std::string& n = u.def->name;
      bool isPrivate = n.size() > 1 && n[0] == '_' && !(n.size() > 4 && n.compare(0, 2, "__") == 0 &&
                                                         n.compare(n.size() - 2, 2, "__") == 0);
      if (construction.count(u.def) || !isPrivate) continue;
      bool named = false, onlyThere = true;
      for (const SelfUse& v : uses) {
        if (!v.mentioned().count(n) || v.def == u.def) continue;
        named = true;
        onlyThere = onlyThere && construction.count(v.def) > 0;
      }
      if (named && onlyThere) {
        construction.insert(u.def);
        grew = true;
      }
    }
  }
  // What the methods other than `m` and construction assign (`m`'s own assignments are its own flow).
  auto unknownAt = [&](const FunctionDef* m) {
    std::set<std::string> out;
    for (const SelfUse& u : uses)
      if (u.def != m && u.def->name != m->name && !construction.count(u.def))
        out.insert(u.assigned().begin(), u.assigned().end());
    return out;
  };
  // The lifecycle: each public method (`train`, `fit`, `step`, ...) on the constructed instance, in its
  // own arm under the constructor's, so one method's effects never reach another's (the methods it calls
  // on `self` run inside it, in its order).
  constexpr size_t kMaxLifecycleMethods = 32;
  std::vector<const FunctionDef*> methods;
  for (const auto& [name, def] : byName) {
    if (name.empty() || name[0] == '_' || decoratedAway(*def)) continue;
    // Only a method that reads or sets something on `self` can see what the constructor did.
    auto u = std::find_if(uses.begin(), uses.end(), [&](const SelfUse& v) { return v.def == def; });
    if (u == uses.end() || u->mentioned().empty()) continue;
    // And only when the constructor or the method itself records a domain fact (a model-wrapping
    // call, say): otherwise the run tells nothing the method's own arm does not.
    if (!constructorActs) {
      const Summary* s = session_.summary(def);
      if (!s || (!s->hasDomainFacts && !s->truncated)) continue;
    }
    methods.push_back(def);
    if (methods.size() >= kMaxLifecycleMethods) break;
  }
  if (methods.empty()) return;
  int constructed = frame.arm;
  int construct = moduleStore_.constructs++;
  EnvMap after = frame.env, afterAttrs = frame.attrs;
  std::string selfKey = "#" + std::to_string(self) + ".";
  int index = 0;
  for (const FunctionDef* m : methods) {
    frame.env = after;
    frame.attrs = afterAttrs;
    frame.arm = constructed;
    frame.arm = in.openArm(construct, index++, false);
    frame.reachable = true;
    for (const std::string& attr : unknownAt(m)) {
      ObjId id = in.newObject(ObjKind::Derived, "." + attr, origin);
      moduleStore_.obj(id).parent = self;
      frame.attrs[selfKey + attr] = {id};
    }
    std::vector<ValueSet> args = withUnknownArgs(in, moduleStore_, *m, origin, 1, {{self}});
    // A method whose summary depends on no caller and holds for this class is put into the arm as a call on the
    // instance would put it (as a function's own arm does), instead of interpreting its body again: every
    // function's summary is at hand here (computed above, or carried over an edit).
    const Summary* s = session_.atHand(m) ? session_.summary(m) : nullptr;
    if (s && !s->contextDependent && !s->truncated && (!s->receiverClass || s->receiverClass == &cls) && in.fits(*s)) {
      ValueSet result;
      in.instantiate(*s, args, Origin{}, result, false);
    } else {
      in.analyzeInPlace(*m, args);
    }
  }
  frame.env = std::move(after);
  frame.attrs = std::move(afterAttrs);
  frame.arm = constructed;
  frame.reachable = true;
}

std::shared_ptr<const FileAnalysis::SelfSets> FileAnalysis::selfSets(const FunctionDef& def) {
  if (!def.owner) return std::make_shared<const SelfSets>();
  std::string_view text = syntax::textOf(def.node, def.owner->file().text);
  if (auto it = selfSets_.find(text); it != selfSets_.end()) return it->second;
  std::shared_ptr<const SelfSets> sets;
  if (const FileAnalysis* before = seed_.previous.get())
    if (auto it = before->selfSets_.find(text); it != before->selfSets_.end()) sets = it->second;
  if (!sets) {
    SelfSets read = selfSetsOf(def);
    read.text = std::string(text);
    sets = std::make_shared<const SelfSets>(std::move(read));
  }
  std::string_view key = sets->text;
  return selfSets_.emplace(key, std::move(sets)).first->second;
}

std::vector<FileAnalysis::Root> FileAnalysis::roots() const { return {{"<module>", &moduleStore_}}; }

}  // namespace shardlint::semantic
