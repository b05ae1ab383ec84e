#!/usr/bin/env bash
# Creates the runtime probe's Python environment, build/probe-venv: torch, accelerate, lightning, transformers
# and peft from PyPI, every package pinned by version and sha256 in scripts/requirements-probe.txt. The linter itself
# needs none of it (scripts/setup.sh does not run this).
#
#   scripts/setup-probe.sh          # install (idempotent: nothing happens when the stamp matches)
#   build/probe-venv/bin/python -c 'import torch; print(torch.__version__)'
#
# The download is about 2.9 GB (PyPI's default torch wheel is a CUDA build; it also runs on CPU). The wheels
# are kept in a wheelhouse outside the checkout ($SHARDLINT_WHEELHOUSE, default ~/.cache/shardlint/wheels;
# pip's own HTTP cache did not keep them here), and installed from it with --no-index, so a second install
# (a fresh clone, a removed build/) downloads nothing. Times: runtime_probe/README.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf '[setup-probe] %s\n' "$*" >&2; }

. scripts/lib/pinned-venv.sh
reqs="scripts/requirements-probe.txt"
venv="build/probe-venv"
if pinned_venv_current "$venv" "$reqs"; then
  log "$venv is up to date ($reqs)"
  exit 0
fi
if ! python3 -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  log "warning: $reqs pins wheels for CPython 3.11; $(python3 --version) may find none"
fi
start=$(date +%s)
log "creating $venv and installing $reqs (about 2.9 GB the first time)"
wheels="${SHARDLINT_WHEELHOUSE:-$HOME/.cache/shardlint/wheels}"
mkdir -p "$wheels"
# From the wheelhouse only; what it lacks is downloaded first (pip checks each file's hash either way).
if ! pinned_venv_make python3 "$venv" "$reqs" --no-index --find-links "$wheels" 2>/dev/null; then
  log "downloading what $wheels lacks"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    --find-links "$wheels" -d "$wheels" -r "$reqs"
  log "wheels ready after $(( $(date +%s) - start )) s"
  pinned_venv_make python3 "$venv" "$reqs" --no-index --find-links "$wheels"
fi
log "installed in $(( $(date +%s) - start )) s: $("$venv/bin/python" -c 'import torch, accelerate, lightning, transformers, peft; print("torch", torch.__version__, "accelerate", accelerate.__version__, "lightning", lightning.__version__, "transformers", transformers.__version__, "peft", peft.__version__)')"
