// How verdicts are shown: the one-line verdict text and the note it becomes on a finding, the
// "probe" object of `--format json`, and the controls' section of the text formats (Probe.h).
#include "Probe.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "ProbeImpl.h"

namespace shardlint::probe {

using nlohmann::json;

std::string verdictText(const ProbeResult& r) {
  std::string s = "probe: " + std::string(verdictName(r.verdict)) + " \u2014 " + r.evidence;
  std::vector<std::string> ctx;
  if (!r.backend.empty()) ctx.push_back(r.backend);
  if (r.worldSize > 0) ctx.push_back("world size " + std::to_string(r.worldSize));
  if (!r.torchVersion.empty()) ctx.push_back("torch " + r.torchVersion);
  if (!r.accelerateVersion.empty()) ctx.push_back("accelerate " + r.accelerateVersion);
  ctx.push_back(fmtSeconds(r.elapsedSeconds));
  s += " [";
  for (size_t i = 0; i < ctx.size(); ++i) s += (i ? ", " : "") + ctx[i];
  return s + "]";
}

void attachVerdict(Diagnostic& d, const ProbeResult& r) { d.notes.push_back({d.location, verdictText(r)}); }

namespace {
json verdictObject(const ProbeResult& r) {
  double secs = std::round(r.elapsedSeconds * 1000.0) / 1000.0;
  json j = {{"verdict", std::string(verdictName(r.verdict))},
            {"evidence", r.evidence},
            {"backend", r.backend.empty() ? json(nullptr) : json(r.backend)},
            {"world_size", r.worldSize},
            {"torch_version", r.torchVersion.empty() ? json(nullptr) : json(r.torchVersion)},
            {"accelerate_version", r.accelerateVersion.empty() ? json(nullptr) : json(r.accelerateVersion)},
            {"elapsed_seconds", secs}};
  if (r.replay) {
    const ReplaySpec& s = *r.replay;
    j["replay"] = {{"shape", s.shape},
                   {"wrap_api", s.wrapApi},
                   {"use_orig_params", s.wrapApi == "fully_shard" || s.wrapApi == "trainer" ? json(nullptr) : json(s.useOrigParams)},
                   {"fsdp_version", s.wrapApi == "accelerate" || (s.wrapApi == "trainer" && s.fsdpFrom == "launcher")
                                        ? json(s.fsdpVersion)
                                        : json(nullptr)},
                   {"joint", s.wrapApi == "fabric" ? json(s.joint) : json(nullptr)},
                   {"replacement", s.replacement.empty() ? json(nullptr) : json(s.replacement)},
                   {"fsdp_from", s.wrapApi == "trainer" ? json(s.fsdpFrom) : json(nullptr)},
                   {"optimizer", s.optimizer},
                   {"shared_with", r.sharedWith.empty() ? json(nullptr) : json(r.sharedWith)}};
  }
  return j;
}
std::string findingKey(const std::string& code, const std::string& path, long line, long column,
                       const std::string& message) {
  return code + "\x1f" + path + "\x1f" + std::to_string(line) + "\x1f" + std::to_string(column) + "\x1f" + message;
}
}  // namespace

std::string verdictJson(const ProbeResult& r) { return verdictObject(r).dump(); }

std::string addProbeToJson(const std::string& text, const std::vector<Diagnostic>& diags,
                           const std::map<size_t, ProbeResult>& results, const std::vector<Diagnostic>& controls,
                           const std::map<size_t, ProbeResult>& controlResults) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("findings") || !doc["findings"].is_array()) return text;
  std::map<std::string, const ProbeResult*> byKey;
  for (const auto& [i, r] : results)
    if (i < diags.size()) {
      const Diagnostic& d = diags[i];
      byKey[findingKey(d.code, d.location.path, static_cast<long>(d.location.start.line) + 1,
                       static_cast<long>(d.location.start.codepointColumn) + 1, d.message)] = &r;
    }
  for (auto& f : doc["findings"]) {
    if (!f.is_object()) continue;
    auto key = findingKey(f.value("code", ""), f.value("path", ""), f.value("line", 0L), f.value("column", 0L),
                          f.value("message", ""));
    auto it = byKey.find(key);
    if (it != byKey.end()) f["probe"] = verdictObject(*it->second);
  }
  if (!controls.empty()) {
    // The patterns the rules found correct, each with the verdict of its replay (--controls).
    json list = json::array();
    for (size_t i = 0; i < controls.size(); ++i) {
      const Diagnostic& c = controls[i];
      json item = {{"code", c.code},
                   {"path", c.location.path},
                   {"line", c.location.start.line + 1},
                   {"column", c.location.start.codepointColumn + 1},
                   {"message", c.message},
                   {"facts", c.facts}};
      if (auto it = controlResults.find(i); it != controlResults.end()) item["probe"] = verdictObject(it->second);
      list.push_back(std::move(item));
    }
    doc["controls"] = std::move(list);
  }
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void writeControls(std::ostream& out, const std::vector<Diagnostic>& controls,
                   const std::map<size_t, ProbeResult>& controlResults) {
  out << "\nControls (patterns the rules found correct, replayed to check that silence):\n";
  for (size_t i = 0; i < controls.size(); ++i) {
    const Diagnostic& c = controls[i];
    out << c.location.path << ":" << c.location.start.line + 1 << ":" << c.location.start.codepointColumn + 1 << ": "
        << c.code << " control: " << c.message;
    if (auto it = controlResults.find(i); it != controlResults.end()) out << " [" << verdictText(it->second) << "]";
    out << "\n";
  }
}

}  // namespace shardlint::probe
