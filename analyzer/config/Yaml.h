// A YAML document model built from yaml-cpp's parser events: mappings keep their
// entries in order, duplicates included, and every node has its byte range.
// Scalars can be resolved the way PyYAML (YAML 1.1) resolves them, which is how
// accelerate and axolotl read their configs.
#pragma once
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/SourceFile.h"

namespace shardlint::config {

struct YNode {
  enum class Kind { Null, Scalar, Map, Seq, Alias } kind = Kind::Null;
  ByteRange range;
  std::string value;    // scalar content (after unquoting / escapes)
  bool quoted = false;  // written quoted (or as a block scalar): always a string
  std::string tag;      // explicit tag ("!!str"), empty when none
  std::vector<std::pair<YNode, YNode>> entries;  // Map: in order, duplicate keys kept
  std::vector<YNode> items;                       // Seq

  // Defined in Yaml.cpp, where YNode is complete: clang 14 (the fuzz build) cannot define it
  // in the class, since std::pair<YNode, YNode> asks whether YNode is default-constructible.
  YNode();

  bool isMap() const { return kind == Kind::Map; }
  bool isScalar() const { return kind == Kind::Scalar; }
  // The value of the first entry whose key is the scalar `key`.
  const YNode* get(std::string_view key) const;
};

// Collections (YAML or JSON mappings and sequences, Python dict/list displays) nest at most this
// deep. Deeper YAML/JSON is a YamlError (reported as SL001); a deeper Python literal is unknown
// past it. Real configurations nest a handful of levels; the limit keeps every walk over the
// document model, its destruction included, far from the stack's end (README "Limits").
constexpr size_t kMaxConfigDepth = 256;

struct YamlError : std::runtime_error {
  YamlError(std::string message, uint32_t offset) : std::runtime_error(std::move(message)), offset(offset) {}
  uint32_t offset;  // byte offset of the problem
};

// All documents of a YAML (or JSON) text. Throws YamlError on malformed input.
std::vector<YNode> parseYaml(const SourceFile& file);

// How PyYAML's SafeLoader (YAML 1.1) types a plain scalar.
struct Resolved {
  enum class Type { Null, Bool, Int, Float, String } type = Type::String;
  bool boolean = false;
  long long integer = 0;
  double real = 0;
};
Resolved resolveYaml11(const YNode& scalar);
std::string_view typeName(Resolved::Type t);

}  // namespace shardlint::config
