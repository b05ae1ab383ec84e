// What the interpreter (Interp, semantic/Interpreter.h) reads of a run's configuration: option
// defaults (values the command line or a loader may change), `argparse.ArgumentParser` options, and
// YAML files the code loads (`yaml.safe_load`, `OmegaConf.load`, `OmegaConf.merge`).
#include "semantic/Interpreter.h"

#include <algorithm>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/Yaml.h"
#include "core/SourceFile.h"

namespace shardlint::semantic {

ValueSet Interp::optionDefaults(const ValueSet& vs, const Origin& origin) {
  // The command line or a config loader may set it: a constant a rule may read as the default
  // configuration, never one that decides which code runs (Store::truthOf, equalityOf and isNone do
  // not read it).
  ValueSet marked;
  for (ObjId v : vs) {
    if (st_.obj(v).kind != ObjKind::Literal) {
      addValue(marked, v);
      continue;
    }
    std::string name = st_.obj(v).name;
    auto tags = st_.obj(v).tags();  // copied: newObject may move the objects
    ObjId d = newObject(ObjKind::Literal, name, origin);
    for (const auto& [k, t] : tags) st_.obj(d).setTag(k, t);
    st_.obj(d).setTag("option_default", "1");
    addValue(marked, d);
  }
  return marked;
}

bool Interp::argparseCall(ObjId parser, const std::string& method, const CallSite& site, ValueSet& result) {
  // `argparse.ArgumentParser`: `add_argument` records an option's default (`default=`, or the
  // `store_true` / `store_false` action's), and `parse_args()` gives an object whose attributes hold
  // them: the configuration a run without that option on its command line gets.
  if (method == "add_argument_group" || method == "add_mutually_exclusive_group") {
    addValue(result, parser);
    return true;
  }
  if (method == "add_argument") {
    std::string dest;
    for (const ValueSet& a : site.args) {
      auto flag = literal(a);
      if (!flag || flag->empty()) continue;
      std::string f = *flag;
      if (f.rfind("--", 0) == 0) {
        dest = f.substr(2);
        break;
      }
      if (dest.empty()) dest = f[0] == '-' ? f.substr(1) : f;
    }
    std::optional<ValueSet> value;
    for (const auto& [k, v] : site.kwargs) {
      if (k == "dest") {
        if (auto d = literal(v)) dest = *d;
      } else if (k == "default") {
        value = v;
      } else if (k == "action" && !value) {
        auto act = literal(v);
        if (act && *act == "store_true") value = ValueSet{constant("False")};
        else if (act && *act == "store_false") value = ValueSet{constant("True")};
      }
    }
    std::replace(dest.begin(), dest.end(), '-', '_');
    if (dest.empty() || !value) return true;
    value = optionDefaults(*value, site.origin);
    st_.obj(parser).more().keys.push_back(dest);
    st_.obj(parser).more().elements.push_back(*value);
    return true;
  }
  if (method == "parse_args" || method == "parse_known_args") {
    ObjId args = newObject(ObjKind::Instance, "argparse.Namespace", site.origin);
    const Obj& po = st_.obj(parser);
    for (size_t i = 0; i < po.keys().size() && i < po.elements().size(); ++i)
      setVar(envKeyFor(args, po.keys()[i]), po.elements()[i]);
    if (method == "parse_known_args") {
      ObjId pair = newObject(ObjKind::Container, "", site.origin);
      st_.obj(pair).containerKind = 't';
      st_.obj(pair).more().elements = {ValueSet{args}, ValueSet{}};
      addValue(result, pair);
    } else {
      addValue(result, args);
    }
    return true;
  }
  return false;
}

bool Interp::isConfigMapping(ObjId o) const {
  const Obj& ob = st_.obj(o);
  return ob.kind == ObjKind::Container && ob.containerKind == 'd' && ob.hasTag("config_file");
}

std::optional<ValueSet> Interp::configKey(ObjId mapping, std::string_view key) const {
  const Obj& ob = st_.obj(mapping);
  std::optional<ValueSet> v;
  for (size_t i = 0; i < ob.keys().size() && i < ob.elements().size(); ++i) {
    if (ob.keys()[i].empty() || ob.keys()[i] == "**") return std::nullopt;  // `update(...)`: any key may change
    if (ob.keys()[i] == key) v = ob.elements()[i];
  }
  return v;
}

std::optional<ObjId> Interp::configValue(const config::YNode& n, bool omega, const std::string& source,
                                         const Origin& origin, size_t& budget) {
  if (budget == 0) return std::nullopt;
  --budget;
  using YKind = config::YNode::Kind;
  auto tagged = [&](ObjId lit) {
    // The file's value unless the command line (`OmegaConf.from_cli`, an argparse override) sets
    // it: read like an argparse default, never deciding dead code.
    ObjId v = optionDefaults(ValueSet{lit}, origin)[0];
    st_.obj(v).setTag("config_file", source);
    return v;
  };
  if (!n.tag.empty() && n.tag != "!!str" && n.tag != "tag:yaml.org,2002:str" &&
      !(n.isMap() && (n.tag == "!!map" || n.tag == "tag:yaml.org,2002:map")))
    return std::nullopt;  // a constructor the engine does not run
  switch (n.kind) {
    case YKind::Null: return tagged(constant("None"));
    case YKind::Scalar: {
      config::Resolved r = config::resolveYaml11(n);
      switch (r.type) {
        case config::Resolved::Type::Null: return tagged(constant("None"));
        case config::Resolved::Type::Bool: return tagged(constant(r.boolean ? "True" : "False"));
        case config::Resolved::Type::Int: return tagged(constant(std::to_string(r.integer)));
        case config::Resolved::Type::Float: return std::nullopt;
        case config::Resolved::Type::String:
          // OmegaConf's interpolations and its missing value are resolved when read: unknown here.
          if (omega && (n.value.find("${") != std::string::npos || n.value == "???")) return std::nullopt;
          return tagged(stringConstant(n.value, true, origin));
      }
      return std::nullopt;
    }
    case YKind::Map: {
      ObjId d = newObject(ObjKind::Container, "", origin);
      st_.obj(d).containerKind = 'd';
      st_.obj(d).setTag("config_file", source);
      if (omega) st_.obj(d).setTag("config_attrs", "1");  // a DictConfig: `cfg.key` reads like `cfg["key"]`
      std::map<std::string, int, std::less<>> written;
      for (const auto& entry : n.entries)
        if (entry.first.isScalar()) ++written[entry.first.value];
      for (const auto& [k, v] : n.entries) {
        // Only names: a key written twice, a merge (`<<`) or a non-string key leaves that key unknown.
        if (!k.isScalar() || !k.tag.empty() || k.value == "<<" || written[k.value] != 1) continue;
        if (!k.quoted && config::resolveYaml11(k).type != config::Resolved::Type::String) continue;
        std::optional<ObjId> value = configValue(v, omega, source, origin, budget);
        if (!value) continue;
        st_.obj(d).more().keys.push_back(k.value);
        st_.obj(d).more().elements.push_back(ValueSet{*value});
      }
      return d;
    }
    default: return std::nullopt;  // sequences, aliases
  }
}

ObjId Interp::mergeConfigs(ObjId a, ObjId b, const Origin& origin, int depth) {
  // `OmegaConf.merge(a, b)`: b's keys win; two mappings under one key merge key by key.
  ObjId m = newObject(ObjKind::Container, "", origin);
  st_.obj(m).containerKind = 'd';
  st_.obj(m).setTag("config_file", std::string(st_.obj(b).tag("config_file")));
  st_.obj(m).setTag("config_attrs", "1");
  std::vector<std::string> keys = st_.obj(a).keys();
  std::vector<ValueSet> elements = st_.obj(a).elements();
  const std::vector<std::string> bKeys = st_.obj(b).keys();
  const std::vector<ValueSet> bElements = st_.obj(b).elements();
  for (size_t i = 0; i < bKeys.size() && i < bElements.size(); ++i) {
    auto it = bKeys[i].empty() ? keys.end() : std::find(keys.begin(), keys.end(), bKeys[i]);
    if (it == keys.end()) {
      keys.push_back(bKeys[i]);
      elements.push_back(bElements[i]);
      continue;
    }
    ValueSet& old = elements[static_cast<size_t>(it - keys.begin())];
    if (depth < 32 && old.size() == 1 && bElements[i].size() == 1 && isConfigMapping(old[0]) &&
        isConfigMapping(bElements[i][0]))
      old = ValueSet{mergeConfigs(old[0], bElements[i][0], origin, depth + 1)};
    else
      old = bElements[i];
  }
  st_.obj(m).more().keys = std::move(keys);
  st_.obj(m).more().elements = std::move(elements);
  return m;
}

bool Interp::configLoadCall(const std::string& q, const CallSite& site, ValueSet& result) {
  if (q == "omegaconf.OmegaConf.from_cli") {
    ObjId o = newObject(ObjKind::Instance, q, site.origin);
    st_.obj(o).setTag("config_cli", "1");
    addValue(result, o);
    return true;
  }
  if (q == "omegaconf.OmegaConf.merge") {
    // Loaded files merged (later ones win) with the command line's (`from_cli`, whose values the
    // loaded ones are already read as defaults for); anything else merged in may set any key.
    if (site.splat || !site.kwargs.empty()) return false;
    std::optional<ObjId> merged;
    for (const ValueSet& a : site.args) {
      if (a.size() != 1) return false;
      if (st_.obj(a[0]).hasTag("config_cli")) continue;
      if (!isConfigMapping(a[0])) return false;
      merged = merged ? mergeConfigs(*merged, a[0], site.origin, 0) : a[0];
    }
    if (!merged) return false;
    addValue(result, *merged);
    return true;
  }
  bool omega = q == "omegaconf.OmegaConf.load";
  if (!omega && q != "yaml.safe_load" && q != "yaml.load" && q != "yaml.full_load" && q != "yaml.unsafe_load")
    return false;
  if (site.splat || !ses_.provider()) return false;
  if (q == "yaml.load")  // PyYAML's own loaders resolve scalars alike; BaseLoader and custom ones do not
    if (const ValueSet* loader = site.arg(1, "Loader")) {
      static const std::set<std::string, std::less<>> known = {
          "yaml.SafeLoader", "yaml.FullLoader", "yaml.Loader", "yaml.UnsafeLoader",
          "yaml.CSafeLoader", "yaml.CFullLoader", "yaml.CLoader", "yaml.CUnsafeLoader"};
      if (loader->size() != 1 || st_.obj((*loader)[0]).kind != ObjKind::Ref || !known.count(st_.obj((*loader)[0]).name))
        return false;
    }
  // The path: a string written in the code (OmegaConf.load's argument, or `open`'s), never one the
  // command line may change (an argparse default).
  auto pathOf = [&](const ValueSet& vs) -> std::optional<std::string> {
    if (vs.size() != 1) return std::nullopt;
    const Obj& o = st_.obj(vs[0]);
    if (o.kind != ObjKind::Literal || o.hasTag("inexact") || o.hasTag("option_default") || o.name.empty())
      return std::nullopt;
    if (!o.hasTag("str") && truthOfConstant(o.name).has_value()) return std::nullopt;  // a number, None
    return o.name;
  };
  const ValueSet* arg = site.arg(0, omega ? "file_" : "stream");
  if (!arg || arg->size() != 1) return false;
  std::optional<std::string> path;
  const Obj& a = st_.obj((*arg)[0]);
  const ValueSet* spelled = a.kind == ObjKind::Instance && a.name == "open" && !a.inputs().empty() ? &a.inputs()[0]
                            : omega                                                             ? arg
                                                                                                : nullptr;
  if (spelled) path = pathOf(*spelled);
  if (!path) {
    if (spelled) needsCallerValue(*spelled);  // `def load(path): return OmegaConf.load(path)`: a caller may name it
    return false;
  }
  std::optional<std::string> text = ses_.provider()->dataFile(*path, mod_);
  if (!text) return false;
  SourceFile file(*path, std::move(*text));
  std::vector<config::YNode> docs;
  try {
    docs = config::parseYaml(file);
  } catch (const std::exception&) {
    return false;  // malformed: the load fails at run time, or reads what the engine does not
  }
  if (docs.size() != 1 || !docs[0].isMap()) return false;
  size_t budget = kMaxConfigNodes;
  std::optional<ObjId> mapping = configValue(docs[0], omega, *path, site.origin, budget);
  if (!mapping) return false;
  addValue(result, *mapping);
  return true;
}

}  // namespace shardlint::semantic
