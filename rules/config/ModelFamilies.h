// Model families of transformers (the generated table in ModelTable.generated.inc), what a project
// or a config says about the model it loads, and the class set of that model.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "driver/Rule.h"

namespace shardlint::rules::config {

struct ModelFamily {
  std::string_view name;                  // transformers' models/<dir>: "llama"
  std::vector<std::string> idPatterns;    // normalized (lower case, no '-', '_', '.'): "llama", "tinyllama"
  std::vector<std::string> layerClasses;  // `_no_split_modules`: "LlamaDecoderLayer"
  std::vector<std::string> archClasses;   // PreTrainedModel classes: "LlamaModel", "LlamaForCausalLM"
  std::vector<std::string> otherClasses;  // every other class of its modeling files
  std::vector<std::string_view> deps;     // families whose classes it imports
  std::string_view openReason;            // non-empty: builds sub-models from the checkpoint's config
};
const std::vector<ModelFamily>& modelFamilies();
const ModelFamily* findFamily(std::string_view name);
// "transformers 5.15.0": the release the table was generated from (for messages).
std::string modelTableRelease();
std::string_view modelFamiliesSource();

// The families a Hugging Face Hub id names. `variant`: the id names a variant (vision, MoE, audio,
// omni) that none of the families it matched covers, so the classes it loads are not known.
struct IdFamilies {
  std::vector<const ModelFamily*> families;
  bool variant = false;
};
IdFamilies familiesOfId(std::string_view id);
// The families one of whose classes has exactly this name.
std::vector<const ModelFamily*> familiesOfClass(std::string_view cls);

// The module classes a model of these families can contain: their classes, those of the families
// they import from and of their later versions and variants (`qwen3` -> `qwen3_moe`), and the
// torch.nn / shared transformers classes. `open` names a family whose class set is not known.
struct ModelClassSet {
  std::set<std::string, std::less<>> classes;
  std::vector<std::string> layers;  // the layer classes, for suggestions
  std::string open;                 // "llava (builds sub-models with AutoModel)"
};
ModelClassSet classSetOf(const std::set<std::string>& families);

// `DeepseekV9DecoderLayer`, `Mistral9DecoderLayer`: the name is <Family><Version><Suffix>, the table
// knows the family's class prefix (`Deepseek`, `Mistral`) but no class of this version, so it may
// come from a newer transformers release. Returns the prefix with the version, or "".
std::string unknownVersionOf(std::string_view cls);

// Facts from the project's Python files:
//   "module_classes": comma list of classes the project defines that may be nn.Modules;
//   "model_families": comma list of families the project gives evidence of loading (Hub id strings,
//                     transformers model classes it imports, subclasses or loads);
//   "model_evidence": what the user wrote that names them (for messages);
//   "model_unknown":  when set, the project may load a model whose classes are not known
//                     (`trust_remote_code`, a model id chosen at run time), and what it wrote.
Facts projectModelFacts(const std::vector<ProjectFile>& files);
// Which files projectModelFacts reads (by their bytes), and what it wants of their outlines.
bool projectModelFactsWant(std::string_view text);
syntax::OutlineRequest projectModelOutline();

}  // namespace shardlint::rules::config
