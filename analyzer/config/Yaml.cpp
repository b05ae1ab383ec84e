#include "config/Yaml.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace shardlint::config {

YNode::YNode() = default;

const YNode* YNode::get(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.kind == Kind::Scalar && k.value == key) return &v;
  return nullptr;
}

namespace {

// Builds YNodes from parser events; end offsets are recovered from the source text.
class Builder final : public YAML::EventHandler {
 public:
  explicit Builder(std::string_view text) : text_(text) {}

  std::vector<YNode> docs;

  void OnDocumentStart(const YAML::Mark&) override { stack_.clear(); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    YNode n;
    n.kind = YNode::Kind::Null;
    lastMark_ = mark;
    uint32_t at = offset(mark);
    n.range = {at, at};
    // An explicit `null` / `~` is written in the text; an empty value is not.
    std::string_view rest = text_.substr(std::min<size_t>(at, text_.size()));
    for (std::string_view word : {"null", "Null", "NULL", "~"})
      if (rest.substr(0, word.size()) == word) n.range.end = at + static_cast<uint32_t>(word.size());
    add(std::move(n));
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    YNode n;
    n.kind = YNode::Kind::Alias;
    uint32_t at = offset(mark);
    n.range = {at, plainEnd(at)};
    add(std::move(n));
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t, const std::string& value) override {
    YNode n;
    n.kind = YNode::Kind::Scalar;
    n.value = value;
    uint32_t at = offset(mark);
    char c = at < text_.size() ? text_[at] : '\0';
    n.quoted = tag == "!" || c == '"' || c == '\'' || c == '|' || c == '>';
    if (tag != "?" && tag != "!") n.tag = tag;
    n.range = {at, c == '"' || c == '\'' ? quotedEnd(at) : plainEnd(at)};
    add(std::move(n));
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(YNode::Kind::Seq, mark);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(YNode::Kind::Map, mark);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YNode node;
    std::optional<YNode> pendingKey;
  };

  uint32_t offset(const YAML::Mark& m) const {
    return m.pos < 0 ? 0 : std::min(static_cast<uint32_t>(m.pos), static_cast<uint32_t>(text_.size()));
  }
  uint32_t plainEnd(uint32_t at) const {
    // A plain scalar ends at the line end, a comment, or (in flow context) `,]}` ; `: ` ends a key.
    uint32_t i = at;
    uint32_t lastNonSpace = at;
    while (i < text_.size() && text_[i] != '\n' && text_[i] != '\r') {
      char c = text_[i];
      if (c == '#' && i > at && (text_[i - 1] == ' ' || text_[i - 1] == '\t')) break;
      if (c == ':' && (i + 1 >= text_.size() || text_[i + 1] == ' ' || text_[i + 1] == '\n' || text_[i + 1] == '\r'))
        break;
      if ((c == ',' || c == ']' || c == '}') && !stack_.empty() && inFlow_) break;
      if (c != ' ' && c != '\t') lastNonSpace = i + 1;
      ++i;
    }
    return std::max(lastNonSpace, at);
  }
  uint32_t quotedEnd(uint32_t at) const {
    char q = text_[at];
    for (uint32_t i = at + 1; i < text_.size(); ++i) {
      if (q == '"' && text_[i] == '\\') {
        ++i;
        continue;
      }
      if (text_[i] == q) {
        if (q == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
          ++i;
          continue;
        }
        return i + 1;
      }
    }
    return static_cast<uint32_t>(text_.size());
  }
  void open(YNode::Kind kind, const YAML::Mark& mark) {
    uint32_t at = offset(mark);
    if (stack_.size() >= kMaxConfigDepth)
      throw YamlError("collections nest more than " + std::to_string(kMaxConfigDepth) + " levels deep", at);
    Open o;
    o.node.kind = kind;
    o.node.range = {at, at};
    if (at < text_.size() && (text_[at] == '{' || text_[at] == '[')) inFlow_ = true;
    stack_.push_back(std::move(o));
  }
  void close() {
    Open o = std::move(stack_.back());
    stack_.pop_back();
    uint32_t end = o.node.range.begin;
    for (const auto& [k, v] : o.node.entries) end = std::max({end, k.range.end, v.range.end});
    for (const auto& it : o.node.items) end = std::max(end, it.range.end);
    // A flow collection ends at its closing bracket.
    if (o.node.range.begin < text_.size() && (text_[o.node.range.begin] == '{' || text_[o.node.range.begin] == '[')) {
      char closer = text_[o.node.range.begin] == '{' ? '}' : ']';
      size_t c = text_.find(closer, end);
      if (c != std::string_view::npos) end = static_cast<uint32_t>(c + 1);
    }
    o.node.range.end = end;
    if (stack_.empty()) inFlow_ = false;
    add(std::move(o.node));
  }
  void add(YNode n) {
    // Every node of a real document costs at least a byte or two of text; yaml-cpp 0.7 can emit
    // null events without end on some inputs (lone CRs in a comment), so the events are bounded.
    if (++events_ > 4 * text_.size() + 64)
      throw YamlError("the YAML parser did not make progress (malformed input)", offset(lastMark_));
    if (stack_.empty()) {
      docs.push_back(std::move(n));
      return;
    }
    Open& top = stack_.back();
    if (top.node.kind == YNode::Kind::Seq) {
      top.node.items.push_back(std::move(n));
    } else if (!top.pendingKey) {
      top.pendingKey = std::move(n);
    } else {
      top.node.entries.emplace_back(std::move(*top.pendingKey), std::move(n));
      top.pendingKey.reset();
    }
  }

  std::string_view text_;
  size_t events_ = 0;
  YAML::Mark lastMark_;
  std::vector<Open> stack_;
  bool inFlow_ = false;
};

}  // namespace

std::vector<YNode> parseYaml(const SourceFile& file) {
  std::istringstream in(file.text);
  Builder builder(file.text);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(builder)) {
    }
  } catch (const YAML::Exception& e) {
    uint32_t off = e.mark.pos < 0 ? 0 : static_cast<uint32_t>(e.mark.pos);
    if (e.mark.pos < 0 && e.mark.line >= 0 && static_cast<uint32_t>(e.mark.line) < file.index.lineCount())
      off = file.index.lineStart(static_cast<uint32_t>(e.mark.line)) + static_cast<uint32_t>(std::max(0, e.mark.column));
    std::string msg = e.msg;
    // yaml-cpp's own guard against deep recursion (DepthGuard) says only "bad file".
    if (dynamic_cast<const YAML::DeepRecursion*>(&e))
      msg = "collections nest more than " + std::to_string(kMaxConfigDepth) + " levels deep";
    throw YamlError(msg, std::min(off, static_cast<uint32_t>(file.text.size())));
  }
  return std::move(builder.docs);
}

Resolved resolveYaml11(const YNode& n) {
  Resolved r;
  if (n.kind == YNode::Kind::Null) {
    r.type = Resolved::Type::Null;
    return r;
  }
  if (n.kind != YNode::Kind::Scalar || n.quoted) return r;
  if (n.tag == "tag:yaml.org,2002:str" || n.tag == "!!str") return r;
  const std::string& v = n.value;
  // std::regex matches recursively, a few frames per character: a long scalar overflowed the stack.
  // No bool or null is long; a long run of decimal digits is an int (beyond long long, so 0 as for
  // any out-of-range int); anything else long stays a string.
  constexpr size_t kMaxRegexScalar = 256;
  if (v.size() > kMaxRegexScalar) {
    size_t i = v[0] == '-' || v[0] == '+' ? 1 : 0;
    if (v[i] >= '1' && v[i] <= '9' &&
        std::all_of(v.begin() + static_cast<long>(i), v.end(), [](char c) { return (c >= '0' && c <= '9') || c == '_'; })) {
      r.type = Resolved::Type::Int;
      r.integer = 0;
    }
    return r;
  }
  // PyYAML's implicit resolvers (resolver.py), YAML 1.1. Note: y/Y/n/N are NOT booleans for PyYAML.
  static const std::regex kBool("^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$");
  static const std::regex kNull("^(?:~|null|Null|NULL|)$");
  static const std::regex kInt(
      "^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$");
  static const std::regex kFloat(
      "^(?:[-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+][0-9]+)?|\\.[0-9_]+(?:[eE][-+][0-9]+)?|"
      "[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN))$");
  if (std::regex_match(v, kBool)) {
    r.type = Resolved::Type::Bool;
    char c = v[0];
    r.boolean = c == 'y' || c == 'Y' || c == 't' || c == 'T' || (v.size() == 2 && (v[1] == 'n' || v[1] == 'N'));
    return r;
  }
  if (std::regex_match(v, kNull)) {
    r.type = Resolved::Type::Null;
    return r;
  }
  std::string digits;
  for (char c : v)
    if (c != '_') digits += c;
  if (std::regex_match(v, kInt)) {
    r.type = Resolved::Type::Int;
    try {
      if (digits.find(':') != std::string::npos) {  // sexagesimal 1:30 = 90
        long long total = 0;
        std::istringstream parts(digits);
        std::string part;
        while (std::getline(parts, part, ':'))  // out of range: 0, as below
          if (__builtin_mul_overflow(total, 60, &total) || __builtin_add_overflow(total, std::stoll(part), &total))
            throw std::out_of_range("sexagesimal int");
        r.integer = total;
      } else {
        std::string body = digits;
        bool neg = !body.empty() && body[0] == '-';
        if (!body.empty() && (body[0] == '-' || body[0] == '+')) body = body.substr(1);
        int base = 10;
        if (body.rfind("0b", 0) == 0) base = 2, body = body.substr(2);
        else if (body.rfind("0x", 0) == 0) base = 16, body = body.substr(2);
        else if (body.size() > 1 && body[0] == '0') base = 8;
        r.integer = std::stoll(body, nullptr, base) * (neg ? -1 : 1);
      }
    } catch (...) {
      r.integer = 0;
    }
    return r;
  }
  if (std::regex_match(v, kFloat)) {
    r.type = Resolved::Type::Float;
    if (digits.find("inf") != std::string::npos || digits.find("Inf") != std::string::npos ||
        digits.find("INF") != std::string::npos)
      r.real = digits[0] == '-' ? -INFINITY : INFINITY;
    else if (digits.find("nan") != std::string::npos || digits.find("NaN") != std::string::npos ||
             digits.find("NAN") != std::string::npos)
      r.real = NAN;
    else
      try {
        r.real = std::stod(digits);
      } catch (...) {
      }
    return r;
  }
  return r;  // a string
}

std::string_view typeName(Resolved::Type t) {
  switch (t) {
    case Resolved::Type::Null: return "null";
    case Resolved::Type::Bool: return "bool";
    case Resolved::Type::Int: return "int";
    case Resolved::Type::Float: return "float";
    case Resolved::Type::String: return "str";
  }
  return "str";
}

}  // namespace shardlint::config
