// The C++ semantic model: what the C++ frontend (CxxFrontend, Clang LibTooling) extracts from a
// translation unit, as plain data. It knows no library: rules interpret the qualified names.
//
// A program is a list of functions with bodies (those defined in the project's own files: the
// translation unit's main file and the headers it includes from outside the system directories).
// Each function has its events in evaluation order (a call's arguments before the call), with
// access paths for the objects involved. Paths see through pointers and handles: `net->fc`,
// `(*net).fc` and `net.get()->fc` are the same path, rooted at the local `net`.
//
// This header does not need Clang: rules and the driver include it in every build.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/SourceFile.h"

namespace shardlint::cxx {

// Where an object lives: a local variable (or function parameter) of the function, the object
// the member function runs on (`this`), a global, or something the model does not follow.
struct Path {
  enum class Root : uint8_t { None, Local, Param, This, Global };
  Root root = Root::None;
  std::string var;                   // Local/Global: a unique id of the variable; Param: its index as text
  std::string name;                  // the variable as written ("net", "this")
  std::vector<std::string> members;  // field ids ("Net::fc") from the root outwards
  std::vector<std::string> memberNames;  // the same fields as written ("fc")

  bool known() const { return root != Root::None; }
  // Same root and same members.
  bool operator==(const Path& o) const { return root == o.root && var == o.var && members == o.members; }
  // This path is `base` or lies inside it (`net->encoder->fc` within `net`).
  bool within(const Path& base) const;
  // "net->fc" as the source would spell it (members joined with "->").
  std::string render() const;
};

struct Event {
  enum class Kind : uint8_t {
    Call,       // a call of a function or member function
    Construct,  // an object built (variable, temporary, `new`, `make_shared<T>`/`make_unique<T>`)
    Assign,     // `target = value` where the value is a path (an alias): `target` now names `value`
  };
  Kind kind = Kind::Call;
  uint32_t file = 0;  // index into Program::files
  ByteRange range;    // the whole call / construction
  // Call: the callee's qualified name ("torch::nn::Module::register_module"); Construct: the
  // constructed type's qualified name ("torch::optim::Adam"), without template arguments.
  std::string callee;
  std::string method;  // the callee's unqualified name ("register_module"); Construct: the type's
  Path receiver;       // member calls: the object it is called on (implicit `this` included)
  // Per argument: the events nested in it (indexes into Function::events; they come earlier), and
  // its path when the argument is an object that has one.
  std::vector<std::vector<uint32_t>> argEvents;
  std::vector<Path> argPaths;
  // Where the result goes: the variable it initialises, the field a constructor initialises, the
  // left side of an assignment. Unknown otherwise (a temporary, an argument).
  Path result;
  int32_t target = -1;  // Call: the index in Program::functions of a callee defined in the project
};

struct Function {
  std::string qualifiedName;  // "Net::build", "train"
  std::string name;           // "build"
  std::string cls;            // the class of a member function ("Net"), else empty
  bool constructor = false;
  uint32_t file = 0;
  ByteRange range;  // the definition
  ByteRange nameRange;
  std::vector<std::string> params;  // parameter names
  std::vector<Event> events;        // a constructor's member initialisers first, then its body
};

struct File {
  std::string path;  // as given to the frontend (the main file) or as Clang found it (headers)
  std::string text;  // the bytes the positions refer to
};

struct Program {
  std::vector<File> files;  // files[0] is the translation unit's main file
  std::vector<Function> functions;
};

}  // namespace shardlint::cxx
