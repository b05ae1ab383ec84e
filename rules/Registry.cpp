#include "Registry.h"

#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

// One entry per code, sorted by code. tests/test_registry.cpp checks the order,
// uniqueness, docs and fixtures of every entry.
struct Entry {
  RuleInfo info;
  std::unique_ptr<Rule> (*make)(const RuleInfo*);
};

std::vector<Entry> makeEntries() {
  return {
      {{"SL001", "syntax-error", Severity::Error, "a file could not be parsed completely", ruleDoc("SL001")},
       nullptr},
      {{"SL002", "file-skipped", Severity::Error, "a file was not analysed (too large, not UTF-8, unreadable)",
        ruleDoc("SL002")},
       nullptr},
      {{"SL101", "optimizer-before-wrap", Severity::Error,
        "optimizer built from parameters that FSDP later replaces or flattens", ruleDoc("SL101")},
       makeSL101},
      {{"SL102", "stray-param-group", Severity::Error,
        "optimizer of an FSDP model holds parameters no FSDP unit manages", ruleDoc("SL102")},
       makeSL102},
      {{"SL103", "unsharded-params", Severity::Error,
        "optimized trainable parameters left outside every FSDP unit", ruleDoc("SL103")},
       makeSL103},
  };
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = makeEntries();
  return e;
}

std::vector<std::unique_ptr<Rule>> makeRules() {
  std::vector<std::unique_ptr<Rule>> out;
  for (const auto& e : entries())
    if (e.make) out.push_back(e.make(&e.info));
  return out;
}

std::unique_ptr<semantic::CallModel> makeCallModel() { return std::make_unique<fsdp::FsdpCallModel>(); }

}  // namespace

const RuleCatalog& catalog() {
  static const RuleCatalog c = [] {
    RuleCatalog cat;
    for (const auto& e : entries()) cat.infos.push_back(e.info);
    cat.makeRules = makeRules;
    cat.makeCallModel = makeCallModel;
    return cat;
  }();
  return c;
}

}  // namespace shardlint::rules
