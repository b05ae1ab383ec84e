#include "driver/Requirements.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <toml++/toml.h>

namespace fs = std::filesystem;

namespace shardlint {

std::string normalizePackageName(std::string_view name) {
  std::string out;
  bool sep = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

namespace {

constexpr size_t kMaxDependencyFileBytes = size_t{1} << 20;

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// A PEP 508 line ("name[extra] >=1.0, <2 ; marker", "name (>=1.0)", "name @ url") or, with `conda`,
// a conda spec ("channel::name=1.0", "name 1.0.*"): the package and its specifier.
bool parseSpecLine(std::string_view line, bool conda, std::string& name, std::string& spec) {
  std::string s = trim(line);
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  if (conda) {
    size_t colons = s.find("::");
    if (colons != std::string::npos) s = s.substr(colons + 2);
  }
  size_t i = 0;
  while (i < s.size() && nameChar(s[i])) ++i;
  name = s.substr(0, i);
  std::string rest = s.substr(i);
  if (size_t semi = rest.find(';'); semi != std::string::npos) rest = rest.substr(0, semi);
  rest = trim(rest);
  if (!rest.empty() && rest[0] == '[') {  // extras
    size_t close = rest.find(']');
    rest = close == std::string::npos ? std::string() : trim(rest.substr(close + 1));
  }
  if (!rest.empty() && rest[0] == '@') rest.clear();  // a direct reference: no version to read
  if (rest.size() >= 2 && rest.front() == '(' && rest.back() == ')') rest = trim(rest.substr(1, rest.size() - 2));
  if (conda && !rest.empty() && std::isdigit(static_cast<unsigned char>(rest[0]))) rest = "=" + rest;
  rest.erase(std::remove_if(rest.begin(), rest.end(), [](unsigned char c) { return std::isspace(c); }), rest.end());
  spec = rest;
  return !name.empty();
}

void add(Requirements& out, const std::string& name, const std::string& spec, const fs::path& file, int line) {
  out[normalizePackageName(name)].push_back(Requirement{spec, file.generic_string(), line});
}

void addSpecLine(Requirements& out, std::string_view text, bool conda, const fs::path& file, int line) {
  std::string name, spec;
  if (parseSpecLine(text, conda, name, spec)) add(out, name, spec, file, line);
}

std::optional<std::string> readSmallFile(const fs::path& p) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec || size > kMaxDependencyFileBytes) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void parseRequirementsTxt(const fs::path& file, const std::string& text, Requirements& out, int depth);

void includeRequirements(const fs::path& from, const std::string& target, Requirements& out, int depth) {
  if (depth >= 4 || target.empty()) return;  // `-r` chains (and cycles) end somewhere
  fs::path p = from.parent_path() / target;
  if (auto text = readSmallFile(p)) parseRequirementsTxt(p.lexically_normal(), *text, out, depth + 1);
}

void parseRequirementsTxt(const fs::path& file, const std::string& text, Requirements& out, int depth) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (size_t hash = line.find(" #"); hash != std::string::npos) line.resize(hash);
    std::string s = trim(line);
    if (s.empty() || s[0] == '#') continue;
    if (s[0] == '-') {
      for (const char* opt : {"-r", "--requirement", "-c", "--constraint"}) {
        std::string o(opt);
        if (s.compare(0, o.size(), o) == 0 && s.size() > o.size() && (std::isspace(static_cast<unsigned char>(s[o.size()])) || s[o.size()] == '=')) {
          includeRequirements(file, trim(s.substr(o.size() + 1)), out, depth);
          break;
        }
      }
      continue;
    }
    addSpecLine(out, s, false, file, n);
  }
}

int lineOf(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

void addTomlArray(const toml::node* node, const fs::path& file, Requirements& out) {
  const toml::array* arr = node ? node->as_array() : nullptr;
  if (!arr) return;
  for (const auto& item : *arr)
    if (auto s = item.value<std::string>()) addSpecLine(out, *s, false, file, lineOf(item));
}

void parsePyproject(const fs::path& file, const std::string& text, Requirements& out) {
  toml::table doc;
  try {
    doc = toml::parse(text, file.string());
  } catch (const toml::parse_error&) {
    return;
  }
  if (const toml::table* project = doc["project"].as_table()) {
    addTomlArray(project->get("dependencies"), file, out);
    if (const toml::table* extras = (*project)["optional-dependencies"].as_table())
      for (const auto& [k, v] : *extras) addTomlArray(&v, file, out);
  }
  if (const toml::table* groups = doc["dependency-groups"].as_table())
    for (const auto& [k, v] : *groups) addTomlArray(&v, file, out);
  // Poetry: `name = "^2.0"` or `name = { version = "^2.0", ... }`, also in groups.
  auto poetryTable = [&](const toml::table* deps) {
    if (!deps) return;
    for (const auto& [k, v] : *deps) {
      std::string name(k.str());
      if (name == "python") continue;
      if (auto s = v.value<std::string>()) {
        add(out, name, *s == "*" ? std::string() : *s, file, lineOf(v));
      } else if (const toml::table* t = v.as_table()) {
        auto ver = (*t)["version"].value<std::string>();
        add(out, name, ver && *ver != "*" ? *ver : std::string(), file, lineOf(v));
      }
    }
  };
  if (const toml::table* poetry = doc["tool"]["poetry"].as_table()) {
    poetryTable((*poetry)["dependencies"].as_table());
    poetryTable((*poetry)["dev-dependencies"].as_table());
    if (const toml::table* groups = (*poetry)["group"].as_table())
      for (const auto& [k, v] : *groups)
        if (const toml::table* g = v.as_table()) poetryTable((*g)["dependencies"].as_table());
  }
}

// setup.cfg: [options] install_requires and [options.extras_require], values on continuation lines.
void parseSetupCfg(const fs::path& file, const std::string& text, Requirements& out) {
  std::istringstream in(text);
  std::string line, section;
  bool inList = false;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (size_t hash = line.find(" #"); hash != std::string::npos) line.resize(hash);
    std::string s = trim(line);
    if (s.empty() || s[0] == '#' || s[0] == ';') continue;
    bool indented = std::isspace(static_cast<unsigned char>(line[0]));
    if (!indented && s.front() == '[' && s.back() == ']') {
      section = trim(s.substr(1, s.size() - 2));
      inList = false;
      continue;
    }
    if (!indented) {
      size_t eq = s.find_first_of("=:");
      inList = false;
      if (eq == std::string::npos) continue;
      std::string key = trim(s.substr(0, eq)), value = trim(s.substr(eq + 1));
      inList = (section == "options" && key == "install_requires") || section == "options.extras_require";
      if (inList && !value.empty()) addSpecLine(out, value, false, file, n);
      continue;
    }
    if (inList) addSpecLine(out, s, false, file, n);
  }
}

void parseEnvironmentYml(const fs::path& file, const std::string& text, Requirements& out) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return;
  }
  try {
    if (!doc.IsMap() || !doc["dependencies"] || !doc["dependencies"].IsSequence()) return;
    for (const auto& item : doc["dependencies"]) {
      if (item.IsScalar()) {
        addSpecLine(out, item.Scalar(), true, file, item.Mark().line + 1);
      } else if (item.IsMap() && item["pip"] && item["pip"].IsSequence()) {
        for (const auto& p : item["pip"])
          if (p.IsScalar()) addSpecLine(out, p.Scalar(), false, file, p.Mark().line + 1);
      }
    }
  } catch (const YAML::Exception&) {
  }
}

bool isRequirementsTxt(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0 && name.rfind("requirements", 0) == 0;
}

bool isDependencyFile(const std::string& name) {
  return isRequirementsTxt(name) || name == "pyproject.toml" || name == "setup.cfg" || name == "environment.yml" ||
         name == "environment.yaml";
}

// The dependency files directly in `dir` (and in its `requirements/` folder), sorted.
std::vector<fs::path> dependencyFilesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    if (it->is_regular_file(fe) && isDependencyFile(it->path().filename().string())) out.push_back(it->path());
  }
  fs::path sub = dir / "requirements";
  for (fs::directory_iterator it(sub, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    std::string name = it->path().filename().string();
    if (it->is_regular_file(fe) && name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0)
      out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Requirements parseRequirementsFile(const fs::path& file, const std::string& text) {
  Requirements out;
  std::string name = file.filename().string();
  if (name == "pyproject.toml") parsePyproject(file, text, out);
  else if (name == "setup.cfg") parseSetupCfg(file, text, out);
  else if (name == "environment.yml" || name == "environment.yaml") parseEnvironmentYml(file, text, out);
  else parseRequirementsTxt(file, text, out, 0);
  return out;
}

const Requirements& RequirementsIndex::forDirectory(const fs::path& start) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> visited;
  const Requirements* found = nullptr;
  static const Requirements none;
  fs::path dir = start.lexically_normal();
  for (int steps = 0; steps < 64 && !dir.empty(); ++steps) {
    std::string key = dir.string();
    if (auto it = cache_.find(key); it != cache_.end()) {
      found = &it->second;
      break;
    }
    visited.push_back(key);
    std::vector<fs::path> files = dependencyFilesIn(dir);
    if (!files.empty()) {
      Requirements merged;
      for (const auto& f : files)
        if (auto text = readSmallFile(f))
          for (auto& [k, v] : parseRequirementsFile(f, *text))
            merged[k].insert(merged[k].end(), v.begin(), v.end());
      found = &(cache_[key] = std::move(merged));
      visited.pop_back();
      break;
    }
    std::error_code ec;
    if (fs::exists(dir / ".git", ec) || dir.parent_path() == dir) break;  // the repository's top, or /
    dir = dir.parent_path();
  }
  for (const auto& v : visited) cache_[v] = found ? *found : Requirements{};
  return found ? *found : none;
}

}  // namespace shardlint
