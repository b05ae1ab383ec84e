// Parsing one translation unit: Clang's errors and missing headers recorded, the memory Clang held, the
// comments of the project files, and parseImpl, which runs Clang and gathers the result.
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticLex.h>
#include <clang/Lex/HeaderSearch.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/MemoryBuffer.h>

#include <chrono>
#include <set>

#include "cxx/CxxFrontendImpl.h"

namespace shardlint::cxx {

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace shardlint::cxx
