// The compile flags of a C++ file: the nearest compile_commands.json entry (each database loaded once per
// path), else compile_flags.txt, else the command line's or the default flags; and the path helpers.
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/JSONCompilationDatabase.h>

#include <fstream>
#include <mutex>

#include "cxx/CxxFrontendImpl.h"

namespace shardlint::cxx {

// ------------------------------------------------------------------ flags

std::string normal(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal().string();
}

bool under(const std::string& path, const std::string& dir) {
  if (dir.empty() || path.size() <= dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
  return dir.back() == '/' || path[dir.size()] == '/';
}

namespace {

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

}  // namespace shardlint::cxx
