// Model families the project loads (from model ids it names) and their
// decoder/encoder layer classes, plus the nn.Module classes the project defines.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "driver/Rule.h"

namespace shardlint::rules::config {

struct ModelFamily {
  std::string_view family;                      // "llama"
  std::vector<std::string_view> idPatterns;     // lower-case substrings of hub ids ("llama", "codellama")
  std::vector<std::string_view> layerClasses;   // "LlamaDecoderLayer"
};
const std::vector<ModelFamily>& modelFamilies();
std::string_view modelFamiliesSource();

// Facts from the Python files' bytes:
//   "module_classes": comma list of classes defined in the project that derive
//                     (directly or through project classes) from an nn.Module-like base;
//   "families":       comma list of families whose ids appear in string literals.
Facts projectModelFacts(const std::vector<const SourceFile*>& pythonFiles);
// Families named by a model id (for `base_model:` in axolotl configs).
std::vector<const ModelFamily*> familiesOfId(std::string_view id);

}  // namespace shardlint::rules::config
