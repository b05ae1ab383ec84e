#include "syntax/Outline.h"

#include <algorithm>

namespace shardlint::syntax {
namespace {

std::string squeezed(std::string_view text) {
  std::string out;
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\\') out += c;
  return out;
}

uint32_t lineOf(TSNode n) { return ts_node_start_point(n).row + 1; }

// The contents of a plain string literal (no interpolation, no escapes decoded), if it is one.
bool plainString(TSNode n, std::string_view src, std::string& out) {
  const auto& kinds = PyKinds::instance();
  if (kinds.kind(n) != Kind::string) return false;
  out.clear();
  for (TSNode c : namedChildren(n)) {
    if (kinds.kind(c) == Kind::string_content) out += textOf(c, src);
    else if (std::string_view(ts_node_type(c)) == "interpolation") return false;
  }
  return true;
}

OutlineArgument argumentOf(TSNode value, std::string_view src) {
  const auto& kinds = PyKinds::instance();
  OutlineArgument a;
  if (plainString(value, src, a.value)) {
    a.literal = a.string = true;
    return a;
  }
  switch (kinds.kind(value)) {
    case Kind::integer:
    case Kind::float_:
    case Kind::true_:
    case Kind::false_:
    case Kind::none:
      a.literal = true;
      break;
    default:
      break;
  }
  std::string_view text = textOf(value, src);
  a.value = squeezed(text.substr(0, 200));
  return a;
}

void addImports(TSNode stmt, std::string_view src, Kind k, Outline& out) {
  const auto& kinds = PyKinds::instance();
  uint32_t line = lineOf(stmt);
  if (k == Kind::import_statement) {
    for (TSNode c : namedChildren(stmt)) {
      if (kinds.kind(c) == Kind::aliased_import)
        out.imports.push_back({squeezed(textOf(field(c, "name"), src)), "", squeezed(textOf(field(c, "alias"), src)), line});
      else if (kinds.kind(c) == Kind::dotted_name)
        out.imports.push_back({squeezed(textOf(c, src)), "", "", line});
    }
    return;
  }
  TSNode mod = field(stmt, "module_name");
  std::string module = squeezed(textOf(mod, src));
  for (TSNode c : namedChildren(stmt)) {
    if (ts_node_eq(c, mod)) continue;
    Kind ck = kinds.kind(c);
    if (ck == Kind::wildcard_import) {
      out.imports.push_back({module, "*", "", line});
    } else if (ck == Kind::aliased_import) {
      out.imports.push_back({module, squeezed(textOf(field(c, "name"), src)), squeezed(textOf(field(c, "alias"), src)), line});
    } else if (ck == Kind::dotted_name) {
      out.imports.push_back({module, squeezed(textOf(c, src)), "", line});
    }
  }
}

}  // namespace

Outline outlinePython(std::string_view src, Parser& parser, const OutlineRequest& request) {
  Tree tree = parser.parse(src);
  if (!tree) return Outline{};
  return outlineTree(src, tree.root(), request);
}

Outline outlineTree(std::string_view src, TSNode root, const OutlineRequest& request) {
  Outline out;
  const auto& kinds = PyKinds::instance();
  std::string text;
  walk(root, [&](TSNode n) {
    Kind k = kinds.kind(n);
    bool descend = true;
    switch (k) {
      case Kind::class_definition: {
        OutlineClass c{std::string(textOf(field(n, "name"), src)), {}, lineOf(n)};
        TSNode supers = field(n, "superclasses");
        if (!ts_node_is_null(supers))
          for (TSNode b : namedChildren(supers)) {
            Kind bk = kinds.kind(b);
            if (bk == Kind::keyword_argument || bk == Kind::comment || bk == Kind::list_splat ||
                bk == Kind::dictionary_splat)
              continue;
            c.bases.push_back(squeezed(textOf(b, src)));
          }
        out.classes.push_back(std::move(c));
        break;
      }
      case Kind::import_statement:
      case Kind::import_from_statement:
        addImports(n, src, k, out);
        descend = false;
        break;
      case Kind::call: {
        bool wanted = std::find(request.callNames.begin(), request.callNames.end(), calleeLastName(n, src)) !=
                      request.callNames.end();
        TSNode args = field(n, "arguments");
        if (!wanted && !request.keywords.empty() && !ts_node_is_null(args))
          for (const auto& kw : keywordArguments(n))
            wanted = wanted || std::find(request.keywords.begin(), request.keywords.end(), textOf(kw.name, src)) !=
                                   request.keywords.end();
        if (!wanted || ts_node_is_null(args)) break;
        OutlineCall call{squeezed(textOf(field(n, "function"), src)), {}, lineOf(n)};
        for (TSNode a : namedChildren(args)) {
          Kind ak = kinds.kind(a);
          if (ak == Kind::comment) continue;
          if (ak == Kind::keyword_argument) {
            OutlineArgument arg = argumentOf(field(a, "value"), src);
            arg.keyword = std::string(textOf(field(a, "name"), src));
            call.args.push_back(std::move(arg));
          } else if (ak == Kind::list_splat || ak == Kind::dictionary_splat) {
            OutlineArgument arg;
            arg.keyword = ak == Kind::list_splat ? "*" : "**";
            arg.value = squeezed(textOf(a, src).substr(0, 200));
            call.args.push_back(std::move(arg));
          } else {
            call.args.push_back(argumentOf(a, src));
          }
        }
        out.calls.push_back(std::move(call));
        break;
      }
      case Kind::string:
        if (request.wantString && plainString(n, src, text) && request.wantString(text))
          out.strings.push_back({text, lineOf(n)});
        descend = false;
        break;
      default:
        break;
    }
    return descend;
  });
  return out;
}

}  // namespace shardlint::syntax
