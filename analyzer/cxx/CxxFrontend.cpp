// The C++ frontend on Clang LibTooling (built with -fno-rtti, like LLVM, and C++17).
// This file holds the module's entry point (the FrontendApi it exports) and the Clang command line a parse
// and a PCH build share; the rest lies beside it (CxxFrontendImpl.h): the flags (CxxFlags.cpp), the AST to
// model (CxxAstModel.cpp), one unit's parse (CxxParse.cpp) and the precompiled headers (CxxPch.cpp).
#include "cxx/CxxFrontend.h"

#include <llvm/Support/VirtualFileSystem.h>

#include <dlfcn.h>

#include <filesystem>

#include "cxx/CxxFrontendImpl.h"

#ifndef SHARDLINT_CLANG_RESOURCE_DIR
#define SHARDLINT_CLANG_RESOURCE_DIR ""
#endif

namespace shardlint::cxx {

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

namespace {
const FrontendApi kApi{kFrontendApiVersion, findFlagsImpl, parseImpl, buildPchImpl};
}  // namespace

}  // namespace shardlint::cxx

extern "C" __attribute__((visibility("default"))) const shardlint::cxx::FrontendApi* shardlint_cxx_frontend_api() {
  return &shardlint::cxx::kApi;
}
