// Text for fixes in configuration settings, written the way the file writes them: a YAML or JSON
// file, a Python literal (`fsdp_config={...}` in code), or a launch command's flags.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "Registry.h"

namespace shardlint::rules::config {
using shardlint::config::YNode;

enum class Syntax { Yaml, Json, Python, Shell };
Syntax syntaxOf(const SourceFile& file);

// The source text of a string scalar `value` that replaces `like` (a scalar of `file`): quoted the
// way `like` is (double, single) or plain where that reads back as the same string; nullopt when
// no spelling is certain (a YAML block scalar, a value that needs escapes a shell would not take).
std::optional<std::string> stringText(const SourceFile& file, const YNode& like, std::string_view value);

// The whole lines holding the mapping entry `key: value` of a YAML file, with their line break,
// when nothing else is on them (a block mapping entry): what removing the entry deletes.
std::optional<ByteRange> yamlEntryLines(const SourceFile& file, const YNode& key, const YNode& value);

}  // namespace shardlint::rules::config
