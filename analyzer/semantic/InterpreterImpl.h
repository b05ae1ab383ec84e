// Internal to the interpreter (FileAnalysis.cpp, Interpreter.cpp and the Interp*.cpp files that define
// Interp's members, see Interpreter.cpp): the syntax helpers and the nesting guard its files share. Not
// part of the public header (semantic/Interpreter.h): nothing outside the interpreter includes it.
#pragma once
#include <tree_sitter/api.h>

#include <algorithm>
#include <vector>

#include "semantic/Model.h"
#include "syntax/TreeSitter.h"

namespace shardlint::semantic {

using syntax::Kind;
using syntax::PyKinds;

inline Kind kindOf(TSNode n) { return PyKinds::instance().kind(n); }

inline bool hasCall(TSNode n) {
  std::vector<TSNode> todo{n};
  while (!todo.empty()) {
    TSNode c = todo.back();
    todo.pop_back();
    Kind k = kindOf(c);
    if (k == Kind::call || k == Kind::lambda || k == Kind::await || k == Kind::named_expression ||
        k == Kind::list_comprehension || k == Kind::generator_expression)
      return true;
    for (TSNode ch : syntax::namedChildren(c)) todo.push_back(ch);
  }
  return false;
}

inline bool truthTestable(const Store& st, const ValueSet& vs) {
  return !vs.empty() && std::all_of(vs.begin(), vs.end(), [&](ObjId v) {
    ObjKind k = st.obj(v).kind;
    return k == ObjKind::Literal || k == ObjKind::Arg || k == ObjKind::Global;
  });
}

inline thread_local int tThreadEvalDepth = 0;  // eval/execStatement frames of every Interp on this thread
struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth) : d(++depth) { ++tThreadEvalDepth; }
  ~DepthGuard() {
    --d;
    --tThreadEvalDepth;
  }
};

}  // namespace shardlint::semantic
