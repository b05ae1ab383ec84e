#include "config/ConfigFixes.h"

#include <cctype>

#include "config/Roles.h"

namespace shardlint::rules::config {

Syntax syntaxOf(const SourceFile& file) {
  auto ends = [&](std::string_view ext) {
    return file.path.size() >= ext.size() && file.path.compare(file.path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".json")) return Syntax::Json;
  if (ends(".py")) return Syntax::Python;
  if (ends(".yaml") || ends(".yml")) return Syntax::Yaml;
  return Syntax::Shell;
}

namespace {

// A YAML plain scalar that PyYAML reads back as this very string: letters, digits and a few
// punctuation marks, not starting with an indicator, not a bool/null/number.
bool plainYamlString(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ',' && c != '-' && c != '/')
      return false;
  if (v.front() == '-' || v.front() == '.' || std::isdigit(static_cast<unsigned char>(v.front()))) return false;
  YNode probe;
  probe.kind = YNode::Kind::Scalar;
  probe.value = std::string(v);
  return shardlint::config::resolveYaml11(probe).type == shardlint::config::Resolved::Type::String;
}

bool shellWordSafe(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ',' && c != '-' && c != '/' &&
        c != '+')
      return false;
  return true;
}

std::string doubleQuoted(std::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::optional<std::string> stringText(const SourceFile& file, const YNode& like, std::string_view value) {
  if (like.range.end > file.text.size() || like.range.begin >= like.range.end) return std::nullopt;
  char first = file.text[like.range.begin];
  bool printable = true;
  for (char c : value) printable = printable && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  if (!printable) return std::nullopt;
  switch (syntaxOf(file)) {
    case Syntax::Json:
      return doubleQuoted(value);
    case Syntax::Python:
      if (first == '\'') {
        std::string out = "'";
        for (char c : value) {
          if (c == '\'' || c == '\\') out += '\\';
          out += c;
        }
        return out + "'";
      }
      return doubleQuoted(value);
    case Syntax::Yaml:
      if (first == '"') return doubleQuoted(value);
      if (first == '\'') {
        std::string out = "'";
        for (char c : value) out += c == '\'' ? std::string("''") : std::string(1, c);
        return out + "'";
      }
      if (first == '|' || first == '>') return std::nullopt;
      if (plainYamlString(value)) return std::string(value);
      return doubleQuoted(value);
    case Syntax::Shell:
      if (!shellWordSafe(value)) return std::nullopt;
      if (first == '"' || first == '\'') return std::string(1, first) + std::string(value) + first;
      return std::string(value);
  }
  return std::nullopt;
}

std::optional<ByteRange> yamlEntryLines(const SourceFile& file, const YNode& key, const YNode& value) {
  const std::string& t = file.text;
  if (key.range.begin > t.size() || value.range.end > t.size()) return std::nullopt;
  size_t begin = key.range.begin;
  while (begin > 0 && (t[begin - 1] == ' ' || t[begin - 1] == '\t')) --begin;
  if (begin > 0 && t[begin - 1] != '\n') return std::nullopt;  // something before the key on its line
  size_t end = std::max<size_t>(value.range.end, key.range.end);
  size_t nl = t.find('\n', end);
  std::string_view rest(t.data() + end, (nl == std::string::npos ? t.size() : nl) - end);
  size_t k = rest.find_first_not_of(" \t\r");
  if (k != std::string_view::npos && rest[k] != '#') return std::nullopt;  // more of a flow mapping
  return ByteRange{static_cast<uint32_t>(begin), static_cast<uint32_t>(nl == std::string::npos ? t.size() : nl + 1)};
}

}  // namespace shardlint::rules::config
