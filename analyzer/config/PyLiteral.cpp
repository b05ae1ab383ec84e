#include "config/PyLiteral.h"

#include "syntax/TreeSitter.h"

namespace shardlint::config {

using syntax::Kind;

YNode fromPythonLiteral(TSNode n, std::string_view src, size_t depth) {
  const auto& kinds = syntax::PyKinds::instance();
  YNode out;
  out.range = syntax::rangeOf(n);
  if (depth >= kMaxConfigDepth) return out;  // unknown: no recursion as deep as the source
  switch (kinds.kind(n)) {
    case Kind::dictionary:
      out.kind = YNode::Kind::Map;
      for (TSNode pair : syntax::namedChildren(n)) {
        if (kinds.kind(pair) != Kind::pair) continue;
        out.entries.emplace_back(fromPythonLiteral(syntax::field(pair, "key"), src, depth + 1),
                                 fromPythonLiteral(syntax::field(pair, "value"), src, depth + 1));
      }
      return out;
    case Kind::list:
    case Kind::tuple:
    case Kind::set:
      out.kind = YNode::Kind::Seq;
      for (TSNode item : syntax::namedChildren(n))
        if (kinds.kind(item) != Kind::comment) out.items.push_back(fromPythonLiteral(item, src, depth + 1));
      return out;
    case Kind::string: {
      bool plain = true;
      for (TSNode c : syntax::namedChildren(n)) {
        Kind k = kinds.kind(c);
        if (k == Kind::string_content) out.value += std::string(syntax::textOf(c, src));
        else if (k != Kind::Other) plain = plain && k != Kind::Error;
        if (std::string_view(ts_node_type(c)) == "interpolation") plain = false;
      }
      if (!plain) {
        YNode null;
        null.range = out.range;
        return null;
      }
      out.kind = YNode::Kind::Scalar;
      out.quoted = true;
      return out;
    }
    case Kind::integer:
    case Kind::float_:
      out.kind = YNode::Kind::Scalar;
      out.value = std::string(syntax::textOf(n, src));
      return out;
    case Kind::unary_operator: {
      TSNode arg = syntax::field(n, "argument");
      Kind k = kinds.kind(arg);
      if ((k == Kind::integer || k == Kind::float_) && syntax::textOf(syntax::field(n, "operator"), src) == "-") {
        out.kind = YNode::Kind::Scalar;
        out.value = "-" + std::string(syntax::textOf(arg, src));
        return out;
      }
      return out;
    }
    case Kind::true_:
      out.kind = YNode::Kind::Scalar;
      out.value = "true";
      return out;
    case Kind::false_:
      out.kind = YNode::Kind::Scalar;
      out.value = "false";
      return out;
    case Kind::parenthesized_expression:
      if (ts_node_named_child_count(n) == 1) return fromPythonLiteral(ts_node_named_child(n, 0), src, depth + 1);
      return out;
    default:
      return out;  // None and anything computed: unknown
  }
}

}  // namespace shardlint::config
