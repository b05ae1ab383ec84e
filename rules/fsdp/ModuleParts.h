// What the parts of a module hold: whether an attribute or element of a module may hold parameters (a
// module, a parameter, nothing, or unknown), and which modules' parts can be listed. SL103 uses it for
// coverage: the parts of a module that no FSDP unit takes.
#pragma once
#include <string_view>

#include "fsdp/FsdpModel.h"

namespace shardlint::rules::fsdp {

// What an attribute or element of a module holds, for coverage.
enum class Holds {
  Nothing,  // no parameter: a plain object, a literal, a tensor, a torch.nn layer without parameters
  Unknown,  // unknown (an argument stored as an attribute, a method's result): not counted either way
  Param,    // an nn.Parameter of the module itself
  Module,   // a module, or an object of an unknown class, which may be one
};

// The strongest thing object `id` may hold: Param for an nn.Parameter, Module for a module or an object of an
// unknown class, Unknown for an argument or a method's result, Nothing for plain objects.
Holds classify(const Store& st, ObjId id, int depth = 0);
// torch.nn's Sequential, ModuleList and ModuleDict.
bool isContainerClass(std::string_view q);
// A module whose parts can be listed: a project nn.Module class (its attributes), a bare
// `nn.Module()` or a torch.nn container (attributes and elements).
bool enumerable(const semantic::Obj& o);

}  // namespace shardlint::rules::fsdp
