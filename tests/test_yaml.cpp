// The YAML document model: order, duplicates, positions, PyYAML (YAML 1.1) resolution.
#include <catch2/catch.hpp>

#include "config/Yaml.h"

using shardlint::SourceFile;
using namespace shardlint::config;

namespace {
Resolved::Type typeOf(const std::string& scalar) {
  SourceFile f("t.yaml", "k: " + scalar + "\n");
  auto docs = parseYaml(f);
  REQUIRE(docs.size() == 1);
  const YNode* v = docs[0].get("k");
  REQUIRE(v);
  return resolveYaml11(*v).type;
}
}  // namespace

TEST_CASE("yaml: ordered entries, duplicates and byte ranges", "[yaml]") {
  std::string text =
      "compute_environment: LOCAL_MACHINE\n"
      "fsdp_config:\n"
      "  fsdp_version: 2\n"
      "  fsdp_min_num_params: 1e8   # a comment\n"
      "  fsdp_version: 1\n"
      "  fsdp_transformer_layer_cls_to_wrap: \"LlamaDecoderLayer, LlamaMLP\"\n"
      "list: [a, 'b', {c: d}]\n";
  SourceFile f("c.yaml", text);
  auto docs = parseYaml(f);
  REQUIRE(docs.size() == 1);
  const YNode& root = docs[0];
  REQUIRE(root.isMap());
  REQUIRE(root.entries.size() == 3);
  CHECK(root.entries[0].first.value == "compute_environment");
  const YNode* fsdp = root.get("fsdp_config");
  REQUIRE(fsdp);
  REQUIRE(fsdp->entries.size() == 4);  // the duplicate fsdp_version is kept
  CHECK(fsdp->entries[0].first.value == "fsdp_version");
  CHECK(fsdp->entries[2].first.value == "fsdp_version");
  CHECK(fsdp->entries[2].second.value == "1");
  // Ranges cover exactly the written text.
  const auto& minParams = fsdp->entries[1];
  CHECK(f.slice(minParams.first.range) == "fsdp_min_num_params");
  CHECK(f.slice(minParams.second.range) == "1e8");
  const auto& cls = fsdp->entries[3].second;
  CHECK(cls.quoted);
  CHECK(cls.value == "LlamaDecoderLayer, LlamaMLP");
  CHECK(f.slice(cls.range) == "\"LlamaDecoderLayer, LlamaMLP\"");
  const YNode* list = root.get("list");
  REQUIRE(list);
  REQUIRE(list->items.size() == 3);
  CHECK(f.slice(list->items[0].range) == "a");
  CHECK(f.slice(list->items[1].range) == "'b'");
  CHECK(f.slice(list->range) == "[a, 'b', {c: d}]");
  auto lc = f.index.resolve(minParams.second.range.begin);
  CHECK(lc.line == 3);
  CHECK(lc.codepointColumn == 23);
}

TEST_CASE("yaml: scalars resolve the PyYAML (YAML 1.1) way", "[yaml]") {
  using T = Resolved::Type;
  // accelerate reads its config with PyYAML: 1e8 and 1.0e8 are strings (no dot / no exponent sign).
  CHECK(typeOf("1e8") == T::String);
  CHECK(typeOf("1.0e8") == T::String);
  CHECK(typeOf("1.0e+8") == T::Float);
  CHECK(typeOf("100000000") == T::Int);
  CHECK(typeOf("1_000") == T::Int);
  CHECK(typeOf("0x1F") == T::Int);
  CHECK(typeOf("017") == T::Int);
  CHECK(typeOf("1:30") == T::Int);
  CHECK(typeOf(".5") == T::Float);
  CHECK(typeOf(".inf") == T::Float);
  for (const char* b : {"yes", "No", "ON", "off", "true", "False"}) CHECK(typeOf(b) == T::Bool);
  // PyYAML's resolver does not treat y / n as booleans (the YAML 1.1 spec does).
  CHECK(typeOf("y") == T::String);
  CHECK(typeOf("n") == T::String);
  CHECK(typeOf("~") == T::Null);
  CHECK(typeOf("null") == T::Null);
  CHECK(typeOf("") == T::Null);
  CHECK(typeOf("\"true\"") == T::String);
  CHECK(typeOf("'1e8'") == T::String);
  CHECK(typeOf("!!str yes") == T::String);
  CHECK(typeOf("FULL_SHARD") == T::String);
  SourceFile f("t.yaml", "a: 0x10\nb: -1.5\nc: Off\n");
  auto d = parseYaml(f)[0];
  CHECK(resolveYaml11(*d.get("a")).integer == 16);
  CHECK(resolveYaml11(*d.get("b")).real == Approx(-1.5));
  CHECK(resolveYaml11(*d.get("c")).boolean == false);
}

TEST_CASE("yaml: malformed input reports a position", "[yaml]") {
  SourceFile f("bad.yaml", "a: 1\nb: [1, 2\nc: 3\n");
  try {
    parseYaml(f);
    FAIL("expected a YamlError");
  } catch (const YamlError& e) {
    CHECK(std::string(e.what()).size() > 0);
    CHECK(e.offset > 0);
  }
  SourceFile json("c.json", "{\"fsdp_version\": 2, \"min_num_params\": 0}\n");
  auto d = parseYaml(json);
  REQUIRE(d.size() == 1);
  CHECK(d[0].entries.size() == 2);
  CHECK(json.slice(d[0].entries[1].first.range) == "\"min_num_params\"");
}
