// The command line: the subcommands and their options (CLI11), and the small commands (`rules`,
// `rule`, `server`, `dump-model`, the hidden `parse-check`); `check` and `probe` run through runCheck
// (CheckCommand.cpp).
#include "core/SourceFile.h"
#include "Cli.h"
#include "CheckCommand.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "driver/Linter.h"
#include "lsp/Server.h"
#include "orchestrator/Probe.h"

#ifndef SHARDLINT_VERSION
#define SHARDLINT_VERSION "0.0.0"
#endif

namespace shardlint {

namespace {

// `parse-check` (hidden, for scripts/parse_diff.py): only "does each file parse without error
// nodes", the SL001/SL002 findings `check` would give it, with no pre-scan, no analysis and no size
// limit. One JSON object per file and line, in the order given (the paths, then those read with
// --files-from):
//   {"path": P, "status": "ok"}
//   {"path": P, "status": "SL001", "line": L, "column": C, "message": M}   (1-based, code points)
//   {"path": P, "status": "SL002" | "unreadable", "message": M}
// Exit 0 when every file parsed completely, 1 otherwise, 2 on a usage error.
int runParseCheck(const RuleCatalog& catalog, std::vector<std::string> paths, const std::string& filesFrom,
                  unsigned jobs) {
  if (!filesFrom.empty()) {
    std::ifstream file;
    if (filesFrom != "-") {
      file.open(filesFrom);
      if (!file) {
        std::cerr << "shardlint: error: cannot read " << filesFrom << "\n";
        return kExitUsage;
      }
    }
    std::istream& in = filesFrom == "-" ? std::cin : file;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) paths.push_back(line);
  }
  LintOptions options;
  options.maxFileBytes = UINT64_MAX;  // the grammar is what is being checked, not the size limit
  Linter linter(catalog, std::move(options));
  std::vector<std::string> lines(paths.size());
  std::vector<char> clean(paths.size(), 0);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
      nlohmann::json j = {{"path", paths[i]}};
      std::string text;
      if (!readFileBytes(paths[i], text)) {
        j["status"] = "unreadable";
        j["message"] = "cannot read the file";
      } else {
        std::vector<Diagnostic> found = linter.syntaxFindings(paths[i], std::move(text));
        if (found.empty()) {
          j["status"] = "ok";
          clean[i] = 1;
        } else {
          const Diagnostic& d = found.front();
          j["status"] = d.code;
          if (d.code == "SL001") {
            j["line"] = d.location.start.line + 1;
            j["column"] = d.location.start.codepointColumn + 1;
          }
          j["message"] = d.message;
        }
      }
      lines[i] = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  };
  if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(1, paths.size())));
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < jobs; ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const auto& l : lines) std::cout << l << "\n";
  std::cout.flush();
  return std::all_of(clean.begin(), clean.end(), [](char c) { return c != 0; }) ? kExitClean : kExitFindings;
}

}  // namespace

int runCli(int argc, char** argv, const RuleCatalog& catalog) {
  CLI::App app{"shardlint: static analysis for PyTorch FSDP training scripts", "shardlint"};
  app.set_version_flag("--version", std::string("shardlint ") + SHARDLINT_VERSION);
  app.require_subcommand(1);

  CheckArgs ca;
  auto& paths = ca.paths;
  auto& select = ca.select;
  auto& ignore = ca.ignore;
  auto& format = ca.format;
  auto& quiet = ca.quiet;
  auto& noColor = ca.noColor;
  CLI::App* check = app.add_subcommand("check", "Lint files and directories (default: the current directory)");
  check->add_option("paths", paths, "Files or directories to lint");
  check->add_option("-j,--jobs", ca.jobs, "Worker threads (default: all cores)")
      ->check(CLI::Range(0u, 1024u))
      ->each([&](const std::string&) { ca.jobsGiven = true; });
  check->add_option("--cxx-memory", ca.cxxMemoryMib,
                    "C++ units: MiB of Clang's allocations the units parsed at once may take (default 256: "
                    "LibTorch units one at a time)")
      ->check(CLI::Range(1u, 1u << 20));
  check->add_option("--config", ca.config, "Configuration file (default: nearest .shardlint.toml or pyproject.toml)");
  check->add_option("--root", ca.roots, "Extra import root for project modules (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_option("--accelerate-config", ca.accelerateConfigs,
                    "accelerate config applying to scripts no launch command links (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_flag("--no-cache", ca.noCache, "Neither read nor write the cache of findings (.shardlint_cache)");
  check->add_option("--cache-dir", ca.cacheDir,
                    "Cache folder (default: SHARDLINT_CACHE_DIR, else .shardlint_cache next to the configuration "
                    "file, else in the current directory)");
  check->add_flag("--fix", ca.fix, "Apply the safe fixes, then report what is left");
  check->add_flag("--unsafe-fixes", ca.unsafeFixes, "With --fix, --fix-only or --diff: apply the unsafe fixes too");
  check->add_flag("--fix-only", ca.fixOnly, "Apply the fixes and report nothing else (exit 0 unless a file was not written)");
  check->add_flag("--diff", ca.diff, "Print a unified diff of the fixes instead of writing them (exit 1 when there is one)");
  check->add_flag("--show-fixes", ca.showFixes, "Text format: print the fix of each finding that has one");
  check->add_option("-o,--output-file", ca.outputFile, "Write the report to FILE (atomically) instead of stdout");
  check->add_flag("-w,--watch", ca.watch, "Lint again on every file change, printing only what changed (Ctrl-C to stop)");
  check->add_flag("--no-snippets", ca.noSnippets, "Text format: no source line and caret under each finding");
  check->add_flag("--exit-zero", ca.exitZero, "Exit 0 even when there are findings (errors still exit 2 or 101)");
  check->add_flag("--statistics", ca.statistics,
                  "Print the number of findings per rule instead of the findings ([*]: some have a fix)");
  check->add_option("--stdin-filename", ca.stdinFilename,
                    "With the path `-`: lint stdin as this file (its settings, project and suppressions apply)");
  check->add_flag("--stats", ca.stats, "Print files seen/parsed, bytes, time per phase and peak RSS to stderr");
  // One value per occurrence (repeatable), so paths can follow: `--select SL101 train.py`.
  check->add_option("--select", select, "Rules to enable: codes, names or code prefixes (comma-separated)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_option("--extend-select", ca.extendSelect, "Rules to enable in addition to the selection")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_flag("--show-settings", ca.showSettings, "Print the resolved configuration and exit");
  check->add_option("--baseline", ca.baseline,
                    "Baseline file: written on the first run (exit 0), then only findings not in it are reported");
  check->add_option("--ignore", ignore, "Rules to disable: codes, names or code prefixes (comma-separated)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_option("--format", format, "Output format: text, concise, json, sarif, github, lsp")
      ->check(CLI::IsMember({"text", "concise", "json", "sarif", "github", "lsp"}));
  check->add_flag("-q,--quiet", quiet, "Print findings only, no summary line");
  check->add_flag("--no-color", noColor, "Disable colored output (NO_COLOR is respected too)");

  CLI::App* rules = app.add_subcommand("rules", "List all rules");
  std::string ruleName;
  CLI::App* rule = app.add_subcommand("rule", "Print the documentation of one rule");
  rule->add_option("rule", ruleName, "Rule code or name (SL101 or optimizer-before-wrap)")->required();

  CLI::App* server = app.add_subcommand("server", "Run the language server (LSP over stdin/stdout)");
  bool stdio = false;  // accepted for clients that pass it; stdio is the only transport
  server->add_flag("--stdio", stdio, "Use stdin/stdout (the default and only transport)");

  // `shardlint probe [options] PATH... [-- SCRIPT ARGS]`: what follows `--` belongs to the script.
  std::vector<std::string> scriptArgs;
  std::vector<char*> args(argv, argv + argc);
  if (argc > 1 && std::string(argv[1]) == "probe") {
    auto dd = std::find_if(args.begin() + 2, args.end(), [](const char* s) { return std::string(s) == "--"; });
    if (dd != args.end()) scriptArgs.assign(dd + 1, args.end()), args.erase(dd, args.end());
  }
  // `shardlint check [options] PATH... [-- FLAGS]`: compile flags for C++ files without a compilation
  // database (like clang-tidy's `--`).
  if (argc > 1 && std::string(argv[1]) == "check") {
    auto dd = std::find_if(args.begin() + 2, args.end(), [](const char* s) { return std::string(s) == "--"; });
    if (dd != args.end()) ca.cxxFlags.assign(dd + 1, args.end()), args.erase(dd, args.end());
  }
  CheckArgs pa;
  probe::ProbeOptions po;
  bool preflight = false;
  int masterPort = 0;
  CLI::App* probeCmd = app.add_subcommand(
      "probe", "Lint, then check every " + probe::probedCodesText("and") +
                   " finding at runtime (torch.distributed.run), or SL501 findings on a LibTorch program (--mode cxx)");
  probeCmd->add_option("paths", pa.paths, "Files or directories to lint (--mode script runs the first)");
  probeCmd->add_option("--mode", po.mode,
                       "replay (a generated program per finding, default), script, or cxx (SL501 findings, on your "
                       "LibTorch program: --build, --run)")
      ->check(CLI::IsMember({"replay", "script", "cxx"}));
  probeCmd->add_option("--build", po.buildCommand, "--mode cxx: the shell command that builds the program");
  probeCmd->add_option("--run", po.runCommand, "--mode cxx: the shell command that runs the program");
  probeCmd->add_option("--nproc", po.nproc, "Ranks per node (default 2)")->check(CLI::Range(1, 1024));
  probeCmd->add_option("--backend", po.backend, "auto (default), nccl or gloo")
      ->check(CLI::IsMember({"auto", "nccl", "gloo"}));
  probeCmd->add_option("--python", po.python,
                       "Python interpreter with torch, and accelerate, Lightning, transformers (SL202) and peft "
                       "(SL105) where a replay uses them (default: $SHARDLINT_PROBE_PYTHON, else the probe-venv "
                       "scripts/setup-probe.sh makes beside this executable, else python3)");
  probeCmd->add_option("--timeout", po.timeoutSeconds, "Seconds per launched run (default 300)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              size_t used = 0;
              double d = std::stod(v, &used);
              if (used == v.size() && d > 0 && d <= 86400) return "";
            } catch (const std::exception&) {
            }
            return "must be a number of seconds above 0 and at most 86400, got '" + v + "'";
          },
          "SECONDS", "seconds"));
  probeCmd->add_flag("--no-cache", pa.noCache,
                     "Neither read nor write the cache (findings, and the CPU self-test's answer for this interpreter)");
  probeCmd->add_option("--format", pa.format, "Output format: text, concise, json, sarif, github, lsp")
      ->check(CLI::IsMember({"text", "concise", "json", "sarif", "github", "lsp"}));
  probeCmd->add_flag("--preflight", preflight, "Run the native CUDA/NCCL preflight and exit with its code");
  probeCmd->add_flag("--keep", po.keep, "Keep the replay programs, logs and rank reports");
  probeCmd->add_flag("--controls", po.controls,
                     "Also replay the patterns the rules examined and found correct (controls): each should be "
                     "not-reproduced; a confirmed control is a bug the rules missed (exit 1). Replay mode only");
  probeCmd->add_option("--master-port", masterPort, "torchrun's master port (default: a free one)")
      ->check(CLI::Range(1, 65535));
  probeCmd->add_option("--nnodes", po.nnodes, "Passed to torch.distributed.run (multi-node)");
  probeCmd->add_option("--rdzv-endpoint", po.rdzvEndpoint, "Passed to torch.distributed.run (multi-node)");
  probeCmd->add_option("--srun", po.srun, "A Slurm line put in front of the launcher (\"srun -N2 ...\")");

  std::string dumpFile;
  CLI::App* dump = app.add_subcommand("dump-model", "Print the semantic model of a file (for debugging)");
  dump->add_option("file", dumpFile, "Python file")->required();
  dump->group("");  // hidden

  std::vector<std::string> parseCheckPaths;
  std::string parseCheckFrom;
  unsigned parseCheckJobs = 0;
  CLI::App* parseCheck =
      app.add_subcommand("parse-check", "Report only whether each Python file parses without error nodes (JSON lines)");
  parseCheck->add_option("paths", parseCheckPaths, "Python files");
  parseCheck->add_option("--files-from", parseCheckFrom, "Read more paths from this file, one a line (- for stdin)");
  parseCheck->add_option("-j,--jobs", parseCheckJobs, "Worker threads (default: all cores)")->check(CLI::Range(0u, 1024u));
  parseCheck->group("");  // hidden: a developer tool (scripts/parse_diff.py)

  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  if (*server) return lsp::runStdioServer(catalog);
  if (*probeCmd) {
    if (preflight) return probe::runPreflight(std::cerr, scriptArgs);
    if (po.controls && po.mode != "replay") {
      std::cerr << "shardlint: error: --controls replays the rules' controls: it needs --mode replay\n";
      return kExitUsage;
    }
    if (!scriptArgs.empty() && po.mode != "script") {
      std::cerr << "shardlint: error: arguments after `--` are for --mode script\n";
      return kExitUsage;
    }
    if (probeCmd->count("--master-port")) po.masterPort = masterPort;
    if (!probeCmd->count("--python")) po.python = probe::defaultPython();
    po.format = pa.format;
    po.scriptArgs = scriptArgs;
    if (!pa.paths.empty()) po.script = pa.paths.front();
    probe::Session session(po, std::cerr);
    return runCheck(catalog, pa, &session);
  }
  if (*dump) {
    std::string text;
    if (!readFileBytes(dumpFile, text)) {
      std::cerr << "shardlint: error: cannot read " << dumpFile << "\n";
      return kExitUsage;
    }
    std::cout << dumpModel(dumpFile, text, catalog);
    return kExitClean;
  }
  if (*parseCheck) return runParseCheck(catalog, std::move(parseCheckPaths), parseCheckFrom, parseCheckJobs);
  if (*check) return runCheck(catalog, ca);
  if (*rules) {
    for (const auto& i : catalog.infos)
      std::cout << i.code << "  " << i.name << std::string(i.name.size() < 26 ? 26 - i.name.size() : 1, ' ')
                << severityName(i.severity) << "  " << i.summary << "\n";
    return kExitClean;
  }
  if (*rule) {
    const RuleInfo* info = catalog.find(ruleName);
    if (!info) {
      std::cerr << "shardlint: error: unknown rule `" << ruleName << "` (see `shardlint rules`)\n";
      return kExitUsage;
    }
    std::cout << info->doc;
    if (!info->doc.empty() && info->doc.back() != '\n') std::cout << "\n";
    return kExitClean;
  }
  return kExitUsage;
}

}  // namespace shardlint
