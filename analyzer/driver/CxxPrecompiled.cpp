#include "driver/CxxPrecompiled.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "core/AtomicWrite.h"
#include "core/Parallel.h"
#include "core/SourceFile.h"
#include "driver/ResultCache.h"

namespace shardlint {
namespace fs = std::filesystem;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool startsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The header name of a line `#include <name>` (a trailing `//` comment allowed), else "".
std::string_view systemInclude(std::string_view line) {
  if (!startsWith(line, "#")) return {};
  line = trim(line.substr(1));
  if (!startsWith(line, "include")) return {};
  line = trim(line.substr(7));
  if (!startsWith(line, "<")) return {};
  size_t close = line.find('>');
  if (close == std::string_view::npos || close == 1) return {};
  std::string_view rest = trim(line.substr(close + 1));
  if (!rest.empty() && !startsWith(rest, "//")) return {};
  return line.substr(1, close - 1);
}

}  // namespace

std::string leadingSystemIncludes(std::string_view text) {
  std::string out;
  if (startsWith(text, "\xEF\xBB\xBF")) text.remove_prefix(3);
  bool inComment = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (inComment || startsWith(line, "/*")) {
      size_t end = line.find("*/", inComment ? 0 : 2);
      inComment = end == std::string_view::npos;
      if (inComment) continue;
      line = trim(line.substr(end + 2));
    }
    if (line.empty() || startsWith(line, "//")) continue;
    if (line.back() == '\\') break;  // a continued line: not worth following
    std::string_view name = systemInclude(line);
    if (name.empty()) break;
    out += "#include <" + std::string(name) + ">\n";
  }
  return out;
}

namespace {
// Absolute: Clang runs in each unit's own working folder (its compile command's), where a relative
// `--cache-dir` would name another place (the precompiled header was written there and never found).
fs::path absoluteDir(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal();
}
}  // namespace

PchStore::PchStore(fs::path cacheDir, std::string buildKey)
    : cacheDir_(std::move(cacheDir)), dir_(absoluteDir(cacheDir_ / "cxx-pch")), buildKey_(std::move(buildKey)) {}

std::string PchStore::key(const Unit& unit) const {
  if (unit.includes.empty()) return "";
  std::string all = buildKey_;
  all += '\0' + unit.flags.directory + '\0';
  for (const auto& a : unit.flags.args) all += a + '\0';
  all += '\0' + unit.includes + '\0';
  for (const auto& d : unit.projectDirs) all += d + '\0';
  return hashHex(contentHash(all));
}

PchStore::Built PchStore::prepare(const std::vector<Unit>& units, unsigned jobs, ClangGate* gate) {
  // A precompiled header costs about one parse to build and saves about half of every later one:
  // it is built for headers two units of this run share, or that an earlier run asked for (a
  // `.seen` marker), not for a one-off unit.
  std::map<std::string, std::pair<const Unit*, size_t>> wanted;
  std::error_code ec;
  for (const auto& u : units) {
    std::string k = key(u);
    if (k.empty()) continue;
    auto& w = wanted[k];
    if (!w.first) w.first = &u;
    ++w.second;
  }
  std::map<std::string, const Unit*> todo;
  std::vector<std::string> firstSeen;
  for (const auto& [k, w] : wanted) {
    if (fs::exists(dir_ / (k + ".pch"), ec) || fs::exists(dir_ / (k + ".none"), ec)) continue;
    if (w.second >= 2 || fs::exists(dir_ / (k + ".seen"), ec)) todo.emplace(k, w.first);
    else firstSeen.push_back(k);
  }
  Built built;
  if (todo.empty() && firstSeen.empty()) return built;
  if (!prepareCacheDir(cacheDir_).empty()) return built;
  fs::create_directories(dir_, ec);
  if (ec) return built;
  for (const auto& k : firstSeen) atomicWriteFile(dir_ / (k + ".seen"), "");
  std::vector<std::pair<std::string, const Unit*>> list(todo.begin(), todo.end());
  std::atomic<size_t> count{0};
  std::vector<double> seconds(list.size(), 0.0);
  parallelFor(list.size(), jobs, [&](size_t i) {
    const auto& [k, unit] = list[i];
    fs::path header = dir_ / (k + ".h");
    fs::path pch = dir_ / (k + ".pch");
    if (!atomicWriteFile(header, unit->includes).empty()) return;
    // Written beside its final name, then renamed: a concurrent run sees it whole or not at all.
    fs::path temporary = dir_ / (k + ".pch.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(i));
    ClangGate::Ticket ticket;
    if (gate) ticket = gate->enter("pch\n" + k);
    cxx::PchResult r;
    try {
      r = cxx::buildPch(header.string(), unit->flags, temporary.string(), unit->projectDirs);
    } catch (const std::exception& e) {
      r.problem = e.what();
    }
    if (gate) {
      gate->leave(ticket, r.clangBytes);
      releaseFreeMemory();
    }
    seconds[i] = r.seconds;
    std::error_code e;
    if (r.ok) {
      fs::rename(temporary, pch, e);
      if (!e) ++count;
    }
    if (!r.ok || e) {
      fs::remove(temporary, e);
      atomicWriteFile(dir_ / (k + ".none"), "no precompiled header: " + r.problem + "\n");
    }
    fs::remove(dir_ / (k + ".seen"), e);
  });
  built.count = count;
  for (double s : seconds) built.seconds += s;
  return built;
}

std::string PchStore::path(const std::string& key) {
  if (key.empty()) return "";
  fs::path pch = dir_ / (key + ".pch");
  std::error_code ec;
  if (!fs::is_regular_file(pch, ec)) return "";
  std::lock_guard<std::mutex> lock(mutex_);
  fs::last_write_time(pch, fs::file_time_type::clock::now(), ec);  // recently used: kept by trim()
  return pch.string();
}

void PchStore::discard(const std::string& key) {
  std::error_code ec;
  fs::remove(dir_ / (key + ".pch"), ec);
}

void PchStore::trim(size_t keep) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return;
  // The newest `limit` files of one kind stay; older ones go (with their header, for .pch).
  auto trimKind = [&](const std::string& ext, size_t limit) {
    std::vector<std::pair<fs::file_time_type, fs::path>> found;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ext) found.emplace_back(it->last_write_time(ec), it->path());
    if (found.size() <= limit) return;
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = limit; i < found.size(); ++i) {
      std::error_code e;
      fs::remove(found[i].second, e);
      if (ext == ".pch") fs::remove(fs::path(found[i].second).replace_extension(".h"), e);
    }
  };
  trimKind(".pch", keep);
  trimKind(".none", keep * 8);
  trimKind(".seen", keep * 8);
}

}  // namespace shardlint
