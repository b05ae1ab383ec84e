// Internals shared by the replay generator's files (Replay.cpp: writing the program; ReplayShapes.cpp:
// the shapes, in words, and the wrap APIs each supports). Not part of the public interface (Replay.h).
#pragma once
#include <string>
#include <string_view>

#include "probe/Types.h"

namespace shardlint::probe {

inline std::string pyBool(bool b) { return b ? "True" : "False"; }

// SL204's replays: a collective state-dict gather that a rank guard keeps from the other ranks. Each is a pair of
// shapes, `<name>-rank0-only` (the finding: rank 0 calls it, the others skip it) and `<name>-all-ranks` (a control).
// The FSDP1 calls run over a group whose collectives time out after kCollectiveSeconds, so rank 0's wait ends
// in torch's own timeout; accelerate's calls run on the default group (accelerate shards over it), whose
// timeout is long: the probe's watchdog then ends rank 0's wait after kCollectiveSeconds and says so.
struct GuardedCollective {
  const char* name;
  const char* wrapApi;
  const char* call;   // Python, in the replay (model, optimizer, group, accelerator are bound)
  const char* label;  // how the rank reports name the call
  const char* what;   // in a sentence
  bool watchdog;
};
constexpr int kCollectiveSeconds = 5;

inline bool rankZeroOnly(std::string_view shape) { return shape.ends_with("-rank0-only"); }

// The collective of an SL204 shape, or null.
const GuardedCollective* guardedCollective(std::string_view shape);

// The shape in words, with the sharding strategy a clip replay uses (the replay program's "# Pattern:" line).
std::string shapeText(const ReplaySpec& spec);

}  // namespace shardlint::probe
