#!/usr/bin/env bash
# Installs everything shardlint needs and builds build/shardlint.
# Idempotent: packages already present are not reinstalled, the PyPI sources and tools are only
# fetched when their lock files changed, and the build is incremental. No npm.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages -------------------------------------------------------
# (the second line: Clang LibTooling for the C++ frontend, LibTorch for the SL501 confirmation programs,
# patch(1) for the test that applies a `--diff`; debootstrap for the install test's clean Debian root,
# zlib1g-dev for the portable build's static zlib)
debs=(cmake g++ make ninja-build git ccache python3 python3-venv libyaml-cpp-dev nlohmann-json3-dev catch2 libcli11-dev libfmt-dev libtomlplusplus-dev libgoogle-perftools-dev pre-commit neovim
      libclang-14-dev libclang-cpp14-dev llvm-14-dev libtorch-dev patch
      debootstrap zlib1g-dev)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
pkgs=()
for p in "${missing[@]}"; do [ -n "$p" ] && pkgs+=("$p"); done
if [ "${#pkgs[@]}" -gt 0 ]; then
  log "installing Debian packages: ${pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# --- pinned tree-sitter C sources from PyPI (third_party/sources.lock) -----------------------
bash scripts/fetch-sources.sh

# --- Python test tools from PyPI into build/venv (scripts/requirements-test.txt) -------------------
. scripts/lib/pinned-venv.sh
if ! pinned_venv_current build/venv scripts/requirements-test.txt; then
  log "installing the pinned Python test tools into build/venv (scripts/requirements-test.txt)"
  pinned_venv_make python3 build/venv scripts/requirements-test.txt
fi

# --- build ----------------------------------------------------------------
# ccache (a Debian package above) keeps compiled objects across clones and build folders
# (~/.cache/ccache): with paths hashed relative to the checkout (CCACHE_BASEDIR) and the build folder
# left out of the hash (CCACHE_NOHASHDIR), a fresh clone on the same machine compiles from it. The
# debug information of such objects names the first clone's paths (only the sanitizer builds have any).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
gen=()
if [ ! -f build/CMakeCache.txt ]; then
  command -v ninja >/dev/null && gen=(-G Ninja)
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B build "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE="${SHARDLINT_BUILD_TYPE:-Release}" >/dev/null
fi
jobs="$(nproc 2>/dev/null || echo 2)"
cmake --build build -j "$jobs"
log "built $root/build/shardlint"
