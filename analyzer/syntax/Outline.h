// A Python file's outline from one tree-sitter parse: class headers (however many lines they
// span), imports, selected calls with their arguments, and selected string literals. It knows no
// framework: rules decide what the names mean. Cheaper than the semantic pass, for facts about
// every file of a project.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "syntax/TreeSitter.h"

namespace shardlint::syntax {

struct OutlineClass {
  std::string name;
  std::vector<std::string> bases;  // as written, whitespace removed (`nn.Module`); keyword arguments skipped
  uint32_t line = 0;               // 1-based
};
// `from module import name as alias` (module keeps its leading dots); `import module as alias` has
// an empty name; a wildcard import has name "*".
struct OutlineImport {
  std::string module;
  std::string name;
  std::string alias;
  uint32_t line = 0;
};
struct OutlineArgument {
  std::string keyword;  // empty for a positional argument; "*" / "**" for splats
  bool literal = false;  // a plain string, number, True, False or None
  bool string = false;   // a plain string literal (value holds its contents)
  std::string value;     // the contents of a string, the literal's text, or the expression's source text
};
struct OutlineCall {
  std::string callee;  // as written, whitespace removed (`AutoModel.from_pretrained`)
  std::vector<OutlineArgument> args;
  uint32_t line = 0;
};
struct OutlineString {
  std::string value;
  uint32_t line = 0;
};
struct Outline {
  std::vector<OutlineClass> classes;
  std::vector<OutlineImport> imports;
  std::vector<OutlineCall> calls;
  std::vector<OutlineString> strings;
};
struct OutlineRequest {
  std::vector<std::string_view> callNames;  // keep calls whose callee's last name is one of these
  std::vector<std::string_view> keywords;   // or that pass one of these keyword arguments
  bool (*wantString)(std::string_view) = nullptr;  // keep plain string literals it accepts
};

Outline outlinePython(std::string_view src, Parser& parser, const OutlineRequest& request);
// The same from a tree already parsed from `src`.
Outline outlineTree(std::string_view src, TSNode root, const OutlineRequest& request);

}  // namespace shardlint::syntax
