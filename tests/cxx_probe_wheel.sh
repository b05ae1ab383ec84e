#!/usr/bin/env bash
# `shardlint probe --mode cxx` against the LibTorch inside the PyPI torch wheel (not Debian's libtorch-dev):
#   tests/cxx_probe_wheel.sh SHARDLINT PYTHON FIXTURE_DIR SOURCE_DIR
# PYTHON is an interpreter with torch installed (build/probe-venv/bin/python); exit 77 (skip) without one.
# 1. Builds the probe library (SOURCE_DIR/runtime_probe/cxx/CxxProbe.cpp) against the wheel's headers and
#    libraries: the one CMake builds against Debian's LibTorch 1.13 cannot be preloaded into a program
#    linked to the wheel's (it pulls in a second LibTorch, and 2.x renamed symbols it calls).
# 2. Checks that the two functions it interposes are exported under the same names by the wheel.
# 3. Builds every fixture's confirmation program (FIXTURE_DIR/*.cpp) against the wheel with g++ (-O0,
#    the wheel's C++ standard and _GLIBCXX_USE_CXX11_ABI, rpath to its lib/), at most $JOBS at a time, and
#    runs tests/cxx_confirm.sh on each (LibTorch's own behaviour: which parameters one step moved).
# 4. Positive fixtures: `shardlint probe --mode cxx --run PROGRAM --format json FIXTURE` with
#    SHARDLINT_CXX_PROBE_LIB set to the library of step 1 must say `confirmed`.
#    _ok fixtures: the probe must find nothing to probe, and the program run with the library preloaded
#    must write a report in which no trainable parameter registered after the optimizer got a gradient
#    outside every optimizer (the verdict rules of cxxVerdict in runtime_probe/orchestrator/ProbeCxx.cpp:
#    `not-reproduced`, or `not-reached` when such parameters got no gradient, i.e. are frozen on purpose).
# Work folder: $SHARDLINT_CXX_WHEEL_DIR when set (kept; outputs are rebuilt when a source is newer or the
# wheel, compiler or flags changed), else a temporary folder removed at exit.
# $SHARDLINT_CXX_WHEEL_JOBS: parallel compilations (default 2).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 SHARDLINT PYTHON FIXTURE_DIR SOURCE_DIR" >&2; exit 2; }
shardlint="$1"; python="$2"; fixtures="$3"; src="$4"
jobs="${SHARDLINT_CXX_WHEEL_JOBS:-2}"
t0=$SECONDS

# ---- the wheel's LibTorch ----
if ! [ -x "$python" ] ||
   ! info="$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null)"; then
  echo "SKIP: $python is not a Python with torch (run scripts/setup-probe.sh, or set SHARDLINT_PROBE_PYTHON)"
  exit 77
fi
{ read -r torch_dir; read -r torch_version; read -r abi; } <<<"$info"
lib="$torch_dir/lib"
for f in "$torch_dir/include/torch/csrc/api/include/torch/torch.h" "$lib/libtorch.so" "$lib/libtorch_cpu.so" "$lib/libc10.so"; do
  [ -e "$f" ] || { echo "SKIP: torch $torch_version at $torch_dir has no $f (a wheel without LibTorch's C++ part)"; exit 77; }
done
# torch 2.x's ATen needs C++20 (`#error C++20 or later` in ATen/ATen.h); TorchConfig.cmake says which.
std=c++17
grep -q cxx_std_20 "$torch_dir/share/cmake/Torch/TorchConfig.cmake" 2>/dev/null && std=c++20
flags=(-std="$std" -O0 -w -D_GLIBCXX_USE_CXX11_ABI="$abi"
       -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include")
# As CMake's find_package(Torch) links a CUDA wheel: libtorch.so (which needs libtorch_cuda.so) kept even if
# unused. The CUDA libraries come from the nvidia wheels through the wheel's own RPATH
# ($ORIGIN/../../nvidia/...); loading them needs no GPU and no LD_LIBRARY_PATH.
# shellcheck disable=SC2054  # commas inside -Wl, options
libs=(-L"$lib" -Wl,-rpath,"$lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed)
echo "torch $torch_version at $torch_dir: -std=$std -D_GLIBCXX_USE_CXX11_ABI=$abi, $jobs compilation(s) at a time"

# ---- the work folder ----
err="$(mktemp)"
if [ -n "${SHARDLINT_CXX_WHEEL_DIR:-}" ]; then
  work="$SHARDLINT_CXX_WHEEL_DIR"
  mkdir -p "$work"
  trap 'rm -f "$err"' EXIT
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/shardlint-cxx-wheel-XXXXXX")"
  trap 'rm -f "$err"; rm -rf "$work"' EXIT
fi
stamp="$(printf '%s\n' "$torch_dir" "$torch_version" "$(stat -c %Y "$lib/libtorch_cpu.so")" \
         "$(g++ --version | head -1)" "${flags[*]}" "${libs[*]}")"
if [ "$(cat "$work/stamp" 2>/dev/null || true)" != "$stamp" ]; then
  rm -rf "${work:?}/bin" "$work/libshardlint_cxxprobe.so"
  printf '%s\n' "$stamp" >"$work/stamp"
fi
mkdir -p "$work/bin" "$work/log"

# out is up to date when it exists and is newer than every input
fresh() {
  local out="$1"; shift
  [ -e "$out" ] || return 1
  for i in "$@"; do [ "$i" -nt "$out" ] && return 1; done
  return 0
}

# ---- 1. the probe library ----
probe_lib="$work/libshardlint_cxxprobe.so"
t=$SECONDS
if ! fresh "$probe_lib" "$src/runtime_probe/cxx/CxxProbe.cpp"; then
  if ! g++ "${flags[@]}" -O1 -fPIC -shared "$src/runtime_probe/cxx/CxxProbe.cpp" -o "$probe_lib.tmp" \
         -L"$lib" -Wl,-rpath,"$lib" -ltorch_cpu -lc10 -ldl >"$work/log/probe_lib.log" 2>&1; then
    echo "FAIL: CxxProbe.cpp does not build against torch $torch_version:"; tail -30 "$work/log/probe_lib.log"; exit 1
  fi
  mv "$probe_lib.tmp" "$probe_lib"
  echo "probe library built in $((SECONDS - t)) s"
fi

# ---- 2. the interposed functions under the names the wheel exports ----
status=0
wheel_syms="$(nm -D --defined-only "$lib/libtorch_cpu.so" | awk '{print $3}')"
ours="$(nm -D --defined-only "$probe_lib" | awk '{print $3}' |
        grep -E '^_ZN5torch(2nn6Module18register_parameter|5optim9Optimizer15add_param_group)' || true)"
[ "$(printf '%s\n' "$ours" | grep -c .)" -eq 2 ] || { echo "FAIL: the probe library defines: $ours"; status=1; }
for sym in $ours; do
  # defined by the library (what the program's calls bind to), looked up by name with dlsym(RTLD_NEXT)
  if ! grep -qxF "$sym" <<<"$wheel_syms"; then echo "FAIL: libtorch_cpu.so of torch $torch_version does not export $sym"; status=1
  elif ! readelf -p .rodata "$probe_lib" | grep -qF " $sym"; then echo "FAIL: the probe library looks up another name than $sym"; status=1
  else echo "interposed: $sym"; fi
done
[ $status -eq 0 ] || exit 1

# ---- 3. the confirmation programs, $jobs at a time ----
t=$SECONDS
names=()
for f in "$fixtures"/*.cpp; do names+=("$(basename "$f" .cpp)"); done
[ ${#names[@]} -gt 0 ] || { echo "FAIL: no fixture in $fixtures"; exit 1; }
build() {
  local name="$1" out="$work/bin/confirm_$1"
  fresh "$out" "$fixtures/$name.cpp" "$fixtures"/*.h && return 0
  local s=$SECONDS
  if g++ "${flags[@]}" -I"$fixtures" "$fixtures/$name.cpp" -o "$out.tmp" "${libs[@]}" >"$work/log/$name.log" 2>&1; then
    mv "$out.tmp" "$out"
    echo "  built confirm_$name in $((SECONDS - s)) s"
  else
    echo "  FAIL: confirm_$name does not build against torch $torch_version:"; tail -20 "$work/log/$name.log"; return 1
  fi
}
pids=()
for name in "${names[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  build "$name" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
echo "programs built in $((SECONDS - t)) s"
[ $status -eq 0 ] || exit 1

# ---- 4. LibTorch's behaviour, then the probe ----
t=$SECONDS
export SHARDLINT_CXX_PROBE_LIB="$probe_lib"
for name in "${names[@]}"; do
  program="$work/bin/confirm_$name"; fixture="$fixtures/$name.cpp"
  if ! confirm_out="$("$src/tests/cxx_confirm.sh" "$program" "$fixture" 2>&1)"; then
    echo "$name: FAIL: cxx_confirm.sh (one training step with torch $torch_version):"; printf '%s\n' "$confirm_out"
    status=1; continue
  fi
  # exit 1: there are findings (confirmed ones included); 0: nothing to probe
  rc=0
  json="$("$shardlint" probe --mode cxx --run "$program" --format json "$fixture" 2>"$err")" || rc=$?
  verdict="$(printf '%s' "$json" |
    python3 -c 'import json,sys; print(" ".join(x.get("probe",{}).get("verdict","none") for x in json.load(sys.stdin)["findings"]))' ||
    echo "unreadable")"
  case "$name" in
    *_ok)
      # no finding, so the CLI runs nothing: run the program with the library and read its report
      report="$work/report_$name.json"; rm -f "$report"
      LD_PRELOAD="$probe_lib" SHARDLINT_CXX_PROBE_REPORT="$report" "$program" >/dev/null 2>>"$err" || true
      own="$(python3 - "$report" <<'EOF' 2>&1 || true
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no-report ({e})"); sys.exit()
late_trained, late_idle, optimized, moved = [], [], 0, 0
for p in r["parameters"]:
    name = f'{p["module"]}.{p["name"]}'
    if p["optimized"]:
        optimized += 1; moved += p["moved"]
    elif p["after_optimizer"] and p["requires_grad"]:
        (late_trained if p["has_grad"] else late_idle).append(name)
if r["param_groups"] == 0: print("not-reached (no optimizer built)")
elif not late_trained and not late_idle: print(f"not-reproduced ({moved} of {optimized} optimized parameters moved)")
elif not late_trained: print(f'not-reached (late, in no optimizer, no gradient: {", ".join(late_idle)}; {moved} of {optimized} moved)')
elif optimized and not moved: print("not-reached (no step ran)")
else: print(f'confirmed ({", ".join(late_trained)})')
EOF
)"
      echo "$name: probe findings: ${verdict:-none} (exit $rc); report: $own"
      case "$rc:$verdict:$own" in
        0::not-reproduced*|"0::not-reached (late, in no optimizer, no gradient"*) ;;
        *) status=1; printf '%s\n' "$json"; cat "$err" ;;
      esac
      ;;
    *)
      echo "$name: $verdict"
      printf '%s' "$json" | python3 -c 'import json,sys; [print("  " + x.get("probe",{}).get("evidence","")) for x in json.load(sys.stdin)["findings"]]' || true
      if [ "$verdict" != confirmed ]; then  # what the probe said, to tell a flaky run from a regression
        status=1; printf '%s\n' "$json"; cat "$err"
      fi
      ;;
  esac
  : >"$err"
done
echo "confirmation and probe runs in $((SECONDS - t)) s; total $((SECONDS - t0)) s (torch $torch_version)"
exit $status
