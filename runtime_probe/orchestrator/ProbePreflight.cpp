// `shardlint probe --preflight`: finding the native preflight binary and running it, and the
// interpreter `shardlint probe` uses by default (Probe.h).
#include "Probe.h"

#include <cstdlib>
#include <filesystem>
#include <ostream>

#include "ProbeImpl.h"

namespace shardlint::probe {

namespace fs = std::filesystem;

// ============================================================================================
// Preflight
// ============================================================================================

namespace {
// `relative` in this executable's folder, when it exists there; "" otherwise.
std::string besideExecutable(const fs::path& relative) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path p = self.parent_path() / relative;
  return fs::exists(p, ec) ? p.string() : "";
}
}  // namespace

std::string defaultPython() {
  if (const char* env = std::getenv("SHARDLINT_PROBE_PYTHON"); env && *env) return env;
  std::string venv = besideExecutable(fs::path("probe-venv") / "bin" / "python");
  return venv.empty() ? "python3" : venv;
}

std::string preflightPath() {
  // $SHARDLINT_PREFLIGHT, then next to this executable (an installed or relocated build: the
  // build tree and `install()` both put it beside `shardlint`), then the path CMake built it at.
  if (const char* env = std::getenv("SHARDLINT_PREFLIGHT"); env && *env) return env;
  std::string built;
#ifdef SHARDLINT_PREFLIGHT_PATH
  built = SHARDLINT_PREFLIGHT_PATH;
#endif
  if (built.empty()) return "";  // configured without the preflight
  std::string beside = besideExecutable(fs::path(built).filename());
  return beside.empty() ? built : beside;
}

int runPreflight(std::ostream& err, const std::vector<std::string>& args) {
  std::string path = preflightPath();
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) {
    err << "shardlint: error: the native preflight was not built"
        << (path.empty() ? std::string(" (this shardlint was configured without it)")
                         : " (expected at " + path + "; build the `shardlint_preflight` target)")
        << "\n";
    return 2;
  }
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.capture = false;  // its output goes straight through
  o.timeoutSeconds = 600;
  SignalGuard guard;
  RunResult r = runProcess(argv, o);
  if (!r.started) {
    err << "shardlint: error: cannot run the preflight " << path << ": " << r.startError << "\n";
    return 2;
  }
  if (r.timedOut) {
    err << "shardlint: error: the preflight did not finish within 600 s and was killed\n";
    return 2;
  }
  if (r.signal) {
    err << "shardlint: error: the preflight was killed by signal " << r.signal << "\n";
    return 101;
  }
  return r.exitCode;
}

}  // namespace shardlint::probe
