// `shardlint server`: a Language Server (LSP 3.17, JSON-RPC over stdio) that lints open
// documents as the user types (push or pull diagnostics) and offers `# noqa` quick fixes.
#pragma once
#include <string>

#include "driver/Rule.h"

namespace shardlint::lsp {

// Serves one client on `inFd`/`outFd` until `exit` or the end of the input. Returns the
// process exit code: 0 after `shutdown` then `exit`, 1 when `exit` (or the end of the input)
// comes without `shutdown`.
int runServer(const RuleCatalog& catalog, int inFd, int outFd);

// On stdin/stdout. Anything else that writes to stdout goes to stderr instead, so the
// protocol stream cannot be corrupted; SIGPIPE is ignored.
int runStdioServer(const RuleCatalog& catalog);

}  // namespace shardlint::lsp
