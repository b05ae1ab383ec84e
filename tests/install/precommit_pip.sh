#!/usr/bin/env bash
# The self-installing pre-commit hook (issue 33): Debian's real `pre-commit`, a fresh PRE_COMMIT_HOME, a
# throwaway repository whose .pre-commit-config.yaml names this checkout (at its HEAD commit) and the
# `shardlint-pip` hook (language: python). pre-commit makes its own virtual environment and pip-installs
# the checkout, which builds shardlint with scikit-build-core; then the installed git hook must block a
# commit with an FSDP bug and let a clean one through. Nothing is on PATH beforehand: the test checks
# that no `shardlint` is.
#
#   tests/install/precommit_pip.sh SOURCE_CHECKOUT
#
# The build reuses ccache's objects of scripts/build-wheel.sh's build where it can (same flags and, with
# CCACHE_BASEDIR set to the pre-commit home, the same relative paths). Exit 77 (skipped) without
# pre-commit or git, or when the checkout is not a git repository; 1 when a check failed.
set -uo pipefail
src="$(cd "${1:?usage: precommit_pip.sh SOURCE_CHECKOUT}" && pwd)"
command -v pre-commit >/dev/null && command -v git >/dev/null || { echo "skipped: needs pre-commit and git"; exit 77; }
rev="$(git -C "$src" rev-parse HEAD 2>/dev/null)" || { echo "skipped: $src is not a git repository"; exit 77; }
# ccache's folder as this user has it (HOME changes below).
ccache_dir="$( (command -v ccache >/dev/null && ccache -k cache_dir) 2>/dev/null || true)"
base="$(mktemp -d /tmp/shardlint-precommit-pip.XXXXXX)"
trap 'rm -rf "$base"' EXIT
export PRE_COMMIT_HOME="$base/home" HOME="$base" GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t \
  GIT_COMMITTER_EMAIL=t@t
export PATH="$(echo "$PATH" | tr ':' '\n' | while read -r d; do [ -x "$d/shardlint" ] || echo "$d"; done | paste -sd:)"
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PRE_COMMIT_HOME" \
    CCACHE_NOHASHDIR=1
  [ -n "$ccache_dir" ] && export CCACHE_DIR="$ccache_dir"
fi
export CC=/usr/bin/cc CXX=/usr/bin/c++  # the compiler names of the other builds: ccache hashes them
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
failed=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failed=1; }
command -v shardlint >/dev/null && bad "a shardlint is on PATH before the test: $(command -v shardlint)"

repo="$base/repo"
mkdir -p "$repo" && cd "$repo" && git init -q . && git config commit.gpgsign false
cat > .pre-commit-config.yaml <<YAML
repos:
  - repo: $src
    rev: $rev
    hooks:
      - id: shardlint-pip
YAML
cat > train.py <<'PY'
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from nets import Net
model = Net()
opt = torch.optim.AdamW(model.parameters())
model = FSDP(model)
opt.step()
PY
cat > clean.py <<'PY'
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from nets import Net
model = FSDP(Net())
opt = torch.optim.AdamW(model.parameters())
opt.step()
PY
git add .pre-commit-config.yaml && git commit -qm config --no-verify
pre-commit install >/dev/null || { bad "pre-commit install"; exit 1; }
started=$(date +%s)
git add train.py
out="$(git commit -qm "a bug" 2>&1)"; rc=$?
echo "(the first commit built and installed the hook's environment in $(( $(date +%s) - started )) s)"
if [ "$rc" -ne 0 ] && grep -q "SL101" <<<"$out"; then ok "the hook blocks a commit with an SL101 bug"
else bad "the commit with a bug: exit $rc: $(tail -20 <<<"$out")"; fi
git reset -q train.py && rm train.py
git add clean.py
out="$(git commit -qm "clean" 2>&1)"; rc=$?
if [ "$rc" -eq 0 ] && [ "$(git log --format=%s -1)" = clean ]; then ok "the hook lets a clean commit through"
else bad "the clean commit: exit $rc: $(tail -20 <<<"$out")"; fi
venv="$(ls -d "$PRE_COMMIT_HOME"/repo*/py_env-* 2>/dev/null | head -1)"
if [ -n "$venv" ] && [ -x "$venv/bin/shardlint" ]; then ok "shardlint lives in pre-commit's own environment ($(basename "$venv"))"
else bad "no shardlint in pre-commit's environment"; fi
exit "$failed"
