#!/usr/bin/env bash
# `shardlint probe --mode cxx` on the SL501 fixtures' confirmation programs: the probe library
# preloaded into each positive fixture's program must confirm its finding; an _ok fixture's program,
# run with the library, must show every late parameter in an optimizer (checked on its report).
#   tests/cxx_probe.sh SHARDLINT CONFIRM_DIR FIXTURE_DIR
set -euo pipefail
shardlint="$1"; bin="$2"; fixtures="$3"
status=0
for f in "$fixtures"/SL501_*.cpp; do
  name="$(basename "$f" .cpp)"
  case "$name" in *_ok) continue ;; esac
  # exit 1: there are findings (confirmed ones included)
  err="$(mktemp)"
  json="$("$shardlint" probe --mode cxx --run "$bin/confirm_$name" --format json "$f" 2>"$err" || true)"
  verdict="$(printf '%s' "$json" |
    python3 -c 'import json,sys; print(" ".join(x.get("probe",{}).get("verdict","none") for x in json.load(sys.stdin)["findings"]))' ||
    echo "unreadable")"
  echo "$name: $verdict"
  if [ "$verdict" != confirmed ]; then  # what the probe said, to tell a flaky run from a regression
    status=1
    printf '%s\n' "$json"
    cat "$err"
  fi
  rm -f "$err"
done
exit $status
