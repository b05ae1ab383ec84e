#include "config/Roles.h"

#include "config/ConfigRule.h"
#include "config/PyLiteral.h"
#include "syntax/TreeSitter.h"

#include <algorithm>

namespace shardlint::rules::config {

std::string_view bareKey(std::string_view key) {
  return key.substr(0, 5) == "fsdp_" ? key.substr(5) : key;
}

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

const std::pair<YNode, YNode>* FsdpSettings::entry(std::string_view bareName) const {
  const std::pair<YNode, YNode>* found = nullptr;
  if (!section || !section->isMap()) return nullptr;
  for (const auto& e : section->entries)
    if (e.first.isScalar() && bareKey(e.first.value) == bareName) found = &e;
  return found;
}

std::string_view FsdpSettings::roleName() const {
  switch (role) {
    case Role::Accelerate: return "accelerate config";
    case Role::Axolotl: return "axolotl config";
    case Role::TrainerJson: return "Trainer fsdp_config";
    case Role::LaunchFlags: return "accelerate launch flags";
    case Role::Plugin: return "FullyShardedDataParallelPlugin arguments";
  }
  return "config";
}

std::optional<bool> asBool(const YNode* n) {
  if (!n) return std::nullopt;
  Resolved r = shardlint::config::resolveYaml11(*n);
  if (r.type == Resolved::Type::Bool) return r.boolean;
  if (n->isScalar()) {  // accelerate / transformers also take "true"/"false" strings
    std::string v = n->value;
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    if (v == "true") return true;
    if (v == "false") return false;
  }
  return std::nullopt;
}

std::string asString(const YNode* n) { return n && n->isScalar() ? n->value : std::string(); }

namespace {
const YNode* lastValue(const YNode& map, std::string_view key) {
  const YNode* found = nullptr;
  for (const auto& [k, v] : map.entries)
    if (k.isScalar() && k.value == key) found = &v;
  return found;
}

void readVersion(FsdpSettings& s, const YNode* node) {
  if (!node) return;
  s.versionNode = node;
  Resolved r = shardlint::config::resolveYaml11(*node);
  if (r.type == Resolved::Type::Int) s.version = static_cast<int>(r.integer);
  else if (node->isScalar() && (node->value == "2" || node->value == "1")) s.version = node->value[0] - '0';
}

bool isJson(const shardlint::SourceFile& f) {
  return f.path.size() > 5 && f.path.substr(f.path.size() - 5) == ".json";
}

// A document written as one JSON object (`{...}`): a JSON file's content wherever it is shown (a fenced
// block of a Markdown file).
bool isJsonObject(const shardlint::SourceFile& f, const YNode& doc) {
  return doc.isMap() && doc.range.begin < f.text.size() && f.text[doc.range.begin] == '{';
}

// `fsdp: "full_shard auto_wrap"`: the Trainer's `fsdp` argument, a string of FSDP options separated by
// spaces (transformers splits it). axolotl's `fsdp` is a list.
bool isTrainerFsdpString(const YNode* n) {
  if (!n || !n->isScalar()) return false;
  const auto& kOptions = trainerFsdpOptions();
  std::string_view v = n->value;
  size_t words = 0;
  while (!v.empty()) {
    size_t b = v.find_first_not_of(' ');
    if (b == std::string_view::npos) break;
    v.remove_prefix(b);
    size_t e = std::min(v.find(' '), v.size());
    if (std::find(kOptions.begin(), kOptions.end(), v.substr(0, e)) == kOptions.end()) return false;
    ++words;
    v.remove_prefix(e);
  }
  return words > 0;
}
}  // namespace

std::optional<FsdpSettings> detectFsdp(const shardlint::SourceFile& file, const YNode& doc) {
  if (!doc.isMap()) return std::nullopt;
  if (doc.get("__launch__")) {  // synthesized from an `accelerate launch` command (Links.cpp)
    FsdpSettings s{Role::LaunchFlags};
    s.root = &doc;
    s.section = doc.get("fsdp_config");
    s.enabled = true;
    if (s.section) readVersion(s, lastValue(*s.section, "fsdp_version"));
    return s;
  }
  const YNode* fsdpConfig = lastValue(doc, "fsdp_config");
  const YNode* distributed = lastValue(doc, "distributed_type");
  static const std::vector<std::string_view> kAccelerateTop = {"compute_environment", "distributed_type",
                                                              "mixed_precision",     "num_processes",
                                                              "machine_rank",        "num_machines",
                                                              "main_training_function"};
  int accelerateKeys = 0;
  for (auto k : kAccelerateTop)
    if (lastValue(doc, k)) ++accelerateKeys;
  if (distributed || (fsdpConfig && accelerateKeys >= 1 && !lastValue(doc, "base_model"))) {
    FsdpSettings s{Role::Accelerate};
    s.root = &doc;
    s.section = fsdpConfig && fsdpConfig->isMap() ? fsdpConfig : nullptr;
    s.enabled = asString(distributed) == "FSDP" || (!distributed && s.section);
    if (s.section) {
      readVersion(s, lastValue(*s.section, "version"));  // accelerate adds the `fsdp_` prefix itself
      readVersion(s, lastValue(*s.section, "fsdp_version"));
    }
    if (!s.section && !s.enabled) return std::nullopt;
    return s;
  }
  const YNode* fsdpList = lastValue(doc, "fsdp");
  if (fsdpConfig && fsdpConfig->isMap() && fsdpList && fsdpList->isScalar() && fsdpList->quoted &&
      fsdpList->value.find_first_not_of(' ') == std::string::npos && !lastValue(doc, "base_model"))
    return std::nullopt;  // training arguments with `fsdp: ""`: the Trainer does not shard, fsdp_config is unread
  if (fsdpConfig && fsdpConfig->isMap() && isTrainerFsdpString(fsdpList) && !lastValue(doc, "base_model")) {
    // Training arguments (a YAML or JSON file `HfArgumentParser` reads, a TRL recipe): the Trainer reads
    // `fsdp_config` as it reads a `--fsdp_config` JSON file.
    FsdpSettings s{Role::TrainerJson};
    s.root = &doc;
    s.section = fsdpConfig;
    s.enabled = true;
    if (const YNode* v = lastValue(*fsdpConfig, "version")) readVersion(s, v);
    if (const YNode* v = lastValue(*fsdpConfig, "fsdp_version")) readVersion(s, v);
    return s;
  }
  if (fsdpConfig && fsdpConfig->isMap() && (fsdpList || lastValue(doc, "base_model") || lastValue(doc, "fsdp_version"))) {
    FsdpSettings s{Role::Axolotl};
    s.root = &doc;
    s.section = fsdpConfig;
    s.enabled = true;
    readVersion(s, lastValue(doc, "fsdp_version"));
    if (const YNode* inner = lastValue(*fsdpConfig, "fsdp_version")) readVersion(s, inner);
    if (const YNode* inner = lastValue(*fsdpConfig, "version")) readVersion(s, inner);
    return s;
  }
  if (isJson(file) || isJsonObject(file, doc)) {
    // A Trainer `fsdp_config` JSON: mostly keys transformers knows (with or without `fsdp_`).
    static const std::vector<std::string_view> kTrainer = {
        "min_num_params",        "transformer_layer_cls_to_wrap", "backward_prefetch", "forward_prefetch",
        "limit_all_gathers",     "use_orig_params",               "sync_module_states", "cpu_ram_efficient_loading",
        "activation_checkpointing", "xla",                        "xla_fsdp_settings", "xla_fsdp_grad_ckpt",
        "version",               "offload_params",                "reshard_after_forward", "state_dict_type",
        "auto_wrap_policy",      "sharding_strategy",             "cpu_offload"};
    int known = 0, total = 0;
    for (const auto& [k, v] : doc.entries) {
      if (!k.isScalar()) continue;
      ++total;
      if (std::find(kTrainer.begin(), kTrainer.end(), bareKey(k.value)) != kTrainer.end()) ++known;
    }
    if (known >= 1 && known * 2 >= total) {
      FsdpSettings s{Role::TrainerJson};
      s.root = &doc;
      s.section = &doc;
      s.enabled = true;
      if (const YNode* v = lastValue(doc, "version")) readVersion(s, v);
      if (const YNode* v = lastValue(doc, "fsdp_version")) readVersion(s, v);
      return s;
    }
  }
  return std::nullopt;
}

const std::vector<std::string_view>& trainerFsdpOptions() {
  // transformers' `FSDPOption` values (`trainer_utils.py`); `TrainingArguments.__post_init__` splits a
  // string `fsdp` on whitespace and looks each word up as written (`FSDPOption(s)`).
  static const std::vector<std::string_view> kOptions = {"full_shard", "shard_grad_op", "no_shard",    "hybrid_shard",
                                                         "hybrid_shard_zero2", "offload", "auto_wrap"};
  return kOptions;
}

const std::vector<std::string_view>& trainingArgumentsClasses() {
  static const std::vector<std::string_view> kArgs = {"TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig",
                                                      "DPOConfig", "GRPOConfig", "ORPOConfig", "KTOConfig",
                                                      "RewardConfig", "PPOConfig"};
  return kArgs;
}

std::vector<std::string_view> ConfigRule::callNames() const {
  std::vector<std::string_view> names = trainingArgumentsClasses();
  names.push_back("FullyShardedDataParallelPlugin");
  return names;
}

void checkTrainingArguments(RuleContext& cx, TSNode call, ConfigRule& rule) {
  std::string_view src = cx.file().text;
  std::string_view name = syntax::calleeLastName(call, src);
  if (name == "FullyShardedDataParallelPlugin") {
    // The plugin's keyword arguments, as a settings mapping (literal values only).
    TSNode args = syntax::field(call, "arguments");
    if (ts_node_is_null(args)) return;
    std::vector<YNode> docs(1);
    docs[0].kind = YNode::Kind::Map;
    docs[0].range = syntax::rangeOf(args);
    for (const auto& kw : syntax::keywordArguments(call)) {
      YNode key;
      key.kind = YNode::Kind::Scalar;
      key.value = std::string(syntax::textOf(kw.name, src));
      key.range = syntax::rangeOf(kw.name);
      docs[0].entries.emplace_back(std::move(key), shardlint::config::fromPythonLiteral(kw.value, src));
    }
    FsdpSettings s{Role::Plugin};
    s.root = &docs[0];
    s.section = &docs[0];
    s.enabled = true;
    readVersion(s, docs[0].get("fsdp_version"));
    ConfigContext ccx(cx.file(), docs, cx.sink());
    rule.check(ccx, s);
    return;
  }
  const auto& kArgs = trainingArgumentsClasses();
  if (std::find(kArgs.begin(), kArgs.end(), name) == kArgs.end()) return;
  for (const auto& kw : syntax::keywordArguments(call)) {
    if (syntax::textOf(kw.name, src) != "fsdp_config") continue;
    std::vector<YNode> docs{shardlint::config::fromPythonLiteral(kw.value, src)};
    if (!docs[0].isMap()) return;
    FsdpSettings s{Role::TrainerJson};
    s.root = &docs[0];
    s.section = &docs[0];
    s.enabled = true;
    if (const YNode* v = docs[0].get("version")) readVersion(s, v);
    if (const YNode* v = docs[0].get("fsdp_version")) readVersion(s, v);
    ConfigContext ccx(cx.file(), docs, cx.sink());
    rule.check(ccx, s);
  }
}

}  // namespace shardlint::rules::config
