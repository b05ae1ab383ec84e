// What a configuration file is, judged by its content (never by its name), and
// where its FSDP settings are.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/Yaml.h"
#include "core/SourceFile.h"

namespace shardlint::rules::config {

using shardlint::config::Resolved;
using shardlint::config::YNode;

// Accelerate: an accelerate config file; Axolotl: an axolotl YAML; TrainerJson: a Trainer
// fsdp_config (JSON file or `TrainingArguments(fsdp_config={...})`); LaunchFlags: the
// `--fsdp_*` flags of an `accelerate launch` command; Plugin: the keyword arguments of
// `FullyShardedDataParallelPlugin(...)` in code.
enum class Role { Accelerate, Axolotl, TrainerJson, LaunchFlags, Plugin };

struct FsdpSettings {
  Role role;
  const YNode* root = nullptr;
  const YNode* section = nullptr;  // the mapping holding the fsdp keys (fsdp_config, or the JSON root)
  bool enabled = false;            // accelerate: distributed_type FSDP; axolotl: fsdp list / fsdp_version; JSON: always
  int version = 1;                 // fsdp_version (1 when absent)
  const YNode* versionNode = nullptr;

  // A key of the section, with or without the `fsdp_` prefix ("min_num_params" finds
  // `fsdp_min_num_params` too). The last occurrence wins, as in PyYAML / json.
  const std::pair<YNode, YNode>* entry(std::string_view bareName) const;
  const YNode* value(std::string_view bareName) const {
    auto* e = entry(bareName);
    return e ? &e->second : nullptr;
  }
  std::string_view roleName() const;
};

// The FSDP settings of one document, or nothing when it is not an FSDP config.
std::optional<FsdpSettings> detectFsdp(const shardlint::SourceFile& file, const YNode& doc);

// `TrainingArguments` and the TRL config classes that subclass it, by the name a call writes.
const std::vector<std::string_view>& trainingArgumentsClasses();
// The words of the Trainer's `fsdp` argument (`"full_shard auto_wrap"`), as transformers spells them.
const std::vector<std::string_view>& trainerFsdpOptions();

// Helpers over resolved scalars.
std::optional<bool> asBool(const YNode* n);
std::string asString(const YNode* n);  // the scalar text ("" for non-scalars)
std::string_view bareKey(std::string_view key);  // "fsdp_min_num_params" -> "min_num_params"
// Levenshtein distance, for "did you mean" suggestions.
size_t editDistance(std::string_view a, std::string_view b);

}  // namespace shardlint::rules::config
