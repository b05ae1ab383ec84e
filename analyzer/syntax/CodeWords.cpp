#include "syntax/CodeWords.h"

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "syntax/TreeSitter.h"

namespace shardlint::syntax {

namespace {

// A string prefix (`r`, `b`, `f`, `t`, `u`, `rb`, `fr`, `tr`, ... in either case); `formatted` when it makes
// an f-string or a template string (Python 3.14), whose fields are code.
bool stringPrefix(std::string_view w, bool& formatted) {
  if (w.empty() || w.size() > 2) return false;
  formatted = false;
  bool raw = false, bytes = false, unicode = false;
  for (char c : w) {
    switch (c) {
      case 'r': case 'R': if (raw) return false; raw = true; break;
      case 'b': case 'B': if (bytes) return false; bytes = true; break;
      case 'f': case 'F': case 't': case 'T': if (formatted) return false; formatted = true; break;
      case 'u': case 'U': if (unicode) return false; unicode = true; break;
      default: return false;
    }
  }
  if (unicode && w.size() > 1) return false;
  return !(bytes && formatted);
}

// Where the run of word bytes that starts at `i` ends.
size_t wordEnd(std::string_view text, size_t i) {
  while (i < text.size() && isWordByte(text[i])) ++i;
  return i;
}

// The words `only` holds (all words without it): a word's length and first byte are checked before it is
// looked up (most words are no name asked).
class WordFilter {
 public:
  explicit WordFilter(const std::unordered_set<std::string_view>* only) : only_(only) {
    if (only)
      for (std::string_view w : *only) {
        if (w.empty()) continue;
        if (w.size() < 64) lengths_.set(w.size());
        else longNames_ = true;
        firsts_.set(static_cast<unsigned char>(w[0]));
      }
  }
  // `only`'s own view of `word`, or none when it holds none (without `only`: `word` itself).
  std::optional<std::string_view> find(std::string_view word) const {
    if (!only_) return word;
    if (word.empty() || !firsts_.test(static_cast<unsigned char>(word[0])) ||
        !(word.size() < 64 ? lengths_.test(word.size()) : longNames_))
      return std::nullopt;
    auto it = only_->find(word);
    if (it == only_->end()) return std::nullopt;
    return *it;
  }

 private:
  const std::unordered_set<std::string_view>* only_;
  std::bitset<64> lengths_;
  std::bitset<256> firsts_;
  bool longNames_ = false;
};

// Calls `count(word)` for each word `text`'s code mentions (codeWordCounts says which).
template <class Count>
void scanWords(std::string_view text, Count&& count) {
  auto countWords = [&](std::string_view part) {
    for (size_t i = 0; i < part.size();) {
      if (!isWordByte(part[i])) {
        ++i;
        continue;
      }
      size_t j = wordEnd(part, i);
      count(part.substr(i, j - i));
      i = j;
    }
  };
  // The string whose opening quote is at `q`: returns where it ends (past its closing quote), or `q + 1`
  // when it is not closed (the rest is then read as code).
  auto string = [&](size_t q, bool formatted) -> size_t {
    char quote = text[q];
    bool triple = q + 2 < text.size() && text[q + 1] == quote && text[q + 2] == quote;
    size_t open = triple ? 3 : 1, k = q + open;
    while (k < text.size()) {
      char c = text[k];
      if (c == '\\') {
        k += 2;
        continue;
      }
      if (!triple && c == '\n') break;
      if (c == quote && (!triple || (k + 2 < text.size() && text[k + 1] == quote && text[k + 2] == quote))) {
        std::string_view body = text.substr(q + open, k - q - open);
        if (formatted) {
          countWords(body);
        } else if (!body.empty() && wordEnd(body, 0) == body.size()) {
          count(body);
        }
        return k + open;
      }
      ++k;
    }
    return q + 1;  // not closed
  };
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      i = string(i, false);
    } else if (isWordByte(c)) {
      size_t j = wordEnd(text, i);
      bool formatted = false;
      if (j < text.size() && (text[j] == '"' || text[j] == '\'') && stringPrefix(text.substr(i, j - i), formatted)) {
        i = string(j, formatted);
        continue;
      }
      count(text.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
}

// Nodes whose children cut their text where no string or comment is open: statements that hold blocks, their
// clauses and blocks (an expression's children may be a string's parts, as an f-string's fields are).
bool splitsIntoStatements(Kind k) {
  switch (k) {
    case Kind::module: case Kind::block: case Kind::class_definition: case Kind::function_definition:
    case Kind::decorated_definition: case Kind::if_statement: case Kind::elif_clause: case Kind::else_clause:
    case Kind::for_statement: case Kind::while_statement: case Kind::try_statement: case Kind::except_clause:
    case Kind::finally_clause: case Kind::with_statement: case Kind::match_statement: case Kind::case_clause:
      return true;
    default: return false;
  }
}

// The counts of the spans this thread read (codeWordCountsBySpans): by the span text's hash and length, for
// the names of `names` (a hash of them).
struct SpanTable {
  uint64_t names = 0;
  std::unordered_map<uint64_t, std::vector<std::pair<std::string, int>>> spans;
};

SpanTable& spanTable() {
  thread_local SpanTable t;
  return t;
}

}  // namespace

std::unordered_map<std::string_view, int> codeWordCounts(std::string_view text,
                                                         const std::unordered_set<std::string_view>* only) {
  std::unordered_map<std::string_view, int> counts;
  WordFilter filter(only);
  scanWords(text, [&](std::string_view word) {
    if (filter.find(word)) ++counts[word];
  });
  return counts;
}

std::unordered_map<std::string_view, int> codeWordCountsBySpans(TSNode root, std::string_view text,
                                                                const std::unordered_set<std::string_view>& only) {
  std::unordered_map<std::string_view, int> counts;
  WordFilter filter(&only);
  auto countHere = [&](std::string_view word) {
    if (auto name = filter.find(word)) ++counts[*name];
  };
  auto whole = [&] {
    counts.clear();
    scanWords(text, countHere);
    return counts;
  };
  if (ts_node_is_null(root) || ts_node_has_error(root) || ts_node_end_byte(root) > text.size()) return whole();
  // The table counted the names asked now, or starts again.
  std::vector<std::string_view> sorted(only.begin(), only.end());
  std::sort(sorted.begin(), sorted.end());
  std::string joined;
  for (std::string_view n : sorted) joined.append(n).push_back('\n');
  SpanTable& table = spanTable();
  constexpr size_t kMaxSpans = 1 << 16;
  if (uint64_t names = textHash(joined); names != table.names || table.spans.size() > kMaxSpans) {
    table.spans.clear();
    table.names = names;
  }
  // A span at most this long (or one that does not split) is a leaf; a leaf shorter than kRemembered is read
  // each time (a hash and a lookup would cost about as much).
  constexpr uint32_t kLeaf = 1024, kRemembered = 96;
  auto leaf = [&](std::string_view span) {
    if (span.size() < kRemembered) return scanWords(span, countHere);
    uint64_t key = textHash(span) ^ (uint64_t{span.size()} * 0x9E3779B97F4A7C15ull);
    auto [it, fresh] = table.spans.try_emplace(key);
    if (fresh) {
      std::unordered_map<std::string_view, int> own;
      scanWords(span, [&](std::string_view word) {
        if (auto name = filter.find(word)) ++own[*name];
      });
      it->second.reserve(own.size());
      for (const auto& [w, c] : own) it->second.emplace_back(std::string(w), c);
    }
    for (const auto& [w, c] : it->second)
      if (auto name = filter.find(w)) counts[*name] += c;
  };
  std::vector<TSNode> todo{root};
  auto textBetween = [&](uint32_t from, uint32_t to) { return text.substr(from, to - from); };
  scanWords(textBetween(0, ts_node_start_byte(root)), countHere);
  scanWords(text.substr(ts_node_end_byte(root)), countHere);
  while (!todo.empty()) {
    TSNode n = todo.back();
    todo.pop_back();
    uint32_t begin = ts_node_start_byte(n), end = ts_node_end_byte(n);
    if (end - begin <= kLeaf || !splitsIntoStatements(PyKinds::instance().kind(n))) {
      leaf(textBetween(begin, end));
      continue;
    }
    // Children at most kLeaf long are read in runs, each run one span from its first child's start to its last
    // one's end (the gaps between them are whitespace and comments): most statements are short, and read one by
    // one they would be read again on every call. A run ends after a child whose length is a multiple of four
    // (or at kRunChildren children, or past kLeaf * 4 bytes): the runs depend on the children's own lengths, so an
    // edit changes the run it falls in and its neighbours (up to the next child that ends a run), not every run
    // after it.
    constexpr int kRunChildren = 16;
    uint32_t at = begin, runBegin = 0, runEnd = 0;
    int inRun = 0;
    auto endRun = [&] {
      if (inRun) leaf(textBetween(runBegin, runEnd));
      inRun = 0;
    };
    for (TSNode c : namedChildren(n)) {
      uint32_t cb = ts_node_start_byte(c), ce = ts_node_end_byte(c);
      if (cb < at || ce < cb || ce > end) return whole();  // never in an error-free tree
      if (ce - cb > kLeaf) {
        endRun();
        scanWords(textBetween(at, cb), countHere);
        todo.push_back(c);
      } else {
        if (!inRun) {
          scanWords(textBetween(at, cb), countHere);
          runBegin = cb;
        }
        runEnd = ce;
        if (++inRun == kRunChildren || (ce - cb) % 4 == 0 || runEnd - runBegin > kLeaf * 4) endRun();
      }
      at = ce;
    }
    endRun();
    scanWords(textBetween(at, end), countHere);
  }
  return counts;
}

size_t rememberedWordSpans() { return spanTable().spans.size(); }

}  // namespace shardlint::syntax
