// Python literals (dict / list / str / int / float / bool / None displays) as the
// same document model as YAML, so settings written in code (`fsdp_config={...}`)
// can be checked by the configuration rules.
#pragma once
#include <tree_sitter/api.h>

#include <string_view>

#include "config/Yaml.h"

namespace shardlint::config {

// Non-literal expressions become Null nodes (unknown); ranges are byte ranges in `src`.
// Displays nested deeper than kMaxConfigDepth are unknown past that depth.
YNode fromPythonLiteral(TSNode node, std::string_view src, size_t depth = 0);

}  // namespace shardlint::config
