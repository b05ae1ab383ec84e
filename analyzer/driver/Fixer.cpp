#include "driver/Fixer.h"

#include <algorithm>

#include "core/AtomicWrite.h"
#include "core/SourceFile.h"

namespace shardlint {

bool fixAllowed(const Fix& fix, bool unsafe) {
  return !fix.edits.empty() && (fix.applicability == Applicability::Safe || unsafe);
}

std::string fixPath(const Fix& fix) {
  if (fix.edits.empty()) return {};
  const std::string& path = fix.edits.front().location.path;
  for (const auto& e : fix.edits)
    if (e.location.path != path) return {};
  return path;
}

AppliedFixes applyFixes(const std::string& path, const std::string& text, const std::vector<Diagnostic>& diags,
                        bool unsafe) {
  struct Candidate {
    const Fix* fix;
    uint32_t first;
  };
  std::vector<Candidate> candidates;
  for (const auto& d : diags) {
    if (!d.fix || !fixAllowed(*d.fix, unsafe)) continue;
    bool here = true;
    uint32_t first = UINT32_MAX;
    for (const auto& e : d.fix->edits) {
      here = here && e.location.path == path && e.location.range.begin <= e.location.range.end &&
             e.location.range.end <= text.size();
      first = std::min(first, e.location.range.begin);
    }
    if (here) candidates.push_back({&*d.fix, first});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.first < b.first; });
  // The edits taken, by position; a fix is taken whole or not at all.
  std::vector<const Edit*> taken;
  AppliedFixes out;
  for (const auto& c : candidates) {
    bool overlaps = false, changes = false;
    for (const auto& e : c.fix->edits) {
      const ByteRange& r = e.location.range;
      changes = changes || text.compare(r.begin, r.end - r.begin, e.text) != 0;
      for (const Edit* t : taken) {
        const ByteRange& q = t->location.range;
        // Touching ranges overlap too when both are insertions at one point (their order is unclear).
        overlaps = overlaps || (r.begin < q.end && q.begin < r.end) || (r.begin == q.begin && (r.begin == r.end || q.begin == q.end));
      }
      for (const auto& other : c.fix->edits)
        if (&other != &e && r.begin < other.location.range.end && other.location.range.begin < r.end) overlaps = true;
    }
    if (overlaps || !changes) continue;
    for (const auto& e : c.fix->edits) taken.push_back(&e);
    ++out.count;
  }
  std::sort(taken.begin(), taken.end(),
            [](const Edit* a, const Edit* b) { return a->location.range.begin < b->location.range.begin; });
  size_t at = 0;
  for (const Edit* e : taken) {
    out.text.append(text, at, e->location.range.begin - at);
    out.text += e->text;
    at = e->location.range.end;
  }
  out.text.append(text, at, std::string::npos);
  return out;
}

FixRun fixToFixedPoint(std::vector<Diagnostic> first, bool unsafe,
                       const std::function<std::vector<Diagnostic>(const std::map<std::string, std::string>&)>& relint,
                       int maxRounds, const std::map<std::string, std::string>& texts) {
  FixRun run;
  run.remaining = std::move(first);
  std::map<std::string, std::string> current;  // path -> text now (fixed so far)
  for (int round = 0; round < maxRounds; ++round) {
    std::map<std::string, std::vector<Diagnostic>> byPath;
    for (const auto& d : run.remaining)
      if (d.fix && fixAllowed(*d.fix, unsafe))
        if (std::string path = fixPath(*d.fix); !path.empty()) byPath[path].push_back(d);
    bool any = false;
    for (const auto& [path, diags] : byPath) {
      auto it = current.find(path);
      if (it == current.end()) {
        std::string text;
        if (auto given = texts.find(path); given != texts.end()) {
          text = given->second;
        } else if (!readFileBytes(path, text)) {
          if (std::find(run.unreadable.begin(), run.unreadable.end(), path) == run.unreadable.end())
            run.unreadable.push_back(path);
          continue;
        }
        run.changed[path].first = text;
        it = current.emplace(path, std::move(text)).first;
      }
      AppliedFixes applied = applyFixes(path, it->second, diags, unsafe);
      if (applied.count == 0) continue;
      it->second = std::move(applied.text);
      run.fixed += applied.count;
      any = true;
    }
    if (!any) break;
    ++run.rounds;
    run.remaining = relint(current);
  }
  for (auto it = run.changed.begin(); it != run.changed.end();) {
    it->second.second = current[it->first];
    if (it->second.first == it->second.second) it = run.changed.erase(it);
    else ++it;
  }
  return run;
}

std::vector<std::pair<std::string, std::string>> writeFixedFiles(const FixRun& run) {
  std::vector<std::pair<std::string, std::string>> problems;
  for (const auto& [path, texts] : run.changed) {
    std::string now;
    if (!readFileBytes(path, now)) {
      problems.emplace_back(path, "it can no longer be read");
      continue;
    }
    if (now != texts.first) {
      problems.emplace_back(path, "it changed on disk since it was read");
      continue;
    }
    if (std::string err = atomicWriteFile(path, texts.second); !err.empty())
      problems.emplace_back(path, err);
  }
  return problems;
}

namespace {

std::vector<std::string_view> lines(const std::string& text) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    out.emplace_back(text.data() + at, end - at);
    at = end;
  }
  return out;
}

}  // namespace

std::string unifiedDiff(const std::string& path, const std::string& before, const std::string& after) {
  if (before == after) return "";
  std::vector<std::string_view> a = lines(before), b = lines(after);
  // Common head and tail, then a line LCS over the middle (one replaced block when it is too big).
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head && a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) ++tail;
  size_t n = a.size() - head - tail, m = b.size() - head - tail;
  // ops over the middle: ' ' kept, '-' removed, '+' added
  std::vector<std::pair<char, std::string_view>> ops;
  for (size_t i = 0; i < head; ++i) ops.emplace_back(' ', a[i]);
  if (n * m <= 4'000'000) {
    std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        lcs[i][j] = a[head + i] == b[head + j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[head + i] == b[head + j]) ops.emplace_back(' ', a[head + i]), ++i, ++j;
      else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) ops.emplace_back('-', a[head + i++]);
      else ops.emplace_back('+', b[head + j++]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) ops.emplace_back('-', a[head + i]);
    for (size_t j = 0; j < m; ++j) ops.emplace_back('+', b[head + j]);
  }
  for (size_t i = a.size() - tail; i < a.size(); ++i) ops.emplace_back(' ', a[i]);

  std::string out = "--- " + path + "\n+++ " + path + "\n";
  constexpr size_t kContext = 3;
  size_t k = 0;
  while (k < ops.size()) {
    while (k < ops.size() && ops[k].first == ' ') ++k;
    if (k == ops.size()) break;
    // A hunk: from kContext lines before this change to kContext after the last change that
    // lies within 2*kContext kept lines of the previous one.
    size_t start = k >= kContext ? k - kContext : 0;
    size_t end = k;
    for (size_t kept = 0; end < ops.size(); ++end) {
      if (ops[end].first != ' ') kept = 0;
      else if (++kept > 2 * kContext) break;
    }
    size_t last = end;
    while (last > k && ops[last - 1].first == ' ') --last;  // the last change + 1
    end = std::min(ops.size(), last + kContext);
    size_t oldStart = 0, newStart = 0;
    for (size_t q = 0; q < start; ++q) {
      oldStart += ops[q].first != '+';
      newStart += ops[q].first != '-';
    }
    size_t oldLen = 0, newLen = 0;
    for (size_t q = start; q < end; ++q) {
      oldLen += ops[q].first != '+';
      newLen += ops[q].first != '-';
    }
    out += "@@ -" + std::to_string(oldLen ? oldStart + 1 : oldStart) + "," + std::to_string(oldLen) + " +" +
           std::to_string(newLen ? newStart + 1 : newStart) + "," + std::to_string(newLen) + " @@\n";
    for (size_t q = start; q < end; ++q) {
      out += ops[q].first;
      out += ops[q].second;
      if (ops[q].second.empty() || ops[q].second.back() != '\n') out += "\n\\ No newline at end of file\n";
    }
    k = end;
  }
  return out;
}

}  // namespace shardlint
