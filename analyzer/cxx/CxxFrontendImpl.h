// The private parts the files of the C++ frontend module share (libshardlint_cxx.so: CxxFrontend.cpp,
// CxxFlags.cpp, CxxAstModel.cpp, CxxParse.cpp, CxxPch.cpp): paths, what one parse builds (Builder), the
// frontend action that runs it, and the Clang command line. Built with -fno-rtti and C++17, like LLVM.
#pragma once
#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Lex/Lexer.h>
#include <llvm/Support/VirtualFileSystem.h>

#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "cxx/CxxFrontend.h"

namespace shardlint::cxx {
namespace fs = std::filesystem;
using namespace clang;

// Paths (CxxFlags.cpp).
std::string normal(const fs::path& p);
bool under(const std::string& path, const std::string& dir);

// The three entries of the module's FrontendApi (CxxFlags.cpp, CxxParse.cpp, CxxPch.cpp).
CompileFlags findFlagsImpl(const std::string& path, const std::vector<std::string>& extra,
                           const std::vector<std::string>& defaults);
ParseResult parseImpl(const std::string& path, const std::string& text, const CompileFlags& flags,
                      const std::vector<std::string>& projectDirs, const std::string& pch);
PchResult buildPchImpl(const std::string& header, const CompileFlags& flags, const std::string& output,
                       const std::vector<std::string>& projectDirs);

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

// What Clang's own allocators hold; a missing header made a plain error (CxxParse.cpp).
size_t clangBytes(CompilerInstance& ci);
void continueAfterMissingHeaders(CompilerInstance& ci);

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
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, llvm::StringRef) override;  // CxxAstModel.cpp
  void EndSourceFileAction() override { bytes_ = clangBytes(getCompilerInstance()); }

 private:
  Builder& b_;
  size_t& bytes_;
};

// The Clang run both a parse and a PCH build make (CxxFrontend.cpp).
llvm::IntrusiveRefCntPtr<FileManager> fileManager(const CompileFlags& flags,
                                                  llvm::IntrusiveRefCntPtr<llvm::vfs::InMemoryFileSystem> memory);
std::string clangResourceDir();
std::vector<std::string> commandLine(const CompileFlags& flags);

}  // namespace shardlint::cxx
