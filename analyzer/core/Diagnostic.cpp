#include "core/Diagnostic.h"

#include <algorithm>
#include <tuple>

namespace shardlint {

std::string_view severityName(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Info: return "info";
    case Severity::Hint: return "hint";
  }
  return "error";
}

std::string_view applicabilityName(Applicability a) { return a == Applicability::Safe ? "safe" : "unsafe"; }

Location makeLocation(const SourceFile& file, ByteRange range) {
  Location loc;
  loc.path = file.path;
  loc.range = range;
  loc.start = file.index.resolve(range.begin);
  loc.end = file.index.resolve(range.end);
  return loc;
}

Diagnostic makeDiagnostic(const RuleInfo& info, Location location, std::string message, std::vector<Note> notes) {
  Diagnostic d;
  d.code = std::string(info.code);
  d.name = std::string(info.name);
  d.severity = info.severity;
  d.location = std::move(location);
  d.message = std::move(message);
  d.notes = std::move(notes);
  return d;
}

void sortDiagnostics(std::vector<Diagnostic>& diags) {
  std::stable_sort(diags.begin(), diags.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.location.path, a.location.start.line, a.location.start.codepointColumn, a.code) <
           std::tie(b.location.path, b.location.start.line, b.location.start.codepointColumn, b.code);
  });
}

}  // namespace shardlint
