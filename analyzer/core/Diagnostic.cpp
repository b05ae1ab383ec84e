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

Location makeLocation(const SourceFile& file, ByteRange range) {
  Location loc;
  loc.path = file.path;
  loc.range = range;
  loc.start = file.index.resolve(range.begin);
  loc.end = file.index.resolve(range.end);
  return loc;
}

void sortDiagnostics(std::vector<Diagnostic>& diags) {
  std::stable_sort(diags.begin(), diags.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.location.path, a.location.start.line, a.location.start.codepointColumn, a.code) <
           std::tie(b.location.path, b.location.start.line, b.location.start.codepointColumn, b.code);
  });
}

}  // namespace shardlint
