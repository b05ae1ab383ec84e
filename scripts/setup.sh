#!/usr/bin/env bash
# Installs everything shardlint needs and builds build/shardlint.
# Idempotent: packages already present are not reinstalled, npm sources are
# only fetched when the lockfile changed, and the build is incremental.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages -------------------------------------------------------
# (the second line: Clang LibTooling for the C++ frontend, LibTorch for the SL501 confirmation programs,
# patch(1) for the test that applies a `--diff`)
debs=(cmake g++ make ninja-build git nodejs npm libyaml-cpp-dev nlohmann-json3-dev catch2 libcli11-dev libfmt-dev libtomlplusplus-dev libgoogle-perftools-dev pre-commit neovim
      libclang-14-dev libclang-cpp14-dev llvm-14-dev libtorch-dev patch)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node/npm may come from outside Debian (NodeSource or a preinstalled toolchain)
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
pkgs=()
for p in "${missing[@]}"; do [ -n "$p" ] && pkgs+=("$p"); done
if [ "${#pkgs[@]}" -gt 0 ]; then
  log "installing Debian packages: ${pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# --- pinned npm C sources (tree-sitter runtime + python grammar) -----------
stamp="third_party/node_modules/.shardlint-lock.sha256"
want="$(sha256sum third_party/package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "installing pinned tree-sitter sources from third_party/package-lock.json"
  (cd third_party && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

# --- test tools from npm (the SARIF validator) ---------------------------
tstamp="tools/node_modules/.shardlint-lock.sha256"
twant="$(sha256sum tools/package-lock.json | cut -d' ' -f1)"
if [ ! -f "$tstamp" ] || [ "$(cat "$tstamp")" != "$twant" ]; then
  log "installing pinned test tools from tools/package-lock.json"
  (cd tools && npm ci --no-audit --no-fund --loglevel=error)
  echo "$twant" > "$tstamp"
fi
# npm does not run the platform package's postinstall (chmod) without approval; do it here.
for bin in tools/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool; do
  [ -f "$bin" ] && chmod u+x "$bin"
done

# --- build ----------------------------------------------------------------
gen=()
if [ ! -f build/CMakeCache.txt ]; then
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE="${SHARDLINT_BUILD_TYPE:-Release}" >/dev/null
fi
jobs="$(nproc 2>/dev/null || echo 2)"
cmake --build build -j "$jobs"
log "built $root/build/shardlint"
