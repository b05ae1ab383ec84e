// SARIF, GitHub annotations, LSP JSON and the concise format.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/SourceFile.h"
#include "output/Emitters.h"

#ifndef SHARDLINT_SOURCE_DIR
#define SHARDLINT_SOURCE_DIR "."
#endif

namespace shardlint::output {

using nlohmann::json;

namespace {

// A path as a URI path (RFC 3986): every byte but the unreserved ones and '/' percent-encoded, so
// spaces, newlines, '%' and non-ASCII survive.
std::string percentEncodePath(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace

std::string fileUri(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return "file://" + percentEncodePath((ec ? std::filesystem::path(path) : abs).lexically_normal().generic_string());
}

std::string ruleDocUri(const RuleInfo& info) {
  std::string file = std::string(info.code) + "_" + std::string(info.name) + ".md";
  for (char& c : file)
    if (c == '-') c = '_';
  return fileUri(std::string(SHARDLINT_SOURCE_DIR) + "/rules/" + file);
}

namespace {

// A path as a relative URI reference (SARIF artifactLocation.uri).
std::string relativeUri(const std::string& path) { return percentEncodePath(path); }

std::string percent(std::string_view s, bool property) {
  std::string out;
  for (char c : s) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else if (property && c == ':') out += "%3A";
    else if (property && c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

// The first paragraph under "## What it does" (or the summary).
std::string fullDescription(const RuleInfo& info) {
  std::string doc(info.doc);
  size_t at = doc.find("## What it does");
  if (at == std::string::npos) return std::string(info.summary);
  at = doc.find('\n', at);
  size_t end = doc.find("\n\n", at + 1);
  std::string para = doc.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
  for (char& c : para)
    if (c == '\n') c = ' ';
  return para.empty() ? std::string(info.summary) : para;
}

// The text of a line, trimmed, for fingerprints (files read once per run).
class LineCache {
 public:
  std::string line(const std::string& path, uint32_t line) {
    auto it = files_.find(path);
    if (it == files_.end()) {
      std::string bytes;
      readFileBytes(path, bytes);  // an unreadable file has no lines
      std::vector<std::string> lines;
      std::istringstream text(bytes);
      for (std::string l; std::getline(text, l);) lines.push_back(l);
      it = files_.emplace(path, std::move(lines)).first;
    }
    if (line >= it->second.size()) return {};
    std::string l = it->second[line];
    size_t b = l.find_first_not_of(" \t\r"), e = l.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : l.substr(b, e - b + 1);
  }

 private:
  std::map<std::string, std::vector<std::string>> files_;
};

// A file in the run's source root (SARIF artifactLocation).
json artifactLocation(const std::string& path) { return {{"uri", relativeUri(path)}, {"uriBaseId", "%SRCROOT%"}}; }

json region(const Location& l) {
  return {{"startLine", l.start.line + 1},
          {"startColumn", l.start.utf16Column + 1},
          {"endLine", l.end.line + 1},
          {"endColumn", l.end.utf16Column + 1}};
}

std::string sarifLevel(Severity s) {
  return s == Severity::Error ? "error" : s == Severity::Warning ? "warning" : "note";
}

}  // namespace

std::vector<std::string> fingerprints(const std::vector<Diagnostic>& diags) {
  // Stable across unrelated edits: the rule, the file and the text of the line, not its
  // number; repeated identical lines are told apart by their order.
  LineCache lines;
  std::map<std::string, int> occurrences;
  std::vector<std::string> out;
  for (const auto& d : diags) {
    std::string key = d.code + "|" + d.location.path + "|" + lines.line(d.location.path, d.location.start.line);
    int nth = occurrences[key]++;
    out.push_back(hashHex(contentHash(key)) + ":" + std::to_string(nth + 1));
  }
  return out;
}

void writeConcise(std::ostream& os, const std::vector<Diagnostic>& diags, const RunSummary& summary,
                  const TextStyle& style) {
  for (const auto& d : diags)
    os << d.location.path << ":" << d.location.start.line + 1 << ":" << d.location.start.codepointColumn + 1 << ": "
       << d.code << " " << d.message << "\n";
  if (style.summary) writeSummary(os, diags.size(), summary);
}

void writeGithub(std::ostream& os, const std::vector<Diagnostic>& diags) {
  for (const auto& d : diags) {
    const Location& l = d.location;
    std::string cmd = d.severity == Severity::Error ? "error" : d.severity == Severity::Warning ? "warning" : "notice";
    os << "::" << cmd << " file=" << percent(l.path, true) << ",line=" << l.start.line + 1;
    if (l.start.line == l.end.line)  // col/endColumn only on single-line ranges
      os << ",col=" << l.start.codepointColumn + 1 << ",endColumn=" << l.end.codepointColumn + 1;
    os << ",endLine=" << l.end.line + 1 << ",title=" << percent(d.code + " " + d.name, true) << "::";
    std::string msg = d.message;
    for (const auto& n : d.notes)
      msg += "\n" + n.location.path + ":" + std::to_string(n.location.start.line + 1) + ":" +
             std::to_string(n.location.start.codepointColumn + 1) + ": note: " + n.message;
    os << percent(msg, false) << "\n";
  }
}

void writeSarif(std::ostream& os, const std::vector<Diagnostic>& diags, const std::vector<RuleInfo>& rules,
                std::string_view version) {
  json jrules = json::array();
  std::map<std::string, size_t> index;
  for (const auto& r : rules) {
    index[std::string(r.code)] = jrules.size();
    jrules.push_back({{"id", std::string(r.code)},
                      {"name", std::string(r.name)},
                      {"shortDescription", {{"text", std::string(r.summary)}}},
                      {"fullDescription", {{"text", fullDescription(r)}}},
                      {"help", {{"text", std::string(r.doc)}, {"markdown", std::string(r.doc)}}},
                      {"helpUri", ruleDocUri(r)},
                      {"defaultConfiguration", {{"level", sarifLevel(r.severity)}}},
                      {"properties", {{"tags", json::array({"correctness", std::string(r.code.substr(0, 3)) + "xx"})}}}});
  }
  std::vector<std::string> prints = fingerprints(diags);
  json results = json::array();
  for (const auto& d : diags) {
    auto physical = [](const Location& l) {
      return json{{"artifactLocation", artifactLocation(l.path)}, {"region", region(l)}};
    };
    json related = json::array();
    int id = 1;
    for (const auto& n : d.notes)
      related.push_back({{"id", id++}, {"physicalLocation", physical(n.location)}, {"message", {{"text", n.message}}}});
    std::string fp = prints[static_cast<size_t>(&d - diags.data())];
    json result = {{"ruleId", d.code},
                   {"level", sarifLevel(d.severity)},
                   {"message", {{"text", d.message}}},
                   {"locations", json::array({{{"physicalLocation", physical(d.location)}}})},
                   {"partialFingerprints", {{"primaryLocationLineHash", fp}}}};
    if (auto it = index.find(d.code); it != index.end()) result["ruleIndex"] = it->second;
    if (!related.empty()) result["relatedLocations"] = related;
    if (d.fix && !d.fix->edits.empty()) {
      // SARIF's fix object: each edit deletes a region (empty for an insertion) and inserts text.
      // All edits of a fix are in one file (core/Diagnostic.h). SARIF has no applicability; a
      // property says whether `--fix` applies it (safe) or only `--unsafe-fixes` does.
      json replacements = json::array();
      for (const auto& e : d.fix->edits)
        replacements.push_back({{"deletedRegion", region(e.location)}, {"insertedContent", {{"text", e.text}}}});
      json change = {{"artifactLocation", artifactLocation(d.fix->edits.front().location.path)},
                     {"replacements", replacements}};
      result["fixes"] = json::array(
          {{{"description", {{"text", d.fix->title}}},
            {"artifactChanges", json::array({change})},
            {"properties", {{"applicability", std::string(applicabilityName(d.fix->applicability))}}}}});
    }
    results.push_back(std::move(result));
  }
  std::error_code ec;
  std::string root = fileUri(std::filesystem::current_path(ec).string());
  if (root.empty() || root.back() != '/') root += "/";
  json log = {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
              {"version", "2.1.0"},
              {"runs",
               json::array({{{"tool",
                              {{"driver",
                                {{"name", "shardlint"},
                                 {"version", std::string(version)},
                                 {"semanticVersion", std::string(version)},
                                 {"informationUri", fileUri(std::string(SHARDLINT_SOURCE_DIR) + "/README.md")},
                                 {"rules", jrules}}}}},
                             {"originalUriBaseIds", {{"%SRCROOT%", {{"uri", root}}}}},
                             {"columnKind", "utf16CodeUnits"},
                             {"results", results}}})}};
  os << log.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

json lspDiagnostic(const Diagnostic& d, const RuleInfo* info, bool utf8,
                   const std::function<std::string(const std::string&)>& uriOf) {
  auto position = [&](const LineCol& lc) {
    return json{{"line", lc.line}, {"character", utf8 ? lc.byteColumn : lc.utf16Column}};
  };
  auto range = [&](const Location& l) { return json{{"start", position(l.start)}, {"end", position(l.end)}}; };
  int severity = d.severity == Severity::Error ? 1 : d.severity == Severity::Warning ? 2
                 : d.severity == Severity::Info ? 3 : 4;
  json diag = {{"range", range(d.location)},
               {"severity", severity},
               {"code", d.code},
               {"source", "shardlint"},
               {"message", d.message}};
  if (info) diag["codeDescription"] = {{"href", ruleDocUri(*info)}};
  json related = json::array();
  for (const auto& n : d.notes)
    related.push_back({{"location", {{"uri", uriOf(n.location.path)}, {"range", range(n.location)}}},
                       {"message", n.message}});
  if (!related.empty()) diag["relatedInformation"] = related;
  return diag;
}

void writeLspJson(std::ostream& os, const std::vector<Diagnostic>& diags, const std::vector<RuleInfo>& rules) {
  std::map<std::string, const RuleInfo*> byCode;
  for (const auto& r : rules) byCode[std::string(r.code)] = &r;
  std::map<std::string, json> byFile;
  std::vector<std::string> order;
  for (const auto& d : diags) {
    std::string uri = fileUri(d.location.path);
    if (!byFile.count(uri)) order.push_back(uri), byFile[uri] = json::array();
    auto it = byCode.find(d.code);
    byFile[uri].push_back(lspDiagnostic(d, it == byCode.end() ? nullptr : it->second, false, fileUri));
  }
  json out = json::array();
  for (const auto& uri : order) out.push_back({{"uri", uri}, {"diagnostics", byFile[uri]}});
  os << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

}  // namespace shardlint::output
