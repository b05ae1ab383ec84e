// Reports and verdicts: the ranks' JSON reports read back, and the verdict each finding gets from
// them (confirmed, not-reproduced, not-reached, probe-error) with its evidence, rule by rule; the
// second (gloo) pass that checks divergence merged in (Probe.h).
#include "Probe.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "ProbeImpl.h"
#include "core/SourceFile.h"

namespace shardlint::probe {

namespace fs = std::filesystem;
using nlohmann::json;

std::string_view verdictName(Verdict v) {
  switch (v) {
    case Verdict::Confirmed:
      return "confirmed";
    case Verdict::NotReproduced:
      return "not-reproduced";
    case Verdict::NotReached:
      return "not-reached";
    case Verdict::ProbeError:
      return "probe-error";
  }
  return "probe-error";
}

// ============================================================================================
// Reports and verdicts
// ============================================================================================

std::optional<RankReport> parseRankReport(const std::string& text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<RankReport> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail("not valid JSON");
  if (!j.is_object()) return fail("not a JSON object");
  RankReport r;
  std::string bad;  // the first field of the wrong type
  // The field `k` when present, not null and of the type `isType` tests; else nullptr (and a
  // wrong type is recorded in `bad`, saying the field is not `what`).
  auto field = [&](const char* k, bool (json::*isType)() const noexcept, const char* what) -> const json* {
    if (!j.contains(k) || j[k].is_null()) return nullptr;
    if ((j[k].*isType)()) return &j[k];
    if (bad.empty()) bad = std::string("`") + k + "` is not " + what;
    return nullptr;
  };
  auto num = [&](const char* k, auto& dst) {
    if (const json* v = field(k, &json::is_number, "a number")) dst = v->get<std::remove_reference_t<decltype(dst)>>();
  };
  auto str = [&](const char* k, std::string& dst) {
    if (const json* v = field(k, &json::is_string, "a string")) dst = v->get<std::string>();
  };
  auto boolean = [&](const char* k, bool& dst) {
    if (const json* v = field(k, &json::is_boolean, "true or false")) dst = v->get<bool>();
  };
  auto optBool = [&](const char* k, std::optional<bool>& dst) {
    if (const json* v = field(k, &json::is_boolean, "true, false or null")) dst = v->get<bool>();
  };
  if (!j.contains("rank") || !j["rank"].is_number_integer()) return fail("no integer `rank`");
  num("rank", r.rank);
  num("world_size", r.worldSize);
  str("backend", r.backend);
  str("torch_version", r.torchVersion);
  str("accelerate_version", r.accelerateVersion);
  boolean("reached_step", r.reachedStep);
  num("stale_optimizer_entries", r.staleOptimizerEntries);
  num("unmanaged_entries", r.unmanagedEntries);
  optBool("params_changed", r.paramsChanged);
  optBool("diverged", r.diverged);
  optBool("tied_apart", r.tiedApart);
  str("phase", r.phase);
  if (const json* v = field("tied_max_diff", &json::is_number, "a number")) r.tiedMaxDiff = v->get<double>();
  if (const json* v = field("trainable_params", &json::is_number_integer, "an integer")) r.trainableParams = v->get<int>();
  if (const json* v = field("trainable_not_optimized", &json::is_number_integer, "an integer"))
    r.trainableNotOptimized = v->get<int>();
  if (const json* v = field("trainable_not_optimized_names", &json::is_array, "a list")) {
    for (const auto& n : *v)
      if (n.is_string() && r.trainableNotOptimizedNames.size() < 32) r.trainableNotOptimizedNames.push_back(n.get<std::string>());
  }
  str("exception_type", r.exceptionType);
  str("exception_message", r.exceptionMessage);
  num("elapsed_seconds", r.elapsedSeconds);
  if (const json* v = field("notes", &json::is_array, "a list")) {
    for (const auto& n : *v)
      if (n.is_string()) r.notes.push_back(n.get<std::string>());
  }
  // `probe_error` (an extra of the Python reports): the probe could not do its job on this rank
  // (torch or accelerate missing or too old, no process group). It travels as a ProbeError
  // exception when the rank recorded no framework exception of its own.
  std::string probeError;
  str("probe_error", probeError);
  if (!bad.empty()) return fail(bad);
  if (!probeError.empty() && r.exceptionType.empty()) {
    r.exceptionType = "ProbeError";
    r.exceptionMessage = probeError;
  }
  if (r.rank < 0) return fail("negative `rank`");
  return r;
}

std::vector<RankReport> readReports(const std::string& dir, std::vector<std::string>* errors) {
  std::vector<RankReport> out;
  std::error_code ec;
  static const std::regex name(R"(rank(\d+)\.json)");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (std::regex_match(it->path().filename().string(), name)) files.push_back(it->path());
  for (const auto& f : files) {
    std::string text, why;
    if (!readFileBytes(f.string(), text)) {
      if (errors) errors->push_back(f.filename().string() + ": unreadable");
      continue;
    }
    auto r = parseRankReport(text, &why);
    if (!r) {
      if (errors) errors->push_back(f.filename().string() + ": " + why);
      continue;
    }
    out.push_back(*r);
  }
  std::sort(out.begin(), out.end(), [](const RankReport& a, const RankReport& b) { return a.rank < b.rank; });
  return out;
}

namespace {

std::string plural(int n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string exceptionText(const RankReport& r) {
  std::string m = firstLine(r.exceptionMessage, 300);
  return r.exceptionType + (m.empty() ? "" : ": " + m);
}

// Framework errors that show the bug itself.
bool isShardedKeyError(const RankReport& r) {
  return contains(r.exceptionMessage, "couldn't be switched to its sharded version") ||
         contains(r.exceptionMessage, "could not be switched to its sharded version");
}
bool isMixedDTensor(const RankReport& r) {
  return contains(r.exceptionMessage, "mixed torch.Tensor and DTensor") ||
         contains(r.exceptionMessage, "mixed Tensor and DTensor");
}
// accelerate FSDP2's refusals (SL201) and the Trainer's (SL202).
// SL207: torch's refusal of a parameter in two FSDP2 groups (2.13+), at the root's lazy init (first forward).
bool isSharedParamError(const RankReport& r) {
  return r.exceptionType == "ValueError" && contains(r.exceptionMessage, "already managed by another FSDP group");
}

// SL207 with FSDP1 use_orig_params=True: the first forward fails (measured on torch 2.15: `RuntimeError: size
// mismatch`, the head computing with the embedding unit's sharded view).
bool isTiedForwardError(const RankReport& r) { return r.exceptionType == "RuntimeError" && r.phase == "forward"; }

bool isSeparatePrepareError(const RankReport& r) {
  return contains(r.exceptionMessage, "a model and optimizer must be passed together") ||
         contains(r.exceptionMessage, "FSDP2 preparation should be done via");
}
bool isTrainerOptimizersError(const RankReport& r) {
  return contains(r.exceptionMessage, "Passing `optimizers` is not allowed") ||
         contains(r.exceptionMessage, "Passing optimizers is not allowed");
}
// Lightning Fabric's joint `setup(model, optimizer)` refuses an optimizer still holding meta-device tensors
// (parameters materialised by to_empty after it was built): SL105's bug, caught by the framework.
bool isFabricMetaOptimizerError(const RankReport& r) {
  return contains(r.exceptionMessage, "optimizer has references to the model's meta-device parameters");
}
bool isSl101FrameworkError(const RankReport& r) {
  return contains(r.exceptionMessage, "FlatParameter") || isMixedDTensor(r) || isShardedKeyError(r) ||
         contains(r.exceptionMessage, "can't optimize a non-leaf Tensor") ||
         // Lightning's FSDPStrategy.setup_optimizer on an optimizer built before setup_module
         contains(r.exceptionMessage, "does not seem to reference any FSDP parameters");
}

// The run could not test anything: the probe's own environment failed.
std::optional<std::string> probeFailure(const std::vector<RankReport>& reports, const RunOutcome& run) {
  for (const auto& r : reports) {
    if (r.exceptionType == "ShardlintProbeError" || r.exceptionType == "ProbeError")
      return "the probe failed on rank " + std::to_string(r.rank) + ": " + exceptionText(r);
    if (run.mode == "replay" && (r.exceptionType == "ModuleNotFoundError" || r.exceptionType == "ImportError")) {
      std::string v = r.torchVersion.empty() ? run.torchVersion : r.torchVersion;
      if (contains(r.exceptionMessage, "fully_shard"))
        return "torch " + v + " has no `fully_shard` (FSDP2): " + exceptionText(r);
      return "the replay could not import what it needs (torch " + v + "): " + exceptionText(r);
    }
  }
  const std::string& t = run.outputTail;
  if (contains(t, "No module named 'shardlint_probe'"))
    return "the instrumentation package is not importable (No module named 'shardlint_probe')";
  if (contains(t, "No module named torch") || contains(t, "No module named 'torch'"))
    return "the launcher's python has no torch (No module named 'torch')";
  if (reports.empty() && run.mode == "replay" && contains(t, "cannot import name 'fully_shard'"))
    return "torch " + run.torchVersion + " has no `fully_shard` (FSDP2)";
  return std::nullopt;
}

std::string stderrTail(const std::string& tail) {
  std::string t = tailLines(tail, 6);
  std::string out;
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (!out.empty()) out += " | ";
    out += line;
  }
  if (out.size() > 600) out = "..." + out.substr(out.size() - 600);
  return out.empty() ? "(no output)" : out;
}

// SL203: what each rank's replay noted after the backward ("rank R clip norm X; global norm Y").
struct ClipNorm {
  int rank = 0;
  double norm = 0, global = 0;
  std::string normText, globalText;
};

const std::regex& clipNormRe() {
  static const std::regex re(R"(^rank (\d+) clip norm ([0-9.eE+-]+|nan|inf); global norm ([0-9.eE+-]+|nan|inf)$)");
  return re;
}

bool isClipNormNote(const std::string& n) { return std::regex_match(n, clipNormRe()); }

std::vector<ClipNorm> clipNormsOf(const std::vector<RankReport>& reports) {
  std::vector<ClipNorm> out;
  for (const auto& r : reports)
    for (const auto& n : r.notes) {
      std::smatch m;
      if (!std::regex_match(n, m, clipNormRe()) || std::stoi(m[1].str()) != r.rank) continue;
      ClipNorm c{r.rank, std::strtod(m[2].str().c_str(), nullptr), std::strtod(m[3].str().c_str(), nullptr),
                 m[2].str(), m[3].str()};
      out.push_back(c);
      break;
    }
  return out;
}

// Two norms differ beyond float rounding (relative 1e-4).
bool normsDiffer(double a, double b) { return std::fabs(a - b) > 1e-4 * std::max({std::fabs(a), std::fabs(b), 1e-12}); }

}  // namespace

// decide(); `nodeRanks` > 0: a multi-node probe with one orchestrator per node, whose report folder
// holds this node's `nodeRanks` ranks only (every node judges its own ranks).
ProbeResult decideOnNode(const std::string& code, const std::vector<RankReport>& reports, const RunOutcome& run,
                         int nodeRanks) {
  ProbeResult res;
  res.backend = run.backend;
  res.worldSize = run.worldSize;
  res.torchVersion = run.torchVersion;
  res.accelerateVersion = run.accelerateVersion;
  res.elapsedSeconds = run.seconds;
  for (const auto& r : reports) {
    if (!r.backend.empty()) res.backend = r.backend;
    if (!r.torchVersion.empty()) res.torchVersion = r.torchVersion;
    if (!r.accelerateVersion.empty()) res.accelerateVersion = r.accelerateVersion;
  }
  if (!reports.empty()) {
    int ws = 0;
    for (const auto& r : reports) ws = std::max(ws, r.worldSize);
    if (ws > 0) res.worldSize = ws;
  }
  // The ranks' notes (what the replay adapted, e.g. accelerate's FSDP switched on in CPU
  // processes) travel with the evidence, each once.
  std::vector<std::string> rankNotes;
  std::vector<ClipNorm> clipNorms = clipNormsOf(reports);  // SL203: read off below, not repeated as notes
  for (const auto& r : reports)
    for (const auto& n : r.notes)
      if (std::find(rankNotes.begin(), rankNotes.end(), n) == rankNotes.end() && !isClipNormNote(n))
        rankNotes.push_back(n);
  std::string nodeScope;  // multi-node: which ranks this node judged
  if (nodeRanks > 0 && !reports.empty()) {
    nodeScope = std::string("multi-node: judged from this node's ") + (reports.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < reports.size(); ++i) nodeScope += (i ? ", " : "") + std::to_string(reports[i].rank);
    nodeScope += " of world size " + std::to_string(res.worldSize) + "; each node judges its own ranks";
  }
  auto verdict = [&](Verdict v, std::string evidence) {
    res.verdict = v;
    res.evidence = std::move(evidence);
    for (const auto& n : rankNotes) res.evidence += " (note: " + firstLine(n, 300) + ")";
    if (!nodeScope.empty()) res.evidence += " (" + nodeScope + ")";
    return res;
  };

  // Which ranks reported, which are missing.
  int expected = run.expectedRanks;
  for (const auto& r : reports) expected = std::max(expected, r.worldSize);
  std::set<int> seen;
  for (const auto& r : reports) seen.insert(r.rank);
  std::vector<int> missing;
  for (int i = 0; i < expected; ++i)
    if (!seen.count(i)) missing.push_back(i);
  std::string missingText;
  if (!missing.empty()) {
    missingText = missing.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < missing.size(); ++i) missingText += (i ? ", " : "") + std::to_string(missing[i]);
    missingText += " wrote no report";
  }
  if (nodeRanks > 0) {
    // The other nodes' ranks report on their own nodes: only this node's can be missing here.
    missingText.clear();
    if (static_cast<int>(reports.size()) < nodeRanks)
      missingText = std::to_string(nodeRanks - static_cast<int>(reports.size())) + " of this node's " +
                    std::to_string(nodeRanks) + " ranks wrote no report";
  }

  // Signals over all ranks.
  int stale = 0, unmanaged = 0, staleRank = -1, unmanagedRank = -1, reached = 0;
  int untrained = 0, untrainedRank = -1, trainable = 0;  // SL105: trainable parameters in no param group
  bool trainableKnown = false;
  const RankReport* untrainedReport = nullptr;
  std::optional<int> unchangedRank, divergedRank;
  bool changedKnown = false, divergenceKnown = false;
  const RankReport* keyError = nullptr;
  const RankReport* mixed = nullptr;
  const RankReport* sl101Error = nullptr;
  const RankReport* firstException = nullptr;
  const RankReport* refused = nullptr;  // SL201 / SL202: the framework's own refusal
  const RankReport* tiedApart = nullptr;  // SL207: the tied weights differ after the step
  bool tieKnown = false;
  for (const auto& r : reports) {
    if (r.reachedStep) ++reached;
    if (r.staleOptimizerEntries > stale) stale = r.staleOptimizerEntries, staleRank = r.rank;
    if (r.unmanagedEntries > unmanaged) unmanaged = r.unmanagedEntries, unmanagedRank = r.rank;
    if (r.trainableParams && r.trainableNotOptimized) {
      trainableKnown = true;
      trainable = std::max(trainable, *r.trainableParams);
      if (*r.trainableNotOptimized > untrained)
        untrained = *r.trainableNotOptimized, untrainedRank = r.rank, untrainedReport = &r;
    }
    if (r.paramsChanged.has_value()) {
      changedKnown = true;
      if (!*r.paramsChanged && !unchangedRank) unchangedRank = r.rank;
    }
    if (r.diverged.has_value()) {
      divergenceKnown = true;
      if (*r.diverged && !divergedRank) divergedRank = r.rank;
    }
    if (r.tiedApart.has_value()) {
      tieKnown = true;
      if (*r.tiedApart && !tiedApart) tiedApart = &r;
    }
    if (!r.exceptionType.empty()) {
      if (!firstException) firstException = &r;
      // A forward that fails in the stand-in whose controls (the same model, the tie kept in one unit) train.
      if (!refused && code == "SL207" && (isSharedParamError(r) || isTiedForwardError(r))) refused = &r;
      if (isShardedKeyError(r) && !keyError) keyError = &r;
      if (isMixedDTensor(r) && !mixed) mixed = &r;
      if (isSl101FrameworkError(r) && !sl101Error) sl101Error = &r;
      if (!refused && ((code == "SL201" && isSeparatePrepareError(r)) || (code == "SL202" && isTrainerOptimizersError(r))))
        refused = &r;
    }
  }
  const int ranksReported = static_cast<int>(reports.size());
  auto onRank = [](int rank) { return " (rank " + std::to_string(rank) + ")"; };

  std::vector<std::string> confirm;
  if (code == "SL101" || code == "SL402") {
    if (stale > 0)
      confirm.push_back("after the wrap the optimizer still held " +
                        plural(stale, "tensor that is not a parameter", "tensors that are not parameters") +
                        " of the wrapped model" + onRank(staleRank));
    if (unchangedRank && reached > 0)
      confirm.push_back("optimizer.step() left the wrapped model's parameters unchanged" + onRank(*unchangedRank));
    if (sl101Error) confirm.push_back("the framework raised " + exceptionText(*sl101Error) + onRank(sl101Error->rank));
  } else if (code == "SL102") {
    if (unmanaged > 0)
      confirm.push_back("the optimizer held " + plural(unmanaged, "tensor", "tensors") + " that no FSDP unit manages" +
                        onRank(unmanagedRank));
    if (keyError) confirm.push_back("accelerate raised " + exceptionText(*keyError) + onRank(keyError->rank));
    if (mixed && mixed != keyError) confirm.push_back("the step raised " + exceptionText(*mixed) + onRank(mixed->rank));
    if (divergedRank)
      confirm.push_back("ranks disagree on the unmanaged parameters after the step (world size " +
                        std::to_string(std::max(res.worldSize, expected)) + ")");
  } else if (code == "SL105") {
    if (untrainedReport) {
      const RankReport& u = *untrainedReport;
      int of = u.trainableParams.value_or(untrained);
      std::string which = untrained == of
                              ? "the optimizer held none of the model's " + plural(of, "trainable parameter", "trainable parameters")
                              : std::to_string(untrained) + " of the model's " + std::to_string(of) +
                                    " trainable parameters are in no param group of the optimizer";
      std::string names;
      for (size_t k = 0; k < u.trainableNotOptimizedNames.size() && k < 2; ++k)
        names += (k ? ", " : "") + u.trainableNotOptimizedNames[k];
      if (u.trainableNotOptimizedNames.size() > 2) names += ", ...";
      confirm.push_back(which + " (rank " + std::to_string(untrainedRank) + (names.empty() ? "" : ": " + names) + ")");
      if (unchangedRank && reached > 0)
        confirm.push_back("optimizer.step() left the model's parameters unchanged" + onRank(*unchangedRank));
    }
    if (keyError) confirm.push_back("accelerate raised " + exceptionText(*keyError) + onRank(keyError->rank));
    for (const auto& r : reports)
      if (isFabricMetaOptimizerError(r)) {
        confirm.push_back("Lightning Fabric raised " + exceptionText(r) + onRank(r.rank));
        break;
      }
  } else if (code == "SL104") {
    if (stale + unmanaged > 0)
      confirm.push_back("after the first step the optimizer held " +
                        plural(stale + unmanaged, "tensor that is not", "tensors that are not") +
                        " among the model's sharded parameters (the unsharded ones the forward left registered)" +
                        onRank(unmanaged >= stale ? unmanagedRank : staleRank));
    if (unchangedRank && reached > 0)
      confirm.push_back("optimizer.step() left the model's parameters unchanged" + onRank(*unchangedRank));
  } else if (code == "SL205") {
    if (mixed)
      confirm.push_back("the forward called as `.forward(...)` raised " + exceptionText(*mixed) + onRank(mixed->rank));
  } else if (code == "SL203") {
    // Confirmed when the clip returned different norms on different ranks (each rank's own shards).
    bool differ = false;
    for (const auto& c : clipNorms) differ = differ || normsDiffer(c.norm, clipNorms.front().norm);
    if (clipNorms.size() >= 2 && differ) {
      std::string each;
      for (size_t i = 0; i < clipNorms.size(); ++i)
        each += std::string(i == 0 ? "" : i + 1 == clipNorms.size() ? " and " : ", ") + clipNorms[i].normText +
                " on rank " + std::to_string(clipNorms[i].rank);
      confirm.push_back("the clip returned " + each + ", where the global norm is " + clipNorms.front().globalText +
                        " on every rank: each rank clipped by its own shard's norm");
    }
  } else if (code == "SL201" || code == "SL202") {
    if (refused)
      confirm.push_back(std::string(code == "SL201" ? "accelerate" : "the Trainer") + " raised " +
                        exceptionText(*refused) + onRank(refused->rank));
  } else if (code == "SL207") {
    if (refused) confirm.push_back("torch raised " + exceptionText(*refused) + " in the " + refused->phase + onRank(refused->rank));
    if (tiedApart) {
      std::string diff;
      if (tiedApart->tiedMaxDiff) {
        std::ostringstream os;
        os << std::setprecision(3) << *tiedApart->tiedMaxDiff;
        diff = " (largest difference " + os.str() + ")";
      }
      confirm.push_back("after the first step the tied embedding and head weights differ" + diff + onRank(tiedApart->rank));
    }
  } else if (code == "SL204") {
    // Confirmed only when a rank that made the call ended in a collective timeout after waiting (or was still
    // waiting when the probe's watchdog gave up), and every other rank says it skipped the call and raised nothing.
    static const std::regex waitedRe(R"(^rank (\d+) waited ([0-9.]+) s in (.+) \(collective timeout (\d+) s\)$)");
    static const std::regex watchedRe(R"(^rank (\d+) was still waiting in (.+) after ([0-9.]+) s \(the probe's watchdog)");
    static const std::regex skippedRe(R"(^rank (\d+) skipped (.+)$)");
    static const std::regex timeoutRe(R"(timed out|timeout)", std::regex::icase);
    const RankReport* caller = nullptr;
    std::string waited, limit, call;
    bool watched = false;
    std::vector<int> skipped;
    bool othersClean = true;
    for (const auto& r : reports) {
      bool skip = false;
      for (const auto& n : r.notes) {
        std::smatch m;
        if (caller) {
        } else if (std::regex_search(n, m, waitedRe) && std::stoi(m[1].str()) == r.rank && !r.exceptionType.empty() &&
                   std::regex_search(r.exceptionMessage, timeoutRe)) {
          caller = &r, waited = m[2].str(), call = m[3].str(), limit = m[4].str();
        } else if (std::regex_search(n, m, watchedRe) && std::stoi(m[1].str()) == r.rank && r.exceptionType.empty()) {
          caller = &r, call = m[2].str(), waited = m[3].str(), watched = true;
        }
        if (std::regex_search(n, m, skippedRe) && std::stoi(m[1].str()) == r.rank) skip = true;
      }
      if (skip) {
        skipped.push_back(r.rank);
        if (!r.exceptionType.empty()) othersClean = false;
      }
    }
    if (caller && !skipped.empty() && othersClean && static_cast<int>(skipped.size()) + 1 == ranksReported) {
      std::string who = skipped.size() == 1 ? "rank " + std::to_string(skipped[0]) : "ranks ";
      if (skipped.size() > 1)
        for (size_t i = 0; i < skipped.size(); ++i) who += (i ? ", " : "") + std::to_string(skipped[i]);
      if (watched)
        confirm.push_back("rank " + std::to_string(caller->rank) + " was still waiting in " + call + "'s collective after " +
                          waited + " s, which " + who + " never joined (the probe's watchdog ended the wait; the "
                          "default group's timeout is far longer)");
      else
        confirm.push_back("rank " + std::to_string(caller->rank) + " waited " + waited + " s in " + call +
                          "'s collective that " + who + " never joined, until the group's " + limit +
                          " s timeout: it raised " + exceptionText(*caller));
    }
  } else if (code == "SL103") {
    if (unmanaged > 0)
      confirm.push_back("the optimizer held " + plural(unmanaged, "tensor", "tensors") + " that no FSDP unit manages" +
                        onRank(unmanagedRank));
    if (mixed) confirm.push_back("the step raised " + exceptionText(*mixed) + onRank(mixed->rank));
    if (divergedRank)
      confirm.push_back("ranks disagree on the parameters outside FSDP after the step (world size " +
                        std::to_string(std::max(res.worldSize, expected)) + ")");
  } else {
    return verdict(Verdict::ProbeError, code + " is not a rule the probe tests");
  }

  if (!confirm.empty()) {
    std::string e;
    for (const auto& c : confirm) e += (e.empty() ? "" : "; ") + c;
    if (!missingText.empty()) e += " (" + missingText + ")";
    return verdict(Verdict::Confirmed, e);
  }

  // Nothing confirms it: could the probe do its job at all?
  if (auto failure = probeFailure(reports, run)) return verdict(Verdict::ProbeError, *failure);

  // Did the run get far enough to refute it?
  if (reports.empty()) {
    if (run.timedOut)
      return verdict(Verdict::NotReached, "timed out after " + fmtSeconds(run.timeoutSeconds) +
                                              " before any rank reported (the whole process group was killed); "
                                              "output: " +
                                              stderrTail(run.outputTail));
    std::string e = "no rank wrote a report (launcher exit code " + std::to_string(run.exitCode) + ")";
    for (const auto& err : run.reportErrors) e += "; " + err;
    return verdict(Verdict::NotReached, e + "; output: " + stderrTail(run.outputTail));
  }
  if (reached == 0) {
    std::string e = "no rank reached the first optimizer step";
    if (firstException)
      e += ": rank " + std::to_string(firstException->rank) + " raised " + exceptionText(*firstException);
    if (run.timedOut) e += "; timed out after " + fmtSeconds(run.timeoutSeconds);
    if (!missingText.empty()) e += "; " + missingText;
    if (!firstException) e += "; output: " + stderrTail(run.outputTail);
    return verdict(Verdict::NotReached, e);
  }
  if (!missingText.empty()) {
    std::string e = missingText + (run.timedOut ? " (timed out after " + fmtSeconds(run.timeoutSeconds) + ")" : "") +
                    "; output: " + stderrTail(run.outputTail);
    return verdict(Verdict::NotReached, e);
  }
  if (reached < ranksReported) {
    std::string e = std::to_string(ranksReported - reached) + " of " + std::to_string(ranksReported) +
                    " ranks did not reach the first optimizer step";
    if (firstException)
      e += ": rank " + std::to_string(firstException->rank) + " raised " + exceptionText(*firstException);
    return verdict(Verdict::NotReached, e);
  }

  std::string e =
      "the first optimizer step ran on " +
      (ranksReported == 1 ? std::string(nodeRanks > 0 ? "this node's rank" : "the only rank")
                          : "all " + std::to_string(ranksReported) + " ranks") +
      " with no sign of the bug: ";
  std::vector<std::string> facts;
  if (code == "SL203") {
    if (clipNorms.size() < 2) {
      facts.push_back(plural(static_cast<int>(clipNorms.size()), "rank", "ranks") +
                      " noted the clip's norm (comparing ranks needs 2 or more)");
    } else {
      bool global = std::all_of(clipNorms.begin(), clipNorms.end(),
                                [](const ClipNorm& c) { return !normsDiffer(c.norm, c.global); });
      facts.push_back("the clip returned " + clipNorms.front().normText + " on every rank" +
                      (global ? ", the global norm" : ", not the global norm " + clipNorms.front().globalText));
    }
  } else if (code == "SL205") {
    facts.push_back("no rank raised the mixed torch.Tensor / DTensor error");
    facts.push_back(changedKnown ? (unchangedRank ? "the step left the parameters unchanged" : "the step changed the parameters")
                                 : "parameter change not measured");
  } else if (code == "SL201" || code == "SL202") {
    facts.push_back(code == "SL201" ? "accelerate's prepare raised no ValueError"
                                    : "the Trainer raised no RuntimeError for the optimizers");
  } else if (code == "SL207") {
    facts.push_back(tieKnown ? "the tied embedding and head weights are still one value after the step"
                             : "the tie was not checked");
  } else if (code == "SL105") {
    facts.push_back(trainableKnown ? "the optimizer held all " + plural(trainable, "trainable parameter", "trainable parameters") +
                                         " of the model"
                                   : "the trainable parameters the optimizer holds were not counted");
    facts.push_back(changedKnown ? (unchangedRank ? "the step left the parameters unchanged" : "the step changed the parameters")
                                 : "parameter change not measured");
  } else if (code == "SL204") {
    static const std::regex returnedRe(R"(^rank (\d+) (.+) returned( \d+ entries)? after )");
    int returned = 0;
    std::string call = "the call";
    for (const auto& r : reports)
      for (const auto& n : r.notes) {
        std::smatch m;
        if (std::regex_search(n, m, returnedRe) && std::stoi(m[1].str()) == r.rank) ++returned, call = m[2].str();
      }
    facts.push_back(returned == ranksReported ? call + " returned on every rank"
                                              : std::to_string(returned) + " of " + std::to_string(ranksReported) +
                                                    " ranks' " + call + " returned, none timed out waiting for the others");
  } else if (code == "SL104") {
    facts.push_back(plural(stale + unmanaged, "optimizer entry", "optimizer entries") +
                    " outside the model's sharded parameters");
    facts.push_back(changedKnown ? "the step changed the parameters" : "parameter change not measured");
  } else if (code == "SL101" || code == "SL402") {
    facts.push_back(plural(stale, "stale optimizer entry", "stale optimizer entries"));
    facts.push_back(changedKnown ? "the step changed the parameters" : "parameter change not measured");
  } else {
    facts.push_back(plural(unmanaged, "unmanaged optimizer entry", "unmanaged optimizer entries"));
    if (divergenceKnown)
      facts.push_back("ranks agree after the step");
    else if (res.worldSize < 2)
      facts.push_back("divergence not checked (world size 1: it needs 2 or more ranks)");
    else
      facts.push_back("divergence not measured");
  }
  for (size_t i = 0; i < facts.size(); ++i) e += (i ? ", " : "") + facts[i];
  if (firstException)
    e += "; later rank " + std::to_string(firstException->rank) + " raised " + exceptionText(*firstException);
  return verdict(Verdict::NotReproduced, e);
}

ProbeResult decide(const std::string& code, const std::vector<RankReport>& reports, const RunOutcome& run) {
  return decideOnNode(code, reports, run, 0);
}

ProbeResult mergeDivergencePass(const ProbeResult& first, const ProbeResult& second) {
  ProbeResult r = first;
  r.backend = first.backend + "+" + second.backend;
  r.worldSize = std::max(first.worldSize, second.worldSize);
  r.elapsedSeconds = first.elapsedSeconds + second.elapsedSeconds;
  std::string firstPart = first.backend + " (world size " + std::to_string(first.worldSize) + "): " + first.evidence;
  std::string secondPart =
      second.backend + " (world size " + std::to_string(second.worldSize) + "): " + second.evidence;
  if (first.verdict == Verdict::Confirmed) return r;
  if (second.verdict == Verdict::Confirmed || second.verdict == Verdict::NotReproduced) {
    r.verdict = second.verdict;
    r.evidence = secondPart + "; " + firstPart;
    return r;
  }
  r.evidence = firstPart + "; the divergence pass on " + second.backend + " was " +
               std::string(verdictName(second.verdict)) + ": " + second.evidence;
  return r;
}

}  // namespace shardlint::probe
