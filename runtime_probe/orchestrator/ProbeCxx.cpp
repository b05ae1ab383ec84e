// `shardlint probe --mode cxx`: SL501 findings checked on the user's own LibTorch program, with the
// probe library (runtime_probe/cxx) preloaded, and the verdict from the report it writes (Probe.h).
#include "Probe.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

#include "core/SourceFile.h"

namespace shardlint::probe {

namespace fs = std::filesystem;

std::string cxxProbeLibrary() {
  std::error_code ec;
  if (const char* env = std::getenv("SHARDLINT_CXX_PROBE_LIB"); env && *env) return env;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::is_regular_file(exe.parent_path() / "libshardlint_cxxprobe.so", ec))
    return (exe.parent_path() / "libshardlint_cxxprobe.so").string();
#ifdef SHARDLINT_CXX_PROBE_LIB
  if (fs::is_regular_file(SHARDLINT_CXX_PROBE_LIB, ec)) return SHARDLINT_CXX_PROBE_LIB;
#endif
  return "";
}

ProbeResult cxxVerdict(const std::string& reportJson) {
  ProbeResult r;
  r.backend = "none";
  r.worldSize = 1;
  nlohmann::json j = nlohmann::json::parse(reportJson, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("parameters") || !j["parameters"].is_array()) {
    r.verdict = Verdict::ProbeError;
    r.evidence = "the probe library's report is not valid JSON";
    return r;
  }
  int groups = j.value("param_groups", 0);
  // Late: registered after the first optimizer was built, trainable, in no optimizer. With a gradient
  // the backward pass reached it, and no step() will ever apply that gradient.
  std::vector<std::string> lateTrained, lateIdle;
  int optimizedMoved = 0, optimized = 0;
  for (const auto& p : j["parameters"]) {
    std::string name = p.value("module", std::string("?")) + "." + p.value("name", std::string("?"));
    if (p.value("optimized", false)) {
      ++optimized;
      optimizedMoved += p.value("moved", false);
    } else if (p.value("after_optimizer", false) && p.value("requires_grad", true)) {
      (p.value("has_grad", false) ? lateTrained : lateIdle).push_back(name);
    }
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 6; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 6) out += ", ...";
    return out;
  };
  std::string stepped = optimized == 0 ? "the optimizer holds no parameter at all"
                                       : std::to_string(optimizedMoved) + " of " + std::to_string(optimized) +
                                             " optimized parameters moved";
  if (groups == 0) {
    r.verdict = Verdict::NotReached;
    r.evidence = "the program built no LibTorch optimizer before it exited";
  } else if (lateTrained.empty() && lateIdle.empty()) {
    r.verdict = Verdict::NotReproduced;
    r.evidence = "every trainable parameter registered after the first optimizer was built is in an optimizer";
  } else if (lateTrained.empty()) {
    r.verdict = Verdict::NotReached;
    r.evidence = std::to_string(lateIdle.size()) + " parameter(s) registered after the optimizer are in no optimizer (" +
                 list(lateIdle) + ") but got no gradient: the program ran no backward pass through them";
  } else if (optimized > 0 && optimizedMoved == 0) {
    r.verdict = Verdict::NotReached;
    r.evidence = std::to_string(lateTrained.size()) + " parameter(s) registered after the optimizer got gradients but "
                 "are in no optimizer (" + list(lateTrained) + "); no optimizer step ran (" + stepped + ")";
  } else {
    r.verdict = Verdict::Confirmed;
    r.evidence = std::to_string(lateTrained.size()) + " parameter(s) registered after the optimizer was built got "
                 "gradients but are in no optimizer, so step() never updates them (" + list(lateTrained) + "); " +
                 stepped;
  }
  return r;
}

int Session::runCxx(std::vector<Diagnostic>& diags) {
  const ProbeOptions& o = options_;
  std::vector<size_t> probed;
  for (size_t i = 0; i < diags.size(); ++i)
    if (diags[i].code == "SL501") probed.push_back(i);
  if (probed.empty()) {
    log_ << "shardlint probe: no SL501 finding to probe\n";
    return 0;
  }
  if (o.runCommand.empty()) {
    log_ << "shardlint: error: --mode cxx needs --run CMD (the command that runs the program; --build CMD builds "
            "it first)\n";
    return 2;
  }
  std::string lib = cxxProbeLibrary();
  if (lib.empty()) {
    log_ << "shardlint: error: the C++ probe library (libshardlint_cxxprobe.so) was not built: it needs LibTorch "
            "(libtorch-dev) at build time; or set SHARDLINT_CXX_PROBE_LIB\n";
    return 2;
  }
  auto started = std::chrono::steady_clock::now();
  auto finishAll = [&](ProbeResult r) {
    r.elapsedSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (size_t i : probed) {
      log_ << "  " << diags[i].code << " " << diags[i].location.path << ":" << diags[i].location.start.line + 1
           << ": " << verdictName(r.verdict) << "\n";
      results_[i] = r;
    }
  };
  RunOptions ro;
  ro.timeoutSeconds = o.timeoutSeconds;
  if (!o.buildCommand.empty()) {
    log_ << "shardlint probe: building: " << o.buildCommand << "\n";
    RunResult b = runProcess({"/bin/sh", "-c", o.buildCommand}, ro);
    if (!b.started || b.timedOut || b.exitCode != 0) {
      ProbeResult r;
      r.verdict = Verdict::ProbeError;
      r.evidence = "the build command " +
                   std::string(b.timedOut ? "timed out" : "failed (exit " + std::to_string(b.exitCode) + ")") + ": " +
                   tailLines(b.output, 3);
      finishAll(r);
      return 0;
    }
  }
  char tmpl[] = "/tmp/shardlint-cxxprobe-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    log_ << "shardlint: error: cannot create a temporary folder for the probe report\n";
    return 2;
  }
  fs::path report = fs::path(tmpl) / "report.json";
  ro.env["SHARDLINT_CXX_PROBE_REPORT"] = report.string();
  const char* preload = std::getenv("LD_PRELOAD");
  ro.env["LD_PRELOAD"] = lib + (preload && *preload ? std::string(":") + preload : std::string());
  log_ << "shardlint probe: running: " << o.runCommand << " (with " << lib << " preloaded)\n";
  RunResult run = runProcess({"/bin/sh", "-c", o.runCommand}, ro);
  std::string text;
  ProbeResult r;
  if (!readFileBytes(report.string(), text)) {
    r.verdict = run.timedOut ? Verdict::ProbeError : Verdict::NotReached;
    r.evidence = run.timedOut ? "the program timed out" :
                 "the program wrote no probe report (it never registered a parameter or built an optimizer, or it "
                 "is not dynamically linked to LibTorch); exit " + std::to_string(run.exitCode) + ": " +
                     tailLines(run.output, 3);
  } else {
    r = cxxVerdict(text);
    if (run.exitCode != 0) r.evidence += " (the program exited with " + std::to_string(run.exitCode) + ")";
  }
  std::error_code ec;
  if (!o.keep) fs::remove_all(tmpl, ec);
  else log_ << "shardlint probe: kept " << tmpl << "\n";
  finishAll(r);
  return 0;
}

}  // namespace shardlint::probe
