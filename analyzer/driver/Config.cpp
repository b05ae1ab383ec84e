#include "driver/Config.h"

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
  for (const auto& [key, value] : table) {
    std::string k(key.str());
    std::string where = file.string() + ": `" + k + "`";
    if (k == "roots") {
      for (const auto& r : stringList(value, where)) {
        fs::path p = fs::path(r).is_absolute() ? fs::path(r) : dir / r;
        cfg.roots.push_back(p.lexically_normal().string());
      }
    } else if (k == "select") {
      cfg.select = stringList(value, where);
    } else if (k == "ignore") {
      cfg.ignore = stringList(value, where);
    } else if (k == "accelerate-config") {
      std::vector<std::string> list;
      if (auto one = value.value<std::string>()) list.push_back(*one);
      else list = stringList(value, where);
      for (const auto& c : list) {
        fs::path p = fs::path(c).is_absolute() ? fs::path(c) : dir / c;
        cfg.accelerateConfigs.push_back(p.lexically_normal().string());
      }
    } else if (k == "jobs") {
      auto n = value.value<int64_t>();
      if (!n || *n < 0 || *n > 1024) throw std::runtime_error(where + " must be an integer from 0 to 1024");
      cfg.jobs = static_cast<unsigned>(*n);
    } else {
      throw std::runtime_error(file.string() + ": unknown key `" + k +
                               "` in shardlint's settings (known: roots, select, ignore, jobs, accelerate-config)");
    }
  }
  return cfg;
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
  if (!pyproject) return readTable(doc, file);
  const toml::node_view<toml::node> tool = doc["tool"]["shardlint"];
  if (!tool) return std::nullopt;
  const toml::table* t = tool.as_table();
  if (!t) throw std::runtime_error(file.string() + ": [tool.shardlint] must be a table");
  return readTable(*t, file);
}

}  // namespace

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

}  // namespace shardlint
