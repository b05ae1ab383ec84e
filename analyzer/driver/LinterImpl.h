// Internal to the Linter's files (Linter.cpp, LintFiles.cpp, LinterTask.cpp, LinterConfigs.cpp): the
// helpers they share and one file's analysis task. Not part of the driver's interface (Linter.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/WordSet.h"
#include "driver/Importers.h"
#include "driver/Linter.h"
#include "driver/ModuleTable.h"
#include "driver/Project.h"
#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

// The pre-scan word groups that decide which Python files and modules matter to `r`, or none when
// the rule does not read Python (it checks only C++ units or configuration files).
std::optional<std::vector<std::vector<std::string_view>>> pythonPrescan(const Rule& r);

// A fresh instance of each rule `options` selects, in the catalog's order.
std::vector<std::unique_ptr<Rule>> selectedRules(const RuleCatalog& catalog, const LintOptions& options);

// The pre-scan's question for a Python file's text, for `rules` (the selected ones; the words are theirs,
// so they must outlive this): which of their words it mentions. Bit i of a mask is words[i]; a word the
// settings make relevant (RuleCatalog::factWords: a configured in-house optimizer or wrap) sets every bit.
struct PythonWords {
  PythonWords(const std::vector<std::unique_ptr<Rule>>& rules, const RuleCatalog& catalog, const LintOptions& options);
  uint64_t mask(std::string_view text) const;
  // mask(after), from `beforeMask` = mask(before): only the bytes around where the texts differ are scanned
  // (and the whole of `after` for each word seen there before and not after), unless the edit is large.
  // `span`: changedSpan(before, after), when the caller has it.
  uint64_t maskAfterEdit(std::string_view before, uint64_t beforeMask, std::string_view after,
                         const ChangedSpan* span = nullptr) const;

  std::vector<std::string_view> words;
  std::vector<std::vector<uint64_t>> ruleGroups;  // per rule that reads Python: a mask per word group
  bool alwaysRelevant = false;                    // a rule that reads every Python file
  std::vector<std::string> extraWords;

 private:
  std::optional<WordSet> wordSet_;
  size_t longest_ = 0;  // the longest word's length
};

Diagnostic engineDiagnostic(const RuleInfo& info, const SourceFile& file, ByteRange range, std::string message);

std::optional<Diagnostic> syntaxDiagnostic(const RuleInfo& info, const SourceFile& file, TSNode root);

void finalizeDiagnostics(std::vector<Diagnostic>& all);

// The kinds of linted files that are not Python (C++ units: isCxxPath, driver/CxxLint.h).
bool isLaunchPath(const std::string& path);
bool isConfigPath(const std::string& path);
bool isMarkdownPath(const std::string& path);

// Whether configuration and Markdown files mention a word the config rules need (Linter::
// mentionsConfigWord), as the run learns it: from the pre-scan cache when a file's stamp is unchanged
// (bit 0 of its mask; such a file is not read), else from its text, remembered for later runs and for
// the rest of this one (linkConfigs then does not read a linted file again).
class ConfigMentions {
 public:
  // `cache`: the pre-scan cache (none: every file is read); `words`: what its masks mean.
  ConfigMentions(PrescanCache* cache, std::string words, const LintOptions& options)
      : cache_(cache), words_(std::move(words)), options_(options) {}
  // The stamp to remember a file by: none without a cache, for an open editor buffer, or when it
  // cannot be stat'ed. Taken before the file is read.
  std::optional<FileStamp> stampOf(const std::string& path) const;
  // Known to mention none: seen so in this run, or unchanged since a run that saw so.
  bool knownQuiet(const std::string& path, const std::optional<FileStamp>& stamp);
  // Known to mention one: unchanged since a run (or an edit of the language server's) that saw so.
  bool knownMentioning(const std::string& path, const std::optional<FileStamp>& stamp);
  void remember(const std::string& path, const std::optional<FileStamp>& stamp, size_t bytes, bool mentions);
  // The facts of a configuration file read only for them, as an earlier run with the same cache found them
  // in the file with this stamp (`key`: its absolutePathKey); and the reverse, for a file of `bytes` bytes.
  std::optional<Facts> knownFacts(const std::string& key, const std::optional<FileStamp>& stamp) const;
  void rememberFacts(const std::string& key, const std::optional<FileStamp>& stamp, size_t bytes, const Facts& facts);
  // The same for a launch file's commands (PrescanCache::launchTargets).
  std::optional<std::vector<PrescanCache::LaunchTarget>> knownLaunch(const std::string& key,
                                                                     const std::optional<FileStamp>& stamp) const;
  void rememberLaunch(const std::string& key, const std::optional<FileStamp>& stamp, size_t bytes,
                      const std::vector<PrescanCache::LaunchTarget>& targets);

 private:
  PrescanCache* cache_;
  std::string words_;
  const LintOptions& options_;
  std::set<std::string> quiet_;  // absolute keys of the files read in this run and found quiet
};

// One analysis task: a linted file (the root) and the project modules its calls reach,
// from the run's ModuleTable (each parsed once per run, shared with the other tasks).
class Task final : public semantic::ModuleProvider {
 public:
  Task(const RuleCatalog& catalog, const LintOptions& options, const ProjectIndex* index, ModuleTable& table,
       const Facts* facts, semantic::SummaryCache* shared);

  ModuleTable::Entry* root() const { return root_; }
  // No linted file still to be analysed imports this one: its summaries stay in this task.
  void setNotImported() { importedByOthers_ = false; }
  // Analysed only for the findings it makes in the linted files (an importer): its summaries are not kept for
  // a later lint of it (ModuleTable::keepSummaries), which holds them only for the files being edited.
  void setNoCarry() { carry_ = false; }
  // Which pre-scan words the file's own text has: bit i for words[i] (the pre-scan's mask of this very
  // text). Without it, the rule walk looks for each word in the text.
  void setOwnWords(uint64_t mask, const std::vector<std::string_view>* words) {
    ownMask_ = mask;
    ownWordList_ = words;
  }
  size_t sharedHits() const { return session_->sharedHits(); }
  // Summaries an earlier analysis of the file gave this one (ModuleTable::seedSummaries) that it used.
  size_t seededHits() const { return session_->seededHits(); }
  // Arms its analysis took from an earlier analysis of the file (FileAnalysis::seedArms).
  size_t armsCarried() const { return armsCarried_; }
  // Functions the module body ran without their summary, which the analysis before the edit found
  // depends on the caller (FileAnalysis::run).
  size_t directRuns() const { return session_->directRuns(); }

  std::vector<Diagnostic> run(const std::string& path, std::optional<std::string> text);

  Found resolve(std::string_view qualname, const semantic::Module& from) override;

  void use(const semantic::Module& module) override;

  ~Task() override;

  std::optional<std::string> dataFile(std::string_view spelled, const semantic::Module& from) override;

 private:
  static std::vector<std::string> split(const std::string& q);

  Found resolve(const std::string& q, const semantic::Module& from, int depth);

  Found lookup(const semantic::Module& m, const std::vector<std::string>& rest, int depth);

  const RuleCatalog& catalog_;
  const LintOptions& options_;
  const ProjectIndex* index_;
  ModuleTable& table_;
  std::unique_ptr<semantic::CallModel> model_;
  std::unique_ptr<semantic::Session> session_;
  const semantic::SummaryCache* shared_ = nullptr;  // the summaries of the task's call-model context
  uint64_t ownMask_ = 0;                                  // setOwnWords
  const std::vector<std::string_view>* ownWordList_ = nullptr;
  ModuleTable::Entry* root_ = nullptr;
  bool importedByOthers_ = true;
  bool carry_ = true;
  size_t armsCarried_ = 0;
  std::map<uint32_t, ModuleTable::Entry*> leased_;  // modules whose trees this task reads
};

}  // namespace shardlint
