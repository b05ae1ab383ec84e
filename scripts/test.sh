#!/usr/bin/env bash
# Sets up (idempotent), builds and runs the whole test suite in build/. With SHARDLINT_SANITIZE_RUN=1
# it then runs the same suite under AddressSanitizer + UndefinedBehaviorSanitizer and the
# ThreadSanitizer test of the parallel driver (scripts/test-sanitize.sh). That part is not yet on by
# default (so not yet in .ci/run): its full run on a clean clone has still to be timed against CI's
# limit. Arguments go to ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
if [ -n "${SHARDLINT_SANITIZE_RUN:-}" ]; then
  "$root/scripts/test-sanitize.sh" "$@"
fi
