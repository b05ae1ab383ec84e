// Precompiling the headers a set of units share (function bodies skipped), refused when the headers reach a
// project file; the calling thread's signal stack kept across LLVM's crash handling.
#include <clang/Basic/Diagnostic.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Tooling/Tooling.h>

#include <signal.h>

#include <chrono>

#include "cxx/CxxFrontendImpl.h"

namespace shardlint::cxx {

namespace {

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

}  // namespace

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

}  // namespace shardlint::cxx
