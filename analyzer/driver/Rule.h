// The rule interface. Rules live in rules/; the engine only dispatches to them.
#pragma once
#include <tree_sitter/api.h>

#include <memory>
#include <string>
#include <vector>

#include "core/Diagnostic.h"
#include "semantic/CallModel.h"
#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

class RuleContext {
 public:
  // `files` maps the file ids used in semantic Sites to sources (index 0: the linted file).
  RuleContext(std::vector<const SourceFile*> files, TSNode root, semantic::FileAnalysis& analysis,
              std::vector<Diagnostic>& out)
      : files_(std::move(files)), root_(root), analysis_(analysis), out_(out) {}
  const SourceFile& file() const { return *files_.at(0); }
  const SourceFile& file(uint32_t id) const { return *files_.at(id); }
  TSNode root() const { return root_; }
  semantic::FileAnalysis& analysis() { return analysis_; }
  Location locate(const semantic::Site& site) const { return makeLocation(file(site.file), site.range); }
  Note note(const semantic::Site& site, std::string message) const { return Note{locate(site), std::move(message)}; }
  void report(const RuleInfo& info, const semantic::Site& primary, std::string message, std::vector<Note> notes = {});

 private:
  std::vector<const SourceFile*> files_;
  TSNode root_;
  semantic::FileAnalysis& analysis_;
  std::vector<Diagnostic>& out_;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual const RuleInfo& info() const = 0;
  // Node kinds this rule wants to see during the rule walk.
  virtual std::vector<syntax::Kind> nodeKinds() const { return {}; }
  virtual void onNode(RuleContext&, TSNode) {}
  // Called once per file after the walk, with the semantic model complete.
  virtual void finish(RuleContext&) {}
  // A cheap byte-level pre-scan: false when the file cannot contain a finding of
  // this rule (no name the rule cares about). Files no enabled rule may apply to
  // skip the semantic pass.
  virtual bool mayApply(std::string_view text) const { (void)text; return true; }
};

// What rules/ hands the engine: rule metadata for every code (engine codes
// included), factories for the checking rules, and the domain call model.
struct RuleCatalog {
  std::vector<RuleInfo> infos;  // sorted by code
  std::vector<std::unique_ptr<Rule>> (*makeRules)() = nullptr;
  std::unique_ptr<semantic::CallModel> (*makeCallModel)() = nullptr;
  const RuleInfo* find(std::string_view codeOrName) const;
};

}  // namespace shardlint
