// What the parts of a module hold (ModuleParts.h): torch.nn layers without parameters, classes and
// functions that are never modules, and the classification of an attribute's or element's objects.
#include "fsdp/ModuleParts.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "fsdp/FsdpModelImpl.h"

namespace shardlint::rules::fsdp {

using semantic::ObjKind;

namespace {

bool parameterless(std::string_view q) {
  // torch.nn modules without parameters of their own.
  static const char* kNames[] = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "ReLU",
                                 "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
                                 "Identity", "Flatten", "Unflatten", "LeakyReLU", "ELU", "Hardswish",
                                 "Hardsigmoid", "Softplus", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
                                 "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
                                 "AdaptiveAvgPool3d", "AdaptiveMaxPool2d", "Upsample", "PixelShuffle",
                                 "CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "BCEWithLogitsLoss",
                                 "BCELoss", "SmoothL1Loss", "KLDivLoss", "CosineSimilarity"};
  if (!startsWith(q, "torch.nn.")) return false;
  std::string_view last = lastComponent(q);
  return std::find(std::begin(kNames), std::end(kNames), last) != std::end(kNames);
}

// Objects of classes and functions that are never modules: standard-library and numpy objects,
// devices, generators, meshes, and classes whose name says what they are (a `...Config`, `...Args`,
// `...Settings`, a tokenizer, a dataset). A project class in a module that was not read (it names
// no optimizer or FSDP API) is known only by its name too.
bool plainExternal(std::string_view q) {
  static const char* kTop[] = {
      "types",   "argparse", "collections", "dataclasses", "logging",  "threading",  "queue",    "enum",
      "pathlib", "os",       "sys",         "re",          "json",     "time",       "datetime", "random",
      "numpy",   "math",     "functools",   "itertools",   "typing",   "contextlib", "io",       "tempfile",
      "string",  "uuid",     "hashlib",     "inspect",     "warnings", "omegaconf",  "yaml",     "wandb",
      "tqdm",    "multiprocessing", "subprocess", "socket", "asyncio", "concurrent", "weakref", "operator",
      "shutil",  "glob",     "csv",         "pickle",      "statistics", "heapq",    "abc",      "dict",
      "list",    "set",      "tuple",       "str",         "int",      "float",      "bool",     "object",
      "frozenset", "bytes",  "bytearray",   "complex"};
  std::string_view top = q.substr(0, q.find('.'));
  if (std::find(std::begin(kTop), std::end(kTop), top) != std::end(kTop)) return true;
  for (const char* p : {"torch.cuda.", "torch.distributed.", "torch.utils.data.", "torch.amp.", "torch.profiler.",
                        "torch.backends."})
    if (startsWith(q, p)) return true;
  std::string_view last = lastComponent(q);
  if (last == "device" || last == "dtype" || last == "Generator" || last == "Size") return startsWith(q, "torch.");
  for (const char* suffix : {"Config", "Configuration", "Settings", "Options", "Args", "Arguments", "Namespace",
                             "Tokenizer", "TokenizerFast", "Processor", "Logger", "Dataset", "DataLoader", "Sampler",
                             "Collator"})
    if (endsWith(last, suffix)) return true;
  return false;
}

}  // namespace

Holds classify(const Store& st, ObjId id, int depth) {
  const semantic::Obj& o = st.obj(id);
  if (o.kind == ObjKind::Arg || o.kind == ObjKind::Global || o.kind == ObjKind::Derived) return Holds::Unknown;
  if (o.kind != ObjKind::Instance) return Holds::Nothing;  // a literal, a display, a function, a name
  if (o.hasTag("free_param")) return Holds::Param;
  for (const char* t : {"tensor", "optimizer", "dataloader", "scheduler", "accelerator", "fabric", "fsdp_plugin",
                        "builtin_test", "fsdp_wrapper"})
    if (o.hasTag(t)) return Holds::Nothing;  // an FSDP1 wrapper is its own unit
  if (o.cls) return isPlainClass(*o.cls) ? Holds::Nothing : Holds::Module;
  std::string_view q = o.name, last = lastComponent(q);
  if (last.empty() || parameterless(q)) return Holds::Nothing;
  bool lower = std::islower(static_cast<unsigned char>(last[0])) != 0;
  if (startsWith(q, "torch.nn.")) {
    if (!lower) return Holds::Module;
    return startsWith(q, "torch.nn.functional.") || startsWith(q, "torch.nn.init.") ? Holds::Nothing
                                                                                    : Holds::Unknown;
  }
  if (plainExternal(q)) return Holds::Nothing;
  // An unknown function applied to one module (`torch.compile(m)`) stands for it.
  if (lower && !o.inputs().empty() && o.inputs()[0].size() == 1 && depth < 8) {
    Holds inner = classify(st, o.inputs()[0][0], depth + 1);
    if (inner == Holds::Module || inner == Holds::Param) return inner;
  }
  // torch's own functions make tensors (`torch.arange`), except the loaders.
  if (lower && startsWith(q, "torch.") && q.find('.', 6) == std::string_view::npos && last != "load")
    return Holds::Nothing;
  return Holds::Module;
}

bool isContainerClass(std::string_view q) {
  std::string_view last = lastComponent(q);
  return startsWith(q, "torch.nn.") && (last == "Sequential" || last == "ModuleList" || last == "ModuleDict");
}

bool enumerable(const semantic::Obj& o) {
  if (o.kind != ObjKind::Instance || o.hasTag("fsdp_wrapper")) return false;
  if (o.cls) return !isPlainClass(*o.cls);
  return isContainerClass(o.name) || o.name == "torch.nn.Module" || o.name == "torch.nn.modules.module.Module";
}

}  // namespace shardlint::rules::fsdp
