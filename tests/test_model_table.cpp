// The syntax outline and SL401's model table: id matching, class sets, unknown versions, project facts.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "TestSupport.h"

#include "config/ModelFamilies.h"
#include "core/SourceFile.h"
#include "syntax/Outline.h"

using namespace shardlint;
using namespace shardlint::rules::config;

namespace {
std::vector<std::string> names(const IdFamilies& ids) {
  std::vector<std::string> out;
  for (const auto* f : ids.families) out.emplace_back(f->name);
  std::sort(out.begin(), out.end());
  return out;
}
using Names = std::vector<std::string>;
}  // namespace

TEST_CASE("outline: class headers over several lines, imports, selected calls and strings", "[unit][syntax]") {
  const char* src =
      "from transformers import (\n    LlamaForCausalLM as L,\n    AutoModel,\n)\nimport torch.nn as nn\n"
      "class Block(\n    nn.Module,  # the base\n    metaclass=Meta,\n):\n    pass\n"
      "m = AutoModel.from_pretrained(\n    'org/model-7b',\n    trust_remote_code=flag,\n)\n"
      "t = tok(f'{x}/y', 'a/b')\n";
  syntax::Parser parser;
  syntax::OutlineRequest req;
  req.callNames = {"from_pretrained"};
  req.wantString = [](std::string_view s) { return s.find('/') != std::string_view::npos; };
  auto o = syntax::outlinePython(src, parser, req);
  REQUIRE(o.classes.size() == 1);
  CHECK(o.classes[0].name == "Block");
  CHECK(o.classes[0].bases == std::vector<std::string>{"nn.Module"});
  CHECK(o.classes[0].line == 6);
  REQUIRE(o.imports.size() == 3);
  CHECK(o.imports[0].module == "transformers");
  CHECK(o.imports[0].name == "LlamaForCausalLM");
  CHECK(o.imports[0].alias == "L");
  CHECK(o.imports[2].module == "torch.nn");
  CHECK(o.imports[2].alias == "nn");
  REQUIRE(o.calls.size() == 1);
  CHECK(o.calls[0].callee == "AutoModel.from_pretrained");
  REQUIRE(o.calls[0].args.size() == 2);
  CHECK(o.calls[0].args[0].string);
  CHECK(o.calls[0].args[0].value == "org/model-7b");
  CHECK(o.calls[0].args[1].keyword == "trust_remote_code");
  CHECK_FALSE(o.calls[0].args[1].literal);
  CHECK(o.calls[0].args[1].value == "flag");
  // f-strings are not plain strings
  std::vector<std::string> strings;
  for (const auto& s : o.strings) strings.push_back(s.value);
  CHECK(strings == std::vector<std::string>{"org/model-7b", "a/b"});
}

TEST_CASE("model table: Hub ids name families by token, aliases and variants", "[unit][sl401]") {
  CHECK(names(familiesOfId("meta-llama/Llama-3.1-8B")) == Names{"llama"});
  CHECK(names(familiesOfId("facebook/opt-1.3b")) == Names{"opt"});
  CHECK(names(familiesOfId("some-org/Optimus-7B")).empty());          // `opt` runs into a letter
  CHECK(names(familiesOfId("openai/some-model")).empty());            // the owner names no architecture
  CHECK(names(familiesOfId("TinyLlama/TinyLlama-1.1B")) == Names{"llama"});  // alias
  CHECK(names(familiesOfId("Qwen/Qwen2.5-7B-Instruct")) == Names{"qwen2"});
  CHECK(names(familiesOfId("tiiuae/Falcon3-7B-Base")) == Names{"falcon", "llama"});
  auto vision = familiesOfId("meta-llama/Llama-3.2-11B-Vision-Instruct");
  CHECK(vision.variant);  // mllama, which the id does not name
  auto vl = familiesOfId("Qwen/Qwen2.5-VL-7B-Instruct");
  CHECK_FALSE(vl.variant);  // qwen2_5_vl covers it
  CHECK(names(IdFamilies{familiesOfClass("LlamaForCausalLM"), false}) == Names{"llama"});
  CHECK(familiesOfClass("AutoModelForCausalLM").empty());
}

TEST_CASE("model table: class sets, open families and unknown versions", "[unit][sl401]") {
  auto qwen3 = classSetOf({"qwen3"});
  CHECK(qwen3.open.empty());
  CHECK(qwen3.classes.count("Qwen3DecoderLayer"));
  CHECK(qwen3.classes.count("Qwen3MoeDecoderLayer"));  // a later variant: Qwen3-30B-A3B says no "moe"
  CHECK(qwen3.classes.count("Linear"));                // torch.nn classes the modeling files use
  CHECK_FALSE(qwen3.classes.count("LlamaDecoderLayer"));
  CHECK_FALSE(classSetOf({"llava"}).open.empty());     // builds its towers with AutoModel
  CHECK(unknownVersionOf("DeepseekV9DecoderLayer") == "DeepseekV9");
  CHECK(unknownVersionOf("Mistral9DecoderLayer") == "Mistral9");
  CHECK(unknownVersionOf("Qwen9DecoderLayer") == "Qwen9");
  CHECK(unknownVersionOf("DeepseekV3DecoderLayer").empty());  // known version
  CHECK(unknownVersionOf("LlamaDecoderLayr").empty());        // a typo, not a version
  CHECK(unknownVersionOf("Foo5DecoderLayer").empty());        // no known family prefix
}

TEST_CASE("model table: project facts from Python files", "[unit][sl401]") {
  auto facts = [](const std::string& text) {
    syntax::Parser parser;
    syntax::Outline outline = syntax::outlinePython(text, parser, projectModelOutline());
    return projectModelFacts({ProjectFile{"train.py", projectModelFactsWant(text) ? &outline : nullptr}});
  };
  auto a = facts("from transformers import LlamaForCausalLM\nm = LlamaForCausalLM.from_pretrained(p)\n");
  CHECK(a["model_families"] == "llama");
  CHECK(a.count("model_unknown") == 0);
  auto b = facts("from transformers import AutoModel\nm = AutoModel.from_pretrained(args.model)\n");
  CHECK(b["model_families"].empty());
  CHECK(b["model_unknown"].find("args.model") != std::string::npos);
  auto c = facts("t = AutoTokenizer.from_pretrained(args.model)\nm = AutoModel.from_pretrained('gpt2', trust_remote_code=True)\n");
  CHECK(c["model_families"] == "gpt2");
  CHECK(c["model_unknown"].find("trust_remote_code=True") != std::string::npos);
  auto d = facts("import torch.nn as nn\nclass A(\n    nn.Module):\n    pass\nclass B(A): pass\nclass C(Enum): pass\nclass D: pass\n");
  CHECK(d["module_classes"] == "A,B");
}

TEST_CASE("gen_model_table.py: a small source tree gives the table rows", "[unit][sl401][script]") {
  if (shardlint::testing::runShell("command -v python3 >/dev/null 2>&1").code != 0) {
    WARN("no python3: the generator is not exercised");
    return;
  }
  shardlint::testing::TempDir dir("sl401-gen-");
  namespace fs = std::filesystem;
  fs::path models = dir.path() / "src" / "transformers" / "models";
  fs::create_directories(models / "llama");
  fs::create_directories(models / "llava");
  fs::create_directories(models / "code_llama");
  auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p) << text; };
  write(dir.path() / "src" / "transformers" / "__init__.py", "__version__ = \"9.9.9\"\n");
  write(models / "llama" / "modeling_llama.py",
        "from dataclasses import dataclass\nfrom torch import nn\nfrom ...modeling_utils import PreTrainedModel\n"
        "from ...modeling_layers import GradientCheckpointingLayer\n"
        "class LlamaMLP(nn.Module):\n    pass\n"
        "class LlamaDecoderLayer(GradientCheckpointingLayer):\n    pass\n"
        "@dataclass\nclass LlamaOutput:\n    pass\n"
        "class LlamaPreTrainedModel(PreTrainedModel):\n    _no_split_modules = [\"LlamaDecoderLayer\"]\n"
        "class LlamaModel(LlamaPreTrainedModel):\n    def f(self):\n        return nn.Embedding(1, 1)\n"
        "class LlamaForCausalLM(LlamaPreTrainedModel):\n    pass\n");
  write(models / "llava" / "modeling_llava.py",
        "from ..auto import AutoModel\nfrom ...modeling_utils import PreTrainedModel\n"
        "class LlavaPreTrainedModel(PreTrainedModel):\n    pass\n"
        "class LlavaModel(LlavaPreTrainedModel):\n    pass\n");
  write(models / "code_llama" / "tokenization_code_llama.py", "X = 1\n");
  fs::path out = dir.path() / "table.inc";
  auto r = shardlint::testing::runShell(
      "python3 " + shardlint::testing::shellQuote(std::string(SHARDLINT_SOURCE_DIR) + "/scripts/gen_model_table.py") +
      " --src " + shardlint::testing::shellQuote(dir.path().string()) + " --out " +
      shardlint::testing::shellQuote(out.string()) + " 2>&1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::string table = shardlint::testing::readFile(out);
  CHECK(table.find("kTransformersVersion = \"9.9.9\"") != std::string::npos);
  CHECK(table.find("{\"llama\",\"llama vicuna tinyllama alpaca smollm codellama falcon3 falcon-e\",\"Llama\","
                   "\"~DecoderLayer\",\"~ForCausalLM ~Model ~PreTrainedModel\",\"~MLP\",\"\",\"\"},") !=
        std::string::npos);
  CHECK(table.find("{\"llava\",\"llava\",\"Llava\",\"\",\"~Model ~PreTrainedModel\",\"\",\"\",\"AutoModel\"},") !=
        std::string::npos);
  CHECK(table.find("{\"code_llama\",\"codellama\",\"\",\"\",\"\",\"\",\"llama\",\"\"},") != std::string::npos);
  CHECK(table.find("Embedding") != std::string::npos);    // torch.nn classes go to the shared list
  CHECK(table.find("LlamaOutput") == std::string::npos);  // output dataclasses are left out
}
