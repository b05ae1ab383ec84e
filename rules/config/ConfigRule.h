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
  // Settings written in code: `TrainingArguments(..., fsdp_config={...})` (and TRL's
  // config classes, which subclass it) are a Trainer fsdp_config.
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{"fsdp_config", "FullyShardedDataParallelPlugin"}};
  }
  std::vector<syntax::Kind> nodeKinds() const override { return {syntax::Kind::call}; }
  std::vector<std::string_view> callNames() const override;
  void onNode(RuleContext& cx, TSNode call) override { checkTrainingArguments(cx, call, *this); }

 protected:
  virtual void check(ConfigContext& cx, const FsdpSettings& s) = 0;
  const RuleInfo* info_;

 private:
  friend void checkTrainingArguments(RuleContext& cx, TSNode call, ConfigRule& rule);
};

// Builds the fsdp_config of a TrainingArguments-like call and runs `rule` on it.
void checkTrainingArguments(RuleContext& cx, TSNode call, ConfigRule& rule);

}  // namespace shardlint::rules::config
