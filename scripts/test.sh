#!/usr/bin/env bash
# Sets up (idempotent), builds and runs the whole test suite in build/, then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer (leak checks on) and the ThreadSanitizer test of the
# parallel driver (scripts/test-sanitize.sh; its builds are build-asan/ and build-tsan/). On a clean
# clone of a 2-core machine the whole command took 35 minutes (2 December 2026), most of it the two
# sanitizer builds and the sanitized suite. SHARDLINT_SANITIZE_RUN=0 skips the sanitizer half (a quick local run).
# Arguments go to both ctest runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The probe's environment (build/probe-venv: torch, accelerate, lightning; 2.9 GB the first time) is
# made in the background while setup.sh builds: the install is mostly disk writes, the build CPU.
# SHARDLINT_PROBE_ENV=0 skips it (the real-torch probe tests then report themselves skipped).
probe_log="$root/build/setup-probe.log"
probe_pid=""
if [ "${SHARDLINT_PROBE_ENV:-1}" != 0 ]; then
  mkdir -p "$root/build"
  "$root/scripts/setup-probe.sh" >"$probe_log" 2>&1 &
  probe_pid=$!
fi
"$root/scripts/setup.sh"
cd "$root"
if [ -n "$probe_pid" ]; then
  if ! wait "$probe_pid"; then
    cat "$probe_log" >&2
    echo "test.sh: scripts/setup-probe.sh failed (log above)" >&2
    exit 1
  fi
  tail -n 1 "$probe_log" >&2
fi
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
if [ "${SHARDLINT_SANITIZE_RUN:-1}" != 0 ]; then
  "$root/scripts/test-sanitize.sh" "$@"
fi
