#!/usr/bin/env bash
# Sets up (idempotent), builds and runs the whole test suite in build/, then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer (leak checks on) and the ThreadSanitizer test of the
# parallel driver (scripts/test-sanitize.sh; its builds are build-asan/ and build-tsan/). On a clean
# clone of a 2-core machine the whole command took 35 minutes (2 December 2026), most of it the two
# sanitizer builds and the sanitized suite. SHARDLINT_SANITIZE_RUN=0 skips the sanitizer half (a quick local run).
# Arguments go to both ctest runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
if [ "${SHARDLINT_SANITIZE_RUN:-1}" != 0 ]; then
  "$root/scripts/test-sanitize.sh" "$@"
fi
