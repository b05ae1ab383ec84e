// Internals shared by the orchestrator's files (Probe.cpp, ProbeSpecs.cpp, ProbeEnvironment.cpp,
// ProbeLaunch.cpp, ProbeVerdicts.cpp, ProbeOutput.cpp, ProbeCxx.cpp, ProbePreflight.cpp): small text
// helpers, the interrupt flag and its guard, and the few functions one file defines and another calls.
// Not part of the public interface (Probe.h).
#pragma once
#include <signal.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "Probe.h"

namespace shardlint::probe {

inline bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

inline std::string firstLine(const std::string& s, size_t max = 240) {
  std::string out = s.substr(0, s.find('\n'));
  while (!out.empty() && (out.back() == '\r' || out.back() == ' ')) out.pop_back();
  if (out.size() > max) out = out.substr(0, max) + "...";
  return out;
}

inline std::string fmtSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// Set by SIGINT/SIGTERM while a probe runs; the runner then kills its process group.
extern volatile sig_atomic_t gInterrupted;
void onInterrupt(int);

// Installs onInterrupt for SIGINT and SIGTERM while a probe runs (the command, the preflight).
struct SignalGuard {
  struct sigaction oldInt {
  }, oldTerm{};
  SignalGuard() {
    gInterrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
  }
};

// How long the CPU self-test may take (two gloo ranks, six one-step checks; 15-30 s on two busy cores).
constexpr double kCpuSelfTestTimeoutSeconds = 180.0;

// The self-test's name for the API a replay needs on CPU (ProbeEnvironment.cpp).
std::string selfTestKey(const ReplaySpec& s);

// decide() for one node of a multi-node probe (ProbeVerdicts.cpp).
ProbeResult decideOnNode(const std::string& code, const std::vector<RankReport>& reports, const RunOutcome& run,
                         int nodeRanks);

}  // namespace shardlint::probe
