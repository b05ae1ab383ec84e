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
    if (style.snippets && style.source)
      if (const std::string* text = style.source(d.location.path)) os << snippet(d.location, *text, style.color);
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

std::string snippet(const Location& loc, const std::string& text, bool color) {
  uint32_t begin = loc.range.begin;
  if (begin > text.size() || loc.start.byteColumn > begin) return "";
  size_t lineStart = begin - loc.start.byteColumn;
  if (lineStart > 0 && text[lineStart - 1] != '\n') return "";  // not the line the location names
  size_t lineEnd = text.find('\n', lineStart);
  if (lineEnd == std::string::npos) lineEnd = text.size();
  if (lineEnd > lineStart && text[lineEnd - 1] == '\r') --lineEnd;
  if (lineEnd - lineStart > 1000) return "";
  std::string_view line(text.data() + lineStart, lineEnd - lineStart);
  auto isContinuation = [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) == 0x80; };
  std::string pad;
  for (size_t i = 0; i < loc.start.byteColumn && i < line.size(); ++i)
    if (line[i] == '\t') pad += '\t';
    else if (!isContinuation(line[i])) pad += ' ';
  size_t end = std::min<size_t>(loc.range.end >= begin ? loc.range.end : begin, lineEnd) - lineStart;
  size_t carets = 0;
  for (size_t i = loc.start.byteColumn; i < end && i < line.size(); ++i) carets += !isContinuation(line[i]);
  std::string number = std::to_string(loc.start.line + 1);
  std::string gutter(number.size(), ' ');
  std::string out = "  " + number + " | " + std::string(line) + "\n";
  out += "  " + gutter + " | " + pad + (color ? kRed : "") + std::string(std::max<size_t>(carets, 1), '^') +
         (color ? kReset : "") + "\n";
  return out;
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
