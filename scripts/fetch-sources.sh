#!/usr/bin/env bash
# Fetches the pinned tree-sitter C sources (third_party/sources.lock: source distributions from PyPI)
# into third_party/src/. Run by scripts/setup.sh, and by CMake when it configures a checkout that has
# none yet (a `pip install .` or a pre-commit hook building the wheel from a fresh clone).
# Needs python3 with pip. Idempotent: nothing is fetched when the sources match the lock file.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf '[sources] %s\n' "$*" >&2; }
# The first interpreter that has pip: the one CMake was given (a pip build's), then python3.
python=""
for p in "${SHARDLINT_SOURCES_PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$p" ] && "$p" -m pip --version >/dev/null 2>&1; then python="$p"; break; fi
done

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
      [ -n "$python" ] || { log "error: no python3 with pip to download $name $version with"; exit 1; }
      "$python" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
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

