#include "syntax/TreeSitter.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace shardlint::syntax {

namespace {
struct KindName {
  Kind kind;
  std::string_view name;
};
#define SHARDLINT_KIND_NAME_1(id) KindName{Kind::id, #id},
#define SHARDLINT_KIND_NAME_2(id, str) KindName{Kind::id, str},
#define SHARDLINT_KIND_NAME_PICK(_1, _2, NAME, ...) NAME
#define SHARDLINT_KIND_NAME(...) \
  SHARDLINT_KIND_NAME_PICK(__VA_ARGS__, SHARDLINT_KIND_NAME_2, SHARDLINT_KIND_NAME_1)(__VA_ARGS__)
constexpr KindName kKindNames[] = {SHARDLINT_PY_KINDS(SHARDLINT_KIND_NAME)};
}  // namespace

PyKinds::PyKinds() : lang_(tree_sitter_python()) {
  uint32_t abi = ts_language_abi_version(lang_);
  if (abi < TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION || abi > TREE_SITTER_LANGUAGE_VERSION)
    throw std::runtime_error("tree-sitter-python ABI " + std::to_string(abi) + " is not supported by this runtime");
  uint32_t count = ts_language_symbol_count(lang_);
  table_.assign(count, Kind::Other);
  std::vector<bool> seen(static_cast<size_t>(Kind::Count), false);
  for (TSSymbol s = 0; s < count; ++s) {
    if (ts_language_symbol_type(lang_, s) != TSSymbolTypeRegular) continue;
    std::string_view nm = ts_language_symbol_name(lang_, s);
    if (nm == "ERROR") {
      table_[s] = Kind::Error;
      continue;
    }
    for (const auto& kn : kKindNames) {
      if (kn.name == nm) {
        table_[s] = kn.kind;
        seen[static_cast<size_t>(kn.kind)] = true;
      }
    }
  }
  if (count > 0xFFFF) throw std::runtime_error("unexpected symbol count");
  uint32_t nfields = ts_language_field_count(lang_);
  if (nfields >= kFieldSlots / 2) throw std::runtime_error("unexpected field count");
  fields_.assign(kFieldSlots, {std::string_view(), 0});
  for (TSFieldId f = 1; f <= nfields; ++f) {
    const char* nm = ts_language_field_name_for_id(lang_, f);
    if (!nm || !*nm) continue;
    size_t slot = fieldSlot(nm);
    while (fields_[slot].second) slot = (slot + 1) % kFieldSlots;
    fields_[slot] = {nm, f};
  }
  for (const auto& kn : kKindNames) {
    if (!seen[static_cast<size_t>(kn.kind)])
      throw std::runtime_error("tree-sitter-python grammar has no node kind '" + std::string(kn.name) + "'");
  }
}

const PyKinds& PyKinds::instance() {
  static const PyKinds kinds;
  return kinds;
}

TSFieldId PyKinds::field(std::string_view name) const {
  if (name.empty()) return 0;
  for (size_t slot = fieldSlot(name);; slot = (slot + 1) % kFieldSlots) {
    const auto& [nm, id] = fields_[slot];
    if (!id) return 0;
    if (nm == name) return id;
  }
}

std::string_view PyKinds::name(Kind k) {
  for (const auto& kn : kKindNames)
    if (kn.kind == k) return kn.name;
  return k == Kind::Error ? "ERROR" : "other";
}

Parser::Parser() : parser_(ts_parser_new()) {
  if (!ts_parser_set_language(parser_.get(), PyKinds::instance().language()))
    throw std::runtime_error("cannot load the tree-sitter-python grammar");
}

Tree Parser::parse(std::string_view text) { return Tree(parsePython(parser_.get(), nullptr, text)); }

TSTree* parsePython(TSParser* parser, const TSTree* old, std::string_view text, bool* viaView) {
  if (viaView) *viaView = false;
  auto size = static_cast<uint32_t>(text.size());
  TSTree* tree = ts_parser_parse_string(parser, old, text.data(), size);
  if (!tree || !ts_node_has_error(ts_tree_root_node(tree))) return tree;
  std::string view = lineBreakView(text);
  if (view.empty()) return tree;
  TSTree* second = ts_parser_parse_string(parser, nullptr, view.data(), size);
  if (!second || ts_node_has_error(ts_tree_root_node(second))) {
    if (second) ts_tree_delete(second);
    return tree;
  }
  ts_tree_delete(tree);
  if (viaView) *viaView = true;
  return second;
}

namespace {

bool isNameByte(unsigned char c) { return isWordByte(static_cast<char>(c)) || c >= 0x80; }

// `id` directly before a quote: a string prefix? Sets whether the string is formatted (f, t) or raw.
bool stringPrefix(std::string_view id, bool& format, bool& raw) {
  format = raw = false;
  bool bytes = false, unicode = false;
  if (id.size() > 2) return false;
  for (char ch : id) {
    bool* flag = nullptr;
    switch (std::tolower(static_cast<unsigned char>(ch))) {
      case 'f': case 't': flag = &format; break;
      case 'r': flag = &raw; break;
      case 'b': flag = &bytes; break;
      case 'u': flag = &unicode; break;
      default: return false;
    }
    if (*flag) return false;
    *flag = true;
  }
  return !(unicode && id.size() > 1) && !(bytes && format);
}

}  // namespace

std::string lineBreakView(std::string_view src) {
  const size_t n = src.size();
  // Code: outside strings (depth = open brackets); FString: the literal part of an f-string;
  // Field: a replacement field (depth = brackets open inside it); Spec: a field's format spec.
  enum class Ctx { Code, FString, Field, Spec };
  struct Frame {
    Ctx ctx;
    char quote = 0;
    bool triple = false, raw = false;
    int depth = 0;
  };
  std::vector<Frame> stack{{Ctx::Code}};
  std::string view(src);
  bool changed = false;
  int statementIndent = 0;  // the scanner's indentation of the current logical line
  bool lineStart = true;
  size_t commentStart = std::string_view::npos;  // a comment that ends at the next line break
  auto isBreak = [&](size_t i) { return i < n && (src[i] == '\n' || src[i] == '\r'); };
  auto breakLength = [&](size_t i) { return src[i] == '\r' && i + 1 < n && src[i + 1] == '\n' ? 2 : 1; };
  // A lone "\r" is a line break for CPython; present it as "\n".
  auto normalizeBreak = [&](size_t i) {
    if (src[i] == '\r' && breakLength(i) == 1) view[i] = '\n', changed = true;
  };
  // Skips a plain (not formatted) string literal whose opening quote is at `i`; npos if unterminated.
  auto skipString = [&](size_t i) -> size_t {
    char q = src[i];
    bool triple = i + 2 < n && src[i + 1] == q && src[i + 2] == q;
    for (size_t j = i + (triple ? 3 : 1); j < n;) {
      char c = src[j];
      if (c == '\\') j += j + 2 < n && src[j + 1] == '\r' && src[j + 2] == '\n' ? 3 : 2;
      else if (c == q && !triple) return j + 1;
      else if (c == q && j + 2 < n && src[j + 1] == q && src[j + 2] == q) return j + 3;
      else if ((c == '\n' || c == '\r') && !triple) return std::string_view::npos;
      else ++j;
    }
    return std::string_view::npos;
  };

  for (size_t i = 0; i < n;) {
    Frame& f = stack.back();
    char c = src[i];
    if (f.ctx == Ctx::FString || f.ctx == Ctx::Spec) {
      size_t k = stack.size() - 1;  // the f-string this literal text belongs to
      while (stack[k].ctx != Ctx::FString) --k;
      const Frame& str = stack[k];
      if (c == '\\') {
        char next = i + 1 < n ? src[i + 1] : 0;
        if (!str.raw && next == 'N' && i + 2 < n && src[i + 2] == '{') {  // \N{NAME}
          size_t close = src.find('}', i + 3);
          if (close == std::string_view::npos) return {};
          i = close + 1;
        } else if (!str.raw || next == str.quote || next == '\\' || next == '\n' || next == '\r') {
          i += next == '\r' && i + 2 < n && src[i + 2] == '\n' ? 3 : 2;
        } else {
          ++i;
        }
      } else if (c == '{') {
        if (i + 1 < n && src[i + 1] == '{') i += 2;
        else stack.push_back({Ctx::Field}), ++i;
      } else if (c == '}') {
        if (f.ctx == Ctx::Spec) {  // the end of the field that owns the spec
          stack.pop_back();
          stack.pop_back();
          ++i;
        } else {
          i += i + 1 < n && src[i + 1] == '}' ? 2 : 1;
        }
      } else if (c == str.quote && f.ctx == Ctx::FString) {
        if (!f.triple) stack.pop_back(), ++i;
        else if (i + 2 < n && src[i + 1] == c && src[i + 2] == c) stack.pop_back(), i += 3;
        else ++i;
      } else if ((c == '\n' || c == '\r') && !str.triple) {
        return {};  // unterminated
      } else {
        ++i;
      }
      continue;
    }

    // Code or a replacement field.
    bool code = f.ctx == Ctx::Code;
    if (code && f.depth == 0 && lineStart) {
      int indent = 0;
      size_t j = i;
      for (; j < n && (src[j] == ' ' || src[j] == '\t' || src[j] == '\f'); ++j)
        indent = src[j] == ' ' ? indent + 1 : src[j] == '\t' ? indent + 8 : 0;
      if (j < n && !isBreak(j) && src[j] != '#') statementIndent = indent;
      lineStart = false;
      i = j;
      continue;
    }
    if (c == '#') {
      commentStart = i;
      while (i < n && !isBreak(i)) ++i;
      continue;
    }
    if (c == '\\' && isBreak(i + 1)) {  // line continuation
      normalizeBreak(i + 1);
      i += 1 + breakLength(i + 1);
      continue;
    }
    if (c == '\n' || c == '\r') {
      if (!code) {  // inside a replacement field the scanner emits no indentation tokens
        i += breakLength(i);
      } else if (f.depth == 0) {  // the end of a logical line
        normalizeBreak(i);
        i += breakLength(i);
        lineStart = true;
      } else {
        // A line break inside brackets, then maybe blank lines: where is the next line's content,
        // and is it indented less than the statement?
        size_t j = i, content = std::string_view::npos;
        int indent = 0;
        while (content == std::string_view::npos) {
          j += breakLength(j);
          indent = 0;
          for (; j < n && (src[j] == ' ' || src[j] == '\t' || src[j] == '\f'); ++j)
            indent = src[j] == ' ' ? indent + 1 : src[j] == '\t' ? indent + 8 : 0;
          if (j >= n) return {};  // an unclosed bracket
          if (!isBreak(j)) content = j;
        }
        bool dedented = indent < statementIndent;
        for (size_t k = i; k < content; ++k) {
          if (src[k] == '\n' && dedented) view[k] = '\r', changed = true;
          else if (src[k] == '\r' && !dedented && breakLength(k) == 1) view[k] = '\n', changed = true;
        }
        if (dedented && commentStart != std::string_view::npos)
          for (size_t k = commentStart; k < i; ++k) view[k] = ' ';
        i = content;
      }
      commentStart = std::string_view::npos;
      continue;
    }
    if (c == '"' || c == '\'' || isNameByte(static_cast<unsigned char>(c))) {
      size_t nameEnd = i;
      while (nameEnd < n && isNameByte(static_cast<unsigned char>(src[nameEnd]))) ++nameEnd;
      bool format = false, raw = false;
      if (nameEnd < n && (src[nameEnd] == '"' || src[nameEnd] == '\'') &&
          stringPrefix(src.substr(i, nameEnd - i), format, raw)) {
        char q = src[nameEnd];
        if (format) {
          bool triple = nameEnd + 2 < n && src[nameEnd + 1] == q && src[nameEnd + 2] == q;
          stack.push_back({Ctx::FString, q, triple, raw});
          i = nameEnd + (triple ? 3 : 1);
        } else {
          i = skipString(nameEnd);
          if (i == std::string_view::npos) return {};
        }
      } else {
        i = nameEnd;
      }
      continue;
    }
    if (c == '*' && code && f.depth == 0 && i + 1 < n && src[i + 1] != '*' && src[i + 1] != '=') {
      // The grammar rejects a starred bracketed or quoted atom in an unbracketed tuple
      // (`return a, *(f(x) for x in xs)`, `x = *[1], 2`); unstarred, it is the same kind of
      // tuple element, which is all the analysis needs.
      size_t next = i + 1;
      while (next < n && (src[next] == ' ' || src[next] == '\t')) ++next;
      size_t prev = i;
      while (prev > 0 && (src[prev - 1] == ' ' || src[prev - 1] == '\t')) --prev;
      auto word = [&](std::string_view w) {
        return prev >= w.size() && src.substr(prev - w.size(), w.size()) == w &&
               (prev == w.size() || !isNameByte(static_cast<unsigned char>(src[prev - w.size() - 1])));
      };
      bool unary = prev > 0 && (src[prev - 1] == ',' || src[prev - 1] == '=' || word("return") || word("yield"));
      if (word("except") && prev < i) {
        // `except *(A, B):`: tree-sitter-python 0.23.6 knows the except-group keyword only as the one
        // token `except*`; move the star next to the keyword (`except* (A, B):`, same length).
        view[prev] = '*';
        view[i] = ' ';
        changed = true;
      } else if (unary && next < n && (src[next] == '(' || src[next] == '[' || src[next] == '"' || src[next] == '\'')) {
        view[i] = ' ';
        changed = true;
      }
    }
    if (c == '(' || c == '[' || c == '{') {
      ++f.depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (f.depth == 0) {
        if (code || c != '}') return {};  // unbalanced
        stack.pop_back();                 // the end of a replacement field
      } else {
        --f.depth;
      }
    } else if (c == ':' && !code && f.depth == 0) {
      stack.push_back({Ctx::Spec});
    }
    ++i;
  }
  if (stack.size() != 1 || stack.back().depth != 0) return {};
  return changed ? view : std::string();
}

std::vector<KeywordArgument> keywordArguments(TSNode call) {
  std::vector<KeywordArgument> out;
  TSNode args = field(call, "arguments");
  if (ts_node_is_null(args)) return out;
  for (TSNode a : namedChildren(args))
    if (PyKinds::instance().kind(a) == Kind::keyword_argument) out.push_back({field(a, "name"), field(a, "value")});
  return out;
}

std::string_view calleeLastName(TSNode call, std::string_view src) {
  std::string_view name = textOf(field(call, "function"), src);
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

std::vector<TSNode> callsNamed(TSNode root, std::string_view src, const std::unordered_set<std::string_view>& names) {
  const auto& kinds = PyKinds::instance();
  std::vector<TSNode> calls;
  for (std::string_view name : names) {
    if (name.empty()) continue;
    for (size_t pos = findWord(src, name); pos != std::string_view::npos; pos = findWord(src, name, pos + 1)) {
      size_t end = pos + name.size();
      TSNode id = ts_node_descendant_for_byte_range(root, static_cast<uint32_t>(pos), static_cast<uint32_t>(end));
      if (ts_node_is_null(id) || kinds.kind(id) != Kind::identifier) continue;
      // `name(...)`, or `x.name(...)` (the identifier is the attribute's last part).
      TSNode callee = id, up = ts_node_parent(id);
      if (!ts_node_is_null(up) && kinds.kind(up) == Kind::attribute &&
          ts_node_eq(field(up, "attribute"), id)) {
        callee = up;
        up = ts_node_parent(up);
      }
      if (ts_node_is_null(up) || kinds.kind(up) != Kind::call || !ts_node_eq(field(up, "function"), callee))
        continue;
      if (calleeLastName(up, src) == name) calls.push_back(up);
    }
  }
  // A walk's (pre-)order: by start, the enclosing call (the longer) first.
  std::sort(calls.begin(), calls.end(), [](TSNode a, TSNode b) {
    uint32_t as = ts_node_start_byte(a), bs = ts_node_start_byte(b);
    return as != bs ? as < bs : ts_node_end_byte(a) > ts_node_end_byte(b);
  });
  return calls;
}

std::optional<ByteRange> commentAround(TSNode root, uint32_t begin, uint32_t end) {
  if (begin == 0) return std::nullopt;
  TSNode n = ts_node_descendant_for_byte_range(root, begin - 1, begin);
  if (ts_node_is_null(n) || PyKinds::instance().kind(n) != Kind::comment) return std::nullopt;
  ByteRange r = rangeOf(n);
  if (r.begin >= begin || r.end < end) return std::nullopt;
  return r;
}

std::optional<TSNode> firstSyntaxError(TSNode root) {
  if (!ts_node_has_error(root)) return std::nullopt;
  TSTreeCursor cur = ts_tree_cursor_new(root);
  std::optional<TSNode> found;
  for (;;) {
    TSNode n = ts_tree_cursor_current_node(&cur);
    if (ts_node_is_error(n) || ts_node_is_missing(n)) {
      found = n;
      break;
    }
    if (ts_node_has_error(n) && ts_tree_cursor_goto_first_child(&cur)) continue;
    bool moved = false;
    while (!moved) {
      if (ts_tree_cursor_goto_next_sibling(&cur)) {
        moved = true;
      } else if (!ts_tree_cursor_goto_parent(&cur)) {
        break;
      }
    }
    if (!moved) break;
  }
  ts_tree_cursor_delete(&cur);
  return found;
}

TSNode blockStatementAt(TSNode root, ByteRange range) {
  TSNode n = ts_node_descendant_for_byte_range(root, range.begin, range.end);
  while (!ts_node_is_null(n)) {
    TSNode parent = ts_node_parent(n);
    if (ts_node_is_null(parent)) return {};
    std::string_view type = ts_node_type(parent);
    if (type == "block" || type == "module") return n;
    n = parent;
  }
  return {};
}

TSNode nodeSpanning(TSNode root, ByteRange range, std::string_view type) {
  TSNode n = ts_node_descendant_for_byte_range(root, range.begin, range.end);
  while (!ts_node_is_null(n) && (std::string_view(ts_node_type(n)) != type || ts_node_start_byte(n) != range.begin ||
                                 ts_node_end_byte(n) != range.end))
    n = ts_node_parent(n);
  return n;
}

TSNode followingPoint(TSNode n) {
  TSNode stmt = {};
  for (TSNode p = ts_node_parent(n); !ts_node_is_null(p); p = ts_node_parent(p)) {
    std::string_view type = ts_node_type(p);
    if (type == "function_definition" || type == "class_definition" || type == "module") break;
    if (type == "for_statement" || type == "while_statement") stmt = p;
    else if (ts_node_is_null(stmt) && type == "expression_statement") stmt = p;
  }
  return stmt;
}

std::set<std::string> identifiersIn(TSNode n, std::string_view src) {
  std::set<std::string> out;
  walk(n, [&](TSNode t) {
    if (std::string_view(ts_node_type(t)) == "identifier") out.insert(std::string(textOf(t, src)));
    return true;
  });
  return out;
}

std::set<std::string> boundNames(TSNode stmt, std::string_view src) {
  std::set<std::string> out;
  walk(stmt, [&](TSNode n) {
    std::string_view type = ts_node_type(n);
    TSNode target = {};
    if (type == "assignment" || type == "augmented_assignment" || type == "for_statement") target = field(n, "left");
    else if (type == "function_definition" || type == "class_definition") target = field(n, "name");
    else if (type == "as_pattern" || type == "aliased_import") target = field(n, "alias");
    else if (type == "import_statement" || type == "import_from_statement") target = n;
    if (!ts_node_is_null(target)) out.merge(identifiersIn(target, src));
    return true;
  });
  return out;
}

}  // namespace shardlint::syntax
