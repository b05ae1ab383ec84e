// SL401 wrap-class-not-found: a wrap class named in a config is provably absent: the class set of every
// model the config or the project may load is known (the generated transformers table), and neither it
// nor the project's own classes hold the name.
#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "config/ConfigRule.h"
#include "config/ModelFamilies.h"

namespace shardlint::rules {
namespace {
using namespace config;

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool identifier(std::string_view s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

class WrapClassNotFound final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    const auto* e = s.entry("transformer_layer_cls_to_wrap");
    if (!e || !cx.project() || s.role == Role::Plugin) return;
    const Facts& project = *cx.project();
    auto fact = [&](const char* key) {
      auto it = project.find(key);
      return it == project.end() ? std::string() : it->second;
    };
    auto listFact = [&](const char* key) {
      std::vector<std::string> items = splitList(fact(key));
      return std::set<std::string>(items.begin(), items.end());
    };
    std::set<std::string> known = listFact("module_classes");
    // The model: what the config itself names (axolotl's `base_model`), else what the project's code loads.
    std::set<std::string> families;
    std::vector<std::string> evidence;
    std::string unknown;
    bool configNamesModel = false;
    if (s.root) {
      for (const char* key : {"base_model", "model_name_or_path", "base_model_config"}) {
        const YNode* id = s.root->get(key);
        if (!id || !id->isScalar() || id->value.empty()) continue;
        configNamesModel = true;
        IdFamilies ids = familiesOfId(id->value);
        if (ids.families.empty() || ids.variant) {
          if (unknown.empty()) unknown = "`" + std::string(key) + ": " + id->value + "`";
          continue;
        }
        for (const auto* f : ids.families) families.insert(std::string(f->name));
        evidence.push_back("`" + std::string(key) + ": " + id->value + "`");
      }
      // axolotl's `model_type: LlamaForCausalLM` loads that class whatever the checkpoint's path says.
      if (const YNode* type = s.root->get("model_type"); type && type->isScalar()) {
        auto fams = familiesOfClass(type->value);
        if (!fams.empty()) {
          for (const auto* f : fams) families.insert(std::string(f->name));
          configNamesModel = true;
          unknown.clear();
          evidence.push_back("`model_type: " + type->value + "`");
        }
      }
      if (asBool(s.root->get("trust_remote_code")).value_or(false)) unknown = "`trust_remote_code: true`";
    }
    if (!configNamesModel) {
      families = listFact("model_families");
      if (auto ev = fact("model_evidence"); !ev.empty()) evidence.push_back(ev);
      if (unknown.empty()) unknown = fact("model_unknown");
    }
    // Only a model whose class set is known proves a name absent: remote code, a model chosen at run
    // time, an id the table does not know or a model assembled from sub-models stay silent.
    if (!unknown.empty() || families.empty()) return;
    ModelClassSet model = classSetOf(families);
    if (!model.open.empty()) return;

    std::vector<std::pair<std::string, ByteRange>> names;
    if (e->second.isScalar()) {
      for (const auto& n : splitList(e->second.value)) names.emplace_back(n, e->second.range);
    } else {
      for (const auto& item : e->second.items)
        if (item.isScalar()) names.emplace_back(item.value, item.range);
    }
    for (const auto& [name, range] : names) {
      if (!identifier(name) || known.count(name) || model.classes.count(name)) continue;
      // `DeepseekV9DecoderLayer`: a version of a known family this table predates.
      if (!unknownVersionOf(name).empty()) continue;
      std::string best;
      size_t bestD = 99;
      std::string lowerName = name;
      std::transform(lowerName.begin(), lowerName.end(), lowerName.begin(), [](unsigned char c) { return std::tolower(c); });
      // The closest layer class of the model; a project class or any other class of the model only
      // when it is close (`KimiDecoderLayer` of the project is no suggestion for `LlamaDecoderLayer`).
      const std::string& written = name;  // clang 14 cannot capture a structured binding
      auto consider = [&](const std::string& candidate, size_t maxD) {
        std::string lc = candidate;
        std::transform(lc.begin(), lc.end(), lc.begin(), [](unsigned char c) { return std::tolower(c); });
        size_t d = lc == lowerName ? 0 : editDistance(written, candidate);
        if (d <= maxD && d < bestD) bestD = d, best = candidate;
      };
      for (const auto& l : model.layers) consider(l, 99);
      for (const auto& k : known) consider(k, 2);
      for (const auto& c : model.classes) consider(c, 1);  // `LlamaMlp` -> `LlamaMLP`
      std::string fams;
      for (const auto& f : families) fams += (fams.empty() ? "" : ", ") + f;
      std::string said;
      for (const auto& ev : evidence) said += (said.empty() ? "" : ", ") + ev;
      cx.report(info(), range,
                "`" + name + "` is not a module class of the model " +
                    (configNamesModel ? "this config loads" : "the project loads") + " (" + said + ": " +
                    modelTableRelease() + " famil" + (families.size() == 1 ? "y " : "ies ") + fams +
                    ") nor a class the project defines; accelerate raises `ValueError: Could not find the "
                    "transformer layer class " + name + " in the model.`" +
                    (bestD <= std::max<size_t>(3, name.size() / 3) ? "; did you mean `" + best + "`?" : ""));
    }
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL401(const RuleInfo* info) { return std::make_unique<WrapClassNotFound>(info); }
}  // namespace shardlint::rules
