// The C++ frontend's entry points in a build without Clang (SHARDLINT_CXX off or Clang not found).
#include "cxx/CxxFrontend.h"

namespace shardlint::cxx {

bool available() { return false; }

CompileFlags findFlags(const std::string&, const std::vector<std::string>& extra, const std::vector<std::string>&) {
  return CompileFlags{extra, {}, "the command line"};
}

ParseResult parse(const std::string& path, const std::string& text, const CompileFlags&,
                  const std::vector<std::string>&) {
  ParseResult r;
  r.program.files.push_back(File{path, text});
  r.failed = true;
  r.error = "the C++ frontend is not built";
  return r;
}

}  // namespace shardlint::cxx
