// A base for rules over FSDP configuration files: detects the role of each
// document and hands the rule its FSDP settings.
#pragma once
#include "Registry.h"
#include "config/Roles.h"

namespace shardlint::rules::config {

class ConfigRule : public Rule {
 public:
  explicit ConfigRule(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  bool checksConfigs() const override { return true; }
  void checkConfig(ConfigContext& cx) override {
    for (const auto& doc : cx.documents())
      if (auto s = detectFsdp(cx.file(), doc)) check(cx, *s);
  }

 protected:
  virtual void check(ConfigContext& cx, const FsdpSettings& s) = 0;
  const RuleInfo* info_;
};

}  // namespace shardlint::rules::config
