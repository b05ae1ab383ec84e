// The explicit, sorted list of rules. All FSDP knowledge lives under rules/.
#pragma once
#include <memory>

#include "driver/Rule.h"

namespace shardlint::rules {

// The catalog the engine runs with: every rule's metadata (engine codes
// included), the rule factories and the FSDP call model.
const RuleCatalog& catalog();

// Generated at build time from the rule .md pages (rules/CMakeLists.txt).
std::string_view ruleDoc(std::string_view code);

std::unique_ptr<Rule> makeSL101(const RuleInfo* info);
std::unique_ptr<Rule> makeSL102(const RuleInfo* info);
std::unique_ptr<Rule> makeSL103(const RuleInfo* info);
std::unique_ptr<Rule> makeSL104(const RuleInfo* info);
std::unique_ptr<Rule> makeSL105(const RuleInfo* info);
std::unique_ptr<Rule> makeSL106(const RuleInfo* info);
std::unique_ptr<Rule> makeSL201(const RuleInfo* info);
std::unique_ptr<Rule> makeSL202(const RuleInfo* info);
std::unique_ptr<Rule> makeSL203(const RuleInfo* info);
std::unique_ptr<Rule> makeSL204(const RuleInfo* info);
std::unique_ptr<Rule> makeSL205(const RuleInfo* info);
std::unique_ptr<Rule> makeSL206(const RuleInfo* info);
std::unique_ptr<Rule> makeSL207(const RuleInfo* info);
std::unique_ptr<Rule> makeSL301(const RuleInfo* info);
std::unique_ptr<Rule> makeSL302(const RuleInfo* info);
std::unique_ptr<Rule> makeSL303(const RuleInfo* info);
std::unique_ptr<Rule> makeSL304(const RuleInfo* info);
std::unique_ptr<Rule> makeSL305(const RuleInfo* info);
std::unique_ptr<Rule> makeSL306(const RuleInfo* info);
std::unique_ptr<Rule> makeSL307(const RuleInfo* info);
std::unique_ptr<Rule> makeSL308(const RuleInfo* info);
std::unique_ptr<Rule> makeSL309(const RuleInfo* info);
std::unique_ptr<Rule> makeSL310(const RuleInfo* info);
std::unique_ptr<Rule> makeSL311(const RuleInfo* info);
std::unique_ptr<Rule> makeSL401(const RuleInfo* info);
std::unique_ptr<Rule> makeSL402(const RuleInfo* info);
std::unique_ptr<Rule> makeSL403(const RuleInfo* info);
std::unique_ptr<Rule> makeSL501(const RuleInfo* info);

}  // namespace shardlint::rules
