#include "driver/CxxLint.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "core/Parallel.h"
#include "driver/ClangGate.h"
#include "cxx/CxxFrontend.h"
#include "driver/CxxPrecompiled.h"
#include "driver/Linter.h"
#include "driver/ModuleTable.h"
#include "driver/Rule.h"
#include "driver/Suppressions.h"

namespace shardlint {
namespace fs = std::filesystem;

bool isCxxPath(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  return ext == ".cpp" || ext == ".cc" || ext == ".cxx";
}

namespace {

// The names in the `#include "name"` lines of `text` (quoted includes; angle includes are left out).
std::vector<std::string> quotedIncludes(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = text.find("#include", pos)) != std::string_view::npos) {
    pos += 8;
    size_t q = text.find_first_not_of(" \t", pos);
    if (q == std::string_view::npos || text[q] != '"') continue;
    size_t end = text.find('"', q + 1);
    size_t nl = text.find('\n', q);
    if (end == std::string_view::npos || (nl != std::string_view::npos && end > nl)) continue;
    out.emplace_back(text.substr(q + 1, end - q - 1));
  }
  return out;
}

// The unit's text and the project headers it includes with quotes (found next to the including
// file), at most 64 files and 8 levels deep: what the pre-scan looks at.
std::string prescanText(const std::string& path, const std::string& text) {
  std::string all = text;
  std::string self = fs::absolute(path).lexically_normal().string();
  std::set<std::string> seen{self};
  std::vector<std::pair<std::string, int>> work{{self, 0}};
  std::vector<std::string> texts{text};
  for (size_t i = 0; i < work.size() && seen.size() < 64; ++i) {
    if (work[i].second >= 8) continue;
    fs::path dir = fs::path(work[i].first).parent_path();
    for (const auto& inc : quotedIncludes(texts[i])) {
      std::string p = (dir / inc).lexically_normal().string();
      std::string body;
      if (seen.count(p) || !readFileBytes(p, body)) continue;
      seen.insert(p);
      all += "\n" + body;
      work.emplace_back(p, work[i].second + 1);
      texts.push_back(std::move(body));
    }
  }
  return all;
}

bool wanted(const std::vector<std::vector<std::string_view>>& groups, std::string_view text) {
  for (const auto& g : groups) {
    bool any = false;
    for (auto w : g) any = any || text.find(w) != std::string_view::npos;
    if (!any) return false;
  }
  return true;
}

// Precompiled headers kept in the cache folder: the most recently used (with LibTorch's headers
// each is 50-80 MB).
constexpr size_t kKeptPchs = 12;

struct Unit {
  std::string path;
  std::string text;
  bool parse = false;
  cxx::CompileFlags flags;
  std::vector<std::string> projectDirs;
  std::string pchKey;  // its precompiled header's key ("" for none)
  cxx::ParseResult result;
  std::string failure;  // an exception while parsing
  bool pchUsed = false;
};

// What the memory of a unit's parse depends on, for the gate (driver/ClangGate.h): its `#include`
// lines, its flags and the precompiled header it loads. Units that share them take about the same.
std::string clangSignature(const Unit& u, const std::string& pch) {
  std::string sig = "parse\n" + pch + "\n" + u.flags.directory + "\n";
  for (const auto& a : u.flags.args) sig += a + '\0';
  sig += '\n';
  std::string_view text = u.text;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos && line[first] == '#' && line.find("include", first) != std::string_view::npos) {
      sig += line;
      sig += '\n';
    }
  }
  return hashHex(contentHash(sig));
}

// Whether the byte offset `offset` of project file `file` lies in the definition of `fn`.
bool inFunction(const cxx::Function& fn, uint32_t file, uint32_t offset) {
  return fn.file == file && fn.range.begin <= offset && offset <= fn.range.end;
}

// After a header that was not found, Clang's errors may come from what the header would have
// declared, and the code around them is parsed only in part (a call of one of its functions is
// dropped, say), so a finding there may be wrong. The rule findings of such a unit are kept only
// when they are certain as far as the errors go: every error lies in the body of a project
// function, and no location of the finding (its position or a note's) lies in a function that has
// one or that calls (through project functions) one that has one. Any other error (at namespace
// or class scope, in a header outside the project, or past kMaxErrorSites) withholds all of the
// unit's rule findings. Removes the findings withheld and returns how many.
size_t withholdUncertain(const cxx::Program& program, const std::vector<std::unique_ptr<SourceFile>>& files,
                         const cxx::ParseResult& result, std::vector<Diagnostic>& found) {
  if (found.empty() || result.laterErrors == 0) return 0;
  const auto& fns = program.functions;
  bool everything = result.laterErrors > result.laterErrorSites.size();
  std::vector<char> uncertain(fns.size(), 0);
  for (const auto& site : result.laterErrorSites) {
    if (everything) break;
    bool inside = false;
    if (site.file >= 0)
      for (size_t i = 0; i < fns.size(); ++i)
        if (inFunction(fns[i], static_cast<uint32_t>(site.file), site.offset)) uncertain[i] = inside = true;
    everything = !inside;
  }
  if (everything) {
    size_t n = found.size();
    found.clear();
    return n;
  }
  // Callers of uncertain functions are uncertain (their summaries include the callee's effects).
  std::vector<std::vector<size_t>> callers(fns.size());
  for (size_t i = 0; i < fns.size(); ++i)
    for (const auto& e : fns[i].events)
      if (e.target >= 0 && static_cast<size_t>(e.target) < fns.size()) callers[static_cast<size_t>(e.target)].push_back(i);
  std::vector<size_t> work;
  for (size_t i = 0; i < fns.size(); ++i)
    if (uncertain[i]) work.push_back(i);
  while (!work.empty()) {
    size_t f = work.back();
    work.pop_back();
    for (size_t c : callers[f])
      if (!uncertain[c]) {
        uncertain[c] = true;
        work.push_back(c);
      }
  }
  auto at = [&](const Location& loc) {
    for (size_t i = 0; i < fns.size(); ++i)
      if (uncertain[i] && fns[i].file < files.size() && files[fns[i].file]->path == loc.path &&
          inFunction(fns[i], fns[i].file, loc.range.begin))
        return true;
    return false;
  };
  size_t before = found.size();
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](const Diagnostic& d) {
                               if (at(d.location)) return true;
                               for (const auto& n : d.notes)
                                 if (at(n.location)) return true;
                               return false;
                             }),
              found.end());
  return before - found.size();
}

// The SL002 note for a header that was not found, at the `#include` in the unit's file that leads
// to it. The first note of a unit also says what the missing headers cost.
Diagnostic missingHeaderNote(const RuleInfo& sl002, const SourceFile& file, const cxx::MissingHeader& m,
                             const std::string& flagsOrigin, bool first, size_t moreMissing, size_t laterErrors,
                             size_t withheld) {
  std::string msg = "analysis incomplete: header `" + m.name + "`" +
                    (m.via.empty() ? std::string() : " (included from " + m.via + ")") +
                    " was not found with the compile flags from " + flagsOrigin +
                    "; the rest of the unit was analysed without it";
  if (first && (moreMissing || laterErrors || withheld)) {
    std::vector<std::string> parts;
    if (moreMissing)
      parts.push_back(std::to_string(moreMissing) + " more header(s) not found are not listed");
    if (laterErrors)
      parts.push_back(std::to_string(laterErrors) + " later Clang error(s) may come from it and are not reported as SL001");
    if (withheld)
      parts.push_back(std::to_string(withheld) + " finding(s) on code Clang could not parse without it withheld");
    msg += " (";
    for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
    msg += ")";
  }
  msg += "; to analyse it, pass its include folder after `--` (`shardlint check PATH -- -I DIR`), or give the "
         "project's compile_commands.json (CMake: -DCMAKE_EXPORT_COMPILE_COMMANDS=ON) or a compile_flags.txt";
  Diagnostic d = makeDiagnostic(sl002, makeLocation(file, m.range), std::move(msg));
  d.severity = Severity::Info;
  return d;
}

}  // namespace

void lintCxx(const RuleCatalog& catalog, const LintOptions& options, const std::vector<std::string>& paths,
             std::vector<Diagnostic>& out, LintStats& stats) {
  if (paths.empty()) return;
  stats.cxxUnits += paths.size();
  const RuleInfo* sl001 = catalog.find("SL001");
  const RuleInfo* sl002 = catalog.find("SL002");
  bool reportSkips = sl002 && options.selection.enabled(*sl002);
  std::vector<std::unique_ptr<Rule>> rules;
  if (catalog.makeRules)
    for (auto& r : catalog.makeRules())
      if (r->checksCxx() && options.selection.enabled(r->info())) rules.push_back(std::move(r));
  if (rules.empty()) return;

  std::vector<Unit> units(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    Unit& u = units[i];
    u.path = paths[i];
    ReadResult r = readSource(u.path, options);
    ++stats.filesRead;
    std::optional<std::string> problem = r.skipped ? r.skipped : contentProblem(r.text, options.maxFileBytes);
    if (problem) {
      if (reportSkips) out.push_back(skippedDiagnostic(*sl002, u.path, *problem));
      continue;
    }
    stats.bytesRead += r.text.size();
    u.text = std::move(r.text);
    std::string scan = prescanText(u.path, u.text);
    for (const auto& rule : rules) u.parse = u.parse || wanted(rule->cxxPrescanTokens(), scan);
  }

  size_t toParse = 0;
  for (const auto& u : units) toParse += u.parse;
  if (toParse == 0) return;
  if (!cxx::available()) {
    if (reportSkips) {
      for (const auto& u : units) {
        if (!u.parse) continue;
        out.push_back(skippedDiagnostic(*sl002, u.path,
                                        "file skipped: " + cxx::loadProblem() + "; " + std::to_string(toParse) +
                                            " C++ translation unit(s) were not analysed"));
        break;  // said once
      }
    }
    return;
  }

  std::vector<std::string> defaults = catalog.cxxDefaultFlags ? catalog.cxxDefaultFlags() : std::vector<std::string>{};
  std::error_code ec;
  std::string cwd = fs::current_path(ec).string();
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::unique_ptr<PchStore> pchs;
  if (!options.pchCacheDir.empty()) pchs = std::make_unique<PchStore>(options.pchCacheDir, options.cacheKey);
  std::vector<PchStore::Unit> pchUnits;
  for (auto& u : units) {
    if (!u.parse) continue;
    try {
      u.flags = cxx::findFlags(u.path, options.cxxFlags, defaults);
      fs::path dir = fs::absolute(u.path).lexically_normal().parent_path();
      u.projectDirs = {dir.string(), dir.parent_path().string()};
      if (!cwd.empty()) u.projectDirs.push_back(cwd);
      if (pchs) {
        PchStore::Unit p{leadingSystemIncludes(u.text), u.flags, u.projectDirs};
        u.pchKey = pchs->key(p);
        if (!u.pchKey.empty()) pchUnits.push_back(std::move(p));
      }
    } catch (const std::exception& e) {
      u.failure = stoppedWhy(e);
    }
  }
  // Clang jobs run under a memory budget, not just `jobs` at a time (driver/ClangGate.h).
  ClangGate gate(options.cxxMemoryBudget ? options.cxxMemoryBudget : ClangGate::kDefaultBudget);
  if (pchs && !pchUnits.empty()) {
    PchStore::Built built = pchs->prepare(pchUnits, jobs, &gate);
    stats.cxxPchBuilt += built.count;
    stats.cxxPchSeconds += built.seconds;
  }
  std::atomic<size_t> pchUsed{0};
  parallelFor(units.size(), jobs, [&](size_t k) {
    Unit& u = units[k];
    if (!u.parse || !u.failure.empty()) return;
    ClangGate::Ticket ticket;
    try {
      std::string pch = pchs ? pchs->path(u.pchKey) : std::string();
      ticket = gate.enter(clangSignature(u, pch));
      u.result = cxx::parse(u.path, u.text, u.flags, u.projectDirs, pch);
      gate.leave(ticket, u.result.clangBytes);
      releaseFreeMemory();
      if (!pch.empty() && u.result.failed) {
        // Clang refuses a precompiled header whose headers changed; the unit may also simply not
        // compile. Either way the finding comes from a parse without it.
        ticket = gate.enter(clangSignature(u, ""));
        cxx::ParseResult plain = cxx::parse(u.path, u.text, u.flags, u.projectDirs);
        gate.leave(ticket, plain.clangBytes);
        releaseFreeMemory();
        if (!plain.failed) pchs->discard(u.pchKey);
        plain.seconds += u.result.seconds;
        u.result = std::move(plain);
      } else if (!pch.empty()) {
        ++pchUsed;
        u.pchUsed = true;
      }
    } catch (const std::exception& e) {
      gate.leave(ticket, 0);
      u.failure = stoppedWhy(e);
    }
  });
  stats.cxxPchUsed += pchUsed;
  stats.cxxMostAtOnce = std::max(stats.cxxMostAtOnce, gate.mostAtOnce());
  stats.cxxMemoryBudget = gate.budget();
  if (pchs) pchs->trim(kKeptPchs);

  for (auto& u : units) {
    if (!u.parse) continue;
    if (!u.failure.empty()) {
      if (reportSkips) out.push_back(skippedDiagnostic(*sl002, u.path, u.failure));
      continue;
    }
    ++stats.cxxParsed;
    stats.cxxParseSeconds += u.result.seconds;
    stats.cxxMaxSeconds = std::max(stats.cxxMaxSeconds, u.result.seconds);
    stats.cxxUnitTimes.push_back(
        {u.path, u.result.seconds, u.result.clangBytes, u.pchUsed, u.result.missing.size()});
    const cxx::Program& program = u.result.program;
    std::vector<std::unique_ptr<SourceFile>> files;
    for (const auto& f : program.files)
      files.push_back(std::make_unique<SourceFile>(files.empty() ? u.path : f.path, f.text));
    std::vector<Diagnostic> found;
    if (u.result.failed && sl001 && options.selection.enabled(*sl001)) {
      uint32_t f = u.result.errorFile < files.size() ? u.result.errorFile : 0;
      found.push_back(makeDiagnostic(
          *sl001, makeLocation(*files[f], u.result.errorRange),
          "the translation unit does not compile: " + u.result.error + " (compile flags from " + u.flags.origin +
              "); the analysis continued on what Clang could parse"));
    }
    std::vector<Diagnostic> ruleFound;
    CxxContext cx(program, files, ruleFound);
    for (auto& rule : rules) {
      try {
        rule->checkCxx(cx);
      } catch (const std::exception& e) {
        if (reportSkips) found.push_back(skippedDiagnostic(*sl002, u.path, stoppedWhy(e)));
      }
    }
    size_t withheld = u.result.missing.empty() ? 0 : withholdUncertain(program, files, u.result, ruleFound);
    for (auto& d : ruleFound) found.push_back(std::move(d));
    if (reportSkips)
      for (size_t m = 0; m < u.result.missing.size(); ++m)
        found.push_back(missingHeaderNote(*sl002, *files[0], u.result.missing[m], u.flags.origin, m == 0,
                                          u.result.moreMissing, u.result.laterErrors, withheld));
    // Suppression comments of every file of the unit; unused ones are reported for the unit's own
    // file only (a header's directive may be used by another unit that includes it).
    std::vector<Suppressions> sups;
    for (const auto& f : files) {
      sups.emplace_back(f.get());
      sups.back().setMarker("//");
    }
    for (const auto& c : u.result.comments)
      if (c.file < sups.size()) sups[c.file].addComment(c.text, c.offset);
    for (auto& d : found) {
      bool suppressed = false;
      for (size_t i = 0; i < files.size() && !suppressed; ++i)
        if (files[i]->path == d.location.path) suppressed = sups[i].suppresses(d, catalog);
      if (!suppressed) out.push_back(std::move(d));
    }
    for (auto& d : sups[0].problems(catalog, options.selection, options.reportUnusedNoqa)) out.push_back(std::move(d));
  }
}

std::string dumpCxxModel(const std::string& path, std::string text, const RuleCatalog& catalog) {
  if (!cxx::available()) return cxx::loadProblem() + "\n";
  std::vector<std::string> defaults = catalog.cxxDefaultFlags ? catalog.cxxDefaultFlags() : std::vector<std::string>{};
  cxx::CompileFlags flags = cxx::findFlags(path, {}, defaults);
  std::error_code ec;
  fs::path dir = fs::absolute(path).lexically_normal().parent_path();
  cxx::ParseResult r = cxx::parse(path, text, flags, {dir.string(), fs::current_path(ec).string()});
  std::string out = "flags from " + flags.origin + "\n";
  if (r.failed) out += "first error: " + r.error + "\n";
  for (const auto& m : r.missing) {
    out += "header not found: " + m.name;
    if (!m.via.empty()) out += " (from " + m.via + ")";
    out += "\n";
  }
  if (r.laterErrors) out += "errors after a missing header: " + std::to_string(r.laterErrors) + "\n";
  for (const auto& site : r.laterErrorSites) {
    if (site.file < 0 || static_cast<size_t>(site.file) >= r.program.files.size()) {
      out += "  outside the project\n";
      continue;
    }
    const std::string& t = r.program.files[static_cast<size_t>(site.file)].text;
    size_t line = 1 + static_cast<size_t>(std::count(t.begin(), t.begin() + std::min<size_t>(site.offset, t.size()), '\n'));
    out += "  at " + r.program.files[static_cast<size_t>(site.file)].path + ":" + std::to_string(line) + "\n";
  }
  auto renderPath = [](const cxx::Path& p) { return p.known() ? p.render() : std::string("-"); };
  for (const auto& fn : r.program.functions) {
    out += "== " + fn.qualifiedName + (fn.constructor ? " (constructor)" : "") + " in " +
           r.program.files[fn.file].path + "\n";
    for (size_t i = 0; i < fn.events.size(); ++i) {
      const auto& e = fn.events[i];
      const char* kind = e.kind == cxx::Event::Kind::Call ? "call" : e.kind == cxx::Event::Kind::Construct ? "construct" : "assign";
      out += "  " + std::to_string(i) + " " + kind + " " + e.callee + " recv=" + renderPath(e.receiver) +
             " result=" + renderPath(e.result) + " target=" + std::to_string(e.target) + " args=[";
      for (size_t a = 0; a < e.argPaths.size(); ++a) {
        out += (a ? ", " : "") + renderPath(e.argPaths[a]);
        if (a < e.argEvents.size() && !e.argEvents[a].empty()) {
          out += " {";
          for (size_t k = 0; k < e.argEvents[a].size(); ++k) out += (k ? " " : "") + std::to_string(e.argEvents[a][k]);
          out += "}";
        }
      }
      out += "]\n";
    }
  }
  return out;
}

}  // namespace shardlint
