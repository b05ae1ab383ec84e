#!/usr/bin/env bash
# The install test (issue 33): builds the wheel (scripts/build-wheel.sh) and the release archive
# (scripts/release.sh), then installs and uses both in a minimal Debian bookworm root made with
# debootstrap from Debian's registry (python3, venv and pip; no compiler, no LLVM, no -dev library), and
# runs the GitHub Action's steps there (tests/install/action_steps.py). What is checked:
# tests/install/inside_root.sh. The action's SARIF log is then validated on this machine against the
# official schema (tests/sarif_check.py).
#
#   tests/install/clean_root.sh [SARIF_PYTHON]
#
# The root is made once and kept as a tarball in ~/.cache/shardlint/roots/ (about 100 MB; making it
# takes 2-4 min); each run unpacks a fresh copy. Needs root (chroot, mounts in a private mount
# namespace: nothing is mounted on this machine after it ends). Exit 77 (skipped) without root,
# debootstrap or unshare; 1 when a check failed.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
sarif_python="${1:-$src/build/venv/bin/python}"
log() { printf '[clean-root] %s\n' "$*" >&2; }
if [ "$(id -u)" -ne 0 ] || ! command -v debootstrap >/dev/null || ! command -v unshare >/dev/null; then
  log "skipped: needs root, debootstrap and unshare"; exit 77
fi
cd "$src"
version="$(sed -n 's/^project(shardlint VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"

whl="$(bash scripts/build-wheel.sh)"
archive="$(bash scripts/release.sh "$whl")"
log "built $whl and $archive"

packages="python3,python3-venv,python3-pip"
cache="${SHARDLINT_ROOT_CACHE:-$HOME/.cache/shardlint/roots}"
tarball="$cache/bookworm-minbase-$(echo "$packages" | sha256sum | cut -c1-12).tar.gz"
work="$(mktemp -d /tmp/shardlint-clean-root.XXXXXX)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
if [ ! -f "$tarball" ]; then
  mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
  log "making a bookworm root with debootstrap (minbase + $packages) from ${mirror:-http://deb.debian.org/debian}"
  debootstrap --variant=minbase --include="$packages" bookworm "$root" "${mirror:-http://deb.debian.org/debian}" \
    >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  mkdir -p "$cache"
  tar -C "$root" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
else
  mkdir -p "$root" && tar -C "$root" -xzf "$tarball"
fi

mkdir -p "$root/work/dist" "$root/work/action"
cp "$whl" "$archive" "$root/work/dist/"
cp -r examples "$root/work/examples"
mkdir -p "$root/work/cxx" && cp fixtures/cxx/SL501_register_parameter_in_main.cpp "$root/work/cxx/"
cp action.yml CMakeLists.txt "$root/work/action/"
cp tests/install/inside_root.sh tests/install/lsp_initialize.py tests/install/action_steps.py "$root/work/"
"$sarif_python" tests/install/action_steps.py plan action.yml >"$root/work/action-plan.json"

log "installing and running shardlint $version in the clean root"
set +e
unshare --mount --propagation private -- bash -c '
  set -e
  mount -t proc proc "$1/proc"
  mount --rbind /dev "$1/dev"
  cp /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null || true
  exec chroot "$1" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 /bin/bash /work/inside_root.sh "$2"' _ "$root" "$version"
rc=$?
set -e
# One version everywhere: the wheel's and the archive's names (from CMakeLists.txt through
# scikit-build-core and release.sh), the SARIF log's tool metadata; --version and the server's
# serverInfo were checked inside the root. The action's default wheel URL must name the wheel built.
check_same() { if [ "$2" = "$3" ]; then echo "ok   version: $1 ($3)"; else echo "FAIL version: $1: $2, not $3"; rc=1; fi; }
check_same "wheel file name" "$(basename "$whl" | cut -d- -f2)" "$version"
check_same "archive file name" "$(basename "$archive")" "shardlint-$version-linux-x86_64.tar.gz"
[ -f "$root/work/action.sarif" ] && check_same "SARIF tool.driver.version" \
  "$("$sarif_python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["tool"]["driver"]["version"])' "$root/work/action.sarif")" "$version"
check_same "the action's default wheel name" \
  "$(grep -o 'shardlint-$VERSION-py3-none-[a-z0-9_]*\.whl' action.yml | sed "s/\$VERSION/$version/")" "$(basename "$whl")"
if [ -f "$root/work/action.sarif" ]; then
  if "$sarif_python" tests/sarif_check.py "$root/work/action.sarif"; then
    echo "ok   action: the SARIF log passes the SARIF 2.1.0 schema and GitHub's rules"
  else
    echo "FAIL action: the SARIF log"; rc=1
  fi
else
  echo "FAIL action: no SARIF log"; rc=1
fi
exit "$rc"
