#include "driver/ResultCache.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "core/AtomicWrite.h"
#include "driver/ModuleTable.h"

namespace shardlint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kFormat = 7;  // after the 8-byte checksum, MessagePack       // bump when the file layout changes
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


// The bulky regular sections (the name table, the stamps, the layout) are packed as MessagePack binary
// values: one value each, not a value per number, so that loading them costs no allocation per number.
// Little-endian fixed-width fields; an Unpacker throws on a field past the end (a damaged cache is none).
struct Packer {
  std::vector<std::uint8_t> bytes;
  template <typename T>
  void put(T v) {
    auto u = static_cast<uint64_t>(v);
    for (size_t k = 0; k < sizeof(T); ++k) bytes.push_back(static_cast<std::uint8_t>((u >> (8 * k)) & 0xff));
  }
};
struct Unpacker {
  const std::vector<std::uint8_t>& bytes;
  size_t at = 0;
  template <typename T>
  T get() {
    if (bytes.size() - at < sizeof(T)) throw std::runtime_error("cache: a packed section is cut short");
    uint64_t u = 0;
    for (size_t k = 0; k < sizeof(T); ++k) u |= static_cast<uint64_t>(bytes[at + k]) << (8 * k);
    at += sizeof(T);
    return static_cast<T>(u);
  }
  const std::string& name(const std::vector<std::string>& names) { return names.at(get<uint32_t>()); }
};

json packNames(const std::vector<std::string>& names) {
  Packer p;
  p.put<uint32_t>(static_cast<uint32_t>(names.size()));
  for (const auto& n : names) {
    p.put<uint32_t>(static_cast<uint32_t>(n.size()));
    p.bytes.insert(p.bytes.end(), n.begin(), n.end());
  }
  return json::binary(std::move(p.bytes));
}

std::vector<std::string> unpackNames(const std::vector<std::uint8_t>& bytes) {
  Unpacker u{bytes};
  std::vector<std::string> names;
  uint32_t count = u.get<uint32_t>();
  if (count > bytes.size()) throw std::runtime_error("cache: a bad name count");
  names.reserve(count);
  for (uint32_t k = 0; k < count; ++k) {
    uint32_t size = u.get<uint32_t>();
    if (bytes.size() - u.at < size) throw std::runtime_error("cache: a name is cut short");
    names.emplace_back(reinterpret_cast<const char*>(bytes.data() + u.at), size);
    u.at += size;
  }
  return names;
}

// Each stamp: path, size, mtime, ctime, mask, hash, flags (1: imports, 2: resolved), then the imports
// (a count and names) and the resolved files (a count, then a name and an ancestor byte each).
void packStamp(Packer& p, const std::string& path, const PrescanCache::Entry& e, NameTable& names) {
  p.put<uint32_t>(names.id(path));
  p.put<uint64_t>(e.stamp.size);
  p.put<int64_t>(e.stamp.mtime);
  p.put<int64_t>(e.stamp.ctime);
  p.put<uint64_t>(e.mask);
  p.put<uint64_t>(e.hash);
  bool resolved = e.hasImports && e.resolved;
  p.put<uint8_t>(static_cast<uint8_t>((e.hasImports ? 1 : 0) | (resolved ? 2 : 0)));
  if (e.hasImports) {
    p.put<uint32_t>(static_cast<uint32_t>(e.imports.size()));
    for (const auto& i : e.imports) p.put<uint32_t>(names.id(i));
  }
  if (resolved) {
    p.put<uint32_t>(static_cast<uint32_t>(e.resolved->size()));
    for (const auto& [file, ancestor] : *e.resolved) {
      p.put<uint32_t>(names.id(file));
      p.put<uint8_t>(ancestor ? 1 : 0);
    }
  }
}

std::pair<std::string, PrescanCache::Entry> unpackStamp(Unpacker& u, const std::vector<std::string>& names) {
  std::string path = u.name(names);
  PrescanCache::Entry e;
  e.stamp.size = u.get<uint64_t>();
  e.stamp.mtime = u.get<int64_t>();
  e.stamp.ctime = u.get<int64_t>();
  e.mask = u.get<uint64_t>();
  e.hash = u.get<uint64_t>();
  uint8_t flags = u.get<uint8_t>();
  if (flags & 1) {
    e.hasImports = true;
    uint32_t n = u.get<uint32_t>();
    for (uint32_t k = 0; k < n; ++k) e.imports.push_back(u.name(names));
  }
  if (flags & 2) {
    uint32_t n = u.get<uint32_t>();
    e.resolved.emplace();
    for (uint32_t k = 0; k < n; ++k) {
      const std::string& file = u.name(names);
      e.resolved->emplace_back(file, u.get<uint8_t>() != 0);
    }
  }
  return {std::move(path), std::move(e)};
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
    std::string bytes;
    in.seekg(0, std::ios::end);
    std::streamoff size = in.tellg();
    if (size < 8) return;
    bytes.resize(static_cast<size_t>(size));
    in.seekg(0);
    if (!in.read(bytes.data(), size)) return;
    // The first 8 bytes: the content hash of the rest (a damaged or edited file is no cache, rather than
    // findings with a changed byte).
    if (bytes.size() < 8) return;
    uint64_t sum = 0;
    for (int k = 7; k >= 0; --k) sum = (sum << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(k)]);
    std::string_view payload(bytes.data() + 8, bytes.size() - 8);
    if (textHash(payload) != sum) return;
    json doc = json::from_msgpack(payload.begin(), payload.end());
    if (doc.value("format", 0) != kFormat) return;
    std::vector<std::string> names = unpackNames(doc.at("names").get_binary());
    for (const auto& j : doc.at("files")) {  // [path, hash, facts, [dep, hash, dep, hash...], findings]
      Item item;
      item.hash = j.at(1).get<uint64_t>();
      item.facts = j.at(2).get<std::string>();
      Unpacker deps{j.at(3).get_binary()};  // a count, then a name and a hash each
      for (uint32_t n = deps.get<uint32_t>(), k = 0; k < n; ++k) {
        const std::string& dep = deps.name(names);
        item.deps.emplace_back(dep, deps.get<uint64_t>());
      }
      for (const auto& f : j.at(4)) item.findings.push_back(findingFrom(f, names));
      items_[names.at(j.at(0).get<uint32_t>())] = std::move(item);
    }
    for (const auto& j : doc.at("outlines"))  // [path, hash, outline]
      outlines_[names.at(j.at(0).get<uint32_t>())] = {j.at(1).get<uint64_t>(), outlineFrom(j.at(2))};
    std::map<std::string, PrescanCache::Entry> stamps;
    Unpacker packedStamps{doc.at("stamps").get_binary()};
    for (uint32_t n = packedStamps.get<uint32_t>(), k = 0; k < n; ++k) stamps.insert(unpackStamp(packedStamps, names));
    stamps_.restore(doc.at("words").get<std::string>(), std::move(stamps));
    if (doc.contains("layout")) {  // cwd, then a count and each folder: name, size, mtime, ctime
      Unpacker u{doc.at("layout").get_binary()};
      ProjectIndex::Layout layout;
      layout.cwd = u.name(names);
      for (uint32_t n = u.get<uint32_t>(), k = 0; k < n; ++k) {
        const std::string& folder = u.name(names);
        FileStamp st;
        st.size = u.get<uint64_t>();
        st.mtime = u.get<int64_t>();
        st.ctime = u.get<int64_t>();
        layout.folders.emplace(folder, st);
      }
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
    Packer deps;
    deps.put<uint32_t>(static_cast<uint32_t>(item.deps.size()));
    for (const auto& [p, h] : item.deps) {
      deps.put<uint32_t>(names.id(p));
      deps.put<uint64_t>(h);
    }
    json findings = json::array();
    for (const auto& d : item.findings) findings.push_back(findingJson(d, names));
    files.push_back({names.id(path), item.hash, item.facts, json::binary(std::move(deps.bytes)), std::move(findings)});
  }
  json outlines = json::array();
  for (const auto& [path, o] : outlines_) outlines.push_back({names.id(path), o.first, outlineJson(o.second)});
  std::string words;
  Packer stamps;
  uint32_t stampCount = 0;
  stamps.put<uint32_t>(0);  // the count, set below
  for (const auto& [path, e] : stamps_.snapshot(&words))
    if (e.stamp.mtime < trustBefore && e.stamp.ctime < trustBefore && stampCount < kMaxItems) {
      packStamp(stamps, path, e, names);
      ++stampCount;
    }
  for (size_t k = 0; k < 4; ++k) stamps.bytes[k] = static_cast<std::uint8_t>((stampCount >> (8 * k)) & 0xff);
  json doc = {{"format", kFormat}, {"files", std::move(files)}, {"outlines", std::move(outlines)}, {"words", words},
              {"stamps", json::binary(std::move(stamps.bytes))}};
  // The layout, unless a folder in it changed too recently to be trusted by its stamp (as files).
  bool layoutSettled = layout_ && layout_->trustworthy && layout_->folders.size() < kMaxItems;
  if (layoutSettled)
    for (const auto& [folder, st] : layout_->folders)
      if (st.size != ProjectIndex::kMissing && (st.mtime >= trustBefore || st.ctime >= trustBefore)) layoutSettled = false;
  if (layoutSettled) {
    Packer layout;
    layout.put<uint32_t>(names.id(layout_->cwd));
    layout.put<uint32_t>(static_cast<uint32_t>(layout_->folders.size()));
    for (const auto& [folder, st] : layout_->folders) {
      layout.put<uint32_t>(names.id(folder));
      layout.put<uint64_t>(st.size);
      layout.put<int64_t>(st.mtime);
      layout.put<int64_t>(st.ctime);
    }
    doc["layout"] = json::binary(std::move(layout.bytes));
  }
  doc["names"] = packNames(names.names);  // last: every section's names are in it
  std::vector<std::uint8_t> payload = json::to_msgpack(doc);
  std::string bytes(8, '\0');
  uint64_t sum = textHash(std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
  for (size_t k = 0; k < 8; ++k) bytes[k] = static_cast<char>((sum >> (8 * k)) & 0xff);  // little-endian
  bytes.append(payload.begin(), payload.end());
  // Atomic: a reader sees the old file or the new one, never half of one.
  return atomicWriteFile(file_, bytes);
}

}  // namespace shardlint
