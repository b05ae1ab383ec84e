#include "output/Emitters.h"

#include <map>
#include <nlohmann/json.hpp>

namespace shardlint::output {

namespace {
const char* kBold = "\x1b[1m";
const char* kRed = "\x1b[31m";
const char* kCyan = "\x1b[36m";
const char* kReset = "\x1b[0m";

std::string position(const Location& l) {
  return l.path + ":" + std::to_string(l.start.line + 1) + ":" + std::to_string(l.start.codepointColumn + 1);
}
}  // namespace

void writeText(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
               const TextStyle& style) {
  auto c = [&](const char* code) { return style.color ? code : ""; };
  for (const auto& d : diags) {
    os << c(kBold) << position(d.location) << ":" << c(kReset) << " " << c(kRed) << severityName(d.severity)
       << c(kReset) << ": " << d.message << " [" << d.code << " " << d.name << "]\n";
    for (const auto& n : d.notes)
      os << "  " << c(kBold) << position(n.location) << ":" << c(kReset) << " " << c(kCyan) << "note" << c(kReset)
         << ": " << n.message << "\n";
    if (style.showFixes && d.fix)
      os << "  " << c(kCyan) << "fix" << c(kReset) << " (" << applicabilityName(d.fix->applicability)
         << (d.fix->applicability == Applicability::Safe ? ", --fix" : ", --unsafe-fixes") << "): " << d.fix->title
         << "\n";
  }
  if (style.summary) writeSummary(os, diags.size(), summary);
}

void writeSummary(std::ostream& os, size_t findings, const RunSummary& summary) {
  if (findings == 0) {
    os << "No findings in " << summary.filesChecked << (summary.filesChecked == 1 ? " file" : " files") << ".\n";
    return;
  }
  os << "Found " << findings << (findings == 1 ? " finding" : " findings") << " in "
     << summary.filesWithFindings << (summary.filesWithFindings == 1 ? " file" : " files") << " ("
     << summary.filesChecked << " checked).\n";
}

nlohmann::json fixJson(const Diagnostic& d) {
  using nlohmann::json;
  if (!d.fix) return nullptr;
  json edits = json::array();
  for (const auto& e : d.fix->edits)
    edits.push_back({{"path", e.location.path},
                     {"line", e.location.start.line + 1},
                     {"column", e.location.start.codepointColumn + 1},
                     {"end_line", e.location.end.line + 1},
                     {"end_column", e.location.end.codepointColumn + 1},
                     {"content", e.text}});
  return {{"applicability", std::string(applicabilityName(d.fix->applicability))},
          {"message", d.fix->title},
          {"edits", edits}};
}

void writeJson(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
               std::string_view version) {
  using nlohmann::json;
  json findings = json::array();
  std::map<std::string, size_t> byCode;
  for (const auto& d : diags) {
    json notes = json::array();
    for (const auto& n : d.notes)
      notes.push_back({{"path", n.location.path},
                       {"line", n.location.start.line + 1},
                       {"column", n.location.start.codepointColumn + 1},
                       {"message", n.message}});
    findings.push_back({{"code", d.code},
                        {"name", d.name},
                        {"severity", std::string(severityName(d.severity))},
                        {"path", d.location.path},
                        {"line", d.location.start.line + 1},
                        {"column", d.location.start.codepointColumn + 1},
                        {"end_line", d.location.end.line + 1},
                        {"end_column", d.location.end.codepointColumn + 1},
                        {"message", d.message},
                        {"notes", notes},
                        {"fix", fixJson(d)}});
    ++byCode[d.code];
  }
  json out = {{"version", std::string(version)},
              {"findings", findings},
              {"summary",
               {{"files_checked", summary.filesChecked},
                {"files_with_findings", summary.filesWithFindings},
                {"findings", diags.size()},
                {"by_code", byCode}}}};
  os << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

}  // namespace shardlint::output
