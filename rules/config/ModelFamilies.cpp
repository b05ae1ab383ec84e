#include "config/ModelFamilies.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <functional>
#include <set>

namespace shardlint::rules::config {

std::string_view modelFamiliesSource() {
  return "layer class names as defined in huggingface/transformers src/transformers/models/<family>/modeling_<family>.py "
         "(transformers 4.4x-4.5x series); id patterns are lower-case substrings of common Hugging Face Hub ids";
}

const std::vector<ModelFamily>& modelFamilies() {
  static const std::vector<ModelFamily> families = {
      {"llama", {"llama", "vicuna", "tinyllama", "alpaca"}, {"LlamaDecoderLayer"}},
      {"mistral", {"mistral", "zephyr"}, {"MistralDecoderLayer"}},
      {"mixtral", {"mixtral"}, {"MixtralDecoderLayer"}},
      {"qwen2", {"qwen2", "qwen/qwen1.5", "qwq"}, {"Qwen2DecoderLayer"}},
      {"qwen3", {"qwen3"}, {"Qwen3DecoderLayer", "Qwen3MoeDecoderLayer"}},
      {"gemma", {"gemma-", "gemma/", "google/gemma"}, {"GemmaDecoderLayer", "Gemma2DecoderLayer", "Gemma3DecoderLayer"}},
      {"phi", {"phi-1", "phi-2", "microsoft/phi"}, {"PhiDecoderLayer", "Phi3DecoderLayer"}},
      {"gpt2", {"gpt2", "distilgpt2"}, {"GPT2Block"}},
      {"gpt_neox", {"gpt-neox", "pythia"}, {"GPTNeoXLayer"}},
      {"opt", {"facebook/opt-"}, {"OPTDecoderLayer"}},
      {"falcon", {"falcon"}, {"FalconDecoderLayer"}},
      {"bloom", {"bloom"}, {"BloomBlock"}},
      {"t5", {"t5-", "/t5", "flan-t5", "t5_"}, {"T5Block"}},
      {"bart", {"bart"}, {"BartEncoderLayer", "BartDecoderLayer"}},
      {"bert", {"bert-", "/bert"}, {"BertLayer"}},
      {"roberta", {"roberta"}, {"RobertaLayer"}},
      {"deepseek", {"deepseek"}, {"DeepseekV2DecoderLayer", "DeepseekV3DecoderLayer"}},
      {"whisper", {"whisper"}, {"WhisperEncoderLayer", "WhisperDecoderLayer"}},
      {"clip", {"clip"}, {"CLIPEncoderLayer"}},
      {"vit", {"google/vit", "/vit-"}, {"ViTLayer"}},
      {"llava", {"llava"}, {"LlamaDecoderLayer", "MistralDecoderLayer", "CLIPEncoderLayer", "SiglipEncoderLayer"}},
      {"granite", {"granite"}, {"GraniteDecoderLayer"}},
      {"olmo", {"olmo"}, {"OlmoDecoderLayer", "Olmo2DecoderLayer"}},
      {"smollm", {"smollm"}, {"LlamaDecoderLayer"}},
  };
  return families;
}

std::vector<const ModelFamily*> familiesOfId(std::string_view id) {
  std::string lower(id);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::vector<const ModelFamily*> out;
  // Variants with their own layer classes (vision-language, MoE, audio) are not in the table: unknown.
  for (std::string_view marker : {"-vl", "_vl", "vl-", "vision", "-moe", "audio", "omni", "-vlm"})
    if (lower.find(marker) != std::string::npos) return out;
  for (const auto& f : modelFamilies())
    for (auto p : f.idPatterns)
      if (lower.find(p) != std::string::npos) {
        out.push_back(&f);
        break;
      }
  return out;
}

Facts projectModelFacts(const std::vector<const SourceFile*>& files) {
  static const std::regex classRe(R"(^[ \t]*class[ \t]+([A-Za-z_]\w*)[ \t]*\(([^)]*)\))", std::regex::multiline);
  static const std::regex idRe(R"(from_pretrained\(\s*[rbuf]?["']([^"']+)["'])");
  std::map<std::string, std::vector<std::string>> bases;
  std::set<std::string> families;
  for (const SourceFile* f : files) {
    const std::string& t = f->text;
    for (auto it = std::sregex_iterator(t.begin(), t.end(), classRe); it != std::sregex_iterator(); ++it) {
      std::string list = (*it)[2];
      std::vector<std::string> bs;
      std::string cur;
      for (char c : list + ",") {
        if (c == ',') {
          cur.erase(0, cur.find_first_not_of(" \t\n"));
          cur.erase(cur.find_last_not_of(" \t\n") + 1);
          if (!cur.empty() && cur.find('=') == std::string::npos) bs.push_back(cur);
          cur.clear();
        } else {
          cur += c;
        }
      }
      bases[(*it)[1]] = bs;
    }
    for (auto it = std::sregex_iterator(t.begin(), t.end(), idRe); it != std::sregex_iterator(); ++it)
      for (const auto* fam : familiesOfId((*it)[1].str())) families.insert(std::string(fam->family));
  }
  // nn.Module-like: a base named *Module / PreTrainedModel / *Layer, or a project class that is.
  std::map<std::string, bool> isModule;
  std::function<bool(const std::string&, int)> moduleLike = [&](const std::string& cls, int depth) -> bool {
    if (auto it = isModule.find(cls); it != isModule.end()) return it->second;
    if (depth > 16) return false;
    isModule[cls] = false;
    bool yes = false;
    for (const auto& b : bases[cls]) {
      std::string last = b.substr(b.rfind('.') == std::string::npos ? 0 : b.rfind('.') + 1);
      if (last == "Module" || last == "PreTrainedModel" || last == "LightningModule" ||
          (bases.count(last) && moduleLike(last, depth + 1)))
        yes = true;
    }
    return isModule[cls] = yes;
  };
  std::string classes, fams;
  for (const auto& [cls, bs] : bases)
    if (moduleLike(cls, 0)) classes += (classes.empty() ? "" : ",") + cls;
  for (const auto& f : families) fams += (fams.empty() ? "" : ",") + f;
  return {{"module_classes", classes}, {"families", fams}};
}

}  // namespace shardlint::rules::config
