#!/usr/bin/env bash
# GPU check of the runtime probe, for a machine with one NVIDIA GPU (written for an H200 with
# torch 2.11, accelerate 1.15 and NCCL), no network. Well inside 10 minutes: every step has its
# own timeout. Writes the rank reports and the JSON outputs to fixtures/probe/<date>/ and, when
# $OUT is set, a tarball of them and the log into $OUT.
#
#   runtime_probe/device_bundle.sh        # here, first: build-device/bundle (carry it to the machine)
#   runtime_probe/gpu_check.sh            # there; PYTHON=/path/to/python to pick the interpreter
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
PYTHON="${PYTHON:-python3}"
STAMP="$(date -u +%Y-%m-%d)"
DEST="fixtures/probe/$STAMP"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/shardlint-gpu-check-XXXXXX")"
LOG="$WORK/gpu_check.log"
RUN_TIMEOUT=60          # --timeout: seconds per launched run
START=$SECONDS

exec > >(tee "$LOG") 2>&1
say() { printf '\n=== %s (%ds)\n' "$*" "$((SECONDS - START))"; }

# Replay: a handful of the seed-rule fixtures, one per wrap API and shape.
REPLAY=(
  fixtures/python/SL101_alias.py                          # FSDP2 fully_shard, optimizer before the wrap
  fixtures/python/SL101_fsdp1_orig_params_false.py        # FSDP1, use_orig_params=False
  fixtures/python/SL101_accelerate_fsdp1_plugin.py        # accelerate FSDP1 plugin
  fixtures/python/SL102_free_logit_scale.py               # FSDP2, add_param_group with a free nn.Parameter
  fixtures/python/SL102_accelerate_ctor_free_param.py     # accelerate FSDP2 prepare KeyError
  fixtures/python/SL103_blocks_without_root.py            # fully_shard on the blocks only
  fixtures/python/SL103_ignored_states_fsdp1.py           # FSDP1 ignored_states
)
SCRIPTS=(examples/fsdp2_blocks_only.py examples/fsdp1_optimizer_first.py)

say "build"
# The device image has CUDA, torch, CMake and ninja but not yaml-cpp, fmt or toml++, and no network:
# prefer a bundle made here by runtime_probe/device_bundle.sh (carried as build-device/bundle), then
# a build in place, then scripts/setup.sh.
BUNDLE="${SHARDLINT_BUNDLE:-$root/build-device/bundle}"
# NCCL for the bundled preflight: the device's own PyTorch ships it.
nccl_lib="$("$PYTHON" -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null || true)"
export LD_LIBRARY_PATH="$BUNDLE/lib${nccl_lib:+:$nccl_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SHARDLINT_PROBE_PYTHONPATH="$root/runtime_probe/python"
SL=""
if [ -x "$BUNDLE/bin/shardlint" ] && "$BUNDLE/bin/shardlint" --version; then
  SL="$BUNDLE/bin/shardlint"
  echo "using the carried bundle $BUNDLE"
else
  echo "no usable bundle at $BUNDLE; building here"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  if timeout 60 cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DSHARDLINT_BUILD_TESTS=OFF >/dev/null &&
     timeout 180 cmake --build build -j "$(nproc)"; then
    SL="$root/build/shardlint"
  elif timeout 240 ./scripts/setup.sh; then
    SL="$root/build/shardlint"
  fi
fi
[ -n "$SL" ] && [ -x "$SL" ] || { echo "FAILED: no shardlint to run (carry build-device/bundle from runtime_probe/device_bundle.sh)"; exit 2; }

say "versions"
date -u
nvidia-smi -L || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
timeout 120 "$PYTHON" - <<'EOF' || echo "(the version check failed)"
import sys
print("python", sys.version.split()[0])
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())
    try:
        print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
    except Exception as e:
        print("nccl ?", e)
except Exception as e:
    print("torch: not importable:", e)
try:
    import accelerate
    print("accelerate", accelerate.__version__)
except Exception as e:
    print("accelerate: not importable:", e)
EOF

say "preflight"
timeout 60 "$SL" probe --preflight
echo "preflight exit code: $?"

# run NAME LIMIT ARGS...: one shardlint probe run of at most LIMIT seconds (SIGINT: shardlint kills
# its process groups and exits 130); JSON to $WORK/NAME.json, stderr to $WORK/NAME.err, the kept
# temp folders (replay programs, logs, rank reports) under $WORK/NAME.tmp.
run() {
  local name="$1" limit="$2"; shift 2
  mkdir -p "$WORK/$name.tmp"
  say "$name: shardlint probe $*"
  TMPDIR="$WORK/$name.tmp" timeout -s INT -k 15 "$limit" "$SL" probe --keep --format json --python "$PYTHON" \
    --timeout "$RUN_TIMEOUT" "$@" >"$WORK/$name.json" 2>"$WORK/$name.err"
  local rc=$?
  cat "$WORK/$name.err"
  echo "exit code: $rc"
}

# Outer limits: a replay normally takes 5-15 s (torchrun start, torch import, one step); these only
# bound a run that goes wrong. Expected total: 4-6 minutes including a cold build.
run replay-nccl-1 130 --mode replay --backend nccl --nproc 1 "${REPLAY[@]}"
run replay-gloo-2 150 --mode replay --backend gloo --nproc 2 "${REPLAY[@]}"
run script-fsdp2-blocks 60 --mode script --backend nccl --nproc 1 "${SCRIPTS[0]}"
run script-fsdp1-optimizer 60 --mode script --backend nccl --nproc 1 "${SCRIPTS[1]}" -- --steps 2

say "verdicts"
"$PYTHON" - "$WORK" <<'EOF'
import json, os, sys
work = sys.argv[1]
rows = []
for name in sorted(os.listdir(work)):
    if not name.endswith(".json"):
        continue
    try:
        doc = json.load(open(os.path.join(work, name)))
    except Exception as e:
        rows.append((name[:-5], "-", "-", "(no JSON output: %s)" % e, "", "", ""))
        continue
    for f in doc.get("findings", []):
        p = f.get("probe")
        if not p:
            continue
        rows.append((name[:-5], f["code"], "%s:%d" % (os.path.basename(f["path"]), f["line"]), p["verdict"],
                     "%s/%s" % (p.get("backend"), p.get("world_size")), "%.1fs" % p.get("elapsed_seconds", 0),
                     p.get("evidence", "")[:150]))
w = [max(len(str(r[i])) for r in rows) if rows else 4 for i in range(6)]
for r in rows:
    print("  ".join(str(r[i]).ljust(w[i]) for i in range(6)) + "  " + str(r[6]))
if not rows:
    print("(no verdicts)")
EOF

say "recording"
mkdir -p "$DEST"
for d in "$WORK"/*.tmp; do
  name="$(basename "$d" .tmp)"
  mkdir -p "$DEST/$name"
  cp "$WORK/$name.json" "$DEST/$name/shardlint.json" 2>/dev/null || true
  cp "$WORK/$name.err" "$DEST/$name/shardlint.stderr.txt" 2>/dev/null || true
  # <tmp>/shardlint-probe-*/<finding>/<backend>-<ws>/rank<R>.json -> DEST/<run>/<finding>/<backend>-<ws>/
  find "$d" -name 'rank*.json' | while read -r f; do
    rel="${f#"$d"/}"; rel="${rel#*/}"
    mkdir -p "$DEST/$name/$(dirname "$rel")"
    cp "$f" "$DEST/$name/$rel"
  done
done
cp "$LOG" "$DEST/gpu_check.log" 2>/dev/null || true
echo "rank reports and outputs: $DEST ($(find "$DEST" -name 'rank*.json' | wc -l) reports)"
echo "replay programs and launcher logs: $WORK/*.tmp"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  tar czf "$OUT/gpu_check_${STAMP}.tgz" "$DEST" && cp "$LOG" "$OUT/gpu_check.log"
  echo "copied to $OUT"
fi
say "done"
