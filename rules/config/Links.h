// How accelerate configs reach scripts: the facts an accelerate FSDP config gives
// the Python analysis, and `accelerate launch` commands in shell scripts/Makefiles.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

#include "driver/Rule.h"

namespace shardlint::rules::config {

// {"accelerate_fsdp": "1"|"2", "use_orig_params": "true"|"false"|"" (absent),
//  "config": path, "config_line"/"config_col": where the deciding key is (1-based),
//  "config_value": the written `use_orig_params` value, when there is one (encodeLocation),
//  "sharding_strategy": the written `fsdp_sharding_strategy`, when there is one}.
Facts accelerateConfigFacts(const SourceFile& file, const std::vector<shardlint::config::YNode>& docs);
std::vector<LaunchLink> accelerateLaunchLinks(const SourceFile& file);
// Words that make a script worth analysing under these facts: accelerate scripts when an
// accelerate config or the fsdp-version setting applies; configured helper names.
std::vector<std::string> factWords(const Facts& facts);

// A location in a config as one fact value (the path is the "config" fact), so that a finding in a
// script can carry a fix that edits the config; decodeLocation gives nullopt for a malformed value.
std::string encodeLocation(const SourceFile& file, ByteRange range);
std::optional<Location> decodeLocation(const std::string& path, std::string_view value);

}  // namespace shardlint::rules::config
