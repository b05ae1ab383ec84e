// The engine's side of the C++ frontend: loads libshardlint_cxx.so (the Clang part) on first use.
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "cxx/CxxFrontend.h"

namespace shardlint::cxx {
namespace {

std::once_flag gOnce;
const FrontendApi* gApi = nullptr;
std::string gProblem;

void load() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SHARDLINT_CXX_FRONTEND"); env && *env) candidates.emplace_back(env);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((exe.parent_path() / "libshardlint_cxx.so").string());  // the build folder
    // an install prefix (cmake --install, the wheel, the release archive): bin/shardlint, lib/shardlint/
    candidates.push_back((exe.parent_path() / ".." / "lib" / "shardlint" / "libshardlint_cxx.so").string());
  }
#ifdef SHARDLINT_CXX_FRONTEND_PATH
  candidates.emplace_back(SHARDLINT_CXX_FRONTEND_PATH);
#endif
  std::string tried;
  for (const auto& c : candidates) {
    if (!fs::is_regular_file(c, ec)) continue;
    void* handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + c + ": " + (err ? err : "dlopen failed");
      continue;
    }
    using Entry = const FrontendApi* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, "shardlint_cxx_frontend_api"));
    const FrontendApi* api = entry ? entry() : nullptr;
    if (!api || api->version != kFrontendApiVersion) {
      tried += (tried.empty() ? "" : "; ") + c + ": not a matching shardlint C++ frontend";
      continue;
    }
    gApi = api;  // the module stays loaded for the process
    return;
  }
  gProblem = tried.empty() ? "this shardlint was built without the C++ frontend (Clang LibTooling 14 was not found "
                             "at build time; scripts/setup.sh installs it)"
                           : "the C++ frontend could not be loaded (" + tried + ")";
}

const FrontendApi* api() {
  std::call_once(gOnce, load);
  return gApi;
}

}  // namespace

bool available() { return api() != nullptr; }

std::string loadProblem() {
  api();
  return gProblem;
}

CompileFlags findFlags(const std::string& path, const std::vector<std::string>& extra,
                       const std::vector<std::string>& defaults) {
  if (const FrontendApi* a = api()) return a->findFlags(path, extra, defaults);
  return CompileFlags{extra, {}, "the command line"};
}

ParseResult parse(const std::string& path, const std::string& text, const CompileFlags& flags,
                  const std::vector<std::string>& projectDirs, const std::string& pch) {
  if (const FrontendApi* a = api()) return a->parse(path, text, flags, projectDirs, pch);
  ParseResult r;
  r.program.files.push_back(File{path, text});
  r.failed = true;
  r.error = loadProblem();
  return r;
}

PchResult buildPch(const std::string& header, const CompileFlags& flags, const std::string& output,
                   const std::vector<std::string>& projectDirs) {
  if (const FrontendApi* a = api()) return a->buildPch(header, flags, output, projectDirs);
  PchResult r;
  r.problem = loadProblem();
  return r;
}

}  // namespace shardlint::cxx
