#include "driver/Project.h"

#include "driver/Linter.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <set>
#include <system_error>

#include <sys/stat.h>

namespace fs = std::filesystem;

namespace shardlint {

namespace {
bool isFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}
bool isDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}
fs::path absoluteOf(const std::string& p) { return fs::path(absolutePathKey(p)); }
}  // namespace

static void addUnique(std::vector<fs::path>& roots, fs::path dir) {
  dir = dir.lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  if (std::find(roots.begin(), roots.end(), dir) == roots.end()) roots.push_back(std::move(dir));
}

ProjectIndex::ProjectIndex(std::vector<std::string> extraRoots) {
  std::error_code ec;
  cwd_ = fs::current_path(ec);
  for (const auto& r : extraRoots) addUnique(extra_, absoluteOf(r));
}

void ProjectIndex::addFiles(const std::vector<std::string>& paths) {
  for (const auto& p : paths) given_[absoluteOf(p).string()] = p;
}

size_t ProjectIndex::rootListOf(const fs::path& dir) const {
  if (auto it = rootsOfDir_.find(dir.string()); it != rootsOfDir_.end()) return it->second;
  std::vector<fs::path> roots = extra_;
  fs::path top = dir;
  while (probeFile(top, "__init__.py") && top.has_parent_path() && top.parent_path() != top) top = top.parent_path();
  addUnique(roots, top);  // the package's top folder (the script's own folder outside packages)
  auto [project, repository] = enclosing(dir.string());
  if (!project.empty()) {
    noteFolder(project.string());
    std::error_code ec;
    if (fs::is_symlink(project / "src", ec)) distrust();
  }
  if (!project.empty() && isDir(project / "src")) addUnique(roots, project / "src");
  if (!project.empty()) addUnique(roots, project);
  else if (!repository.empty()) addUnique(roots, repository);
  // Folders with the same roots (those of one package) share a list, and so the lookups made for it.
  std::vector<std::string> key;
  for (const auto& r : roots) key.push_back(r.string());
  auto [known, fresh] = listIds_.emplace(std::move(key), rootLists_.size());
  if (fresh) rootLists_.push_back(std::move(roots));
  rootsOfDir_.emplace(dir.string(), known->second);
  return known->second;
}

ProjectIndex::Enclosing ProjectIndex::enclosing(const std::string& dir) const {
  // Up from `dir`: the nearest folder with a project file, and the nearest with `.git` (where the
  // walk stops). Each folder's answer is kept, and a folder's is its own markers over its parent's.
  std::lock_guard<std::mutex> lock(enclosingMu_);
  if (auto it = enclosingOfDir_.find(dir); it != enclosingOfDir_.end()) return it->second;
  std::vector<std::pair<fs::path, bool>> walked;  // folders whose answer is not known yet, nearest first
  Enclosing out;
  for (fs::path up = dir; !up.empty(); up = up.parent_path()) {
    if (auto it = enclosingOfDir_.find(up.string()); it != enclosingOfDir_.end()) {
      out = it->second;
      break;
    }
    bool project = probeFile(up, "pyproject.toml") || probeFile(up, "setup.py") || probeFile(up, "setup.cfg");
    walked.emplace_back(up, project);
    std::error_code ec;
    if (fs::exists(up / ".git", ec)) {
      out.repository = up;
      break;
    }
    if (up.parent_path() == up) break;
  }
  // From the top down: each walked folder's answer is its parent's, with its own project file first.
  for (auto it = walked.rbegin(); it != walked.rend(); ++it) {
    if (it->second) out.project = it->first;
    enclosingOfDir_.emplace(it->first.string(), out);
  }
  return out;
}

fs::path ProjectIndex::projectDirOf(const std::string& file) const {
  Enclosing e = enclosing(parentKey(absolutePathKey(file)));
  return e.project.empty() ? e.repository : e.project;
}

std::vector<fs::path> ProjectIndex::rootsFor(const std::string& fromFile) const {
  std::lock_guard<std::mutex> lock(mu_);
  return rootLists_[rootListOf(absoluteOf(fromFile).parent_path())];
}

std::string ProjectIndex::display(const fs::path& absolute) const {
  auto it = given_.find(absolute.lexically_normal().string());
  if (it != given_.end()) return it->second;
  fs::path rel = absolute.lexically_relative(cwd_);
  return (rel.empty() ? absolute : rel).generic_string();
}

bool ProjectIndex::hasInit(const fs::path& dir) const {
  std::string key = dir.string();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = initCache_.find(key); it != initCache_.end()) return it->second;
  }
  bool yes = probeFile(dir, "__init__.py");
  std::lock_guard<std::mutex> lock(mu_);
  return initCache_[key] = yes;
}

std::string ProjectIndex::displayKept(const std::string& absolute) const {
  {
    std::lock_guard<std::mutex> lock(filesMu_);
    if (auto it = displayed_.find(absolute); it != displayed_.end()) return it->second;
  }
  std::string shown = display(fs::path(absolute));
  std::lock_guard<std::mutex> lock(filesMu_);
  return displayed_.emplace(absolute, std::move(shown)).first->second;
}

const ProjectIndex::Listing& ProjectIndex::listingOf(const std::string& folder) const {  // filesMu_ held
  auto it = listings_.find(folder);
  if (it != listings_.end()) return *it->second;
  if (share_) {
    std::lock_guard<std::mutex> lock(share_->mu);
    if (auto shared = share_->listings.find(folder); shared != share_->listings.end())
      return *listings_.emplace(folder, shared->second).first->second;
  }
  noteFolder(folder.empty() ? std::string(".") : folder);
  std::optional<FileStamp> stamp = share_ ? folderStamp(folder.empty() ? std::string(".") : folder) : std::nullopt;
  Listing entries;
  std::error_code ec;
  for (fs::directory_iterator d(folder.empty() ? fs::path(".") : fs::path(folder), ec), end; !ec && d != end;
       d.increment(ec)) {
    std::error_code typeEc;
    auto type = d->symlink_status(typeEc).type();  // from the listing where the system gives it
    Entry kind = type == fs::file_type::regular                                                      ? Entry::File
                 : type == fs::file_type::symlink || type == fs::file_type::unknown || typeEc ? Entry::Link
                                                                                                   : Entry::Other;
    entries.emplace(d->path().filename().native(), kind);
  }
  auto made = std::make_shared<const Listing>(std::move(entries));
  if (share_) {
    std::lock_guard<std::mutex> lock(share_->mu);
    share_->listings.emplace(folder, made);
    if (stamp) share_->stamps.emplace(folder, *stamp);
    else share_->trustworthy = false;
  }
  if (share_ && share_->history) {
    ListingHistory& h = *share_->history;
    std::lock_guard<std::mutex> lock(h.mu);
    std::shared_ptr<const Listing>& last = h.last[folder];
    if (last && *last != *made) ++h.changes;
    last = made;
  }
  return *listings_.emplace(folder, std::move(made)).first->second;
}

bool ProjectIndex::isFileKept(const std::string& p) const {
  std::string name(lastNameOf(p));
  Entry kind = Entry::Other;
  {
    std::lock_guard<std::mutex> lock(filesMu_);
    const Listing& listing = listingOf(parentKey(p));
    auto e = listing.find(name);
    if (e == listing.end()) return false;
    kind = e->second;
  }
  if (kind == Entry::Link) distrust();  // what it points to can change with no folder's stamp
  return kind == Entry::File || (kind == Entry::Link && isFile(p));
}

bool ProjectIndex::mayHold(const fs::path& root, const std::string& first) const {
  std::lock_guard<std::mutex> lock(filesMu_);
  const Listing& listing = listingOf(root.native());
  return listing.count(first) || listing.count(first + ".py");
}

ProjectIndex::Module ProjectIndex::moduleOf(const std::string& path) const {
  {
    std::lock_guard<std::mutex> lock(modulesMu_);
    if (auto it = moduleOfPath_.find(path); it != moduleOfPath_.end()) return it->second;
  }
  Module m = computeModuleOf(path);
  std::lock_guard<std::mutex> lock(modulesMu_);
  return moduleOfPath_.emplace(path, std::move(m)).first->second;
}

ProjectIndex::Module ProjectIndex::computeModuleOf(const std::string& path) const {
  fs::path abs = absoluteOf(path);
  Module m;
  m.isPackage = abs.filename() == "__init__.py";
  std::vector<std::string> parts;
  if (!m.isPackage) parts.push_back(abs.stem().string());
  for (fs::path dir = abs.parent_path(); hasInit(dir); dir = dir.parent_path()) {
    parts.push_back(dir.filename().string());
    if (dir.parent_path() == dir) break;
  }
  std::reverse(parts.begin(), parts.end());
  for (const auto& p : parts) m.name += (m.name.empty() ? "" : ".") + p;
  if (m.name.empty()) m.name = abs.stem().string();
  return m;
}

std::optional<std::string> ProjectIndex::findModuleFile(const std::string& dotted, const std::string& fromFile) const {
  if (dotted.empty() || dotted[0] == '.') return std::nullopt;
  const std::vector<fs::path>* roots = nullptr;
  size_t list = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto known = rootsOfFile_.find(fromFile); known != rootsOfFile_.end()) {
      list = known->second;
    } else {
      list = rootListOf(absoluteOf(fromFile).parent_path());
      rootsOfFile_.emplace(fromFile, list);
    }
    if (cache_.size() <= list) cache_.resize(list + 1);
    auto it = cache_[list].find(dotted);
    if (it != cache_[list].end()) return it->second;
    roots = &rootLists_[list];
  }
  std::optional<std::string> found;
  // Candidates by string: `root/a/b.py`, then `root/a/b/__init__.py` (no path object per candidate).
  std::string rel = dotted;
  std::replace(rel.begin(), rel.end(), '.', '/');
  std::string first = dotted.substr(0, dotted.find('.'));
  for (const auto& root : *roots) {
    if (!mayHold(root, first)) continue;  // one directory listing per root, not two stats per name
    std::string base = root.native();
    if (base.empty() || base.back() != '/') base.push_back('/');
    base += rel;
    if (isFileKept(base + ".py")) {
      found = base + ".py";
      break;
    }
    if (isFileKept(base + "/__init__.py")) {
      found = base + "/__init__.py";
      break;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  cache_[list][dotted] = found;
  return found;
}

std::optional<std::string> ProjectIndex::findModule(const std::string& dotted, const std::string& fromFile) const {
  std::optional<std::string> file = findModuleFile(dotted, fromFile);
  if (file) file = displayKept(*file);
  return file;
}

std::optional<std::string> ProjectIndex::absoluteName(const std::string& fromFile, std::string_view spelled) const {
  size_t dots = 0;
  while (dots < spelled.size() && spelled[dots] == '.') ++dots;
  if (dots == 0) return std::string(spelled);
  Module m = moduleOf(fromFile);
  std::vector<std::string> parts;
  for (size_t start = 0; start <= m.name.size();) {
    size_t dot = m.name.find('.', start);
    parts.push_back(m.name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  size_t drop = dots - (m.isPackage ? 1 : 0);
  if (drop > parts.size()) return std::nullopt;  // beyond the top-level package
  parts.resize(parts.size() - drop);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ".") + p;
  std::string_view rest = spelled.substr(dots);
  if (!rest.empty()) out += (out.empty() ? "" : ".") + std::string(rest);
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<FileStamp> ProjectIndex::folderStamp(const std::string& folder) {
  struct stat st {};
  if (::lstat(folder.c_str(), &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? std::optional<FileStamp>(FileStamp{kMissing, 0, 0}) : std::nullopt;
  if (S_ISLNK(st.st_mode)) return std::nullopt;
  auto ns = [](const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
  return FileStamp{static_cast<uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

void ProjectIndex::noteFolder(const std::string& folder) const {
  std::lock_guard<std::mutex> lock(layoutMu_);
  if (!layout_.trustworthy || layout_.folders.count(folder)) return;
  if (auto stamp = folderStamp(folder)) layout_.folders.emplace(folder, *stamp);
  else layout_.trustworthy = false;  // a link, or it cannot be stat'ed
}

void ProjectIndex::distrust() const {
  std::lock_guard<std::mutex> lock(layoutMu_);
  layout_.trustworthy = false;
}

bool ProjectIndex::probeFile(const fs::path& dir, const char* name) const {
  std::string folder = dir.string();
  noteFolder(folder);
  std::string p = folder + "/" + name;
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return false;
  if (!S_ISLNK(st.st_mode)) return S_ISREG(st.st_mode);
  distrust();  // what it points to can change with no folder's stamp
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

ProjectIndex::Layout ProjectIndex::layout() const {
  std::lock_guard<std::mutex> lock(layoutMu_);
  Layout out = layout_;
  out.cwd = cwd_.string();
  return out;
}

std::vector<std::string> ProjectIndex::extraRoots() const {
  std::vector<std::string> out;
  for (const auto& r : extra_) out.push_back(r.generic_string());
  return out;
}

// ------------------------------------------------------------------ import scan

namespace {
bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

std::string_view readDotted(std::string_view line, size_t& i) {
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  size_t start = i;
  while (i < line.size() && identChar(line[i])) ++i;
  return line.substr(start, i - start);
}
}  // namespace

std::vector<std::string> scanImports(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::string_view rest = line.substr(i);
    if (rest.rfind("import ", 0) == 0) {
      size_t j = i + 7;
      for (;;) {
        std::string_view name = readDotted(line, j);
        if (!name.empty()) out.emplace_back(name);
        while (j < line.size() && line[j] != ',' && line[j] != '#') ++j;  // skip "as x"
        if (j >= line.size() || line[j] != ',') break;
        ++j;
      }
    } else if (rest.rfind("from ", 0) == 0) {
      size_t j = i + 5;
      std::string_view mod = readDotted(line, j);
      while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
      if (mod.empty() || line.substr(j, 7) != "import ") continue;
      out.emplace_back(mod);
      j += 7;
      // Names on this line (parenthesised lists spanning lines are read up to the line end).
      for (;;) {
        while (j < line.size() && (line[j] == ' ' || line[j] == '(' || line[j] == '\t')) ++j;
        std::string_view name = readDotted(line, j);
        if (name.empty() || name == "*") break;
        std::string full(mod);
        if (full.back() != '.') full += ".";
        out.push_back(full + std::string(name));
        while (j < line.size() && line[j] != ',' && line[j] != '#') ++j;
        if (j >= line.size() || line[j] != ',') break;
        ++j;
      }
    }
  }
  return out;
}

bool importLinesDiffer(std::string_view before, std::string_view after, const ChangedSpan& span) {
  auto touched = [&](std::string_view text, size_t end) {
    size_t from = span.begin == 0 ? 0 : text.rfind('\n', span.begin - 1);
    from = from == std::string_view::npos ? 0 : from;
    size_t to = text.find('\n', end);
    return text.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from);
  };
  return touched(before, span.oldEnd).find("import") != std::string_view::npos ||
         touched(after, span.newEnd).find("import") != std::string_view::npos;
}

}  // namespace shardlint
