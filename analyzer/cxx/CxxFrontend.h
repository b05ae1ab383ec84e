// The C++ frontend: a translation unit parsed with Clang (LibTooling), reduced to the plain model
// of CxxModel.h. The Clang part is a separate shared module (libshardlint_cxx.so, built only when
// CMake finds Clang: SHARDLINT_CXX), loaded with dlopen the first time a C++ unit is parsed, so
// that runs without C++ files never load LLVM (about 100 ms and 60 MB at start-up). These
// functions live in the engine (CxxLoader.cpp) and forward to the module; without it `available()`
// is false.
#pragma once
#include <string>
#include <vector>

#include "cxx/CxxModel.h"

namespace shardlint::cxx {

// Whether this build has the C++ frontend.
bool available();

// A compilation command for one file: Clang's argument list without the compiler and without
// the file itself, and the folder relative paths in it are relative to.
struct CompileFlags {
  std::vector<std::string> args;
  std::string directory;
  // Where they came from: "compile_commands.json at PATH", "compile_flags.txt at PATH",
  // "the command line", "the default".
  std::string origin;
};

// The flags for `path`: the nearest compile_commands.json that has an entry for it (searched in
// the file's folder, each folder above it, and their `build/` subfolders), else the nearest
// compile_flags.txt, else `extra` (flags given after `--` on the command line) when non-empty,
// else `defaults`. `extra` is appended to flags found in a file too.
CompileFlags findFlags(const std::string& path, const std::vector<std::string>& extra,
                       const std::vector<std::string>& defaults);

struct Comment {
  uint32_t file = 0;
  uint32_t offset = 0;
  std::string text;  // including the `//` or `/*`
};

// An `#include` Clang could not resolve with the unit's flags (a header of a library that is not
// installed or not on the include path). Clang goes on without it.
struct MissingHeader {
  std::string name;  // as written: "argparse/argparse.hpp"
  // The `#include` in the main file that leads to it: the directive itself, or the include of the
  // header whose directive it is.
  ByteRange range;
  std::string via;  // "FILE:LINE" of the directive when it is not in the main file, else ""
};

// Where an error Clang reported lies: a project file of the program (its index) and a byte offset
// in it, or file -1 (a header outside the project, or no position).
struct ErrorSite {
  int32_t file = -1;
  uint32_t offset = 0;
};

struct ParseResult {
  Program program;
  std::vector<Comment> comments;  // in the project's files of the program
  // The first error Clang reported before any missing header (the translation unit does not
  // compile), if any. A missing header is not such an error: see `missing`.
  bool failed = false;
  std::string error;        // Clang's message
  uint32_t errorFile = 0;   // index in program.files (0 when it has no position in one)
  ByteRange errorRange;
  // The headers not found, each once, in the order Clang reported them: the first kMaxMissingHeaders,
  // and how many more there were.
  std::vector<MissingHeader> missing;
  size_t moreMissing = 0;
  // The errors Clang reported after the first missing header: they may be consequences of what the
  // header would have declared (unknown types, macros), so none of them is taken as the unit's
  // error. `laterErrorSites` has the first kMaxErrorSites of them.
  size_t laterErrors = 0;
  std::vector<ErrorSite> laterErrorSites;
  // What Clang's own allocators held at the end of the parse (the AST, the source manager, the
  // preprocessor, a precompiled header's buffers): most of the unit's memory.
  size_t clangBytes = 0;
  double seconds = 0;       // the parse and the model
};
constexpr size_t kMaxErrorSites = 10000;
constexpr size_t kMaxMissingHeaders = 100;

// Parses `text` as the file `path` with `flags`. Functions are modelled when they are defined in
// the main file or in a header under one of `projectDirs` (absolute, lexically normal); other
// headers are parsed for their declarations only (their function bodies are skipped).
// `pch`, when not empty, is a precompiled header (buildPch) of the headers the file includes
// first; Clang refuses one whose headers or flags changed, and the result then fails (the
// caller parses again without it). A header that is not found does not stop the parse (see
// ParseResult::missing). Thread-safe: each call has its own Clang instance.
ParseResult parse(const std::string& path, const std::string& text, const CompileFlags& flags,
                  const std::vector<std::string>& projectDirs, const std::string& pch = {});

struct PchResult {
  bool ok = false;
  std::string problem;  // why there is none, when !ok
  size_t clangBytes = 0;  // as ParseResult::clangBytes, for the headers' parse
  double seconds = 0;
};

// Precompiles the header file `header` with `flags` into `output` (written in place: the caller
// renames it into view). Function bodies are skipped, as in parse(). Refused (ok false) when the
// header does not compile or reaches a file under one of `projectDirs`: the project's own
// declarations must come from parsing, where the model sees them.
PchResult buildPch(const std::string& header, const CompileFlags& flags, const std::string& output,
                   const std::vector<std::string>& projectDirs);

// What the module exports (`shardlint_cxx_frontend_api`), and where the loader looks for it:
// $SHARDLINT_CXX_FRONTEND, next to the executable, then where the build put it.
struct FrontendApi {
  int version;
  CompileFlags (*findFlags)(const std::string&, const std::vector<std::string>&, const std::vector<std::string>&);
  ParseResult (*parse)(const std::string&, const std::string&, const CompileFlags&, const std::vector<std::string>&,
                       const std::string&);
  PchResult (*buildPch)(const std::string&, const CompileFlags&, const std::string&, const std::vector<std::string>&);
};
constexpr int kFrontendApiVersion = 3;
// Why the module could not be loaded ("" when it was, or has not been tried).
std::string loadProblem();

}  // namespace shardlint::cxx
