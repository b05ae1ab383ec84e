// The index of one module: its functions, classes and imports, collected once from
// its syntax tree and immutable afterwards. Summaries, the per-file interpretation
// and every analysis task of a run share it (see driver/ModuleTable.h).
#pragma once
#include <tree_sitter/api.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/SourceFile.h"

namespace shardlint::semantic {

struct ClassDef;
class Module;

struct FunctionDef {
  const Module* owner = nullptr;  // the module that defines it
  TSNode node{};                  // valid while the module's tree is (see Module::rebind)
  ByteRange span;                 // of the function_definition node
  ByteRange extent;               // with its decorators (the decorated_definition's), else `span`
  std::string name;
  std::string qualname;
  std::vector<std::string> params;  // positional-or-keyword names, `self` included for methods
  // Per parameter: its default when that is a constant a call site can bind (`True`, `False`,
  // `None`, a number, a plain string kept with its quotes: `"fsdp"`), else empty.
  std::vector<std::string> defaults;
  std::string kwargs;  // the name of its `**kwargs` parameter, if it has one
  const ClassDef* cls = nullptr;
  bool isStatic = false;
  bool nested = false;  // defined inside another function's body
};

struct ClassDef {
  const Module* owner = nullptr;
  TSNode node{};  // valid while the module's tree is
  ByteRange span;
  std::string name;
  std::string qualname;
  std::vector<std::string> bases;  // resolved qualified names of the bases
  std::vector<const ClassDef*> localBases;
  std::map<std::string, const FunctionDef*, std::less<>> methods;
  // A `@dataclass`: its fields in order (annotated class attributes), each with its default when that is
  // a constant a call site can bind (as FunctionDef::defaults), else empty.
  bool dataclass = false;
  std::vector<std::pair<std::string, std::string>> fields;
  const FunctionDef* findMethod(std::string_view name) const;
  // Qualified names of all bases, transitively through local classes.
  std::vector<std::string> allBases() const;
};

using ImportMap = std::map<std::string, std::string, std::less<>>;

class Module {
 public:
  // Collects the definitions and imports of `root` (the tree of `file`, which must
  // outlive the module). `moduleName` is the dotted module name ("pkg.train");
  // `isPackage` for an __init__.py (relative imports resolve against it). `fileId`
  // is the id Origins use for this file.
  Module(const SourceFile& file, TSNode root, std::string moduleName, uint32_t fileId = 0, bool isPackage = false);
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const SourceFile& file() const { return file_; }
  TSNode root() const { return root_; }
  const std::string& moduleName() const { return moduleName_; }
  uint32_t fileId() const { return fileId_; }
  bool isPackage() const { return isPackage_; }

  const FunctionDef* topFunction(std::string_view name) const;
  const ClassDef* topClass(std::string_view name) const;
  std::optional<std::string> importOf(std::string_view name) const;
  // Module-level name -> qualified name for imports ("FSDP" -> "torch...FullyShardedDataParallel").
  const ImportMap& imports() const { return imports_; }
  // Modules imported with `from m import *`.
  std::vector<std::string> starImports() const;
  // The innermost function whose body contains `range`.
  const FunctionDef* enclosingFunction(ByteRange range) const;
  const FunctionDef* findFunction(std::string_view qualname) const;
  const ClassDef* findClass(std::string_view qualname) const;
  // Every function and class, in source order (nested ones included).
  const std::vector<std::unique_ptr<FunctionDef>>& functions() const { return functions_; }
  const std::vector<std::unique_ptr<ClassDef>>& classes() const { return classes_; }
  // The names an import statement binds (relative imports resolved against this module).
  void collectImport(TSNode stmt, ImportMap& into) const;
  // Points every definition at `root`, a new parse of the same text (after the old tree
  // was freed to save memory). The definitions, and pointers to them, stay the same.
  void rebind(TSNode root);

 private:
  void collectDefinitions(TSNode body, const ClassDef* cls, const std::string& prefix, bool topLevel);

  const SourceFile& file_;
  TSNode root_;
  std::string moduleName_;
  uint32_t fileId_ = 0;
  bool isPackage_ = false;
  std::vector<std::unique_ptr<FunctionDef>> functions_;
  std::vector<std::unique_ptr<ClassDef>> classes_;
  std::map<std::string, const FunctionDef*, std::less<>> topFunctions_;  // by simple name
  std::map<std::string, const ClassDef*, std::less<>> topClasses_;
  ImportMap imports_;
};

// Finds the source and the module of a file id (Origin::file) for the rules.
class ModuleLookup {
 public:
  virtual ~ModuleLookup() = default;
  virtual const SourceFile* fileById(uint32_t id) const = 0;
  virtual const Module* moduleById(uint32_t id) const = 0;
};

}  // namespace shardlint::semantic
