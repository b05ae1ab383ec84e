// How often each word of a Python file occurs in its code, read from the text (the tree only cuts it into
// spans): what FileAnalysis asks to know that nothing in a file names a function but its own `def`.
#pragma once
#include <tree_sitter/api.h>

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

// codeWordCounts(text, &only) of a module's text (`root` its error-free tree: else the text is read whole),
// read span by span: the tree's statements and blocks cut the text where no string or comment is open, so each
// span counts alone what it counts inside the whole. The thread remembers each larger span's counts by its
// text (hash and length) and the names asked (the table starts again when they change), so that after a
// language server's edit only the spans it changed are read again. The map's keys are `only`'s own views.
std::unordered_map<std::string_view, int> codeWordCountsBySpans(TSNode root, std::string_view text,
                                                                const std::unordered_set<std::string_view>& only);
// Spans remembered on this thread (for tests).
size_t rememberedWordSpans();

}  // namespace shardlint::syntax
