#include "syntax/TreeSitter.h"

#include <stdexcept>
#include <string>

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
  return ts_language_field_id_for_name(lang_, name.data(), static_cast<uint32_t>(name.size()));
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

Tree Parser::parse(std::string_view text) {
  return Tree(ts_parser_parse_string(parser_.get(), nullptr, text.data(), static_cast<uint32_t>(text.size())));
}

TSNode field(TSNode n, std::string_view name) {
  return ts_node_child_by_field_name(n, name.data(), static_cast<uint32_t>(name.size()));
}

std::vector<TSNode> namedChildren(TSNode n) {
  std::vector<TSNode> out;
  uint32_t c = ts_node_named_child_count(n);
  out.reserve(c);
  for (uint32_t i = 0; i < c; ++i) out.push_back(ts_node_named_child(n, i));
  return out;
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

}  // namespace shardlint::syntax
