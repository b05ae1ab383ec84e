// Inline expectations in fixture files (format: fixtures/README.md).
#pragma once
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace shardlint::testing {

struct Expectation {
  uint32_t line = 0;    // 1-based line of the finding
  uint32_t column = 0;  // 1-based code-point column
  std::string code;
  std::optional<std::string> messageRegex;
};

inline uint32_t codepoints(const std::string& s, size_t bytes) {
  uint32_t n = 0;
  for (size_t i = 0; i < bytes && i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  return n;
}

inline std::vector<Expectation> parseExpectations(const std::string& text) {
  // `#   ^^^ SL101` (caret marks the column) or `# <- SL101` (the `#` marks it); `//` in C++.
  static const std::regex re(R"(^(\s*)(?:#|//)(\s*)(\^+|<-)\s+((?:SL\d{3}\s*)+)(?::\s*(.*))?$)");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  std::vector<Expectation> out;
  std::vector<bool> isExpectation(lines.size(), false);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, re)) continue;
    isExpectation[i] = true;
    size_t target = i;
    while (target > 0 && isExpectation[target - 1]) --target;
    if (target == 0) continue;
    bool arrow = m[3].str() == "<-";
    uint32_t caret = codepoints(lines[i], static_cast<size_t>(arrow ? m.position(1) + m.length(1) : m.position(3)));
    std::string codes = m[4].str();
    std::regex codeRe(R"(SL\d{3})");
    for (auto it = std::sregex_iterator(codes.begin(), codes.end(), codeRe); it != std::sregex_iterator(); ++it) {
      Expectation e;
      e.line = static_cast<uint32_t>(target);  // 1-based number of the line above (index target-1)
      e.column = caret + 1;
      e.code = it->str();
      if (m[5].matched && !m[5].str().empty()) e.messageRegex = m[5].str();
      out.push_back(e);
    }
  }
  return out;
}

}  // namespace shardlint::testing
