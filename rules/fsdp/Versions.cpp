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

// True when every Poetry alternative ("||") of `written` has a clause ("," or a space) for which
// `clauseHolds` is true. The clauses are views into one normalized copy that outlives them.
template <typename ClauseTest>
bool everyAlternativeHasClause(std::string_view written, ClauseTest clauseHolds) {
  const std::string spec = normalizeSpec(written);
  if (spec.empty()) return false;
  const std::string_view all(spec);
  for (size_t start = 0; start <= all.size();) {
    size_t bar = all.find("||", start);
    std::string_view alt = all.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    bool holds = false;
    for (size_t s = 0; s <= alt.size();) {
      size_t comma = alt.find(',', s);
      std::string_view clause = alt.substr(s, comma == std::string_view::npos ? std::string_view::npos : comma - s);
      if (!clause.empty() && clauseHolds(clause)) holds = true;
      if (comma == std::string_view::npos) break;
      s = comma + 1;
    }
    if (!holds) return false;
    if (bar == std::string_view::npos) break;
    start = bar + 2;
  }
  return true;
}

}  // namespace

bool allowsOnlyBelow(std::string_view written, std::string_view boundText) {
  auto bound = parseVersion(boundText);
  return bound && everyAlternativeHasClause(written, [&](std::string_view c) { return clauseBelow(c, *bound); });
}

namespace {

// Calls `visit(name, spec, where)` for each declaration of `packages` in the facts ("SPEC\tPATH:LINE"
// joined by newlines, which no spec holds: Poetry's "||" does), until it returns false. False when stopped.
template <typename Visit>
bool eachDeclaration(const std::map<std::string, std::string>& facts, const std::vector<std::string>& packages,
                     Visit visit) {
  for (const auto& name : packages) {
    auto it = facts.find("requires:" + name);
    if (it == facts.end()) continue;
    std::string_view all(it->second);
    for (size_t start = 0; start <= all.size();) {
      size_t nl = all.find('\n', start);
      std::string_view entry = all.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
      size_t tab = entry.find('\t');
      std::string_view where = tab == std::string_view::npos ? std::string_view() : entry.substr(tab + 1);
      if (!visit(name, entry.substr(0, tab), where)) return false;
      if (nl == std::string_view::npos) break;
      start = nl + 1;
    }
  }
  return true;
}

}  // namespace

std::optional<std::string> pinnedBelow(const std::map<std::string, std::string>& facts,
                                       const std::vector<std::string>& packages, std::string_view bound) {
  std::optional<std::string> first;
  bool all = eachDeclaration(facts, packages, [&](const std::string& name, std::string_view spec, std::string_view where) {
    if (!allowsOnlyBelow(spec, bound)) return false;  // some declaration lets a later version in
    if (!first) first = name + std::string(spec) + (where.empty() ? "" : " (" + std::string(where) + ")");
    return true;
  });
  return all ? first : std::nullopt;
}

bool allowsOnlyAtLeast(std::string_view written, std::string_view boundText) {
  auto bound = parseVersion(boundText);
  return bound && everyAlternativeHasClause(written, [&](std::string_view c) { return clauseAtLeast(c, *bound); });
}

bool pinnedAtLeast(const std::map<std::string, std::string>& facts, const std::vector<std::string>& packages,
                   std::string_view bound) {
  bool any = false;
  bool all = eachDeclaration(facts, packages, [&](const std::string&, std::string_view spec, std::string_view) {
    any = true;
    return allowsOnlyAtLeast(spec, bound);
  });
  return all && any;
}

std::optional<std::vector<bool>> allowedReleases(const std::map<std::string, std::string>& facts,
                                                 const std::vector<std::string>& packages,
                                                 const std::vector<std::string_view>& releases, std::string* pin) {
  std::vector<bool> allowed(releases.size(), true);
  bool any = false;
  eachDeclaration(facts, packages, [&](const std::string& name, std::string_view spec, std::string_view where) {
    if (!any && pin) *pin = name + std::string(spec) + (where.empty() ? "" : " (" + std::string(where) + ")");
    any = true;
    for (size_t i = 0; i < releases.size(); ++i) {
      std::string next = i + 1 < releases.size() ? std::string(releases[i + 1]) : std::string(releases[i]) + ".1";
      if (allowsOnlyBelow(spec, releases[i]) || allowsOnlyAtLeast(spec, next)) allowed[i] = false;
    }
    return true;
  });
  if (!any) return std::nullopt;
  return allowed;
}

}  // namespace shardlint::rules::fsdp
