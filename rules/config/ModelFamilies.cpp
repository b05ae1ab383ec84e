#include "config/ModelFamilies.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "syntax/Outline.h"

namespace shardlint::rules::config {
namespace {

struct GeneratedFamily {
  std::string_view name, ids, prefix, layers, archs, classes, deps, open;
};
#include "config/ModelTable.generated.inc"

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string_view::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool isSeparator(char c) { return c == '-' || c == '_' || c == '.' || c == ' '; }

std::string normalized(std::string_view s) {
  std::string out;
  for (char c : lower(s))
    if (!isSeparator(c)) out += c;
  return out;
}

struct Index {
  std::vector<ModelFamily> families;
  std::map<std::string, std::vector<size_t>, std::less<>> byClass;
  std::map<std::string_view, size_t, std::less<>> byName;
  // Class-name prefixes with a version (`DeepseekV3`, `Qwen2`) and the bare family prefixes
  // they extend (`Deepseek`, `Qwen`).
  std::set<std::string, std::less<>> versionedPrefixes, familyPrefixes;
};

// `Qwen2_5` -> {"Qwen", "2_5"}, `DeepseekV3` -> {"Deepseek", "V3"}; empty when there is no version.
std::pair<std::string, std::string> splitVersion(std::string_view stem) {
  size_t end = stem.size();
  size_t i = end;
  while (i > 0 && (std::isdigit(static_cast<unsigned char>(stem[i - 1])) || stem[i - 1] == '_')) --i;
  while (i < end && stem[i] == '_') ++i;
  if (i == end || !std::isdigit(static_cast<unsigned char>(stem[i]))) return {};
  if (i > 1 && stem[i - 1] == 'V' && std::islower(static_cast<unsigned char>(stem[i - 2]))) --i;
  if (i == 0) return {};
  return {std::string(stem.substr(0, i)), std::string(stem.substr(i))};
}

const Index& index() {
  static const Index idx = [] {
    Index x;
    for (const auto& g : kGeneratedFamilies) {
      ModelFamily f;
      f.name = g.name;
      for (auto p : words(g.ids)) f.idPatterns.push_back(normalized(p));
      auto expand = [&](std::string_view list, std::vector<std::string>& into) {
        for (auto w : words(list))
          into.push_back(w[0] == '~' ? std::string(g.prefix) + std::string(w.substr(1)) : std::string(w));
      };
      expand(g.layers, f.layerClasses);
      expand(g.archs, f.archClasses);
      expand(g.classes, f.otherClasses);
      f.deps = words(g.deps);
      f.openReason = g.open;
      x.families.push_back(std::move(f));
    }
    for (size_t i = 0; i < x.families.size(); ++i) {
      const auto& f = x.families[i];
      x.byName[f.name] = i;
      for (const auto* list : {&f.layerClasses, &f.archClasses, &f.otherClasses})
        for (const auto& c : *list) {
          auto& v = x.byClass[c];
          if (v.empty() || v.back() != i) v.push_back(i);
        }
    }
    // Versioned prefixes: the leading part of each class name up to the first capital after a
    // version number (`DeepseekV3` of DeepseekV3Attention, `Qwen2` of Qwen2MLP).
    for (const auto& [cls, fams] : x.byClass) {
      for (size_t i = 1; i < cls.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(cls[i - 1]))) continue;
        if (std::isdigit(static_cast<unsigned char>(cls[i])) || cls[i] == '_') continue;
        auto [base, version] = splitVersion(std::string_view(cls).substr(0, i));
        if (base.empty()) break;
        x.versionedPrefixes.insert(base + version);
        x.familyPrefixes.insert(base);
        break;
      }
    }
    for (const auto& f : x.families)  // unversioned families extend the same prefixes (`Mistral`)
      for (const auto& a : f.archClasses)
        if (a.size() > 15 && a.compare(a.size() - 15, 15, "PreTrainedModel") == 0)
          x.familyPrefixes.insert(a.substr(0, a.size() - 15));
    return x;
  }();
  return idx;
}

// Does `pattern` (normalized) occur in the id's model name (its last path component; the owner, as
// in `openai/...`, names no architecture), starting a token and not running into a letter (`opt`
// names `facebook/opt-1.3b`, not `Optimus-7B`)?
bool idNames(std::string_view id, const std::string& pattern) {
  std::string_view comp = id.substr(id.rfind('/') == std::string_view::npos ? 0 : id.rfind('/') + 1);
  std::string norm;
  std::vector<size_t> origin;  // norm index -> comp index
  std::vector<bool> tokenStart;
  for (size_t i = 0; i < comp.size(); ++i) {
    if (isSeparator(comp[i])) continue;
    tokenStart.push_back(i == 0 || isSeparator(comp[i - 1]));
    origin.push_back(i);
    norm += static_cast<char>(std::tolower(static_cast<unsigned char>(comp[i])));
  }
  for (size_t t = 0; t + pattern.size() <= norm.size(); ++t) {
    if (!tokenStart[t] || norm.compare(t, pattern.size(), pattern) != 0) continue;
    size_t end = origin[t + pattern.size() - 1] + 1;
    if (end == comp.size() || !std::isalpha(static_cast<unsigned char>(comp[end]))) return true;
  }
  return false;
}

}  // namespace

const std::vector<ModelFamily>& modelFamilies() { return index().families; }

const ModelFamily* findFamily(std::string_view name) {
  const auto& x = index();
  auto it = x.byName.find(name);
  return it == x.byName.end() ? nullptr : &x.families[it->second];
}

std::string modelTableRelease() { return "transformers " + std::string(kTransformersVersion); }

std::string_view modelFamiliesSource() { return kTransformersSource; }

IdFamilies familiesOfId(std::string_view id) {
  IdFamilies out;
  for (const auto& f : modelFamilies())
    for (const auto& p : f.idPatterns)
      if (idNames(id, p)) {
        out.families.push_back(&f);
        break;
      }
  std::string l = lower(id.substr(id.rfind('/') == std::string_view::npos ? 0 : id.rfind('/') + 1));
  for (std::string_view marker : {"-vl", "_vl", "vl-", "vision", "-moe", "_moe", "audio", "omni", "-vlm"}) {
    if (l.find(marker) == std::string::npos) continue;
    std::string word;
    for (char c : marker)
      if (!isSeparator(c)) word += c;
    if (word == "vlm") word = "vl";
    bool covered = std::any_of(out.families.begin(), out.families.end(), [&](const ModelFamily* f) {
      return f->name.find(word) != std::string_view::npos;
    });
    out.variant = out.variant || !covered;
  }
  return out;
}

std::vector<const ModelFamily*> familiesOfClass(std::string_view cls) {
  const auto& x = index();
  std::vector<const ModelFamily*> out;
  if (auto it = x.byClass.find(cls); it != x.byClass.end())
    for (size_t i : it->second) out.push_back(&x.families[i]);
  return out;
}

ModelClassSet classSetOf(const std::set<std::string>& names) {
  ModelClassSet out;
  std::set<std::string_view> done;
  std::function<void(const ModelFamily&, bool, bool)> add = [&](const ModelFamily& f, bool direct, bool layers) {
    if (!done.insert(f.name).second) return;
    if (direct && !f.openReason.empty() && out.open.empty())
      out.open = std::string(f.name) + " (builds sub-models with " + std::string(f.openReason) + ")";
    for (const auto* list : {&f.layerClasses, &f.archClasses, &f.otherClasses})
      for (const auto& c : *list) out.classes.insert(c);
    if (layers)
      for (const auto& c : f.layerClasses) out.layers.push_back(c);
    for (auto d : f.deps)
      if (const ModelFamily* dep = findFamily(d)) add(*dep, direct, false);
  };
  for (const auto& n : names)
    if (const ModelFamily* f = findFamily(n)) add(*f, true, true);
  // Later versions and variants of a named family (`qwen3` -> `qwen3_moe`, `mistral` -> `mistral4`):
  // a Hub id does not always say which one it is. Their classes count; an open one does not make
  // the set unknown.
  for (const auto& n : names)
    for (const auto& f : modelFamilies())
      if (f.name.size() > n.size() && f.name.compare(0, n.size(), n) == 0 &&
          (f.name[n.size()] == '_' || std::isdigit(static_cast<unsigned char>(f.name[n.size()]))))
        add(f, false, true);
  for (auto c : words(kSharedClasses)) out.classes.insert(std::string(c));
  return out;
}

std::string unknownVersionOf(std::string_view cls) {
  const auto& x = index();
  for (std::string_view suffix : {"DecoderLayer", "EncoderLayer", "Layer", "Block"}) {
    if (cls.size() <= suffix.size() || cls.substr(cls.size() - suffix.size()) != suffix) continue;
    auto [base, version] = splitVersion(cls.substr(0, cls.size() - suffix.size()));
    if (base.empty() || !x.familyPrefixes.count(base)) return "";
    return x.versionedPrefixes.count(base + version) ? "" : base + version;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// What the project's Python says about the model it loads.
namespace {

bool looksLikeHubId(std::string_view s) {
  if (s.size() < 3 || s.size() > 96 || std::count(s.begin(), s.end(), '/') != 1) return false;
  if (!std::isalnum(static_cast<unsigned char>(s.front())) || s.back() == '/') return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

std::string lastName(std::string_view dotted) {
  std::string s(dotted.substr(0, dotted.find('[')));  // Generic[T] -> Generic
  size_t dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Receivers of `from_pretrained` that load no model (tokenizers, configs, adapters).
bool loadsNoModel(std::string_view recv) {
  if (recv.rfind("AutoPeftModel", 0) == 0) return false;
  for (std::string_view w : {"Tokenizer", "Processor", "Config", "Extractor", "Scheduler", "Pipeline", "Dataset",
                             "Peft", "Adapter", "Lora", "Vocab"})
    if (contains(recv, w)) return true;
  return false;
}

// Bases that are no nn.Module: a class deriving only from these (or from none) is not one.
bool notAModule(std::string_view base) {
  static const std::set<std::string_view> names = {
      "object", "ABC", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "Exception", "BaseException",
      "ValueError", "RuntimeError", "TypeError", "KeyError", "dict", "list", "tuple", "set", "str", "int",
      "float", "NamedTuple", "TypedDict", "Protocol", "Generic", "BaseModel", "Thread", "Callback",
      "TrainerCallback", "Dataset", "IterableDataset", "TestCase"};
  auto endsWith = [&](std::string_view suffix) {
    return base.size() > suffix.size() && base.substr(base.size() - suffix.size()) == suffix;
  };
  return names.count(base) || endsWith("Error") || endsWith("Exception") || endsWith("Config");
}

// A path for messages: relative to the working directory when it lies below it.
std::string shortPath(const std::string& p) {
  std::error_code ec;
  std::filesystem::path cwd = std::filesystem::current_path(ec);
  if (!ec) {
    std::filesystem::path rel = std::filesystem::path(p).lexically_proximate(cwd);
    std::string r = rel.generic_string();
    if (!rel.empty() && r.rfind("..", 0) != 0) return r;
  }
  return p;
}

}  // namespace

bool projectModelFactsWant(std::string_view t) {
  // Nothing of interest without one of these words: not outlined.
  return contains(t, "class") || contains(t, "from_pretrained") || contains(t, "trust_remote_code") ||
         contains(t, "transformers") || contains(t, "/");
}

syntax::OutlineRequest projectModelOutline() {
  syntax::OutlineRequest request;
  request.callNames = {"from_pretrained", "from_config"};
  request.keywords = {"trust_remote_code"};
  request.wantString = looksLikeHubId;
  return request;
}

Facts projectModelFacts(const std::vector<ProjectFile>& files) {
  struct ClassInfo {
    std::vector<std::string> bases;  // last names
    std::string where;
  };
  std::map<std::string, ClassInfo> classes;
  std::set<std::string> families;
  std::vector<std::string> evidence, unknown;
  std::vector<const syntax::Outline*> outlines;
  std::vector<std::string> paths;
  for (const ProjectFile& f : files) {
    if (!f.outline) continue;
    outlines.push_back(f.outline);
    paths.push_back(shortPath(f.path));
  }
  auto note = [](std::vector<std::string>& into, std::string s) {
    if (into.size() < 3 && std::find(into.begin(), into.end(), s) == into.end()) into.push_back(std::move(s));
  };
  auto addFamilies = [&](const std::vector<const ModelFamily*>& fams, std::string why) {
    if (fams.empty()) return;
    for (const auto* fam : fams) families.insert(std::string(fam->name));
    note(evidence, std::move(why));
  };
  for (size_t i = 0; i < outlines.size(); ++i)
    for (const auto& c : outlines[i]->classes) {
      ClassInfo info{{}, paths[i] + ":" + std::to_string(c.line)};
      for (const auto& b : c.bases) info.bases.push_back(lastName(b));
      classes[c.name] = std::move(info);
    }
  // Families a project class derives from (through the project's own classes).
  std::function<std::vector<const ModelFamily*>(const std::string&, int)> familiesOfProjectClass =
      [&](const std::string& cls, int depth) -> std::vector<const ModelFamily*> {
    std::vector<const ModelFamily*> out;
    auto it = classes.find(cls);
    if (it == classes.end() || depth > 16) return out;
    for (const auto& b : it->second.bases) {
      auto fams = classes.count(b) ? familiesOfProjectClass(b, depth + 1) : familiesOfClass(b);
      out.insert(out.end(), fams.begin(), fams.end());
    }
    return out;
  };
  for (size_t i = 0; i < outlines.size(); ++i) {
    const auto& o = *outlines[i];
    auto at = [&](uint32_t line) { return paths[i] + ":" + std::to_string(line); };
    for (const auto& imp : o.imports)
      if (imp.module == "transformers" || imp.module.rfind("transformers.", 0) == 0)
        addFamilies(familiesOfClass(imp.name),
                    "`from " + imp.module + " import " + imp.name + "` (" + at(imp.line) + ")");
    for (const auto& c : o.classes)
      for (const auto& b : c.bases)
        if (!classes.count(lastName(b)))
          addFamilies(familiesOfClass(lastName(b)), "`class " + c.name + "(" + b + ")` (" + at(c.line) + ")");
    for (const auto& s : o.strings) {
      IdFamilies ids = familiesOfId(s.value);
      if (!ids.variant) addFamilies(ids.families, "`" + s.value + "` (" + at(s.line) + ")");
    }
    for (const auto& call : o.calls) {
      for (const auto& a : call.args)
        if (a.keyword == "trust_remote_code" && !(a.literal && (a.value == "False" || a.value == "None")))
          note(unknown, "`trust_remote_code=" + a.value + "` (" + at(call.line) + ")");
      std::string_view callee = call.callee;
      bool fromConfig = callee.size() > 12 && callee.substr(callee.size() - 12) == ".from_config";
      bool fromPretrained = callee.size() > 16 && callee.substr(callee.size() - 16) == ".from_pretrained";
      if (!fromConfig && !fromPretrained) continue;
      std::string receiver = lastName(callee.substr(0, callee.rfind('.')));
      if (loadsNoModel(receiver)) continue;
      std::string text = std::string(callee) + "(...)` (" + at(call.line) + ")";
      auto fams = classes.count(receiver) ? familiesOfProjectClass(receiver, 0) : familiesOfClass(receiver);
      if (!fams.empty()) {  // `LlamaForCausalLM.from_pretrained(path)` loads a Llama whatever the path
        addFamilies(fams, "`" + text);
        continue;
      }
      const syntax::OutlineArgument* id = nullptr;
      for (const auto& a : call.args)
        if ((a.keyword.empty() && !id) || a.keyword == "pretrained_model_name_or_path") id = &a;
      if (fromConfig) {
        note(unknown, "`" + text + " builds a model from a config chosen at run time");
      } else if (!id || !id->string) {
        note(unknown, "`" + std::string(callee) + "(" + (id ? id->value : "") + ")` (" + at(call.line) +
                          ") loads a model chosen at run time");
      } else {
        IdFamilies ids = familiesOfId(id->value);
        if (ids.families.empty() || ids.variant)
          note(unknown, "`" + id->value + "` (" + at(call.line) + ") names no model family of the table (" +
                            modelTableRelease() + ")");
        else
          addFamilies(ids.families, "`" + id->value + "` (" + at(call.line) + ")");
      }
    }
  }
  // Classes that may be nn.Modules: a base that is one, or an external base not known to be none.
  std::map<std::string, bool> isModule;
  std::function<bool(const std::string&, int)> moduleLike = [&](const std::string& cls, int depth) -> bool {
    if (auto it = isModule.find(cls); it != isModule.end()) return it->second;
    if (depth > 16) return false;
    isModule[cls] = false;
    bool yes = false;
    for (const auto& b : classes[cls].bases)
      yes = yes || (classes.count(b) ? moduleLike(b, depth + 1) : !notAModule(b));
    return isModule[cls] = yes;
  };
  auto join = [](const auto& items, const char* sep) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : sep) + std::string(s);
    return out;
  };
  std::vector<std::string> moduleClasses;
  for (const auto& [cls, info] : classes)
    if (moduleLike(cls, 0)) moduleClasses.push_back(cls);
  Facts out{{"module_classes", join(moduleClasses, ",")}, {"model_families", join(families, ",")}};
  if (!evidence.empty()) out["model_evidence"] = join(evidence, ", ");
  if (!unknown.empty()) out["model_unknown"] = join(unknown, ", ");
  return out;
}

}  // namespace shardlint::rules::config
