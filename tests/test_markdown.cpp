// The Markdown fence scanner (config/Markdown.h) and Markdown files through the linter: blocks, their
// lines, the view that keeps the file's positions, placeholders, here-documents, discovery and settings.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "Registry.h"
#include "config/Markdown.h"
#include "config/Yaml.h"
#include "driver/Config.h"
#include "driver/Discovery.h"
#include "driver/Linter.h"

using namespace shardlint::config;
namespace fs = std::filesystem;

TEST_CASE("markdown: backtick and tilde fences, info strings, indentation, unclosed", "[markdown]") {
  std::string text =
      "# Title\n"              // 0
      "```yaml\n"              // 1
      "a: 1\n"                 // 2
      "```\n"                  // 3
      "text\n"                 // 4
      "   ~~~~ {.Shell title=x}\n"  // 5: three spaces, four tildes
      "b: 2\n"                 // 6
      "~~~\n"                  // 7: too short to close
      "```\n"                  // 8: other character
      "~~~~~  \n"              // 9: closes
      "    ```yaml\n"          // 10: four spaces: not a fence
      "inline ```x``` code\n"  // 11: not at the line start
      "``` a`b\n"              // 12: backtick in the info string: not a fence
      "````\n"                 // 13: opens, no info
      "c: 3\n"                 // 14
      "```\n";                 // 15: shorter: does not close, the block runs to the end
  REQUIRE(mayHaveFences(text));
  auto blocks = fencedBlocks(text);
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[0].language == "yaml");
  CHECK(blocks[0].fenceLine == 1);
  CHECK(blocks[0].content.first == 2);
  CHECK(blocks[0].content.end == 3);
  CHECK(blocks[0].closed);
  CHECK(blocks[1].info == "{.Shell title=x}");
  CHECK(blocks[1].language == "shell");
  CHECK(blocks[1].content.first == 6);
  CHECK(blocks[1].content.end == 9);
  CHECK(blocks[2].language.empty());
  CHECK(blocks[2].content.first == 14);
  CHECK(blocks[2].content.end == 16);
  CHECK_FALSE(blocks[2].closed);
  CHECK(fencedBlocks("no fences here\n").empty());
  CHECK_FALSE(mayHaveFences("``\n~~\n"));
  // CRLF line ends and a file without a final newline.
  auto crlf = fencedBlocks("```yaml\r\nk: v\r\n```\r\n");
  REQUIRE(crlf.size() == 1);
  CHECK(crlf[0].closed);
  CHECK(crlf[0].language == "yaml");
  auto noEnd = fencedBlocks("```\nk: v");
  REQUIRE(noEnd.size() == 1);
  CHECK(noEnd[0].content.end == 2);
}

TEST_CASE("markdown: a span's view keeps the file's offsets, lines and columns", "[markdown]") {
  std::string text = "Intro \xC3\xA9t\xC3\xA9\n```yaml\nk: v\n...\n  # ...\nz: 1\n```\ntail\n";
  auto blocks = fencedBlocks(text);
  REQUIRE(blocks.size() == 1);
  auto starts = lineStarts(text);
  std::string view = spanView(text, starts, blocks[0].content, true);
  REQUIRE(view.size() == starts[blocks[0].content.end]);
  CHECK(view.substr(0, 8).find_first_not_of(' ') == std::string::npos);  // the intro is blanked
  size_t k = text.find("k: v");
  CHECK(view.substr(k, 4) == "k: v");
  CHECK(view.find("...") == std::string::npos);  // placeholders blanked
  shardlint::SourceFile file("README.md", view);
  auto docs = parseYaml(file);
  REQUIRE(docs.size() == 1);
  const YNode* z = docs[0].get("z");
  REQUIRE(z);
  auto lc = file.index.resolve(z->range.begin);
  CHECK(lc.line == 5);
  CHECK(lc.codepointColumn == 3);
  // Without dropping placeholders, the `...` ends the YAML document.
  std::string kept = spanView(text, starts, blocks[0].content, false);
  CHECK(kept.find("...") != std::string::npos);
}

TEST_CASE("markdown: placeholder lines", "[markdown]") {
  CHECK(isPlaceholderLine("..."));
  CHECK(isPlaceholderLine("   ....  "));
  CHECK(isPlaceholderLine("# ..."));
  CHECK(isPlaceholderLine("  #..."));
  CHECK(isPlaceholderLine("\xE2\x80\xA6"));
  CHECK_FALSE(isPlaceholderLine(".."));
  CHECK_FALSE(isPlaceholderLine("key: ..."));
  CHECK_FALSE(isPlaceholderLine("# comment"));
}

TEST_CASE("markdown: here-documents in a shell block", "[markdown]") {
  std::string text = "```bash\ncat > a.yaml <<EOF\nk: 1\nEOF\necho x\ncat <<-'END' > b.yaml\n\tj: 2\n\tEND\ncat <<< hi\n```\n";
  auto blocks = fencedBlocks(text);
  REQUIRE(blocks.size() == 1);
  auto starts = lineStarts(text);
  auto docs = hereDocuments(text, starts, blocks[0].content);
  REQUIRE(docs.size() == 2);
  CHECK(docs[0].first == 2);
  CHECK(docs[0].end == 3);
  CHECK(docs[1].first == 6);
  CHECK(docs[1].end == 7);
}

namespace {
std::vector<shardlint::Diagnostic> lintMd(const std::string& text) {
  shardlint::Linter linter(shardlint::rules::catalog(), {});
  return linter.lintText("README.md", text);
}
}  // namespace

TEST_CASE("markdown: config blocks are linted in place, never SL001", "[markdown]") {
  std::string cfg =
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_sync_module_states: true\n";
  auto found = lintMd("Text\n\n```yaml\n" + cfg + "```\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0].code == "SL302");
  CHECK(found[0].location.path == "README.md");
  CHECK(found[0].location.start.line == 6);
  CHECK(found[0].location.start.codepointColumn == 2);
  // A block that does not parse, a Python block, prose: nothing (no SL001).
  CHECK(lintMd("```yaml\nfsdp_config:\n  fsdp_version: [2\n```\n").empty());
  CHECK(lintMd("```python\nfsdp_config = {'fsdp_version': 2}\n```\n").empty());
  CHECK(lintMd("fsdp_config: is documented here\n").empty());
  // A file-wide directive in a block covers the block only.
  auto two = lintMd("```yaml\n# shardlint: noqa\n" + cfg + "```\n\n```yaml\n" + cfg + "```\n");
  REQUIRE(two.size() == 1);
  CHECK(two[0].location.start.line == 12);
  // The HTML comment form before the fence; a directive naming another rule leaves it.
  CHECK(lintMd("<!-- shardlint: disable=SL302 -->\n```yaml\n" + cfg + "```\n").empty());
  CHECK(lintMd("<!-- shardlint: noqa -->\n```yaml\n" + cfg + "```\n").empty());
  auto other = lintMd("<!-- shardlint: disable=SL301 -->\n```yaml\n" + cfg + "```\n");
  bool sl302 = false, sl003 = false;
  for (const auto& d : other) sl302 = sl302 || d.code == "SL302", sl003 = sl003 || d.code == "SL003";
  CHECK(sl302);
  CHECK(sl003);  // the directive suppresses nothing
}

TEST_CASE("markdown: Trainer and axolotl blocks are recognised by their keys, whatever the tag", "[markdown]") {
  auto codes = [](const std::vector<shardlint::Diagnostic>& found) {
    std::vector<std::string> out;
    for (const auto& d : found) out.push_back(d.code);
    return out;
  };
  using V = std::vector<std::string>;
  // A Trainer `--fsdp_config` JSON shown in a block (JSON, untagged, shell): transformers' keys and rules.
  std::string json =
      "{\n  \"fsdp_min_num_params\": 1000000,\n  \"fsdp_transformer_layer_cls_to_wrap\": [\"T5Block\"]\n}\n";
  for (const char* tag : {"json", "", "shell"}) {
    auto found = lintMd("Pass it with `--fsdp_config`:\n\n```" + std::string(tag) + "\n" + json + "```\n");
    CHECK(codes(found) == V{"SL309"});
    if (!found.empty()) CHECK(found[0].location.start.line == 5);  // the later of the two keys
  }
  // The same keys in block YAML are not a JSON object: an fsdp_config fragment of any consumer, not checked.
  CHECK(lintMd("```yaml\nfsdp_min_num_params: 1000000\nfsdp_transformer_layer_cls_to_wrap: T5Block\n```\n").empty());
  // Training arguments: `fsdp` a string of Trainer options next to an `fsdp_config` mapping.
  std::string args = "fsdp: full_shard auto_wrap\nfsdp_config:\n  min_num_params: 1000\n"
                     "  transformer_layer_cls_to_wrap: [T5Block]\n";
  CHECK(codes(lintMd("```yaml\n" + args + "```\n")) == V{"SL309"});
  CHECK(codes(lintMd("```json\n{\"fsdp\": \"full_shard auto_wrap\", \"fsdp_config\": {\"min_num_params\": 1000, "
                     "\"transformer_layer_cls_to_wrap\": [\"T5Block\"]}}\n```\n")) == V{"SL309"});
  // `fsdp: ""` turns FSDP off; a word that is no Trainer option leaves the block to the other readings.
  CHECK(lintMd("```yaml\nfsdp: \"\"\nfsdp_config:\n  min_num_params: 1e8\n```\n").empty());
  // axolotl: the `fsdp` list, or `fsdp_version: 2`, next to `fsdp_config`.
  CHECK(codes(lintMd("```yaml\nfsdp_version: 2\nfsdp_config:\n  sharding_strategy: FULL_SHARD\n```\n")) ==
        V{"SL302"});
  CHECK(codes(lintMd("```\nfsdp:\n  - full_shard\nfsdp_config:\n  fsdp_transformer_layer_cls_to_wrap: A, B\n```\n")) ==
        V{"SL303"});
  // Partial blocks and placeholders: never SL001, whatever the kind.
  CHECK(lintMd("```json\n{\n  \"fsdp_min_num_params\": 1000000,\n  \"fsdp_transformer_layer_cls_to_wrap\": [\n```\n")
            .empty());
  CHECK(lintMd("```json\n  \"fsdp_min_num_params\": 1000000,\n  \"fsdp_backward_prefetch\": \"backward_pre\",\n```\n")
            .empty());
  CHECK(codes(lintMd("```json\n{\n  \"fsdp_min_num_params\": 1000000,\n  ...\n  \"fsdp_transformer_layer_cls_to_wrap\": "
                     "[\"T5Block\"]\n}\n```\n")) == V{"SL309"});
  CHECK(lintMd("```yaml\nfsdp: full_shard auto_wrap\nfsdp_config:\n  min_num_params: [1000\n```\n").empty());
  CHECK(lintMd("```yaml\nfsdp_version: 2\nfsdp_config:\n    offload_params: false\n  ...\n  reshard: [\n```\n").empty());
}

TEST_CASE("markdown: discovery finds *.md only when asked; the `markdown` setting", "[markdown]") {
  fs::path dir = fs::temp_directory_path() / "shardlint_md_discovery";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "README.md") << "# x\n";
  std::ofstream(dir / "train.py") << "x = 1\n";
  auto with = shardlint::discover({dir.string()}, 0, true).files;
  auto without = shardlint::discover({dir.string()}).files;
  CHECK(with.size() == 2);
  CHECK(without.size() == 1);
  CHECK(shardlint::discover({(dir / "README.md").string()}).files.size() == 1);  // named: always
  auto cfg = shardlint::configFromText("markdown = false\n", dir / ".shardlint.toml", false);
  REQUIRE(cfg);
  REQUIRE(cfg->markdown);
  CHECK_FALSE(*cfg->markdown);
  CHECK_THROWS(shardlint::configFromText("markdown = 1\n", dir / ".shardlint.toml", false));
  CHECK(shardlint::describeConfig(*cfg).find("markdown = false") != std::string::npos);
  fs::remove_all(dir);
}
