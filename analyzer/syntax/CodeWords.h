// How often each word of a Python file occurs in its code, read from the text alone (no tree): what
// FileAnalysis asks to know that nothing in a file names a function but its own `def`.
#pragma once
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace shardlint::syntax {

// Each word (a maximal run of letters, digits and `_`) and how often the code mentions it. Comments and
// strings mention no word, except a string that is one word as a whole (`getattr(self, "step")` names a
// method) and any word of an f-string or a template string (their fields are code). Text that does not lex (an unterminated
// string) counts as code past where it stops, so a word is never missed, only counted too often.
// With `only`, just the words in it are counted (the others are not kept: a file's thousands of distinct
// words cost no map entries when the caller asks about a few).
std::unordered_map<std::string_view, int> codeWordCounts(std::string_view text,
                                                         const std::unordered_set<std::string_view>* only = nullptr);

}  // namespace shardlint::syntax
