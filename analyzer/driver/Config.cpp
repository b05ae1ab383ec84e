#include "driver/Config.h"

#include <regex>
#include <stdexcept>
#include <system_error>
#include <toml++/toml.h>

namespace fs = std::filesystem;

namespace shardlint {

namespace {

std::vector<std::string> stringList(const toml::node& node, const std::string& where) {
  std::vector<std::string> out;
  const toml::array* arr = node.as_array();
  if (!arr) throw std::runtime_error(where + " must be a list of strings");
  for (const auto& el : *arr) {
    auto s = el.value<std::string>();
    if (!s) throw std::runtime_error(where + " must be a list of strings");
    out.push_back(*s);
  }
  return out;
}

FileConfig readTable(const toml::table& table, const fs::path& file) {
  FileConfig cfg;
  cfg.path = file;
  fs::path dir = file.parent_path();
  auto besideFile = [&](const std::string& p) {  // a path written in the file is relative to its folder
    return (fs::path(p).is_absolute() ? fs::path(p) : dir / p).lexically_normal().string();
  };
  for (const auto& [key, value] : table) {
    std::string k(key.str());
    std::string where = file.string() + ": `" + k + "`";
    if (k == "roots") {
      for (const auto& r : stringList(value, where)) cfg.roots.push_back(besideFile(r));
    } else if (k == "select") {
      cfg.select = stringList(value, where);
    } else if (k == "ignore") {
      cfg.ignore = stringList(value, where);
    } else if (k == "accelerate-config") {
      std::vector<std::string> list;
      if (auto one = value.value<std::string>()) list.push_back(*one);
      else list = stringList(value, where);
      for (const auto& c : list) cfg.accelerateConfigs.push_back(besideFile(c));
    } else if (k == "extend-select") {
      cfg.extendSelect = stringList(value, where);
    } else if (k == "exclude") {
      cfg.exclude = stringList(value, where);
    } else if (k == "optimizers") {
      cfg.optimizers = stringList(value, where);
    } else if (k == "wraps") {
      cfg.wraps = stringList(value, where);
    } else if (k == "per-file-ignores") {
      const toml::table* t = value.as_table();
      if (!t) throw std::runtime_error(where + " must be a table of glob = [rules]");
      for (const auto& [glob, rules] : *t) cfg.perFileIgnores.emplace_back(std::string(glob.str()), stringList(rules, where));
    } else if (k == "severity") {
      const toml::table* t = value.as_table();
      if (!t) throw std::runtime_error(where + " must be a table of rule = \"error\" | \"warning\" | \"info\" | \"hint\"");
      for (const auto& [rule, level] : *t) {
        auto l = level.value<std::string>();
        if (!l || (*l != "error" && *l != "warning" && *l != "info" && *l != "hint"))
          throw std::runtime_error(where + "." + std::string(rule.str()) + " must be \"error\", \"warning\", \"info\" or \"hint\"");
        cfg.severity.emplace_back(std::string(rule.str()), *l);
      }
    } else if (k == "fsdp-version") {
      auto n = value.value<int64_t>();
      if (!n || (*n != 1 && *n != 2)) throw std::runtime_error(where + " must be 1 or 2");
      cfg.fsdpVersion = static_cast<int>(*n);
    } else if (k == "markdown") {
      auto b = value.value<bool>();
      if (!b || !value.is_boolean()) throw std::runtime_error(where + " must be true or false");
      cfg.markdown = *b;
    } else if (k == "jobs") {
      auto n = value.value<int64_t>();
      if (!n || *n < 0 || *n > 1024) throw std::runtime_error(where + " must be an integer from 0 to 1024");
      cfg.jobs = static_cast<unsigned>(*n);
    } else {
      throw std::runtime_error(file.string() + ":" + std::to_string(key.source().begin.line) + ": unknown key `" + k +
                               "` in shardlint's settings (known: select, extend-select, ignore, per-file-ignores, "
                               "exclude, severity, roots, accelerate-config, fsdp-version, optimizers, wraps, markdown, jobs)");
    }
  }
  return cfg;
}

// The settings of a parsed file: the whole table, or a pyproject.toml's [tool.shardlint] (nullopt without one).
std::optional<FileConfig> fromDocument(const toml::table& doc, const fs::path& file, bool pyproject) {
  if (!pyproject) return readTable(doc, file);
  const toml::node_view<const toml::node> tool = doc["tool"]["shardlint"];
  if (!tool) return std::nullopt;
  const toml::table* t = tool.as_table();
  if (!t) throw std::runtime_error(file.string() + ": [tool.shardlint] must be a table");
  return readTable(*t, file);
}

std::optional<FileConfig> tryFile(const fs::path& file, bool pyproject) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  toml::table doc;
  try {
    doc = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw std::runtime_error(file.string() + ":" + std::to_string(src.begin.line) + ":" +
                             std::to_string(src.begin.column) + ": invalid TOML: " + std::string(e.description()));
  }
  return fromDocument(doc, file, pyproject);
}

}  // namespace

std::optional<FileConfig> configFromText(std::string_view text, const fs::path& file, bool pyproject) {
  toml::table doc;
  try {
    doc = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw std::runtime_error(file.string() + ":" + std::to_string(src.begin.line) + ":" +
                             std::to_string(src.begin.column) + ": invalid TOML: " + std::string(e.description()));
  }
  return fromDocument(doc, file, pyproject);
}

FileConfig loadConfig(const fs::path& start, const std::optional<std::string>& explicitPath) {
  if (explicitPath) {
    fs::path p(*explicitPath);
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) throw std::runtime_error(*explicitPath + ": no such configuration file");
    auto cfg = tryFile(p, p.filename() == "pyproject.toml");
    return cfg ? *cfg : FileConfig{};
  }
  std::error_code ec;
  fs::path dir = fs::absolute(start, ec);
  for (; !dir.empty(); dir = dir.parent_path()) {
    if (auto cfg = tryFile(dir / ".shardlint.toml", false)) return *cfg;
    if (auto cfg = tryFile(dir / "pyproject.toml", true)) return *cfg;
    if (dir.parent_path() == dir) break;
  }
  return {};
}

bool globMatch(std::string_view pattern, std::string_view path) {
  // Translate to a regex once per call (settings are few).
  std::string re;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '*' && i + 1 < pattern.size() && pattern[i + 1] == '*') {
      re += ".*";
      ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == '/') ++i, re += "/?";
    } else if (c == '*') {
      re += "[^/]*";
    } else if (c == '?') {
      re += "[^/]";
    } else if (std::string_view(".^$+(){}[]|\\").find(c) != std::string_view::npos) {
      re += '\\';
      re += c;
    } else {
      re += c;
    }
  }
  std::regex rx(re);
  std::string p(path);
  if (std::regex_match(p, rx)) return true;
  for (size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', slash + 1))
    if (std::regex_match(p.substr(slash + 1), rx)) return true;
  return false;
}

std::string describeConfig(const FileConfig& cfg) {
  auto list = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
    return s + "]";
  };
  std::string out = "# settings from " + (cfg.path ? cfg.path->string() : std::string("defaults (no configuration file)")) +
                    ", with command-line options applied\n[tool.shardlint]\n";
  out += "select = " + list(cfg.select.empty() ? std::vector<std::string>{"ALL"} : cfg.select) + "\n";
  out += "extend-select = " + list(cfg.extendSelect) + "\n";
  out += "ignore = " + list(cfg.ignore) + "\n";
  out += "exclude = " + list(cfg.exclude) + "\n";
  out += "roots = " + list(cfg.roots) + "\n";
  out += "accelerate-config = " + list(cfg.accelerateConfigs) + "\n";
  out += "optimizers = " + list(cfg.optimizers) + "\n";
  out += "wraps = " + list(cfg.wraps) + "\n";
  out += "fsdp-version = " + (cfg.fsdpVersion ? std::to_string(*cfg.fsdpVersion) : std::string("\"unset\"")) + "\n";
  out += std::string("markdown = ") + (cfg.markdown.value_or(true) ? "true" : "false") + "\n";
  out += "jobs = " + std::to_string(cfg.jobs.value_or(0)) + "  # 0: all cores\n";
  out += "\n[tool.shardlint.per-file-ignores]\n";
  for (const auto& [glob, rules] : cfg.perFileIgnores) out += "\"" + glob + "\" = " + list(rules) + "\n";
  out += "\n[tool.shardlint.severity]\n";
  for (const auto& [rule, level] : cfg.severity) out += rule + " = \"" + level + "\"\n";
  return out;
}

}  // namespace shardlint
