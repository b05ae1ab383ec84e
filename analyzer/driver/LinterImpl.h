// Internal to the Linter's files (Linter.cpp, LintFiles.cpp, LinterTask.cpp, LinterConfigs.cpp): the
// helpers they share and one file's analysis task. Not part of the driver's interface (Linter.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "driver/Linter.h"
#include "driver/ModuleTable.h"
#include "driver/Project.h"
#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

namespace shardlint {

// The pre-scan word groups that decide which Python files and modules matter to `r`, or none when
// the rule does not read Python (it checks only C++ units or configuration files).
std::optional<std::vector<std::vector<std::string_view>>> pythonPrescan(const Rule& r);

Diagnostic engineDiagnostic(const RuleInfo& info, const SourceFile& file, ByteRange range, std::string message);

std::optional<Diagnostic> syntaxDiagnostic(const RuleInfo& info, const SourceFile& file, TSNode root);

void finalizeDiagnostics(std::vector<Diagnostic>& all);

// The kinds of linted files that are not Python (C++ units: isCxxPath, driver/CxxLint.h).
bool isLaunchPath(const std::string& path);
bool isConfigPath(const std::string& path);
bool isMarkdownPath(const std::string& path);

// One analysis task: a linted file (the root) and the project modules its calls reach,
// from the run's ModuleTable (each parsed once per run, shared with the other tasks).
class Task final : public semantic::ModuleProvider {
 public:
  Task(const RuleCatalog& catalog, const LintOptions& options, const ProjectIndex* index, ModuleTable& table,
       const Facts* facts, semantic::SummaryCache* shared);

  ModuleTable::Entry* root() const { return root_; }
  // No linted file still to be analysed imports this one: its summaries stay in this task.
  void setNotImported() { importedByOthers_ = false; }
  size_t sharedHits() const { return session_->sharedHits(); }

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
  ModuleTable::Entry* root_ = nullptr;
  bool importedByOthers_ = true;
  std::map<uint32_t, ModuleTable::Entry*> leased_;  // modules whose trees this task reads
};

}  // namespace shardlint
