#!/usr/bin/env bash
# Runs one SL501 fixture compiled against LibTorch (tests/CMakeLists.txt builds it) and checks what its
# training step did against the fixture's `// confirm:` line:
#   // confirm: unchanged NAME...   these parameters did not move, every other one moved
#   // confirm: all moved           every parameter moved
# The program prints `moved NAME` or `unchanged NAME` for each parameter (fixtures/cxx/confirm.h).
set -euo pipefail
program="$1"; fixture="$2"
spec="$(grep -m1 '^// confirm:' "$fixture" | sed 's|^// confirm:[[:space:]]*||')"
[ -n "$spec" ] || { echo "no // confirm: line in $fixture"; exit 2; }
out="$("$program")"
echo "$out"
declare -A want=()
if [ "$spec" != "all moved" ]; then
  read -r word names <<<"$spec"
  [ "$word" = unchanged ] || { echo "bad confirm line: $spec"; exit 2; }
  for n in $names; do want[$n]=unchanged; done
fi
status=0; seen=0
while read -r state name; do
  seen=$((seen + 1))
  expected="${want[$name]:-moved}"
  if [ "$state" != "$expected" ]; then echo "MISMATCH: $name $state, expected $expected"; status=1; fi
  unset "want[$name]"
done <<<"$out"
for n in "${!want[@]}"; do echo "MISSING: parameter $n was not reported"; status=1; done
[ "$seen" -gt 0 ] || { echo "no parameter reported"; status=1; }
exit $status
