// Output formats. Every emitter reads the same Diagnostic model.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "core/Diagnostic.h"

namespace shardlint::output {

struct RunSummary {
  size_t filesChecked = 0;
  size_t filesWithFindings = 0;
};

struct TextStyle {
  bool color = false;
  bool summary = true;
};

// `path:line:col: severity: message [CODE name]`, notes indented below, then a summary line.
void writeText(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
               const TextStyle& style);
// One JSON object: {"version", "findings": [...], "summary": {...}}.
void writeJson(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
               std::string_view version);

}  // namespace shardlint::output
