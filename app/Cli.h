#pragma once
#include "driver/Rule.h"

namespace shardlint {

// Exit codes (documented in the README).
enum ExitCode : int { kExitClean = 0, kExitFindings = 1, kExitUsage = 2, kExitInternal = 101 };

int runCli(int argc, char** argv, const RuleCatalog& catalog);

}  // namespace shardlint
