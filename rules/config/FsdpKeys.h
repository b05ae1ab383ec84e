// Data tables of the FSDP configuration keys that accelerate (config file /
// `accelerate launch` / FullyShardedDataParallelPlugin) and HF TrainingArguments
// (fsdp_config) read, with per-version meaning and defaults. Sources and the
// versions read are in fsdpKeysSource() and in FsdpKeys.cpp.
#pragma once
#include <string_view>
#include <vector>
namespace shardlint::rules::config {
enum class ValueType { Bool, Int, Float, String, Enum, ClassList, Any };
struct FsdpKey {
  std::string_view name;            // as written in the YAML, e.g. "fsdp_sharding_strategy"
  bool fsdp1;                        // meaningful with fsdp_version 1
  bool fsdp2;                        // meaningful with fsdp_version 2
  ValueType type;
  std::vector<std::string_view> values;  // valid values for Enum (as the consumer accepts them; note case rules in `note`)
  std::string_view launcherDefault;  // what `accelerate launch` uses when the key is absent ("" if none)
  std::string_view pluginDefault;    // what FullyShardedDataParallelPlugin() built in code uses when not given ("" if none)
  std::string_view note;             // one line: how the consumer treats it (ignored/warned/ValueError on the other version, etc.)
};
// Keys accelerate reads inside `fsdp_config:` of an accelerate config file (both versions), including fsdp_version itself.
const std::vector<FsdpKey>& accelerateFsdpKeys();
// Deprecated or renamed accelerate keys that are silently ignored now, with the replacement (e.g. fsdp_backward_prefetch_policy -> fsdp_backward_prefetch),
// and the accelerate releases between which the launcher read them (rules compare them with the project's pin).
struct RenamedKey {
  std::string_view old;
  std::string_view replacement;
  std::string_view note;
  // The first accelerate release whose launcher no longer reads `old` ("1.0.0"); "" when no release
  // read it from a config file (it is ignored whatever the version).
  std::string_view ignoredSince;
  // The first release that reads `replacement` ("0.26.0"; before it `old` was the only name); "" when
  // `replacement` is no config key or has always been read.
  std::string_view replacementSince;
  // Where the two versions were read (tags and commits of accelerate), for the rule's documentation.
  std::string_view versionSource;
};
const std::vector<RenamedKey>& accelerateRenamedKeys();
// Top-level keys of an accelerate config file (compute_environment, distributed_type, mixed_precision, num_processes, deepspeed_config, fsdp_config, ...).
const std::vector<std::string_view>& accelerateTopLevelKeys();
// Keys of HF TrainingArguments.fsdp_config (JSON or dict), with or without the `fsdp_` prefix as transformers accepts them (list the canonical spelling; note the prefix rule in the .cpp comment).
const std::vector<FsdpKey>& trainerFsdpConfigKeys();
// The entry of `table` named `name` (exact spelling), or nullptr.
const FsdpKey* findKey(const std::vector<FsdpKey>& table, std::string_view name);
// Where the tables come from: source files, commits/versions.
std::string_view fsdpKeysSource();
}
