// The rule interface. Rules live in rules/; the engine only dispatches to them.
#pragma once
#include <tree_sitter/api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/Yaml.h"
#include "core/Diagnostic.h"
#include "cxx/CxxModel.h"
#include "semantic/CallModel.h"
#include "semantic/Interpreter.h"
#include "syntax/Outline.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

class RuleContext {
 public:
  // `modules` maps the file ids used in semantic Sites to sources and modules.
  RuleContext(const semantic::ModuleLookup& modules, semantic::FileAnalysis& analysis, std::vector<Diagnostic>& out,
              std::vector<Diagnostic>* controls = nullptr)
      : modules_(modules), analysis_(analysis), out_(out), controls_(controls) {}
  // The innermost function (in any loaded module) whose body contains the site.
  const semantic::FunctionDef* enclosingFunction(const semantic::Site& site) const {
    if (site.file == analysis_.module().fileId()) return analysis_.enclosingFunction(site.range);
    const semantic::Module* m = modules_.moduleById(site.file);
    return m ? m->enclosingFunction(site.range) : nullptr;
  }
  // The linted file.
  const SourceFile& file() const { return analysis_.file(); }
  const SourceFile& file(uint32_t id) const;
  TSNode root() const { return analysis_.module().root(); }
  semantic::FileAnalysis& analysis() { return analysis_; }
  Location locate(const semantic::Site& site) const { return makeLocation(file(site.file), site.range); }
  Note note(const semantic::Site& site, std::string message) const { return Note{locate(site), std::move(message)}; }
  void report(const RuleInfo& info, const semantic::Site& primary, std::string message, std::vector<Note> notes = {},
              std::optional<Fix> fix = std::nullopt);
  // An edit of `site`'s bytes (in the file of `site.file`).
  Edit edit(const semantic::Site& site, std::string text) const { return Edit{locate(site), std::move(text)}; }
  // Whether controls are collected (LintOptions::controls): rules skip the work otherwise.
  bool wantsControls() const { return controls_ != nullptr; }
  // A control: a pattern the rule examined and found correct, with the facts a runtime check of
  // that verdict needs (`shardlint probe --controls` replays it and expects no bug). Never a
  // finding: controls go to their own list, not to any output of `check`.
  void control(const RuleInfo& info, const semantic::Site& primary, std::string message,
               std::map<std::string, std::string> facts) {
    if (!controls_) return;
    Diagnostic d = makeDiagnostic(info, locate(primary), std::move(message));
    d.severity = Severity::Hint;
    d.facts = std::move(facts);
    controls_->push_back(std::move(d));
  }
  // Where findings go (for rules that check settings written in code with a ConfigContext).
  std::vector<Diagnostic>& sink() { return out_; }

 private:
  const semantic::ModuleLookup& modules_;
  semantic::FileAnalysis& analysis_;
  std::vector<Diagnostic>& out_;
  std::vector<Diagnostic>* controls_;
};

// Facts a configuration contributes to the analysis of the scripts it applies to
// (the domain decides their meaning, e.g. {"accelerate_fsdp": "1", "use_orig_params": "false"}).
using Facts = std::map<std::string, std::string>;

// What a configuration rule sees: one YAML/JSON file and its documents.
class ConfigContext {
 public:
  ConfigContext(const SourceFile& file, const std::vector<config::YNode>& docs, std::vector<Diagnostic>& out,
                const Facts* project = nullptr)
      : file_(file), docs_(docs), out_(out), project_(project) {}
  // Facts about the project's Python code (RuleCatalog::projectFacts), with the dependencies the
  // project declares for this file's folder (RuleCatalog::requirementPackages), or null.
  const Facts* project() const { return project_; }
  const SourceFile& file() const { return file_; }
  const std::vector<config::YNode>& documents() const { return docs_; }
  Note note(ByteRange range, std::string message) const { return Note{makeLocation(file_, range), std::move(message)}; }
  // The finding, for a rule to adjust (a severity below the rule's default for one kind of finding).
  Diagnostic& report(const RuleInfo& info, ByteRange range, std::string message, std::vector<Note> notes = {},
                     std::optional<Fix> fix = std::nullopt) {
    out_.push_back(makeDiagnostic(info, makeLocation(file_, range), std::move(message), std::move(notes)));
    out_.back().fix = std::move(fix);
    return out_.back();
  }
  // An edit of this file's bytes `range`.
  Edit edit(ByteRange range, std::string text) const { return Edit{makeLocation(file_, range), std::move(text)}; }

 private:
  const SourceFile& file_;
  const std::vector<config::YNode>& docs_;
  std::vector<Diagnostic>& out_;
  const Facts* project_;
};

// What a C++ rule sees: the model of one translation unit (cxx/CxxModel.h). Files are indexes
// into program().files.
class CxxContext {
 public:
  CxxContext(const cxx::Program& program, const std::vector<std::unique_ptr<SourceFile>>& files,
             std::vector<Diagnostic>& out)
      : program_(program), files_(files), out_(out) {}
  const cxx::Program& program() const { return program_; }
  const SourceFile& file(uint32_t index) const { return *files_.at(index); }
  Location locate(uint32_t file, ByteRange range) const { return makeLocation(*files_.at(file), range); }
  Note note(uint32_t file, ByteRange range, std::string message) const {
    return Note{locate(file, range), std::move(message)};
  }
  void report(const RuleInfo& info, uint32_t file, ByteRange range, std::string message, std::vector<Note> notes = {}) {
    out_.push_back(makeDiagnostic(info, locate(file, range), std::move(message), std::move(notes)));
  }

 private:
  const cxx::Program& program_;
  const std::vector<std::unique_ptr<SourceFile>>& files_;
  std::vector<Diagnostic>& out_;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual const RuleInfo& info() const = 0;
  // Node kinds this rule wants to see during the rule walk. The walk visits only files whose
  // own text has a word of every prescanTokens() group: what onNode looks at is in the file.
  virtual std::vector<syntax::Kind> nodeKinds() const { return {}; }
  // With `call` among nodeKinds(): the callees (their last name, `TrainingArguments` for
  // `transformers.TrainingArguments(...)`) whose calls onNode wants; the walk reads each call's callee
  // once for all such rules. Empty: every call.
  virtual std::vector<std::string_view> callNames() const { return {}; }
  virtual void onNode(RuleContext&, TSNode) {}
  // Called once per file after the walk, with the semantic model complete.
  virtual void finish(RuleContext&) {}
  // The byte-level pre-scan: groups of words. The rule may apply to a file only when,
  // for every group, some word occurs in the file or in a project module it imports
  // (transitively). Files no enabled rule may apply to are not parsed. No groups:
  // the rule applies everywhere.
  virtual std::vector<std::vector<std::string_view>> prescanTokens() const { return {}; }
  // Configuration files (YAML / JSON). Rules that check them return true and get
  // checkConfig() once per parsed file; they decide themselves which files they
  // understand (role detection by content).
  virtual bool checksConfigs() const { return false; }
  virtual void checkConfig(ConfigContext&) {}
  // C++ translation units (the C++ frontend). Rules that check them return true and get
  // checkCxx() once per translation unit. A unit is parsed only when, for every group of
  // cxxPrescanTokens(), some word occurs in it or in a project header it includes.
  virtual bool checksCxx() const { return false; }
  // False for rules that check nothing in Python files (the Python pre-scan then ignores them).
  virtual bool checksPython() const { return true; }
  virtual void checkCxx(CxxContext&) {}
  virtual std::vector<std::vector<std::string_view>> cxxPrescanTokens() const { return {}; }
};

// What rules/ hands the engine: rule metadata for every code (engine codes
// included), factories for the checking rules, and the domain call model.

// A launch command found in a shell script or Makefile: which script it runs with
// which configuration file and which command-line settings.
struct LaunchLink {
  std::string script;      // as written
  std::string configFile;  // as written, may be empty
  Facts facts;             // settings given on the command line
  // The command's settings as a document (ranges in the script), checked by the
  // configuration rules like a config file; Null when there are none.
  config::YNode settings;
};

// A Python file as the project facts see it: its path and its outline.
struct ProjectFile {
  std::string path;
  const syntax::Outline* outline = nullptr;
};

struct RuleCatalog {
  std::vector<RuleInfo> infos;  // sorted by code
  std::vector<std::unique_ptr<Rule>> (*makeRules)() = nullptr;
  std::unique_ptr<semantic::CallModel> (*makeCallModel)() = nullptr;
  // Facts of a configuration file (empty when it configures nothing the rules use).
  Facts (*configFacts)(const SourceFile& file, const std::vector<config::YNode>& docs) = nullptr;
  // Launch commands in a shell script or Makefile.
  std::vector<LaunchLink> (*launchLinks)(const SourceFile& file) = nullptr;
  // Words that make a Python file worth analysing when it has these facts (a linked
  // config, settings): the pre-scan adds them to the rules' own words.
  std::vector<std::string> (*factWords)(const Facts& facts) = nullptr;
  // Words that make a configuration file worth parsing (the config pre-scan).
  std::vector<std::string_view> configWords;
  // Packages whose declared versions the rules read (normalised names, "lightning"): each becomes a
  // fact "requires:NAME" of a Python file (its task's facts) or a configuration file
  // (ConfigContext::project()) whose project declares it (driver/Requirements.h), "SPEC\tPATH:LINE"
  // per declaration (PATH relative to the file's folder), declarations joined by newlines (a spec may hold
  // Poetry's "||").
  std::vector<std::string> requirementPackages;
  // Facts about the whole project (for rules over configuration files that must agree
  // with the code), from the outlines of the Python files whose bytes `projectFactsWant`
  // accepts, each outlined with `projectOutline` from the run's one parse of the file.
  bool (*projectFactsWant)(std::string_view text) = nullptr;
  syntax::OutlineRequest projectOutline;
  Facts (*projectFacts)(const std::vector<ProjectFile>& files) = nullptr;
  // Compile flags for a C++ file that has no compile_commands.json, compile_flags.txt or flags on
  // the command line (include folders of the libraries the C++ rules know).
  std::vector<std::string> (*cxxDefaultFlags)() = nullptr;
  const RuleInfo* find(std::string_view codeOrName) const;
};

}  // namespace shardlint
