// Output formats. Every emitter reads the same Diagnostic model.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
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
  bool showFixes = false;  // a `fix (safe|unsafe): ...` line under each finding that has one
  // Source snippets: the finding's line and a caret line under its range (text format). `source`
  // gives a file's text by the path findings use (null: none, no snippet).
  bool snippets = false;
  std::function<const std::string*(const std::string& path)> source;
};

// The snippet of `loc` in `text`: `  N | the line` and `    |     ^^^^` (tabs kept so the carets line
// up), or "" when the line is not in the text or is too long to show (over 1,000 bytes).
std::string snippet(const Location& loc, const std::string& text, bool color);

// `path:line:col: severity: message [CODE name]`, notes indented below, then a summary line.
void writeText(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
               const TextStyle& style);
// `No findings in N files.` / `Found N findings in M files (K checked).`
void writeSummary(std::ostream& os, size_t findings, const RunSummary& summary);

// A finding's fix as JSON ({"applicability", "message", "edits": [{path, line, column, end_line,
// end_column, content}]}; 1-based code point columns), or null.
nlohmann::json fixJson(const Diagnostic& d);

// One JSON object: {"version", "findings": [...], "summary": {...}}.
void writeJson(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
               std::string_view version);

// `path:line:col: CODE message`, one line per finding (no notes), then the summary.
void writeConcise(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
                  const TextStyle& style);

// GitHub Actions workflow commands: `::error file=...,line=...,col=...,endLine=...,endColumn=...,title=...::msg`.
void writeGithub(std::ostream& os, const std::vector<Diagnostic>& diags);

// A fingerprint per finding (rule, path, the text of its line; stable when unrelated lines move).
std::vector<std::string> fingerprints(const std::vector<Diagnostic>& diags);

// Where a rule's documentation lives (a file URI into the source tree the binary was built from).
std::string ruleDocUri(const RuleInfo& info);
std::string fileUri(const std::string& path);

// SARIF 2.1.0 (GitHub code scanning): rules from the catalog, 1-based UTF-16 columns,
// notes as relatedLocations, partialFingerprints stable when unrelated lines move.
void writeSarif(std::ostream& os, const std::vector<Diagnostic>& diags, const std::vector<RuleInfo>& rules,
                std::string_view version);

// One LSP Diagnostic: 0-based ranges in UTF-16 code units (or bytes with `utf8`); notes
// become relatedInformation with URIs from `uriOf`.
nlohmann::json lspDiagnostic(const Diagnostic& d, const RuleInfo* info, bool utf8,
                             const std::function<std::string(const std::string&)>& uriOf);

// LSP: a JSON array of PublishDiagnosticsParams (0-based UTF-16 ranges).
void writeLspJson(std::ostream& os, const std::vector<Diagnostic>& diags, const std::vector<RuleInfo>& rules);

}  // namespace shardlint::output
