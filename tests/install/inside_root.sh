#!/bin/bash
# Runs inside the clean Debian root (tests/install/clean_root.sh copies it to /work): installs the wheel
# and the release archive as a user would, with no compiler, no LLVM and no -dev library there, and
# checks each way shardlint is used. Prints `ok`/`FAIL` lines; exits 1 when one failed.
#   inside_root.sh VERSION
set -u
version="$1"
cd /work
failed=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failed=1; }
expect() {  # expect NAME COMMAND...: the command succeeds
  local name="$1"; shift
  if "$@"; then ok "$name"; else bad "$name"; fi
}

for c in cc gcc g++ c++ clang clang++ ld; do
  if command -v "$c" >/dev/null; then bad "the clean root has a compiler or linker ($c)"; fi
done
for l in /usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 \
         /usr/lib/x86_64-linux-gnu/libtomlplusplus.so.3 /usr/lib/x86_64-linux-gnu/libfmt.so.9; do
  [ -e "$l" ] && bad "the clean root has $l"
done

# --- the wheel, into a virtual environment -----------------------------------------------------
whl="$(ls /work/dist/shardlint-*.whl)"
python3 -m venv /opt/sl && /opt/sl/bin/python -m pip install --quiet --disable-pip-version-check --no-index "$whl" ||
  { bad "pip install $(basename "$whl")"; exit 1; }
ok "pip install $(basename "$whl")"
export PATH=/opt/sl/bin:$PATH
expect "shardlint is on PATH from the venv" test "$(command -v shardlint)" = /opt/sl/bin/shardlint
expect "shardlint --version says $version" test "$(shardlint --version)" = "shardlint $version"

lint() {  # lint LABEL EXE: the six seeded findings of examples/, exit 1
  local label="$1" exe="$2" out rc
  out="$("$exe" check --no-cache --no-color examples/ 2>&1)"; rc=$?
  if [ "$rc" -eq 1 ] && grep -q "^Found 6 findings" <<<"$out"; then
    ok "$label: check examples/ gives the six findings, exit 1"
  else
    bad "$label: check examples/ gave exit $rc: $(tail -1 <<<"$out")"
  fi
  out="$("$exe" check --no-cache --no-color cxx/ 2>&1)"; rc=$?
  if grep -qi "C++ frontend" <<<"$out" || [ "$rc" -gt 1 ]; then
    bad "$label: the C++ frontend did not load (exit $rc): $(grep -i 'C++ frontend' <<<"$out" | head -1)"
  elif grep -q "SL501" <<<"$out"; then
    ok "$label: the C++ frontend loads and finds SL501 (exit $rc)"
  else
    bad "$label: no SL501 finding in cxx/ (exit $rc): $(tail -1 <<<"$out")"
  fi
  out="$("$exe" rule SL101 2>&1)"; rc=$?
  if [ "$rc" -eq 0 ] && grep -q "SL101" <<<"$out"; then ok "$label: rule SL101"; else bad "$label: rule SL101 (exit $rc)"; fi
  out="$("$exe" probe --no-cache --python python3 examples/nanogpt_fsdp.py 2>&1)"; rc=$?
  # No torch here: the probe must find its package and then say that torch is missing (exit 2).
  if [ "$rc" -eq 2 ] && grep -q "cannot import it" <<<"$out" && ! grep -q "was not found" <<<"$out"; then
    ok "$label: probe finds its package and asks for torch (exit 2)"
  else
    bad "$label: probe (exit $rc): $(head -2 <<<"$out")"
  fi
  out="$(python3 /work/lsp_initialize.py "$exe" /work)"
  if grep -q "\"version\": \"$version\"" <<<"$out"; then ok "$label: server answers initialize ($out)"; else bad "$label: server: $out"; fi
}
lint wheel /opt/sl/bin/shardlint

# --- the release archive, unpacked anywhere ------------------------------------------------------
mkdir -p /opt/unpacked && tar -xzf "/work/dist/shardlint-$version-linux-x86_64.tar.gz" -C /opt/unpacked ||
  { bad "unpack the release archive"; exit 1; }
for f in bin/shardlint lib/shardlint/libshardlint_cxx.so share/shardlint/python/shardlint_probe/__init__.py \
         share/shardlint/rules/SL101_optimizer_before_wrap.md share/shardlint/licenses/llvm-14-dev.txt README.md LICENSE; do
  [ -e "/opt/unpacked/shardlint-$version/$f" ] || bad "the archive has no $f"
done
expect "archive: --version says $version" test "$(/opt/unpacked/shardlint-$version/bin/shardlint --version)" = "shardlint $version"
lint archive "/opt/unpacked/shardlint-$version/bin/shardlint"

# --- the GitHub Action's steps, as a runner runs them ---------------------------------------------
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # the venv above is not the action's
res="$(python3 /work/action_steps.py run /work/action-plan.json --action-path /work/action --input "wheel=$whl" \
       --input paths=examples --input sarif-file=/work/action.sarif 2>&1 | tee /work/action-default.log | sed -n 's/^RESULT //p')"
python3 - "$res" /work/action-default.log "$version" <<'PY' || failed=1
import json, sys
res = json.loads(sys.argv[1]); log = open(sys.argv[2]).read(); version = sys.argv[3]
steps = {s["id"]: s for s in res["steps"]}
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + "action (defaults): " + what)
    return ok
good = all([
    check(res["skipped"] == ["actions/cache@v4"], f"skips only the cache step ({res['skipped']})"),
    check(steps.get("version", {}).get("outputs", {}).get("version") == version, "takes the version from CMakeLists.txt"),
    check(steps.get("install", {}).get("rc") == 0, "installs the wheel"),
    check(steps.get("check", {}).get("rc") == 1, "fails the step on findings (fail-on-findings: true)"),
    check(sum(1 for l in log.splitlines() if l.startswith("::error file=examples/")) == 6, "six annotations"),
    check(res["outputs"].get("findings") == "6", f"output findings = {res['outputs'].get('findings')}"),
    check(res["outputs"].get("sarif-file") == "/work/action.sarif", "writes the SARIF log"),
])
sys.exit(0 if good else 1)
PY
res="$(python3 /work/action_steps.py run /work/action-plan.json --action-path /work/action --input "wheel=$whl" \
       --input paths=examples --input fail-on-findings=false --input sarif-file= 2>&1 | sed -n 's/^RESULT //p')"
python3 -c '
import json, sys
res = json.loads(sys.argv[1])
ok = all(s["rc"] == 0 for s in res["steps"]) and len(res["steps"]) == 3 and res["outputs"].get("findings") == "6"
print(("ok   " if ok else "FAIL ") + "action (fail-on-findings: false, no SARIF): every step passes, findings reported")
sys.exit(0 if ok else 1)' "$res" || failed=1
exit "$failed"
