#!/usr/bin/env bash
# Sets up (idempotent), builds and runs the whole test suite: the normal build (build/), then the
# same suite under AddressSanitizer + UndefinedBehaviorSanitizer and the ThreadSanitizer test of the
# parallel driver (scripts/test-sanitize.sh; SHARDLINT_NO_SANITIZE=1 skips that part). Arguments go
# to ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
if [ -z "${SHARDLINT_NO_SANITIZE:-}" ]; then
  "$root/scripts/test-sanitize.sh" "$@"
fi
