// From Clang's AST to the plain model of CxxModel.h: the objects expressions name, the events of each
// project function's body (BodyVisitor), and the consumer that collects the functions and models them.
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>

#include "cxx/CxxFrontendImpl.h"

namespace shardlint::cxx {

// ------------------------------------------------------------------ the model

namespace {
std::string varId(const VarDecl* v, Builder& b) {
  const VarDecl* c = v->getCanonicalDecl();
  return c->getNameAsString() + "@" + std::to_string(b.sm->getFileOffset(b.sm->getExpansionLoc(c->getLocation())));
}

const Expr* strip(const Expr* e) {
  while (e) {
    const Expr* next = e->IgnoreParenImpCasts();
    if (auto* m = dyn_cast<MaterializeTemporaryExpr>(next)) next = m->getSubExpr();
    else if (auto* t = dyn_cast<CXXBindTemporaryExpr>(next)) next = t->getSubExpr();
    else if (auto* w = dyn_cast<ExprWithCleanups>(next)) next = w->getSubExpr();
    else if (auto* f = dyn_cast<CXXFunctionalCastExpr>(next)) next = f->getSubExpr();
    if (next == e) return e;
    e = next;
  }
  return e;
}

bool isStdName(const FunctionDecl* f, llvm::StringRef name) {
  return f && f->getQualifiedNameAsString() == ("std::" + name).str();
}

// The object an expression names, seen through pointers and handles.
Path pathOf(const Expr* e, Builder& b) {
  e = strip(e);
  if (!e) return {};
  if (auto* ref = dyn_cast<DeclRefExpr>(e)) {
    if (auto* parm = dyn_cast<ParmVarDecl>(ref->getDecl())) {
      Path p;
      p.root = Path::Root::Param;
      p.var = std::to_string(parm->getFunctionScopeIndex());
      p.name = parm->getNameAsString();
      return p;
    }
    if (auto* var = dyn_cast<VarDecl>(ref->getDecl())) {
      Path p;
      p.root = var->hasLocalStorage() || var->isStaticLocal() ? Path::Root::Local : Path::Root::Global;
      p.var = p.root == Path::Root::Local ? varId(var, b) : var->getQualifiedNameAsString();
      p.name = var->getNameAsString();
      return p;
    }
    return {};
  }
  if (isa<CXXThisExpr>(e)) {
    Path p;
    p.root = Path::Root::This;
    p.name = "this";
    return p;
  }
  if (auto* m = dyn_cast<MemberExpr>(e)) {
    if (auto* field = dyn_cast<FieldDecl>(m->getMemberDecl())) {
      Path p = pathOf(m->getBase(), b);
      if (!p.known()) return p;
      p.members.push_back(field->getQualifiedNameAsString());
      p.memberNames.push_back(field->getNameAsString());
      return p;
    }
    return {};
  }
  if (auto* u = dyn_cast<UnaryOperator>(e)) {
    if (u->getOpcode() == UO_Deref || u->getOpcode() == UO_AddrOf) return pathOf(u->getSubExpr(), b);
    return {};
  }
  if (auto* op = dyn_cast<CXXOperatorCallExpr>(e)) {
    // `p->x` and `*p` on smart pointers and module handles: the object they point to.
    if ((op->getOperator() == OO_Arrow || op->getOperator() == OO_Star) && op->getNumArgs() == 1)
      return pathOf(op->getArg(0), b);
    return {};
  }
  if (auto* call = dyn_cast<CXXMemberCallExpr>(e)) {
    // `p.get()`, `h.ptr()`: the pointee.
    const CXXMethodDecl* m = call->getMethodDecl();
    if (m && call->getNumArgs() == 0 && (m->getName() == "get" || m->getName() == "ptr"))
      return pathOf(call->getImplicitObjectArgument(), b);
    return {};
  }
  if (auto* call = dyn_cast<CallExpr>(e)) {
    const FunctionDecl* f = call->getDirectCallee();
    if (call->getNumArgs() == 1 && (isStdName(f, "move") || isStdName(f, "ref")))
      return pathOf(call->getArg(0), b);
    return {};
  }
  if (auto* c = dyn_cast<CXXConstructExpr>(e)) {
    // A copy or move of an object (a handle copied into a variable) is the same object for the model.
    if (c->getNumArgs() == 1 && c->getConstructor() && c->getConstructor()->isCopyOrMoveConstructor())
      return pathOf(c->getArg(0), b);
    return {};
  }
  return {};
}

// Walks one function body post-order, so that the events of a call's arguments come before it.
class BodyVisitor : public RecursiveASTVisitor<BodyVisitor> {
 public:
  BodyVisitor(Builder& b, Function& fn) : b_(b), fn_(fn) {}
  // The expression a constructor's member initialiser initialises `field` with (the parent map does
  // not lead from it to the initialiser).
  void setInitializer(const Expr* root, const FieldDecl* field) {
    initRoot_ = root;
    initPath_ = Path{};
    if (!field) return;
    initPath_.root = Path::Root::This;
    initPath_.name = "this";
    initPath_.members.push_back(field->getQualifiedNameAsString());
    initPath_.memberNames.push_back(field->getNameAsString());
  }
  bool shouldTraversePostOrder() const { return true; }
  bool shouldVisitTemplateInstantiations() const { return false; }
  bool shouldVisitImplicitCode() const { return false; }

  bool VisitCXXConstructExpr(CXXConstructExpr* e) {
    const CXXConstructorDecl* ctor = e->getConstructor();
    if (!ctor || ctor->isCopyOrMoveConstructor() || ctor->isDefaultConstructor()) return true;
    const CXXRecordDecl* cls = ctor->getParent();
    if (!cls) return true;
    Event ev;
    ev.kind = Event::Kind::Construct;
    ev.callee = cls->getQualifiedNameAsString();
    ev.method = cls->getNameAsString();
    std::vector<const Expr*> args(e->arg_begin(), e->arg_end());
    add(e, std::move(ev), args);
    return true;
  }

  bool VisitCallExpr(CallExpr* e) {
    if (auto* op = dyn_cast<CXXOperatorCallExpr>(e)) {
      if (op->getOperator() == OO_Equal && op->getNumArgs() == 2) assign(op, op->getArg(0), op->getArg(1));
      return true;
    }
    const FunctionDecl* f = e->getDirectCallee();
    if (!f) return true;
    Event ev;
    std::vector<const Expr*> args(e->arg_begin(), e->arg_end());
    if ((isStdName(f, "make_shared") || isStdName(f, "make_unique")) && f->getTemplateSpecializationArgs() &&
        f->getTemplateSpecializationArgs()->size() >= 1 &&
        f->getTemplateSpecializationArgs()->get(0).getKind() == TemplateArgument::Type) {
      // make_shared<T>(args...) builds a T from args (its constructor runs inside the library).
      QualType t = f->getTemplateSpecializationArgs()->get(0).getAsType();
      const CXXRecordDecl* cls = t->getAsCXXRecordDecl();
      if (!cls) return true;
      ev.kind = Event::Kind::Construct;
      ev.callee = cls->getQualifiedNameAsString();
      ev.method = cls->getNameAsString();
      add(e, std::move(ev), args);
      return true;
    }
    ev.kind = Event::Kind::Call;
    ev.callee = f->getQualifiedNameAsString();
    ev.method = f->getNameAsString();
    if (auto* mc = dyn_cast<CXXMemberCallExpr>(e)) ev.receiver = pathOf(mc->getImplicitObjectArgument(), b_);
    const FunctionDecl* def = nullptr;
    if (f->hasBody(def) && def) {
      auto it = b_.functionIndex.find(def->getCanonicalDecl());
      if (it != b_.functionIndex.end()) ev.target = static_cast<int32_t>(it->second);
    }
    add(e, std::move(ev), args);
    return true;
  }

  bool VisitBinaryOperator(BinaryOperator* e) {
    if (e->getOpcode() == BO_Assign) assign(e, e->getLHS(), e->getRHS());
    return true;
  }

  bool VisitVarDecl(VarDecl* v) {
    // `auto& m = *net;` or `auto h = net->fc;`: the variable names an existing object.
    if (!v->hasInit() || !v->hasLocalStorage() || isa<ParmVarDecl>(v)) return true;
    Path value = pathOf(v->getInit(), b_);
    if (!value.known()) return true;
    Event ev;
    ev.kind = Event::Kind::Assign;
    ev.result.root = Path::Root::Local;
    ev.result.var = varId(v, b_);
    ev.result.name = v->getNameAsString();
    ev.argPaths.push_back(value);
    ev.argEvents.emplace_back();
    place(ev, v->getSourceRange());
    fn_.events.push_back(std::move(ev));
    return true;
  }

 private:
  void assign(const Expr* whole, const Expr* lhs, const Expr* rhs) {
    Path value = pathOf(rhs, b_);
    Path target = pathOf(lhs, b_);
    if (!value.known() || !target.known()) return;
    Event ev;
    ev.kind = Event::Kind::Assign;
    ev.result = target;
    ev.argPaths.push_back(value);
    ev.argEvents.emplace_back();
    place(ev, whole->getSourceRange());
    fn_.events.push_back(std::move(ev));
  }

  void place(Event& ev, SourceRange r) {
    int f = b_.fileOf(r.getBegin());
    ev.file = f >= 0 ? static_cast<uint32_t>(f) : fn_.file;
    ev.range = b_.rangeOf(r, ev.file);
  }

  void add(const Expr* e, Event ev, const std::vector<const Expr*>& args) {
    place(ev, e->getSourceRange());
    for (const Expr* a : args) {
      if (isa<CXXDefaultArgExpr>(a)) continue;
      std::vector<uint32_t> nested;
      collectNested(a, nested);
      ev.argEvents.push_back(std::move(nested));
      ev.argPaths.push_back(pathOf(a, b_));
    }
    ev.result = resultOf(e);
    index_[e] = static_cast<uint32_t>(fn_.events.size());
    fn_.events.push_back(std::move(ev));
  }

  void collectNested(const Stmt* s, std::vector<uint32_t>& out, int depth = 0) {
    if (!s || depth > 256) return;
    if (auto* e = dyn_cast<Expr>(s)) {
      auto it = index_.find(e);
      if (it != index_.end()) out.push_back(it->second);
    }
    for (const Stmt* c : s->children()) collectNested(c, out, depth + 1);
  }

  // Where the value of `e` is stored: the variable or field it initialises, or the left side of the
  // assignment it is the right side of, seen through temporaries, conversions and `new`.
  Path resultOf(const Expr* e) {
    DynTypedNode node = DynTypedNode::create(*e);
    for (int hops = 0; hops < 12; ++hops) {
      if (initRoot_ && node.get<Expr>() == initRoot_) return initPath_;
      auto parents = b_.ctx->getParents(node);
      if (parents.empty()) return {};
      const DynTypedNode& p = parents[0];
      if (const auto* v = p.get<VarDecl>()) {
        if (isa<ParmVarDecl>(v)) return {};
        Path out;
        out.root = v->hasLocalStorage() ? Path::Root::Local : Path::Root::Global;
        out.var = out.root == Path::Root::Local ? varId(v, b_) : v->getQualifiedNameAsString();
        out.name = v->getNameAsString();
        return out;
      }
      if (const auto* init = p.get<CXXCtorInitializer>()) {
        const FieldDecl* field = init->getMember();
        if (!field) return {};
        Path out;
        out.root = Path::Root::This;
        out.name = "this";
        out.members.push_back(field->getQualifiedNameAsString());
        out.memberNames.push_back(field->getNameAsString());
        return out;
      }
      if (const auto* bin = p.get<BinaryOperator>()) {
        if (bin->getOpcode() == BO_Assign) return pathOf(bin->getLHS(), b_);
        return {};
      }
      if (const auto* op = p.get<CXXOperatorCallExpr>()) {
        if (op->getOperator() == OO_Equal && op->getNumArgs() == 2) return pathOf(op->getArg(0), b_);
        return {};
      }
      const Expr* pe = p.get<Expr>();
      if (!pe) return {};
      bool through = isa<ImplicitCastExpr>(pe) || isa<ParenExpr>(pe) || isa<MaterializeTemporaryExpr>(pe) ||
                     isa<CXXBindTemporaryExpr>(pe) || isa<ExprWithCleanups>(pe) || isa<CXXFunctionalCastExpr>(pe) ||
                     isa<CXXNewExpr>(pe) || isa<InitListExpr>(pe) || isa<CXXStdInitializerListExpr>(pe);
      if (auto* c = dyn_cast<CXXConstructExpr>(pe))
        through = c->getNumArgs() == 1 && c->getConstructor() &&
                  (c->getConstructor()->isCopyOrMoveConstructor() || c->getConstructor()->isConvertingConstructor(false));
      if (auto* call = dyn_cast<CallExpr>(pe)) {
        // A handle or pointer made from it: shared_ptr<T>(new T(...)).
        const FunctionDecl* f = call->getDirectCallee();
        through = isStdName(f, "move");
      }
      if (!through) return {};
      node = p;
    }
    return {};
  }

  Builder& b_;
  Function& fn_;
  std::unordered_map<const Expr*, uint32_t> index_;
  const Expr* initRoot_ = nullptr;
  Path initPath_;
};

class Consumer : public ASTConsumer {
 public:
  explicit Consumer(Builder& b) : b_(b) {}

  bool HandleTopLevelDecl(DeclGroupRef group) override {
    for (Decl* d : group) top_.push_back(d);
    return true;
  }

  // Bodies outside the project are skipped (SkipFunctionBodies is on): declarations are enough there.
  bool shouldSkipFunctionBody(Decl* d) override { return !b_.inProject(d->getLocation()); }

  void HandleTranslationUnit(ASTContext& ctx) override {
    b_.ctx = &ctx;
    // The parent map (resultOf) covers the project's own declarations only. Built over the whole
    // unit it took as much memory as LibTorch's AST itself, and with a precompiled header it
    // loaded every declaration in it.
    std::vector<Decl*> scope;
    for (Decl* d : top_)
      if (d && b_.inProject(d->getLocation())) scope.push_back(d);
    ctx.setTraversalScope(scope);
    // First every project function with a body (so calls can name their target), then the bodies.
    for (Decl* d : top_) collect(d);
    for (size_t i = 0; i < b_.functionDecls.size(); ++i) model(b_.functionDecls[i], b_.program.functions[i]);
  }

 private:
  void collect(Decl* d) {
    if (!d || !b_.inProject(d->getLocation())) return;
    if (auto* ns = dyn_cast<NamespaceDecl>(d)) {
      for (Decl* c : ns->decls()) collect(c);
      return;
    }
    if (auto* ls = dyn_cast<LinkageSpecDecl>(d)) {
      for (Decl* c : ls->decls()) collect(c);
      return;
    }
    if (auto* rec = dyn_cast<CXXRecordDecl>(d)) {
      if (rec->isDependentContext()) return;  // templates: not modelled
      for (Decl* c : rec->decls()) collect(c);
      return;
    }
    auto* f = dyn_cast<FunctionDecl>(d);
    if (!f || !f->doesThisDeclarationHaveABody() || f->isDependentContext()) return;
    int file = b_.fileOf(f->getLocation());
    if (file < 0) return;
    Function fn;
    fn.qualifiedName = f->getQualifiedNameAsString();
    fn.name = f->getNameAsString();
    if (auto* m = dyn_cast<CXXMethodDecl>(f)) fn.cls = m->getParent()->getQualifiedNameAsString();
    fn.constructor = isa<CXXConstructorDecl>(f);
    fn.file = static_cast<uint32_t>(file);
    fn.range = b_.rangeOf(f->getSourceRange(), fn.file);
    fn.nameRange = b_.rangeOf(SourceRange(f->getLocation(), f->getLocation()), fn.file);
    for (const ParmVarDecl* p : f->parameters()) fn.params.push_back(p->getNameAsString());
    b_.functionIndex[f->getCanonicalDecl()] = static_cast<uint32_t>(b_.program.functions.size());
    b_.functionDecls.push_back(f);
    b_.program.functions.push_back(std::move(fn));
  }

  void model(const FunctionDecl* f, Function& fn) {
    BodyVisitor v(b_, fn);
    if (auto* ctor = dyn_cast<CXXConstructorDecl>(f))
      for (const CXXCtorInitializer* init : ctor->inits())
        if (init->isWritten() && init->getInit()) {
          v.setInitializer(init->getInit(), init->getMember());
          v.TraverseStmt(const_cast<Expr*>(init->getInit()));
        }
    v.setInitializer(nullptr, nullptr);
    v.TraverseStmt(f->getBody());
  }

  Builder& b_;
  std::vector<Decl*> top_;
};

}  // namespace

std::unique_ptr<ASTConsumer> Action::CreateASTConsumer(CompilerInstance& ci, llvm::StringRef) {
  b_.sm = &ci.getSourceManager();
  return std::make_unique<Consumer>(b_);
}

}  // namespace shardlint::cxx
