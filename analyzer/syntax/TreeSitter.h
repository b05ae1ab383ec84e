// RAII owners for the tree-sitter C API and a node-kind table for Python.
#pragma once
#include <tree_sitter/api.h>

#include <cctype>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/SourceFile.h"

extern "C" const TSLanguage* tree_sitter_python(void);

namespace shardlint::syntax {

// Python node kinds the engine dispatches on. Every name is checked against the
// grammar once at start-up (PyKinds::instance()).
#define SHARDLINT_PY_KINDS(X)                                                                      \
  X(module) X(block) X(comment) X(identifier) X(attribute) X(call) X(argument_list)                \
  X(keyword_argument) X(subscript) X(expression_statement) X(assignment) X(augmented_assignment)   \
  X(string) X(concatenated_string) X(integer) X(float_, "float") X(true_, "true")                  \
  X(false_, "false") X(none) X(list) X(tuple) X(set) X(dictionary) X(pair) X(list_comprehension)   \
  X(generator_expression) X(set_comprehension) X(dictionary_comprehension) X(for_in_clause)        \
  X(if_clause) X(lambda) X(binary_operator) X(boolean_operator) X(not_operator)                    \
  X(comparison_operator) X(unary_operator) X(conditional_expression) X(parenthesized_expression)   \
  X(named_expression) X(await) X(list_splat) X(dictionary_splat) X(expression_list)                \
  X(pattern_list) X(tuple_pattern) X(list_pattern) X(if_statement) X(elif_clause) X(else_clause)   \
  X(for_statement) X(while_statement) X(try_statement) X(except_clause) X(finally_clause)          \
  X(with_statement) X(with_clause) X(with_item) X(match_statement) X(case_clause)                  \
  X(function_definition) X(class_definition) X(decorated_definition) X(parameters)                 \
  X(default_parameter) X(typed_parameter) X(typed_default_parameter) X(list_splat_pattern)         \
  X(dictionary_splat_pattern) X(return_statement) X(raise_statement) X(pass_statement)             \
  X(break_statement) X(continue_statement) X(import_statement) X(import_from_statement)             \
  X(future_import_statement) X(aliased_import) X(dotted_name) X(relative_import)                   \
  X(import_prefix) X(wildcard_import) X(global_statement) X(nonlocal_statement)                    \
  X(delete_statement) X(assert_statement) X(decorator) X(yield) X(string_content) X(slice)         \
  X(keyword_separator) X(positional_separator) X(as_pattern)

enum class Kind : uint16_t {
  Other = 0,
#define SHARDLINT_KIND_ENUM(name, ...) name,
  SHARDLINT_PY_KINDS(SHARDLINT_KIND_ENUM)
#undef SHARDLINT_KIND_ENUM
  Error,
  Count
};

class PyKinds {
 public:
  static const PyKinds& instance();  // throws std::runtime_error on grammar drift
  Kind kind(TSNode n) const {
    TSSymbol s = ts_node_symbol(n);
    if (s == static_cast<TSSymbol>(-1)) return Kind::Error;  // ts_builtin_sym_error
    return s < table_.size() ? table_[s] : Kind::Other;
  }
  TSFieldId field(std::string_view name) const;
  static std::string_view name(Kind k);
  const TSLanguage* language() const { return lang_; }

 private:
  PyKinds();
  const TSLanguage* lang_;
  std::vector<Kind> table_;
  // Field names with their ids, an open-addressing table (the runtime's own lookup compares the
  // name with every field's; the engine asks about a million times per thousand files).
  static constexpr size_t kFieldSlots = 256;
  static size_t fieldSlot(std::string_view n) {
    return (n.size() * 131u + static_cast<uint8_t>(n.front()) * 31u + static_cast<uint8_t>(n.back())) % kFieldSlots;
  }
  std::vector<std::pair<std::string_view, TSFieldId>> fields_;
};

struct TreeDeleter {
  void operator()(TSTree* t) const { ts_tree_delete(t); }
};
struct ParserDeleter {
  void operator()(TSParser* p) const { ts_parser_delete(p); }
};

// Move-only owner of a parsed tree.
class Tree {
 public:
  Tree() = default;
  explicit Tree(TSTree* t) : tree_(t) {}
  TSNode root() const { return ts_tree_root_node(tree_.get()); }
  explicit operator bool() const { return static_cast<bool>(tree_); }
  const TSTree* get() const { return tree_.get(); }

 private:
  std::unique_ptr<TSTree, TreeDeleter> tree_;
};

// Parses Python source with `parser`, incrementally from `old` when given. When that tree has
// errors, parses `lineBreakView(text)` again from scratch and keeps that tree instead when it has
// none: the view has the same length, so every node keeps its byte range in `text`. `*viaView`
// says which tree came back (one parsed from the view must not be the `old` tree of a later
// incremental parse: its rows are not the text's). Null on failure (timeout or cancel).
TSTree* parsePython(TSParser* parser, const TSTree* old, std::string_view text, bool* viaView = nullptr);

// A same-length copy of Python source with the line breaks CPython's tokenizer sees, for the
// parse above; empty when it would not differ or the text cannot be tokenized (an unclosed bracket
// or string). Two workarounds for the grammar's external scanner, which cannot see brackets:
// - a line break inside brackets followed by a line indented less than the statement (upstream
//   tree-sitter-python issue #256: the scanner emits a DEDENT there) becomes "\r", which the
//   grammar skips as whitespace; a comment ending such a line becomes spaces (it would run on);
// - a lone "\r" outside brackets and strings (old Mac line ends; CPython reads it as a line
//   break, the scanner as a space) becomes "\n".
// Besides line breaks, two same-length rewrites of constructs the grammar rejects: a starred bracketed
// or quoted atom in an unbracketed tuple loses its star, and `except *(...)` becomes `except* (...)`.
std::string lineBreakView(std::string_view text);

// Move-only owner of a parser. One per thread.
class Parser {
 public:
  Parser();
  Tree parse(std::string_view text);  // parsePython(); an empty Tree on failure (timeout or cancel)

 private:
  std::unique_ptr<TSParser, ParserDeleter> parser_;
};

// Small helpers over TSNode (a value that owns nothing).
inline ByteRange rangeOf(TSNode n) { return {ts_node_start_byte(n), ts_node_end_byte(n)}; }
inline std::string_view textOf(TSNode n, std::string_view src) {
  return src.substr(ts_node_start_byte(n), ts_node_end_byte(n) - ts_node_start_byte(n));
}
// The child of `n` in field `name` (the first one), or a null node: like ts_node_child_by_field_id, but
// from the node's own children only, as a cursor pass sees them (tree-sitter also gives a
// match_statement's "alternative" from its body).
//
// field(), fieldChildren() and namedChildren() may read a node's children from a table of the calling
// thread, filled by one cursor pass the first time the node is asked about (syntax/Children.cpp), when
// rememberChildren(true) was called: the server does, as after each edit its analysis asks about the
// same nodes as before the edit (the incremental parse shares the unchanged subtrees), and tree-sitter's
// own walks over the children cost several hundred instructions a call. The command line does not: it
// asks about most nodes once or twice, the table would save it nothing, and it would hold each thread's
// last trees alive.
void rememberChildren(bool on);
TSNode field(TSNode n, std::string_view name);
// A node's children as namedChildren gives them: the first kInline in place, so that the interpreter's
// many short lists (an expression's operands, a call's arguments, most blocks) cost no allocation;
// longer ones on the heap.
class NodeList {
 public:
  void push_back(TSNode n) {
    if (size_ < kInline) {
      inline_[size_++] = n;
      return;
    }
    if (size_ == kInline) heap_.assign(inline_, inline_ + kInline);
    heap_.push_back(n);
    ++size_;
  }
  const TSNode* begin() const { return size_ <= kInline ? inline_ : heap_.data(); }
  const TSNode* end() const { return begin() + size_; }
  std::reverse_iterator<const TSNode*> rbegin() const { return std::reverse_iterator<const TSNode*>(end()); }
  std::reverse_iterator<const TSNode*> rend() const { return std::reverse_iterator<const TSNode*>(begin()); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const TSNode& operator[](size_t i) const { return begin()[i]; }
  const TSNode& front() const { return begin()[0]; }
  const TSNode& back() const { return begin()[size_ - 1]; }

 private:
  static constexpr size_t kInline = 8;
  size_t size_ = 0;
  TSNode inline_[kInline];
  std::vector<TSNode> heap_;
};
// The named children of `n` in order (one cursor pass: ts_node_named_child(n, i) walks from the
// first child each time).
NodeList namedChildren(TSNode n);
// All children of `n` in order, named or not (an operator's tokens too): likewise, for ts_node_child(n, i).
NodeList children(TSNode n);
// How many nodes' children this thread's table holds now, and how many trees it keeps alive for them
// (for tests).
size_t rememberedNodes();
size_t heldTrees();
// The root subtree of `tree` as the table knows trees by (a copy of a tree shares it).
const void* rootSubtreeOf(const TSTree* tree);
// All children of `n` in field `name` (an if_statement has several "alternative"s).
std::vector<TSNode> fieldChildren(TSNode n, std::string_view name);
// A call's keyword arguments in source order (`name=value`; `**splat` and positional ones skipped).
struct KeywordArgument {
  TSNode name;
  TSNode value;
};
std::vector<KeywordArgument> keywordArguments(TSNode call);
// The last dotted component of a call's callee as written (`FullyShardedDataParallelPlugin` for
// `accelerate.utils.FullyShardedDataParallelPlugin(...)`).
std::string_view calleeLastName(TSNode call, std::string_view src);
// A byte of a word in Python source: a letter, a digit (ASCII) or `_`. A table, not std::isalnum (a
// call into the C library per byte, which the word scans of every file make millions of times).
inline constexpr struct WordBytes {
  bool table[256] = {};
  constexpr WordBytes() {
    for (int c = 0; c < 256; ++c)
      table[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
} kWordBytes{};
inline bool isWordByte(char c) { return kWordBytes.table[static_cast<unsigned char>(c)]; }
// Where `word` next occurs in `text` from `from` on as a whole word (no word byte just before or after
// it), or npos.
inline size_t findWord(std::string_view text, std::string_view word, size_t from = 0) {
  for (size_t pos = text.find(word, from); pos != std::string_view::npos; pos = text.find(word, pos + 1)) {
    size_t end = pos + word.size();
    if ((pos == 0 || !isWordByte(text[pos - 1])) && (end == text.size() || !isWordByte(text[end]))) return pos;
  }
  return std::string_view::npos;
}
// The calls whose calleeLastName is one of `names`, in the order a walk of the tree meets them (by
// start, an enclosing call first): found from the names' whole-word occurrences in the text (the
// callee's last name is an identifier there) rather than a walk over every node.
std::vector<TSNode> callsNamed(TSNode root, std::string_view src, const std::unordered_set<std::string_view>& names);
// First ERROR or MISSING node in document order, if any.
std::optional<TSNode> firstSyntaxError(TSNode root);
// The range of the comment that holds the bytes [begin, end) (the byte before `begin` is in it, so the
// comment's `#` is not among them; `end` may be the comment's end), if one does.
std::optional<ByteRange> commentAround(TSNode root, uint32_t begin, uint32_t end);

// Statements, for fixes that move or add them (null nodes when there is none):
// the statement directly in a block (or the module) whose range contains `range`;
TSNode blockStatementAt(TSNode root, ByteRange range);
// the node of type `type` spanning exactly `range`;
TSNode nodeSpanning(TSNode root, ByteRange range, std::string_view type);
// the statement after which code that follows `n` goes: the outermost `for`/`while` around `n`
// within its function (or class, or module), else `n`'s own expression statement.
TSNode followingPoint(TSNode n);
// The names a statement binds (assignment, augmented assignment and loop targets, definitions,
// imports, `as` targets), and every identifier in it.
std::set<std::string> boundNames(TSNode stmt, std::string_view src);
std::set<std::string> identifiersIn(TSNode n, std::string_view src);

// Visits every node under `root` in document order with a tree cursor (no recursion);
// `visit(node)` returns false to skip that node's children.
template <class Visit>
void walk(TSNode root, Visit&& visit) {
  TSTreeCursor cur = ts_tree_cursor_new(root);
  for (;;) {
    if (visit(ts_tree_cursor_current_node(&cur)) && ts_tree_cursor_goto_first_child(&cur)) continue;
    bool moved = false;
    while (!moved) {
      if (ts_tree_cursor_goto_next_sibling(&cur)) moved = true;
      else if (!ts_tree_cursor_goto_parent(&cur)) break;
    }
    if (!moved) break;
  }
  ts_tree_cursor_delete(&cur);
}

}  // namespace shardlint::syntax
