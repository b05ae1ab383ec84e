#include "syntax/CodeWords.h"

#include <bitset>

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

}  // namespace

std::unordered_map<std::string_view, int> codeWordCounts(std::string_view text,
                                                         const std::unordered_set<std::string_view>* only) {
  std::unordered_map<std::string_view, int> counts;
  // With `only`: a word's length and first byte are checked before it is hashed (most words are no name asked).
  std::bitset<64> lengths;
  std::bitset<256> firsts;
  bool longNames = false;
  if (only)
    for (std::string_view w : *only) {
      if (w.empty()) continue;
      if (w.size() < 64) lengths.set(w.size());
      else longNames = true;
      firsts.set(static_cast<unsigned char>(w[0]));
    }
  auto count = [&](std::string_view word) {
    if (only) {
      if (word.empty() || !firsts.test(static_cast<unsigned char>(word[0])) ||
          (word.size() < 64 ? !lengths.test(word.size()) : !longNames) || !only->count(word))
        return;
    }
    ++counts[word];
  };
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
  return counts;
}

}  // namespace shardlint::syntax
