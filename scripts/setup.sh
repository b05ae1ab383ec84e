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
# patch(1) for the test that applies a `--diff`)
debs=(cmake g++ make ninja-build git ccache python3 python3-venv libyaml-cpp-dev nlohmann-json3-dev catch2 libcli11-dev libfmt-dev libtomlplusplus-dev libgoogle-perftools-dev pre-commit neovim
      libclang-14-dev libclang-cpp14-dev llvm-14-dev libtorch-dev patch)
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
# pip downloads each source distribution (and checks its hash), then every archive's sha256 is checked
# against the lock file here before anything is extracted. third_party/dist/ keeps the archives and the
# stamp records the lock file the extracted sources came from, so a second run downloads nothing.
lock="third_party/sources.lock"
stamp="third_party/src/.shardlint-lock.sha256"
want="$(sha256sum "$lock" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  mkdir -p third_party/dist
  # one pin a line: NAME==VERSION --hash=sha256:HEX # ROLE
  pins=()
  while read -r spec hash _hash role; do
    pins+=("${spec%%==*} ${spec##*==} ${hash#--hash=sha256:} $role")
  done < <(sed 's/#/ # /' "$lock" | awk '$1 !~ /^#/ && NF { print $1, $2, $3, $4 }')
  # An sdist is NAME-VERSION.tar.gz, with '-' in NAME written as '_' by newer build tools.
  sdist() { local c; for c in "third_party/dist/$1-$2.tar.gz" "third_party/dist/${1//-/_}-$2.tar.gz"; do
    if [ -f "$c" ]; then echo "$c"; return 0; fi; done; return 0; }
  rm -rf third_party/src.tmp && mkdir -p third_party/src.tmp
  for pin in "${pins[@]}"; do
    read -r name version sha role <<<"$pin"
    case "$role" in ''|*[!a-z-]*) log "error: $lock: $name==$version has no role comment"; exit 1 ;; esac
    f="$(sdist "$name" "$version")"
    if [ -z "$f" ] || [ "$(sha256sum "$f" | cut -d' ' -f1)" != "$sha" ]; then
      log "downloading $name $version (source distribution, pinned in $lock)"
      rm -f "$f"
      python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        --require-hashes -d third_party/dist -r <(echo "$name==$version --hash=sha256:$sha")
      f="$(sdist "$name" "$version")"
    fi
    [ -n "$f" ] || { log "error: $name $version: no source distribution in third_party/dist"; exit 1; }
    got="$(sha256sum "$f" | cut -d' ' -f1)"
    if [ "$got" != "$sha" ]; then
      log "error: $f has sha256 $got, $lock pins $sha; not extracting it"
      exit 1
    fi
    mkdir -p "third_party/src.tmp/$role"
    tar -xzf "$f" -C "third_party/src.tmp/$role" --strip-components=1 --no-same-owner
  done
  # The grammar's `#include "tree_sitter/parser.h"` (and scanner.c's array.h): the ABI-14 headers.
  inc="third_party/src.tmp/python-grammar-include/tree_sitter"
  mkdir -p "$inc"
  for h in parser.h array.h alloc.h ts_assert.h; do
    cp "third_party/src.tmp/grammar-header/tree_sitter/core/lib/src/$h" "$inc/$h"
  done
  rm -rf third_party/src && mv third_party/src.tmp third_party/src
  echo "$want" > "$stamp"
  log "tree-sitter sources extracted into third_party/src/"
fi

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
