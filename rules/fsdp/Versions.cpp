#include "fsdp/Versions.h"

#include <algorithm>
#include <cctype>

namespace shardlint::rules::fsdp {
namespace {

using Version = std::vector<long>;

// The release part of a version ("2.0.9rc1" -> 2.0.9); `wildcard` is set by a trailing ".*".
std::optional<Version> parseVersion(std::string_view s, bool* wildcard = nullptr) {
  if (wildcard) *wildcard = false;
  if (s.size() >= 2 && s.substr(s.size() - 2) == ".*") {
    if (wildcard) *wildcard = true;
    s.remove_suffix(2);
  }
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) s.remove_prefix(1);
  Version v;
  size_t i = 0;
  while (i < s.size()) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) break;
    long n = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && n < 1000000) n = n * 10 + (s[i++] - '0');
    v.push_back(n);
    if (i < s.size() && s[i] == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) ++i;
    else break;
  }
  if (v.empty()) return std::nullopt;
  return v;
}

int compare(const Version& a, const Version& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    long x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// The first version after every version with prefix `v` (2.0 -> 2.1).
Version nextPrefix(Version v) {
  v.back() += 1;
  return v;
}

// Whether one clause caps the versions below `bound`.
bool clauseBelow(std::string_view c, const Version& bound) {
  auto starts = [&](std::string_view p) { return c.substr(0, p.size()) == p; };
  bool wild = false;
  auto after = [&](size_t n) { return parseVersion(c.substr(n), &wild); };
  if (starts("===") || starts("==")) {
    auto v = after(starts("===") ? 3 : 2);
    return v && compare(wild ? nextPrefix(*v) : *v, bound) <= (wild ? 0 : -1);
  }
  if (starts("<=")) {
    auto v = after(2);
    return v && compare(*v, bound) < 0;
  }
  if (starts("<")) {
    auto v = after(1);
    return v && compare(*v, bound) <= 0;
  }
  if (starts("~=")) {  // ~=2.0.5 means >=2.0.5,==2.0.*
    auto v = after(2);
    if (!v || v->size() < 2) return false;
    v->pop_back();
    return compare(nextPrefix(*v), bound) <= 0;
  }
  if (starts(">") || starts("!=")) return false;
  if (starts("^")) {  // Poetry: up to the next change of the first non-zero part
    auto v = after(1);
    if (!v) return false;
    size_t i = 0;
    while (i + 1 < v->size() && (*v)[i] == 0) ++i;
    v->resize(i + 1);
    return compare(nextPrefix(*v), bound) <= 0;
  }
  if (starts("~")) {  // Poetry: ~2.0.3 and ~2.0 mean <2.1; ~2 means <3
    auto v = after(1);
    if (!v) return false;
    v->resize(std::min<size_t>(v->size(), 2));
    return compare(nextPrefix(*v), bound) <= 0;
  }
  if (starts("=")) {  // conda: a prefix match
    auto v = after(1);
    return v && compare(nextPrefix(*v), bound) <= 0;
  }
  auto v = parseVersion(c, &wild);  // Poetry's bare version, conda's "2.0.*"
  return v && compare(wild ? nextPrefix(*v) : *v, bound) <= (wild ? 0 : -1);
}

// Whether one clause keeps the versions at or above `bound`.
bool clauseAtLeast(std::string_view c, const Version& bound) {
  auto starts = [&](std::string_view p) { return c.substr(0, p.size()) == p; };
  bool wild = false;
  auto atLeast = [&](size_t n) {
    auto v = parseVersion(c.substr(n), &wild);
    return v && compare(*v, bound) >= 0;  // "==0.33.*" starts at 0.33
  };
  if (starts("===")) return atLeast(3);
  if (starts("==") || starts(">=") || starts("~=")) return atLeast(2);
  if (starts("<") || starts("!=")) return false;
  if (starts(">") || starts("^") || starts("~") || starts("=")) return atLeast(1);
  return atLeast(0);  // Poetry's bare version, conda's "2.0.*"
}

// `written` with spaces dropped after an operator and turned into clause separators elsewhere (Poetry).
std::string normalizeSpec(std::string_view written) {
  std::string spec;
  for (char c : written) {
    if (c == ' ' || c == '\t') {
      if (!spec.empty() && std::string_view("<>=!~^,|").find(spec.back()) == std::string_view::npos) spec += ',';
      continue;
    }
    spec += c;
  }
  return spec;
}

}  // namespace

bool allowsOnlyBelow(std::string_view written, std::string_view boundText) {
  auto bound = parseVersion(boundText);
  // Spaces: dropped after an operator (">= 2.0"), else they separate Poetry's clauses (">=1.0 <2.0").
  std::string spec;
  for (char c : written) {
    if (c == ' ' || c == '\t') {
      if (!spec.empty() && std::string_view("<>=!~^,|").find(spec.back()) == std::string_view::npos) spec += ',';
      continue;
    }
    spec += c;
  }
  if (!bound || spec.empty()) return false;
  // Poetry alternatives: each must be below.
  for (size_t start = 0; start <= spec.size();) {
    size_t bar = spec.find("||", start);
    std::string_view alt = spec.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    bool below = false;
    for (size_t s = 0; s <= alt.size();) {  // clauses joined by "," (PEP 440) or " " (Poetry, spaces removed)
      size_t comma = alt.find(',', s);
      std::string_view clause = alt.substr(s, comma == std::string_view::npos ? std::string_view::npos : comma - s);
      if (!clause.empty() && clauseBelow(clause, *bound)) below = true;
      if (comma == std::string_view::npos) break;
      s = comma + 1;
    }
    if (!below) return false;
    if (bar == std::string_view::npos) break;
    start = bar + 2;
  }
  return true;
}

std::optional<std::string> pinnedBelow(const std::map<std::string, std::string>& facts,
                                       const std::vector<std::string>& packages, std::string_view bound) {
  std::optional<std::string> first;
  for (const auto& name : packages) {
    auto it = facts.find("requires:" + name);
    if (it == facts.end()) continue;
    const std::string& v = it->second;
    for (size_t start = 0; start <= v.size();) {
      size_t bar = v.find('|', start);
      std::string entry = v.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
      size_t tab = entry.find('\t');
      std::string spec = entry.substr(0, tab), where = tab == std::string::npos ? "" : entry.substr(tab + 1);
      if (!allowsOnlyBelow(spec, bound)) return std::nullopt;  // some declaration lets a later version in
      if (!first) first = name + spec + (where.empty() ? "" : " (" + where + ")");
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
  }
  return first;
}

}  // namespace shardlint::rules::fsdp

namespace shardlint::rules::fsdp {

bool allowsOnlyAtLeast(std::string_view written, std::string_view boundText) {
  auto bound = parseVersion(boundText);
  std::string spec = normalizeSpec(written);
  if (!bound || spec.empty()) return false;
  for (size_t start = 0; start <= spec.size();) {  // Poetry alternatives: each must be at or above
    size_t bar = spec.find("||", start);
    std::string_view alt =
        std::string_view(spec).substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    bool atLeast = false;
    for (size_t s = 0; s <= alt.size();) {  // clauses: one lower bound is enough
      size_t comma = alt.find(',', s);
      std::string_view clause = alt.substr(s, comma == std::string_view::npos ? std::string_view::npos : comma - s);
      if (!clause.empty() && clauseAtLeast(clause, *bound)) atLeast = true;
      if (comma == std::string_view::npos) break;
      s = comma + 1;
    }
    if (!atLeast) return false;
    if (bar == std::string::npos) break;
    start = bar + 2;
  }
  return true;
}

bool pinnedAtLeast(const std::map<std::string, std::string>& facts, const std::vector<std::string>& packages,
                   std::string_view bound) {
  bool any = false;
  for (const auto& name : packages) {
    auto it = facts.find("requires:" + name);
    if (it == facts.end()) continue;
    const std::string& v = it->second;
    for (size_t start = 0; start <= v.size();) {
      size_t bar = v.find('|', start);
      std::string entry = v.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
      if (!allowsOnlyAtLeast(entry.substr(0, entry.find('\t')), bound)) return false;
      any = true;
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
  }
  return any;
}

}  // namespace shardlint::rules::fsdp
