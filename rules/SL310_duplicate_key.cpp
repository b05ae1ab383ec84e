// SL310 duplicate-key: a key given twice in one mapping of an FSDP config; the later silently wins.
#include <map>

#include "config/ConfigRule.h"

namespace shardlint::rules {
namespace {
using namespace config;

class DuplicateKey final : public ConfigRule {
 public:
  using ConfigRule::ConfigRule;

 private:
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (s.role != Role::Plugin) visit(cx, *s.root);  // duplicate keyword arguments are a SyntaxError
  }

  void visit(ConfigContext& cx, const YNode& n) {
    if (n.isMap()) {
      std::map<std::string, const std::pair<YNode, YNode>*> seen;
      for (const auto& e : n.entries) {
        if (e.first.isScalar()) {
          auto [it, fresh] = seen.emplace(e.first.value, &e);
          if (!fresh) {
            std::string earlier = it->second->second.isScalar() ? it->second->second.value : std::string("...");
            std::string later = e.second.isScalar() ? e.second.value : std::string("...");
            cx.report(info(), e.first.range,
                      "`" + e.first.value + "` is given twice in this mapping; the loader keeps the later value (`" +
                          later + "`) and silently drops the earlier one (`" + earlier + "`); keep one",
                      {cx.note(it->second->first.range, "first given here")});
            it->second = &e;
          }
        }
        visit(cx, e.second);
      }
    } else {
      for (const auto& item : n.items) visit(cx, item);
    }
  }
};
}  // namespace

std::unique_ptr<Rule> makeSL310(const RuleInfo* info) { return std::make_unique<DuplicateKey>(info); }
}  // namespace shardlint::rules
