#include "driver/ResultCache.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "core/AtomicWrite.h"
#include "driver/ModuleTable.h"

namespace shardlint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kFormat = 2;       // bump when the file layout changes
constexpr size_t kMaxItems = 50000;

json lineCol(const LineCol& lc) { return {lc.line, lc.byteColumn, lc.codepointColumn, lc.utf16Column}; }
LineCol lineColFrom(const json& j) {
  return LineCol{j.at(0).get<uint32_t>(), j.at(1).get<uint32_t>(), j.at(2).get<uint32_t>(), j.at(3).get<uint32_t>()};
}
json location(const Location& l) {
  return {{"path", l.path}, {"range", {l.range.begin, l.range.end}}, {"start", lineCol(l.start)}, {"end", lineCol(l.end)}};
}
Location locationFrom(const json& j) {
  Location l;
  l.path = j.at("path").get<std::string>();
  l.range = ByteRange{j.at("range").at(0).get<uint32_t>(), j.at("range").at(1).get<uint32_t>()};
  l.start = lineColFrom(j.at("start"));
  l.end = lineColFrom(j.at("end"));
  return l;
}
json outlineJson(const syntax::Outline& o) {
  json classes = json::array(), imports = json::array(), calls = json::array(), strings = json::array();
  for (const auto& c : o.classes) classes.push_back({c.name, c.bases, c.line});
  for (const auto& i : o.imports) imports.push_back({i.module, i.name, i.alias, i.line});
  for (const auto& c : o.calls) {
    json args = json::array();
    for (const auto& a : c.args) args.push_back({a.keyword, a.literal, a.string, a.value});
    calls.push_back({c.callee, args, c.line});
  }
  for (const auto& t : o.strings) strings.push_back({t.value, t.line});
  return {classes, imports, calls, strings};
}

syntax::Outline outlineFrom(const json& j) {
  syntax::Outline o;
  for (const auto& c : j.at(0))
    o.classes.push_back({c.at(0).get<std::string>(), c.at(1).get<std::vector<std::string>>(), c.at(2).get<uint32_t>()});
  for (const auto& i : j.at(1))
    o.imports.push_back({i.at(0).get<std::string>(), i.at(1).get<std::string>(), i.at(2).get<std::string>(),
                         i.at(3).get<uint32_t>()});
  for (const auto& c : j.at(2)) {
    syntax::OutlineCall call;
    call.callee = c.at(0).get<std::string>();
    for (const auto& a : c.at(1))
      call.args.push_back({a.at(0).get<std::string>(), a.at(1).get<bool>(), a.at(2).get<bool>(), a.at(3).get<std::string>()});
    call.line = c.at(2).get<uint32_t>();
    o.calls.push_back(std::move(call));
  }
  for (const auto& t : j.at(3)) o.strings.push_back({t.at(0).get<std::string>(), t.at(1).get<uint32_t>()});
  return o;
}
}  // namespace

std::optional<syntax::Outline> ResultCache::outline(const std::string& path, uint64_t hash) const {
  auto it = outlines_.find(path);
  if (it == outlines_.end() || it->second.first != hash) return std::nullopt;
  return it->second.second;
}

void ResultCache::storeOutline(const std::string& path, uint64_t hash, const syntax::Outline& outline) {
  auto it = outlines_.find(path);
  if (it != outlines_.end() && it->second.first == hash) return;
  outlines_[path] = {hash, outline};
  dirty_ = true;
}

std::string executableFingerprint() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "unknown";
  auto size = fs::file_size(exe, ec);
  if (ec) return "unknown";
  auto mtime = fs::last_write_time(exe, ec);
  if (ec) return "unknown";
  return std::to_string(size) + "-" + std::to_string(mtime.time_since_epoch().count());
}

ResultCache::ResultCache(fs::path dir, const std::string& key) : dir_(std::move(dir)) {
  file_ = dir_ / ("results-" + hashHex(contentHash(key)) + ".json");
}

void ResultCache::load() {
  items_.clear();
  outlines_.clear();
  std::ifstream in(file_, std::ios::binary);
  if (!in) return;
  try {
    json doc = json::parse(in);
    if (doc.value("format", 0) != kFormat) return;
    for (const auto& [path, j] : doc.at("files").items()) {
      Item item;
      item.hash = std::stoull(j.at("hash").get<std::string>(), nullptr, 16);
      item.facts = j.at("facts").get<std::string>();
      for (const auto& d : j.at("deps")) item.deps.emplace_back(d.at(0).get<std::string>(), std::stoull(d.at(1).get<std::string>(), nullptr, 16));
      for (const auto& f : j.at("findings")) {
        Diagnostic d;
        d.code = f.at("code").get<std::string>();
        d.name = f.at("name").get<std::string>();
        d.severity = static_cast<Severity>(f.at("severity").get<int>());
        d.location = locationFrom(f.at("location"));
        d.message = f.at("message").get<std::string>();
        for (const auto& n : f.at("notes")) d.notes.push_back(Note{locationFrom(n.at("location")), n.at("message").get<std::string>()});
        if (f.contains("fix")) {
          const json& x = f.at("fix");
          Fix fix;
          fix.title = x.at("title").get<std::string>();
          fix.applicability = x.at("safe").get<bool>() ? Applicability::Safe : Applicability::Unsafe;
          for (const auto& e : x.at("edits")) fix.edits.push_back(Edit{locationFrom(e.at(0)), e.at(1).get<std::string>()});
          d.fix = std::move(fix);
        }
        item.findings.push_back(std::move(d));
      }
      items_[path] = std::move(item);
    }
    if (doc.contains("outlines"))
      for (const auto& [path, j] : doc.at("outlines").items())
        outlines_[path] = {std::stoull(j.at(0).get<std::string>(), nullptr, 16), outlineFrom(j.at(1))};
  } catch (const std::exception&) {
    items_.clear();  // a damaged cache is no cache
    outlines_.clear();
  }
}

std::optional<std::vector<Diagnostic>> ResultCache::lookup(
    const std::string& path, uint64_t hash, const std::string& facts,
    const std::function<uint64_t(const std::string&)>& hashOf) const {
  auto it = items_.find(path);
  if (it == items_.end() || it->second.hash != hash || it->second.facts != facts) return std::nullopt;
  for (const auto& [dep, h] : it->second.deps)
    if (dep != path && hashOf(dep) != h) return std::nullopt;
  return it->second.findings;
}

std::string prepareCacheDir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create " + dir.string() + " (" + ec.message() + ")";
  // Like Ruff's cache folder: ignored by git, and marked as a cache for backup tools.
  if (!fs::exists(dir / ".gitignore", ec)) atomicWriteFile(dir / ".gitignore", "# Created by shardlint\n*\n");
  if (!fs::exists(dir / "CACHEDIR.TAG", ec))
    atomicWriteFile(dir / "CACHEDIR.TAG",
                    "Signature: 8a477f597d28d172789f06886806bc55\n"
                    "# This file is a cache directory tag created by shardlint.\n");
  return "";
}

void ResultCache::store(const std::string& path, uint64_t hash, const std::string& facts,
                        std::vector<std::pair<std::string, uint64_t>> deps, const std::vector<Diagnostic>& findings) {
  Item item{hash, facts, std::move(deps), findings};
  items_[path] = std::move(item);
  dirty_ = true;
}

std::string ResultCache::save() const {
  if (!dirty_) return "";
  if (std::string problem = prepareCacheDir(dir_); !problem.empty()) return problem;
  json files = json::object();
  size_t n = 0;
  for (const auto& [path, item] : items_) {
    if (++n > kMaxItems) break;
    json deps = json::array();
    for (const auto& [p, h] : item.deps) deps.push_back({p, hashHex(h)});
    json findings = json::array();
    for (const auto& d : item.findings) {
      json notes = json::array();
      for (const auto& note : d.notes) notes.push_back({{"location", location(note.location)}, {"message", note.message}});
      findings.push_back({{"code", d.code}, {"name", d.name}, {"severity", static_cast<int>(d.severity)},
                          {"location", location(d.location)}, {"message", d.message}, {"notes", notes}});
      if (d.fix) {
        json edits = json::array();
        for (const auto& e : d.fix->edits) edits.push_back({location(e.location), e.text});
        findings.back()["fix"] = {{"title", d.fix->title},
                                  {"safe", d.fix->applicability == Applicability::Safe},
                                  {"edits", edits}};
      }
    }
    files[path] = {{"hash", hashHex(item.hash)}, {"facts", item.facts}, {"deps", deps}, {"findings", findings}};
  }
  json outlines = json::object();
  for (const auto& [path, o] : outlines_) outlines[path] = {hashHex(o.first), outlineJson(o.second)};
  json doc = {{"format", kFormat}, {"files", files}, {"outlines", outlines}};
  // Atomic: a reader sees the old file or the new one, never half of one.
  if (std::string err = atomicWriteFile(file_, doc.dump()); !err.empty()) return err;
  return "";
}

}  // namespace shardlint
