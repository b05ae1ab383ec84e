// Fault injection for the containment tests (tests only): the real rules plus one rule that throws
// while a file is analysed when the file's text has a marker, and optionally a project-facts step
// that throws (a failure outside any one file's analysis).
#pragma once
#include <memory>
#include <new>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "Registry.h"
#include "driver/Rule.h"

namespace shardlint::testing {

// In a file's text: its analysis throws std::runtime_error("injected failure") / std::bad_alloc.
inline constexpr std::string_view kFaultRuntimeMarker = "SHARDLINT_FAULT_RUNTIME";
inline constexpr std::string_view kFaultBadAllocMarker = "SHARDLINT_FAULT_BAD_ALLOC";

class FaultRule final : public Rule {
 public:
  const RuleInfo& info() const override { return *rules::catalog().find("SL101"); }
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{kFaultRuntimeMarker, kFaultBadAllocMarker}};
  }
  void finish(RuleContext& cx) override {
    const std::string& text = cx.file().text;
    if (text.find(kFaultRuntimeMarker) != std::string::npos) throw std::runtime_error("injected failure");
    if (text.find(kFaultBadAllocMarker) != std::string::npos) throw std::bad_alloc();
  }
};

inline std::vector<std::unique_ptr<Rule>> faultRules() {
  auto rules = rules::catalog().makeRules();
  rules.push_back(std::make_unique<FaultRule>());
  return rules;
}

inline Facts failingProjectFacts(const std::vector<ProjectFile>&) {
  throw std::runtime_error("injected internal failure");
}

// The real catalog with FaultRule; with `internalFailure`, the project facts the configuration
// checks need (computed after every file's analysis) throw.
inline RuleCatalog faultCatalog(bool internalFailure) {
  RuleCatalog c = rules::catalog();
  c.makeRules = &faultRules;
  if (internalFailure) c.projectFacts = &failingProjectFacts;
  return c;
}

}  // namespace shardlint::testing
