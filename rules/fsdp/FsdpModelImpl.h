// The private helpers the files of the FSDP call model share (FsdpModel.cpp and the files beside it):
// reading a call's arguments, optimizers recognised by use, accelerate, Fabric, transformers' Trainer and
// the lineage queries. Not for rules: they use FsdpModel.h.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fsdp/FsdpModel.h"
#include "semantic/Interpreter.h"

namespace shardlint::rules::fsdp {

inline bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
inline bool endsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
inline std::string_view lastComponent(std::string_view q) {
  auto dot = q.rfind('.');
  return dot == std::string_view::npos ? q : q.substr(dot + 1);
}

// A call's arguments and result (CallArguments.cpp).
std::optional<std::string> literalOf(const Store& st, const ValueSet* vs);
std::string shardingName(std::string_view written);
std::string shardingOf(const Store& st, const ValueSet* vs);
bool anyTagged(const Store& st, const ValueSet& vs, std::string_view tag);
ValueSet flattenModules(const Store& st, const ValueSet& vs);
ValueSet makeResult(semantic::Interp& in, const std::vector<ValueSet>& values, const semantic::Origin& origin);
std::string calleeText(const semantic::CallSite& site);
std::string_view writtenKeyword(const semantic::CallSite& site, size_t i);
std::pair<std::string, std::string> keywordText(const semantic::CallSite& site, std::string_view name);

// Optimizers recognised by use (OptimizerUse.cpp).
enum OptUse : unsigned { kStepped = 1, kZeroed = 2, kOptimizerKw = 4 };
void noteOptimizerUse(Store& st, const ValueSet& ids, unsigned signal, bool strong, std::string_view text = {});
void markMethodOptimizer(semantic::Interp& in, ObjId id);
void noteOptimizerUses(semantic::CallSite& site);

// accelerate's `prepare` and `prepare_model` (Accelerate.cpp).
bool handlePrepare(semantic::CallSite& site, const semantic::Obj& acc);
void noteFsdp2PrepareModel(semantic::CallSite& site, const semantic::Obj& acc);

// Fabric's `setup`, `setup_module` and `setup_optimizers` (Fabric.cpp).
bool handleFabric(semantic::CallSite& site, const semantic::Obj& fabric, const std::map<std::string, std::string>& facts);

// transformers' Trainer and TrainingArguments (HfTrainer.cpp).
bool isTrainingArguments(std::string_view q);
bool isHfTrainer(std::string_view q);
// Whether a call of the project class `cls` hands its keyword arguments to transformers' or trl's Trainer
// `__init__` as written: `cls` derives from one through project classes (of any module of the project), and
// each `__init__` on the way is absent or passes `**kwargs` on to `super().__init__` without touching
// `optimizers`.
bool passesToHfTrainer(semantic::Interp& in, const semantic::ClassDef* cls, int depth = 0);
std::string trainerFsdpSetting(const Store& st, const ValueSet* v);

// A whole object (Lineage.cpp).
bool isBareObject(const Store& st, ObjId id);

}  // namespace shardlint::rules::fsdp
