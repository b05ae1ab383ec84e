#include "config/Links.h"

#include <cctype>

#include "config/Roles.h"

namespace shardlint::rules::config {

Facts accelerateConfigFacts(const SourceFile& file, const std::vector<shardlint::config::YNode>& docs) {
  for (const auto& doc : docs) {
    auto s = detectFsdp(file, doc);
    if (!s || s->role != Role::Accelerate || !s->enabled) continue;
    Facts f;
    f["accelerate_fsdp"] = std::to_string(s->version);
    f["config"] = file.path;
    const YNode* decide = s->section ? s->section : s->root;
    if (const auto* e = s->entry("use_orig_params")) {
      auto b = asBool(&e->second);
      f["use_orig_params"] = b ? (*b ? "true" : "false") : "";
      decide = &e->second;
    } else {
      f["use_orig_params"] = "";  // the launcher's default (true) applies
    }
    LineCol lc = file.index.resolve(decide->range.begin);
    f["config_line"] = std::to_string(lc.line + 1);
    f["config_col"] = std::to_string(lc.codepointColumn + 1);
    return f;
  }
  return {};
}

namespace {
// Words of a command, with backslash-newline continuations joined and simple quotes removed.
std::vector<std::string> words(std::string_view cmd) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  for (size_t i = 0; i < cmd.size(); ++i) {
    char c = cmd[i];
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '\\' && i + 1 < cmd.size() && cmd[i + 1] == '\n') {
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c)) || c == ';' || c == '&' || c == '|') {
      if (!cur.empty()) out.push_back(cur), cur.clear();
      if (c == '\n' || c == ';' || c == '&' || c == '|') out.push_back("\n");
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}
}  // namespace

std::vector<LaunchLink> accelerateLaunchLinks(const SourceFile& file) {
  std::vector<LaunchLink> links;
  std::vector<std::string> w = words(file.text);
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i] != "launch" || i == 0 || (w[i - 1] != "accelerate" && w[i - 1].find("/accelerate") == std::string::npos))
      continue;
    LaunchLink link;
    for (size_t j = i + 1; j < w.size() && w[j] != "\n"; ++j) {
      std::string a = w[j];
      std::string value;
      auto eq = a.find('=');
      if (a.rfind("--", 0) == 0 && eq != std::string::npos) value = a.substr(eq + 1), a = a.substr(0, eq);
      auto next = [&]() -> std::string {
        if (!value.empty()) return value;
        if (j + 1 < w.size() && w[j + 1] != "\n") return w[++j];
        return "";
      };
      if (a == "--config_file" || a == "--config-file") {
        link.configFile = next();
      } else if (a == "--use_fsdp" || a == "--use-fsdp") {
        link.facts["accelerate_fsdp"] = link.facts.count("accelerate_fsdp") ? link.facts["accelerate_fsdp"] : "1";
      } else if (a == "--fsdp_version" || a == "--fsdp-version") {
        link.facts["accelerate_fsdp"] = next();
      } else if (a == "--fsdp_use_orig_params" || a == "--fsdp-use-orig-params") {
        std::string v = next();
        for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        link.facts["use_orig_params"] = v == "true" || v == "1" ? "true" : "false";
        link.facts["config"] = file.path;
        LineCol lc = file.index.resolve(static_cast<uint32_t>(file.text.find("orig_params")));
        link.facts["config_line"] = std::to_string(lc.line + 1);
        link.facts["config_col"] = std::to_string(lc.codepointColumn + 1);
      } else if (a.rfind("--", 0) == 0) {
        if (a.find("fsdp") != std::string::npos && value.empty() && j + 1 < w.size() && w[j + 1].rfind("--", 0) != 0)
          ++j;  // another --fsdp_* flag with its value
      } else if (a.size() > 3 && a.substr(a.size() - 3) == ".py") {
        link.script = a;
        break;  // the script; what follows are its own arguments
      }
    }
    if (!link.script.empty()) links.push_back(std::move(link));
  }
  return links;
}

}  // namespace shardlint::rules::config
