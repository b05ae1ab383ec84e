#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan, build-fuzz/) and runs one of them.
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer options...]
#   scripts/fuzz.sh list
#
# TARGET: python | yaml | json | settings | lsp | project (tests/fuzz/FuzzTargets.h).
# Idempotent: the clang packages are installed only when missing, the build is incremental,
# the seeds (build-fuzz/seeds/TARGET, from fixtures/) are regenerated, the corpus
# (build-fuzz/corpus/TARGET) grows from run to run. Crashes go to build-fuzz/artifacts/TARGET/,
# the log to build-fuzz/logs/. Environment: FUZZ_BUILD_JOBS (default 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf '[fuzz] %s\n' "$*" >&2; }

targets=(python yaml json settings lsp project)
if [ "${1:-}" = "list" ]; then printf '%s\n' "${targets[@]}"; exit 0; fi
if [ $# -lt 2 ] || ! printf '%s\n' "${targets[@]}" | grep -qx -- "$1" || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer options...]   (TARGET: ${targets[*]})" >&2
  exit 2
fi
target="$1"; seconds="$2"; shift 2

# --- Debian packages: clang 14 and its sanitizer/libFuzzer runtimes --------------------------
debs=(clang-14 libclang-rt-14-dev llvm-14 python3)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -f third_party/src/python-grammar/src/parser.c ]; then
  echo "tree-sitter sources missing under third_party/src; run scripts/setup.sh first" >&2
  exit 1
fi

# --- build (separate tree; tcmalloc off: the sanitizers bring their own allocator) ----------
bdir="$root/build-fuzz"
san="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$bdir/CMakeCache.txt" ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  log "configuring $bdir"
  cmake -S . -B "$bdir" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
    -DSHARDLINT_FUZZ=ON -DSHARDLINT_CXX=OFF -DSHARDLINT_BUILD_TESTS=OFF -DSHARDLINT_TCMALLOC=OFF -DSHARDLINT_BUILD_PREFLIGHT=OFF >/dev/null
fi
cmake --build "$bdir" -j "${FUZZ_BUILD_JOBS:-2}" --target "fuzz_$target"

# --- seeds from fixtures/ ----------------------------------------------------------------
seeds="$bdir/seeds/$target"
rm -rf "$seeds"; mkdir -p "$seeds"
copy_seeds() {  # copy_seeds NAME-PATTERN...: fixture files matching any pattern
  local args=() first=1
  for pat in "$@"; do
    [ $first -eq 1 ] || args+=(-o)
    args+=(-name "$pat"); first=0
  done
  find fixtures tests/parse_corpus examples -type f \( "${args[@]}" \) -print0 2>/dev/null |
    while IFS= read -r -d '' f; do cp "$f" "$seeds/$(printf '%s' "$f" | tr '/' '_')"; done
}
case "$target" in
  python) copy_seeds '*.py' ;;
  yaml) copy_seeds '*.yaml' '*.yml' ;;
  json) copy_seeds '*.json' ;;
  settings)
    copy_seeds '*.toml'
    printf 'select = ["SL1", "SL301"]\nextend-select = ["SL003"]\nignore = ["SL102"]\nexclude = ["**/gen/*.py", "build"]\nroots = ["src"]\naccelerate-config = "configs/fsdp.yaml"\nfsdp-version = 2\noptimizers = ["helpers.make_optimizer"]\nwraps = ["helpers.shard"]\njobs = 2\n[per-file-ignores]\n"tests/**" = ["SL101", "ALL"]\n"*.py" = ["SL3"]\n[severity]\nSL301 = "info"\nSL101 = "warning"\n' >"$seeds/shardlint.toml"
    printf '[project]\nname = "x"\n[tool.shardlint]\nselect = ["ALL"]\nexclude = ["a?b/**", "*.{py}"]\n[tool.shardlint.severity]\nSL401 = "hint"\n' >"$seeds/pyproject.toml"
    printf '[tool.shardlint]\nfsdp-version = 3\n' >"$seeds/bad_version.toml"
    printf 'unknown = 1\n' >"$seeds/unknown_key.toml"
    ;;
  lsp)
    python3 "$root/tests/fuzz/lsp_seeds.py" "$seeds" fixtures/python/*.py fixtures/config/*.yaml fixtures/config/*.json ;;
  project)
    for d in fixtures/projects/*/; do
      name="$(basename "$d")"
      (cd "$d" && find . -type f ! -name '*.expected' ! -name '*.md' | sort | while read -r f; do
        printf '### %s\n' "${f#./}"; cat "$f"; echo
      done) >"$seeds/$name"
    done ;;
esac
log "$(find "$seeds" -type f | wc -l) seeds in $seeds"

# --- run -------------------------------------------------------------------------------------
corpus="$bdir/corpus/$target"; artifacts="$bdir/artifacts/$target"; logs="$bdir/logs"
mkdir -p "$corpus" "$artifacts" "$logs"
opts=(-max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts/")
case "$target" in python|project) opts+=(-dict="$root/tests/fuzz/python.dict") ;; esac
logfile="$logs/$target-$(date -u +%Y%m%dT%H%M%SZ).log"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:intercept_tls_get_addr=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
command -v llvm-symbolizer-14 >/dev/null && export ASAN_SYMBOLIZER_PATH="$(command -v llvm-symbolizer-14)"
log "running fuzz_$target for ${seconds}s (log: $logfile)"
set +e
"$bdir/fuzz/fuzz_$target" "${opts[@]}" "$@" "$corpus" "$seeds" 2>&1 | tee "$logfile"
rc=${PIPESTATUS[0]}
set -e
summary="$(grep -E '^#[0-9]+.*(DONE|INITED)' "$logfile" | tail -n 1 || true)"
log "fuzz_$target exit $rc; $(grep -E 'stat::number_of_executed_units' "$logfile" | tail -n 1 || true); last: $summary"
[ "$rc" -eq 0 ] || log "crash inputs: $(ls "$artifacts" 2>/dev/null | tr '\n' ' ')"
exit "$rc"
