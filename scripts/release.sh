#!/usr/bin/env bash
# Makes the release archive dist/shardlint-VERSION-linux-x86_64.tar.gz from the wheel's portable build
# (scripts/build-wheel.sh; only glibc and libtinfo shared), laid out as an install prefix:
#
#   shardlint-VERSION/bin/shardlint             the program (and shardlint-preflight where CUDA and NCCL were found)
#   shardlint-VERSION/lib/shardlint/            the C++ frontend module and Clang's resource headers
#   shardlint-VERSION/share/shardlint/python/   the probe's instrumentation package
#   shardlint-VERSION/share/shardlint/rules/    the rule pages
#   shardlint-VERSION/share/shardlint/licenses/ the licences of the code linked in
#   shardlint-VERSION/README.md, LICENSE
#
# Unpack it anywhere and run bin/shardlint: it finds the rest from its own path. The wheel carries no
# library copied in by auditwheel (build-wheel.sh leaves libtinfo and NCCL to the machine), so its files
# keep working when moved. Run after scripts/setup.sh. Prints the archive's path last.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf '[release] %s\n' "$*" >&2; }

version="$(sed -n 's/^project(shardlint VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
[ -n "$version" ] || { log "error: no version in CMakeLists.txt's project() line"; exit 1; }
whl="${1:-}"
[ -n "$whl" ] || whl="$(bash scripts/build-wheel.sh)"
name="shardlint-$version"
stage=build/release-stage
rm -rf "$stage" && mkdir -p "$stage/unzipped" "$stage/$name"
build/wheel-venv/bin/python -m zipfile -e "$whl" "$stage/unzipped"
data="$stage/unzipped/$name.data"
if ls "$stage/unzipped" | grep -q '\.libs$'; then
  log "error: $whl carries libraries copied in by auditwheel; they would not be found from the archive"
  exit 1
fi
mkdir -p "$stage/$name/bin"
cp "$data"/scripts/* "$stage/$name/bin/" && chmod 755 "$stage/$name"/bin/*
cp -r "$data"/data/. "$stage/$name/"
cp README.md LICENSE "$stage/$name/"
mkdir -p dist
out="dist/$name-linux-x86_64.tar.gz"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out.tmp" "$name" && mv "$out.tmp" "$out"
log "$out: $(( $(stat -c %s "$out") / 1024 / 1024 )) MB"
echo "$out"
