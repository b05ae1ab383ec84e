// The C++ frontend on Clang LibTooling (built with -fno-rtti, like LLVM, and C++17).
#include "cxx/CxxFrontend.h"

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticLex.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Lex/HeaderSearch.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/JSONCompilationDatabase.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>

#include <signal.h>

#include <dlfcn.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#ifndef SHARDLINT_CLANG_RESOURCE_DIR
#define SHARDLINT_CLANG_RESOURCE_DIR ""
#endif

namespace shardlint::cxx {
namespace fs = std::filesystem;
using namespace clang;

// ------------------------------------------------------------------ flags

namespace {

std::string normal(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal().string();
}

bool under(const std::string& path, const std::string& dir) {
  if (dir.empty() || path.size() <= dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
  return dir.back() == '/' || path[dir.size()] == '/';
}

// One compile_commands.json loaded per path for the whole process (the files are immutable for a run;
// the language server re-reads a changed one by its modification time).
struct LoadedDatabase {
  fs::file_time_type mtime;
  std::shared_ptr<tooling::CompilationDatabase> db;
};
std::mutex gDbMutex;
std::map<std::string, LoadedDatabase> gDatabases;

std::shared_ptr<tooling::CompilationDatabase> loadDatabase(const fs::path& file) {
  std::error_code ec;
  auto mtime = fs::last_write_time(file, ec);
  if (ec) return nullptr;
  std::lock_guard<std::mutex> lock(gDbMutex);
  auto it = gDatabases.find(file.string());
  if (it != gDatabases.end() && it->second.mtime == mtime) return it->second.db;
  std::string err;
  std::shared_ptr<tooling::CompilationDatabase> db =
      tooling::JSONCompilationDatabase::loadFromFile(file.string(), err, tooling::JSONCommandLineSyntax::AutoDetect);
  gDatabases[file.string()] = {mtime, db};
  return db;
}

// The arguments of a compile command without the compiler, the output, the dependency files and the
// source file itself.
std::vector<std::string> argumentsOf(const tooling::CompileCommand& cmd, const std::string& file) {
  std::vector<std::string> line = cmd.CommandLine;
  line = tooling::getClangStripOutputAdjuster()(line, file);
  line = tooling::getClangStripDependencyFileAdjuster()(line, file);
  std::vector<std::string> out;
  for (size_t i = 1; i < line.size(); ++i) {
    const std::string& a = line[i];
    if (a == "-c" || a == "-fsyntax-only") continue;
    if (a == cmd.Filename || normal(fs::path(cmd.Directory) / a) == file) continue;
    out.push_back(a);
  }
  return out;
}

}  // namespace

namespace {
CompileFlags findFlagsImpl(const std::string& path, const std::vector<std::string>& extra,
                           const std::vector<std::string>& defaults) {
  std::string file = normal(path);
  CompileFlags flags;
  std::error_code ec;
  for (fs::path dir = fs::path(file).parent_path();; dir = dir.parent_path()) {
    for (const fs::path& candidate : {dir / "compile_commands.json", dir / "build" / "compile_commands.json"}) {
      if (!fs::is_regular_file(candidate, ec)) continue;
      auto db = loadDatabase(candidate);
      if (!db) continue;
      auto cmds = db->getCompileCommands(file);
      if (cmds.empty()) continue;
      flags.args = argumentsOf(cmds.front(), file);
      flags.directory = cmds.front().Directory;
      flags.origin = "compile_commands.json at " + candidate.string();
      flags.args.insert(flags.args.end(), extra.begin(), extra.end());
      return flags;
    }
    fs::path txt = dir / "compile_flags.txt";
    if (fs::is_regular_file(txt, ec)) {
      std::ifstream in(txt);
      for (std::string line; std::getline(in, line);) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (!line.empty()) flags.args.push_back(line);
      }
      flags.directory = dir.string();
      flags.origin = "compile_flags.txt at " + txt.string();
      flags.args.insert(flags.args.end(), extra.begin(), extra.end());
      return flags;
    }
    if (dir == dir.root_path() || dir.empty()) break;
  }
  flags.directory = fs::path(file).parent_path().string();
  if (!extra.empty()) {
    flags.args = extra;
    flags.origin = "the command line";
  } else {
    flags.args = defaults;
    flags.origin = "the default";
  }
  return flags;
}
}  // namespace

// ------------------------------------------------------------------ the model

namespace {

// What one parse builds: the files of the program and the functions, filled by the consumer.
struct Builder {
  SourceManager* sm = nullptr;
  ASTContext* ctx = nullptr;
  std::vector<std::string> projectDirs;
  std::string mainPath;  // as given
  Program program;
  std::map<FileID, int> fileIndex;  // -1: not a project file
  std::unordered_map<const FunctionDecl*, uint32_t> functionIndex;
  std::vector<const FunctionDecl*> functionDecls;

  // The index of the project file `loc` is in, or -1.
  int fileOf(SourceLocation loc) {
    if (loc.isInvalid()) return -1;
    loc = sm->getExpansionLoc(loc);
    FileID id = sm->getFileID(loc);
    auto it = fileIndex.find(id);
    if (it != fileIndex.end()) return it->second;
    int index = -1;
    if (id == sm->getMainFileID()) {
      index = 0;
    } else if (const FileEntry* fe = sm->getFileEntryForID(id)) {
      std::string name = normal(fe->tryGetRealPathName().empty() ? fe->getName().str()
                                                                  : fe->tryGetRealPathName().str());
      bool project = !sm->isInSystemHeader(loc);
      if (project) {
        project = false;
        for (const auto& d : projectDirs) project = project || under(name, d);
      }
      if (project) {
        bool invalid = false;
        llvm::StringRef buf = sm->getBufferData(id, &invalid);
        if (!invalid) {
          index = static_cast<int>(program.files.size());
          program.files.push_back(File{name, buf.str()});
        }
      }
    }
    fileIndex[id] = index;
    return index;
  }

  bool inProject(SourceLocation loc) { return fileOf(loc) >= 0; }

  ByteRange rangeOf(SourceRange r, uint32_t file) {
    SourceLocation b = sm->getExpansionLoc(r.getBegin());
    SourceLocation e = sm->getExpansionLoc(r.getEnd());
    uint32_t begin = sm->getFileOffset(b);
    uint32_t end = sm->getFileOffset(Lexer::getLocForEndOfToken(e, 0, *sm, ctx->getLangOpts()));
    if (sm->getFileID(e) != sm->getFileID(b) || end < begin) end = begin;
    uint32_t size = static_cast<uint32_t>(program.files[file].text.size());
    return ByteRange{std::min(begin, size), std::min(end, size)};
  }
};

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

// Records Clang's errors: the first one, the headers it could not find, and where the errors after
// the first missing header lie.
class Errors : public DiagnosticConsumer {
 public:
  explicit Errors(Builder& b) : b_(b) {}
  void HandleDiagnostic(DiagnosticsEngine::Level level, const Diagnostic& info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < DiagnosticsEngine::Error) return;
    if (info.hasSourceManager()) b_.sm = &info.getSourceManager();
    unsigned id = info.getID();
    if (id == diag::err_pp_file_not_found || id == diag::err_pp_file_not_found_angled_include_not_fatal) {
      missingHeader(info);
      return;
    }
    if (!missing.empty()) {
      laterError(info);
      return;
    }
    if (failed) return;
    failed = true;
    llvm::SmallString<256> text;
    info.FormatDiagnostic(text);
    message = text.str().str();
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      SourceLocation loc = info.getSourceManager().getExpansionLoc(info.getLocation());
      int f = b_.fileOf(loc);
      if (f >= 0) {
        file = static_cast<uint32_t>(f);
        uint32_t off = info.getSourceManager().getFileOffset(loc);
        range = ByteRange{off, off};
      } else if (const FileEntry* fe = info.getSourceManager().getFileEntryForID(
                     info.getSourceManager().getFileID(loc))) {
        // In a header outside the project (a system or library header).
        message += " (in " + fe->getName().str() + ":" +
                   std::to_string(info.getSourceManager().getExpansionLineNumber(loc)) + ")";
      }
    }
  }
  bool failed = false;
  std::string message;
  uint32_t file = 0;
  ByteRange range;
  std::vector<MissingHeader> missing;
  size_t moreMissing = 0;
  size_t laterErrors = 0;
  std::vector<ErrorSite> laterErrorSites;

 private:
  std::set<std::string> names_;  // of the headers not found
  void missingHeader(const Diagnostic& info) {
    MissingHeader m;
    if (info.getNumArgs() > 0 && info.getArgKind(0) == DiagnosticsEngine::ak_std_string) m.name = info.getArgStdStr(0);
    if (m.name.empty()) m.name = "?";
    if (!names_.insert(m.name).second) return;
    if (missing.size() >= kMaxMissingHeaders) {
      ++moreMissing;
      return;
    }
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      const SourceManager& sm = info.getSourceManager();
      SourceLocation loc = sm.getExpansionLoc(info.getLocation());
      // Up the include chain to the main file.
      for (int depth = 0; loc.isValid() && depth < 512; ++depth) {
        FileID id = sm.getFileID(loc);
        if (id == sm.getMainFileID()) {
          uint32_t off = sm.getFileOffset(loc);
          m.range = ByteRange{off, off};
          break;
        }
        if (depth == 0) {
          const FileEntry* fe = sm.getFileEntryForID(id);
          m.via = (fe ? fe->getName().str() : std::string("?")) + ":" + std::to_string(sm.getExpansionLineNumber(loc));
        }
        SourceLocation up = sm.getIncludeLoc(id);
        loc = up.isValid() ? sm.getExpansionLoc(up) : up;
      }
    }
    missing.push_back(std::move(m));
  }

  void laterError(const Diagnostic& info) {
    ++laterErrors;
    if (laterErrorSites.size() >= kMaxErrorSites) return;
    ErrorSite site;
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      SourceLocation loc = info.getSourceManager().getExpansionLoc(info.getLocation());
      int f = b_.fileOf(loc);
      if (f >= 0) {
        site.file = f;
        site.offset = info.getSourceManager().getFileOffset(loc);
      }
    }
    laterErrorSites.push_back(site);
  }

  Builder& b_;
};

// What Clang's own allocators hold: the AST, the side tables, the source manager, the
// preprocessor, the header search, the identifiers and a precompiled header's buffers.
size_t clangBytes(CompilerInstance& ci) {
  size_t n = 0;
  if (ci.hasSourceManager()) {
    SourceManager& sm = ci.getSourceManager();
    SourceManager::MemoryBufferSizes buffers = sm.getMemoryBufferSizes();
    n += buffers.malloc_bytes + buffers.mmap_bytes + sm.getContentCacheSize() + sm.getDataStructureSizes();
  }
  if (ci.hasPreprocessor()) {
    Preprocessor& pp = ci.getPreprocessor();
    n += pp.getTotalMemory() + pp.getHeaderSearchInfo().getTotalMemory() +
         pp.getIdentifierTable().getAllocator().getTotalMemory();
  }
  if (ci.hasASTContext()) {
    ASTContext& ctx = ci.getASTContext();
    n += ctx.getASTAllocatedMemory() + ctx.getSideTableAllocatedMemory();
    if (ExternalASTSource* external = ctx.getExternalSource()) {
      ExternalASTSource::MemoryBufferSizes buffers = external->getMemoryBufferSizes();
      n += buffers.malloc_bytes + buffers.mmap_bytes;
    }
  }
  return n;
}

// A header that is not found stops Clang by default (a fatal error: the rest of the unit is parsed
// with no further includes entered and no template instantiated). As a plain error the rest of the
// unit is analysed as well as Clang can without it. No error limit (after 20 errors Clang's limit
// is a fatal error too) and no spelling correction (it searches the whole AST for each unknown
// name, and what it guesses is not what the code says).
void continueAfterMissingHeaders(CompilerInstance& ci) {
  DiagnosticsEngine& d = ci.getDiagnostics();
  d.setSeverity(diag::err_pp_file_not_found, diag::Severity::Error, SourceLocation());
  d.setErrorLimit(0);
}

// (ToolInvocation destroys the action when it has run: its memory figure goes to the caller's
// variable.)
class Action : public ASTFrontendAction {
 public:
  Action(Builder& b, size_t& bytes) : b_(b), bytes_(bytes) {}
  bool BeginInvocation(CompilerInstance& ci) override {
    ci.getFrontendOpts().SkipFunctionBodies = true;
    ci.getDiagnosticOpts().ShowCarets = false;  // no "N errors generated." on stderr
    ci.getLangOpts().SpellChecking = false;
    continueAfterMissingHeaders(ci);
    return true;
  }
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, llvm::StringRef) override {
    b_.sm = &ci.getSourceManager();
    return std::make_unique<Consumer>(b_);
  }
  void EndSourceFileAction() override { bytes_ = clangBytes(getCompilerInstance()); }

 private:
  Builder& b_;
  size_t& bytes_;
};

void collectComments(Builder& b, std::vector<Comment>& out) {
  LangOptions lang;
  lang.CPlusPlus = lang.CPlusPlus11 = lang.CPlusPlus14 = lang.CPlusPlus17 = true;
  lang.LineComment = true;
  for (uint32_t i = 0; i < b.program.files.size(); ++i) {
    const std::string& text = b.program.files[i].text;
    if (text.find("//") == std::string::npos && text.find("/*") == std::string::npos) continue;
    Lexer lex(SourceLocation(), lang, text.data(), text.data(), text.data() + text.size());
    lex.SetCommentRetentionState(true);
    Token tok;
    for (int guard = 0; guard < 50'000'000; ++guard) {
      lex.LexFromRawLexer(tok);
      if (tok.is(tok::eof)) break;
      if (!tok.is(tok::comment)) continue;
      // The lexer stands just after the token it returned.
      const char* at = lex.getBufferLocation() - tok.getLength();
      uint32_t off = static_cast<uint32_t>(at - text.data());
      out.push_back(Comment{i, off, std::string(at, tok.getLength())});
    }
  }
}

}  // namespace

namespace {

// A file system of its own per Clang run: the shared real one would change the process's working
// directory when the compile command's directory is set (and so every thread's). `memory` takes
// files that override the disk's.
llvm::IntrusiveRefCntPtr<FileManager> fileManager(const CompileFlags& flags,
                                                  llvm::IntrusiveRefCntPtr<llvm::vfs::InMemoryFileSystem> memory) {
  std::unique_ptr<llvm::vfs::FileSystem> physical = llvm::vfs::createPhysicalFileSystem();
  llvm::IntrusiveRefCntPtr<llvm::vfs::OverlayFileSystem> overlay(
      new llvm::vfs::OverlayFileSystem(llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>(physical.release())));
  if (memory) overlay->pushOverlay(memory);
  if (!flags.directory.empty()) overlay->setCurrentWorkingDirectory(flags.directory);
  return llvm::IntrusiveRefCntPtr<FileManager>(new FileManager(FileSystemOptions(), overlay));
}

// Clang's own headers (stddef.h, stdarg.h, the intrinsics): `clang/` beside this module when they were
// installed with it (a wheel or release archive: `lib/shardlint/clang/include`), else the folder of
// the Clang it was built with.
std::string clangResourceDir() {
  static const std::string dir = [] {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<const void*>(&clangResourceDir), &info) && info.dli_fname) {
      std::error_code ec;
      fs::path beside = fs::path(info.dli_fname).parent_path() / "clang";
      if (fs::is_directory(beside / "include", ec)) return beside.string();
    }
    return std::string(SHARDLINT_CLANG_RESOURCE_DIR);
  }();
  return dir;
}

// The driver command line up to the input: the resource folder, C++17 unless the flags choose a
// standard, the flags, and no warnings (only errors matter here).
std::vector<std::string> commandLine(const CompileFlags& flags) {
  std::vector<std::string> argv = {"clang++"};
  std::string resourceDir = clangResourceDir();
  if (!resourceDir.empty()) argv.push_back("-resource-dir=" + resourceDir);
  bool hasStd = false;
  for (const auto& a : flags.args) hasStd = hasStd || a.rfind("-std=", 0) == 0;
  if (!hasStd) argv.push_back("-std=c++17");
  argv.insert(argv.end(), flags.args.begin(), flags.args.end());
  argv.push_back("-Wno-everything");
  return argv;
}

ParseResult parseImpl(const std::string& path, const std::string& text, const CompileFlags& flags,
                      const std::vector<std::string>& projectDirs, const std::string& pch) {
  auto started = std::chrono::steady_clock::now();
  ParseResult result;
  Builder b;
  b.mainPath = path;
  for (const auto& d : projectDirs) b.projectDirs.push_back(normal(d));
  b.program.files.push_back(File{path, text});
  std::string absolute = normal(path);

  llvm::IntrusiveRefCntPtr<llvm::vfs::InMemoryFileSystem> memory(new llvm::vfs::InMemoryFileSystem);
  memory->addFile(absolute, 0, llvm::MemoryBuffer::getMemBufferCopy(text, absolute));
  llvm::IntrusiveRefCntPtr<FileManager> files = fileManager(flags, memory);

  std::vector<std::string> argv = commandLine(flags);
  argv.push_back("-fsyntax-only");
  if (!pch.empty()) {
    argv.push_back("-include-pch");
    argv.push_back(pch);
  }
  argv.push_back(absolute);

  Errors errors(b);
  tooling::ToolInvocation invocation(argv, std::make_unique<Action>(b, result.clangBytes), files.get(),
                                     std::make_shared<PCHContainerOperations>());
  invocation.setDiagnosticConsumer(&errors);
  bool ran = invocation.run();
  if (!ran && !errors.failed && errors.missing.empty()) {
    errors.failed = true;
    errors.message = "Clang could not run on this file with its compile flags";
  }
  collectComments(b, result.comments);
  result.failed = errors.failed;
  result.error = errors.message;
  result.errorFile = errors.file;
  result.errorRange = errors.range;
  result.missing = std::move(errors.missing);
  result.moreMissing = errors.moreMissing;
  result.laterErrors = errors.laterErrors;
  result.laterErrorSites = std::move(errors.laterErrorSites);
  result.program = std::move(b.program);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

// Clang's PCH writer with function bodies skipped. Afterwards `projectFile` is the first file it
// read, other than the header itself, that lies under one of the project folders ("" if none).
// (ToolInvocation destroys the action when it has run: the answer goes to the caller's string.)
class PchAction : public GeneratePCHAction {
 public:
  PchAction(const std::string& header, const std::vector<std::string>& projectDirs, std::string& projectFile,
            size_t& bytes)
      : header_(header), projectDirs_(projectDirs), projectFile_(projectFile), bytes_(bytes) {}
  bool BeginInvocation(CompilerInstance& ci) override {
    ci.getFrontendOpts().SkipFunctionBodies = true;
    return GeneratePCHAction::BeginInvocation(ci);
  }
  void EndSourceFileAction() override {
    bytes_ = clangBytes(getCompilerInstance());
    SourceManager& sm = getCompilerInstance().getSourceManager();
    for (auto it = sm.fileinfo_begin(); it != sm.fileinfo_end() && projectFile_.empty(); ++it) {
      const FileEntry* entry = it->getFirst();
      llvm::StringRef real = entry->tryGetRealPathName();
      std::string name = normal(real.empty() ? entry->getName().str() : real.str());
      if (name == header_) continue;
      for (const auto& d : projectDirs_)
        if (under(name, d)) projectFile_ = name;
    }
    GeneratePCHAction::EndSourceFileAction();
  }

 private:
  const std::string& header_;
  const std::vector<std::string>& projectDirs_;
  std::string& projectFile_;
  size_t& bytes_;
};

class CountErrors : public DiagnosticConsumer {
 public:
  void HandleDiagnostic(DiagnosticsEngine::Level level, const Diagnostic& info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level >= DiagnosticsEngine::Error && first.empty()) {
      llvm::SmallString<256> text;
      info.FormatDiagnostic(text);
      first = text.str().str();
    }
  }
  std::string first;
};

// LLVM gives the calling thread a signal stack from malloc the first time it registers a file to
// delete on a crash (the PCH's temporary file does that). The thread's own stack, when it had one,
// is put back afterwards: sanitizer runtimes unmap a thread's signal stack when the thread ends, and
// abort on one that came from malloc. (LLVM's handlers run on whichever stack is current.)
class KeepSignalStack {
 public:
  KeepSignalStack() { saved_ = sigaltstack(nullptr, &old_) == 0 && !(old_.ss_flags & SS_DISABLE); }
  ~KeepSignalStack() {
    stack_t now{};
    if (saved_ && sigaltstack(nullptr, &now) == 0 && now.ss_sp != old_.ss_sp) {
      old_.ss_flags = 0;
      sigaltstack(&old_, nullptr);
    }
  }
  KeepSignalStack(const KeepSignalStack&) = delete;
  KeepSignalStack& operator=(const KeepSignalStack&) = delete;

 private:
  stack_t old_{};
  bool saved_ = false;
};

PchResult buildPchImpl(const std::string& header, const CompileFlags& flags, const std::string& output,
                       const std::vector<std::string>& projectDirs) {
  KeepSignalStack keepSignalStack;
  auto started = std::chrono::steady_clock::now();
  PchResult result;
  std::vector<std::string> dirs;
  for (const auto& d : projectDirs) dirs.push_back(normal(d));
  llvm::IntrusiveRefCntPtr<FileManager> files = fileManager(flags, nullptr);
  std::vector<std::string> argv = commandLine(flags);
  for (const char* a : {"-x", "c++-header"}) argv.emplace_back(a);
  std::string headerPath = normal(header);
  argv.push_back(headerPath);
  argv.push_back("-o");
  argv.push_back(output);
  std::string projectFile;
  auto action = std::make_unique<PchAction>(headerPath, dirs, projectFile, result.clangBytes);
  CountErrors errors;
  tooling::ToolInvocation invocation(argv, std::unique_ptr<FrontendAction>(std::move(action)), files.get(),
                                     std::make_shared<PCHContainerOperations>());
  invocation.setDiagnosticConsumer(&errors);
  bool ran = invocation.run();
  if (!ran || !errors.first.empty()) {
    result.problem = errors.first.empty() ? "Clang could not precompile the headers" : errors.first;
  } else if (!projectFile.empty()) {
    result.problem = "the headers reach the project file " + projectFile;
  } else {
    result.ok = true;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

const FrontendApi kApi{kFrontendApiVersion, findFlagsImpl, parseImpl, buildPchImpl};
}  // namespace

}  // namespace shardlint::cxx

extern "C" __attribute__((visibility("default"))) const shardlint::cxx::FrontendApi* shardlint_cxx_frontend_api() {
  return &shardlint::cxx::kApi;
}
