#include "driver/ResultCache.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "core/AtomicWrite.h"
#include "driver/ModuleTable.h"

namespace shardlint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kFormat = 5;  // after the 8-byte checksum, MessagePack       // bump when the file layout changes
constexpr size_t kMaxItems = 50000;

// Names (paths, imported modules, rule codes and names) are written once, in a table, and referred to by their index.
struct NameTable {
  std::vector<std::string> names;
  std::map<std::string, uint32_t> ids;
  uint32_t id(const std::string& name) {
    auto [it, fresh] = ids.emplace(name, static_cast<uint32_t>(names.size()));
    if (fresh) names.push_back(name);
    return it->second;
  }
};

// A location as one flat array: [path, range begin, range end, start (4 columns), end (4 columns)].
json location(const Location& l, NameTable& names) {
  json out = json::array();
  out.push_back(names.id(l.path));
  out.push_back(l.range.begin);
  out.push_back(l.range.end);
  for (const LineCol* lc : {&l.start, &l.end}) {
    out.push_back(lc->line);
    out.push_back(lc->byteColumn);
    out.push_back(lc->codepointColumn);
    out.push_back(lc->utf16Column);
  }
  return out;
}
Location locationFrom(const json& j, const std::vector<std::string>& names) {
  auto u = [&](size_t k) { return j.at(k).get<uint32_t>(); };
  Location l;
  l.path = names.at(u(0));
  l.range = ByteRange{u(1), u(2)};
  l.start = LineCol{u(3), u(4), u(5), u(6)};
  l.end = LineCol{u(7), u(8), u(9), u(10)};
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


json stampJson(const PrescanCache::Entry& e, NameTable& names) {
  json j = {e.stamp.size, e.stamp.mtime, e.stamp.ctime, e.mask, e.hash};
  if (e.hasImports) {
    json imports = json::array();
    for (const auto& i : e.imports) imports.push_back(names.id(i));
    j.push_back(std::move(imports));
    if (e.resolved) {  // [file, ancestor, file, ancestor...]
      json resolved = json::array();
      for (const auto& [file, ancestor] : *e.resolved) {
        resolved.push_back(names.id(file));
        resolved.push_back(ancestor);
      }
      j.push_back(std::move(resolved));
    }
  }
  return j;
}

PrescanCache::Entry stampFrom(const json& j, const std::vector<std::string>& names) {
  PrescanCache::Entry e;
  e.stamp = FileStamp{j.at(0).get<uint64_t>(), j.at(1).get<int64_t>(), j.at(2).get<int64_t>()};
  e.mask = j.at(3).get<uint64_t>();
  e.hash = j.at(4).get<uint64_t>();
  if (j.size() > 5) {
    e.hasImports = true;
    for (const auto& i : j.at(5)) e.imports.push_back(names.at(i.get<uint32_t>()));
  }
  if (j.size() > 6) {
    const json& r = j.at(6);
    e.resolved.emplace();
    for (size_t k = 0; k + 1 < r.size(); k += 2) e.resolved->emplace_back(names.at(r[k].get<uint32_t>()), r[k + 1].get<bool>());
  }
  return e;
}

// A finding as an array: [code, name, severity, location, message, [location, message, ...] (its notes)],
// and with a fix [title, safe, [location, text, ...] (its edits)] after them.
json findingJson(const Diagnostic& d, NameTable& names) {
  json notes = json::array();
  for (const auto& note : d.notes) {
    notes.push_back(location(note.location, names));
    notes.push_back(note.message);
  }
  json f = {names.id(d.code), names.id(d.name), static_cast<int>(d.severity), location(d.location, names), d.message,
            std::move(notes)};
  if (d.fix) {
    json edits = json::array();
    for (const auto& e : d.fix->edits) {
      edits.push_back(location(e.location, names));
      edits.push_back(e.text);
    }
    f.push_back({d.fix->title, d.fix->applicability == Applicability::Safe, std::move(edits)});
  }
  return f;
}

Diagnostic findingFrom(const json& f, const std::vector<std::string>& names) {
  Diagnostic d;
  d.code = names.at(f.at(0).get<uint32_t>());
  d.name = names.at(f.at(1).get<uint32_t>());
  d.severity = static_cast<Severity>(f.at(2).get<int>());
  d.location = locationFrom(f.at(3), names);
  d.message = f.at(4).get<std::string>();
  const json& notes = f.at(5);
  for (size_t k = 0; k + 1 < notes.size(); k += 2)
    d.notes.push_back(Note{locationFrom(notes[k], names), notes[k + 1].get<std::string>()});
  if (f.size() > 6) {
    const json& x = f.at(6);
    Fix fix;
    fix.title = x.at(0).get<std::string>();
    fix.applicability = x.at(1).get<bool>() ? Applicability::Safe : Applicability::Unsafe;
    const json& edits = x.at(2);
    for (size_t k = 0; k + 1 < edits.size(); k += 2)
      fix.edits.push_back(Edit{locationFrom(edits[k], names), edits[k + 1].get<std::string>()});
    d.fix = std::move(fix);
  }
  return d;
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
  file_ = dir_ / ("results-" + hashHex(contentHash(key)) + ".msgpack");
}

void ResultCache::load() {
  items_.clear();
  outlines_.clear();
  stamps_.restore("", {});
  layout_.reset();
  std::ifstream in(file_, std::ios::binary);
  if (!in) return;
  try {
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The first 8 bytes: the content hash of the rest (a damaged or edited file is no cache, rather than
    // findings with a changed byte).
    if (bytes.size() < 8) return;
    uint64_t sum = 0;
    for (int k = 7; k >= 0; --k) sum = (sum << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(k)]);
    std::string_view payload(bytes.data() + 8, bytes.size() - 8);
    if (contentHash(payload) != sum) return;
    json doc = json::from_msgpack(payload.begin(), payload.end());
    if (doc.value("format", 0) != kFormat) return;
    std::vector<std::string> names = doc.at("names").get<std::vector<std::string>>();
    for (const auto& j : doc.at("files")) {  // [path, hash, facts, [dep, hash, dep, hash...], findings]
      Item item;
      item.hash = j.at(1).get<uint64_t>();
      item.facts = j.at(2).get<std::string>();
      const json& deps = j.at(3);
      for (size_t k = 0; k + 1 < deps.size(); k += 2)
        item.deps.emplace_back(names.at(deps[k].get<uint32_t>()), deps[k + 1].get<uint64_t>());
      for (const auto& f : j.at(4)) item.findings.push_back(findingFrom(f, names));
      items_[names.at(j.at(0).get<uint32_t>())] = std::move(item);
    }
    for (const auto& j : doc.at("outlines"))  // [path, hash, outline]
      outlines_[names.at(j.at(0).get<uint32_t>())] = {j.at(1).get<uint64_t>(), outlineFrom(j.at(2))};
    std::map<std::string, PrescanCache::Entry> stamps;
    for (const auto& j : doc.at("stamps"))  // [path, stamp...]
      stamps.emplace(names.at(j.at(0).get<uint32_t>()), stampFrom(j.at(1), names));
    stamps_.restore(doc.at("words").get<std::string>(), std::move(stamps));
    if (doc.contains("layout")) {  // [cwd, [folder, size, mtime, ctime, ...]]
      const json& l = doc.at("layout");
      ProjectIndex::Layout layout;
      layout.cwd = l.at(0).get<std::string>();
      const json& folders = l.at(1);
      for (size_t k = 0; k + 3 < folders.size(); k += 4)
        layout.folders.emplace(names.at(folders[k].get<uint32_t>()),
                               FileStamp{folders[k + 1].get<uint64_t>(), folders[k + 2].get<int64_t>(),
                                         folders[k + 3].get<int64_t>()});
      layout_ = std::move(layout);
    }
  } catch (const std::exception&) {
    items_.clear();  // a damaged cache is no cache
    outlines_.clear();
    stamps_.restore("", {});
    layout_.reset();
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

std::string ResultCache::save(int64_t trustBefore) {
  // Stamps alone changed (the first run after files were written): worth a write, so that the next
  // run reads nothing.
  if (!dirty_ && stamps_.stores() == 0) return "";
  if (std::string problem = prepareCacheDir(dir_); !problem.empty()) return problem;
  NameTable names;
  json files = json::array();
  for (const auto& [path, item] : items_) {
    if (files.size() >= kMaxItems) break;
    json deps = json::array();
    for (const auto& [p, h] : item.deps) {
      deps.push_back(names.id(p));
      deps.push_back(h);
    }
    json findings = json::array();
    for (const auto& d : item.findings) findings.push_back(findingJson(d, names));
    files.push_back({names.id(path), item.hash, item.facts, std::move(deps), std::move(findings)});
  }
  json outlines = json::array();
  for (const auto& [path, o] : outlines_) outlines.push_back({names.id(path), o.first, outlineJson(o.second)});
  std::string words;
  json stampList = json::array();
  for (const auto& [path, e] : stamps_.snapshot(&words))
    if (e.stamp.mtime < trustBefore && e.stamp.ctime < trustBefore && stampList.size() < kMaxItems)
      stampList.push_back({names.id(path), stampJson(e, names)});
  json doc = {{"format", kFormat}, {"names", names.names}, {"files", std::move(files)},
              {"outlines", std::move(outlines)}, {"words", words}, {"stamps", std::move(stampList)}};
  // The layout, unless a folder in it changed too recently to be trusted by its stamp (as files).
  bool layoutSettled = layout_ && layout_->trustworthy && layout_->folders.size() < kMaxItems;
  if (layoutSettled) {
    json folders = json::array();
    for (const auto& [folder, st] : layout_->folders) {
      if (st.size != ProjectIndex::kMissing && (st.mtime >= trustBefore || st.ctime >= trustBefore)) {
        layoutSettled = false;
        break;
      }
      folders.push_back(names.id(folder));
      folders.push_back(st.size);
      folders.push_back(st.mtime);
      folders.push_back(st.ctime);
    }
    if (layoutSettled) doc["layout"] = json::array({layout_->cwd, std::move(folders)});
  }
  doc["names"] = names.names;  // the layout's folders too
  std::vector<std::uint8_t> payload = json::to_msgpack(doc);
  std::string bytes(8, '\0');
  uint64_t sum = contentHash(std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
  for (size_t k = 0; k < 8; ++k) bytes[k] = static_cast<char>((sum >> (8 * k)) & 0xff);  // little-endian
  bytes.append(payload.begin(), payload.end());
  // Atomic: a reader sees the old file or the new one, never half of one.
  return atomicWriteFile(file_, bytes);
}

}  // namespace shardlint
