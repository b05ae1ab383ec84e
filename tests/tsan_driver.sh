#!/usr/bin/env bash
# ThreadSanitizer check of the parallel driver (ctest's tsan_driver, in a SHARDLINT_SANITIZE=thread
# build): lints multi-file projects (files importing each other, summaries shared between the
# worker threads, trees retired while other tasks run) with several jobs, then twice more with a cache
# folder (a cold run filling it, a warm one taking findings and stamps from it). TSAN_OPTIONS makes a
# race abort the run with exit 66; the findings must be those of a one-thread run.
set -uo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:exitcode=66}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
cacheArgs=(--no-cache)
run() {  # run NAME ARGS...: shardlint check must exit 1 (findings) and write $tmp/NAME
  local name="$1"; shift
  (cd "$root" && "$bin" check "${cacheArgs[@]}" --no-color "$@") >"$tmp/$name" 2>"$tmp/$name.err"
  local rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "tsan_driver: \`shardlint check $*\` exited $rc (want 1: findings)"; cat "$tmp/$name.err"; fail=1
  fi
}
for dir in fixtures/projects examples; do
  key="${dir//\//_}"
  run "$key.j1" --jobs 1 "$dir"
  for j in 2 4 8; do
    run "$key.j$j" --jobs "$j" "$dir"
    if ! cmp -s "$tmp/$key.j1" "$tmp/$key.j$j"; then
      echo "tsan_driver: $dir with --jobs $j differs from --jobs 1"; diff "$tmp/$key.j1" "$tmp/$key.j$j" | head -20; fail=1
    fi
  done
  grep -q "SL1" "$tmp/$key.j1" || { echo "tsan_driver: no SL1xx finding in $dir"; fail=1; }
  cacheArgs=(--cache-dir "$tmp/cache-$key")
  for round in cold warm; do
    run "$key.$round" --jobs 4 "$dir"
    if ! cmp -s "$tmp/$key.j1" "$tmp/$key.$round"; then
      echo "tsan_driver: $dir with --jobs 4 and a $round cache differs from --jobs 1"
      diff "$tmp/$key.j1" "$tmp/$key.$round" | head -20; fail=1
    fi
  done
  cacheArgs=(--no-cache)
done
[ "$fail" -eq 0 ] && echo "tsan_driver: no data race, same findings with 1, 2, 4 and 8 jobs, and with a cold and a warm cache"
exit "$fail"
