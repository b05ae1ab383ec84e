#!/usr/bin/env bash
# shardlint benchmark: one command, everything in one go. See scripts/bench/README.md.
#
#   scripts/bench/run.sh                 # install what is missing, build, generate corpora, measure, write results.md
#   BENCH_RUNS=1 scripts/bench/run.sh    # fewer repetitions (default 3; the best = minimum wall time is kept)
#   BENCH_CORPORA="synth-1x synth-4x" scripts/bench/run.sh   # a subset of: stdlib torch synth-1x synth-4x synth-16x
#   BENCH_OUT=/tmp/results.md scripts/bench/run.sh            # write the report elsewhere
#   SHARDLINT=/path/to/shardlint scripts/bench/run.sh         # measure another binary (skips the build)
#
# Idempotent: Debian packages are installed only when missing, npm packages only when the lockfile
# changed, the parse floor is recompiled only when a source changed, corpora are regenerated only
# when the generator changed. Raw measurements go to scripts/bench/build/raw/ (git-ignored).
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$bench/../.." && pwd)"
cd "$root"

RUNS="${BENCH_RUNS:-3}"
CORPORA="${BENCH_CORPORA:-stdlib torch synth-1x synth-4x synth-16x}"
OUT="${BENCH_OUT:-$bench/results.md}"
PYLINT_SAMPLE=50
log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

# ------------------------------------------------------------------ Debian packages
debs=(time gcc pyflakes3 pylint python3-torch python3)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ! { command -v node >/dev/null && command -v npm >/dev/null; }; then missing+=(nodejs npm); fi
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]} (python3-torch is a large download)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is missing after installing the 'time' package"
PY=/usr/bin/python3   # Debian's python3: the harness helpers are stdlib-only

# ------------------------------------------------------------------ shardlint
if [ -n "${SHARDLINT:-}" ]; then
  SL="$SHARDLINT"
else
  log "building shardlint (scripts/setup.sh, incremental)"
  "$root/scripts/setup.sh" >/dev/null
  SL="$root/build/shardlint"
fi
[ -x "$SL" ] || die "no shardlint binary at $SL"
# Measure a private copy: a rebuild of build/shardlint during the run must not change what is measured.
mkdir -p "$bench/build"
cp "$SL" "$bench/build/shardlint-under-test"
SL="$bench/build/shardlint-under-test"

# ------------------------------------------------------------------ npm: Ruff's wasm build
stamp="$bench/node_modules/.bench-lock.sha256"
want="$(sha256sum "$bench/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || [ ! -d "$bench/node_modules/@astral-sh/ruff-wasm-nodejs" ]; then
  log "installing pinned npm packages from scripts/bench/package-lock.json"
  (cd "$bench" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

# ------------------------------------------------------------------ parse-only floor
mkdir -p "$bench/build"
TS="$root/third_party/node_modules/tree-sitter/vendor/tree-sitter/lib"
TSPY="$root/third_party/node_modules/tree-sitter-python/src"
floor_src=("$bench/parse_floor.c" "$TS/src/lib.c" "$TSPY/parser.c" "$TSPY/scanner.c")
FLOOR="$bench/build/parse_floor"
for f in "${floor_src[@]}"; do [ -f "$f" ] || die "missing $f (run scripts/setup.sh)"; done
rebuild=0
[ -x "$FLOOR" ] || rebuild=1
for f in "${floor_src[@]}"; do [ "$f" -nt "$FLOOR" ] && rebuild=1; done
if [ "$rebuild" = 1 ]; then
  log "compiling the parse-only floor (gcc -O2, same tree-sitter sources as shardlint)"
  gcc -O2 -DNDEBUG -std=gnu11 -w -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200112L \
      -I"$TS/include" -I"$TS/src" -I"$TSPY" -o "$FLOOR.tmp" "${floor_src[@]}"
  mv "$FLOOR.tmp" "$FLOOR"
fi

# ------------------------------------------------------------------ corpora
corpus_path() {
  case "$1" in
    stdlib) echo /usr/lib/python3.11 ;;
    torch)
      local init
      init="$(dpkg -L python3-torch | grep '/torch/__init__.py$' | head -1)"
      [ -n "$init" ] || die "python3-torch installs no torch/__init__.py"
      dirname "$init" ;;
    synth-*) echo "$bench/corpus/$1" ;;
    *) die "unknown corpus $1" ;;
  esac
}
for c in $CORPORA; do
  case "$c" in
    synth-*x)
      n="${c#synth-}"; n="${n%x}"
      dir="$bench/corpus/$c"
      want="$(cat "$bench/gen_corpus.py" | sha256sum | cut -d' ' -f1) $n"
      if [ ! -f "$dir/.stamp" ] || [ "$(cat "$dir/.stamp")" != "$want" ]; then
        log "generating $c"
        "$PY" "$bench/gen_corpus.py" "$n" "$dir" >&2
        echo "$want" > "$dir/.stamp"
      fi ;;
  esac
  [ -d "$(corpus_path "$c")" ] || die "corpus $c: $(corpus_path "$c") is not a directory"
done

# ------------------------------------------------------------------ what this shardlint build supports
SL_HELP="$("$SL" check --help 2>&1 || true)"
HAS_JOBS=0; HAS_STATS=0
grep -q -- '--jobs' <<<"$SL_HELP" && HAS_JOBS=1
grep -q -- '--stats' <<<"$SL_HELP" && HAS_STATS=1
[ "$HAS_JOBS" = 1 ] || log "this shardlint has no --jobs: the '--jobs 1' row runs without the flag"
[ "$HAS_STATS" = 1 ] || log "this shardlint has no --stats: no per-phase statistics"

# ------------------------------------------------------------------ measurement
# Other processes on a 2-core machine (a build, a test suite) distort every number: before each
# round, wait (up to BENCH_WAIT seconds, default 300) until the CPUs are at most BENCH_MAX_BUSY %
# busy (default 15) over a 2 s window, and record what was seen so the report can say so.
cpu_busy_pct() {
  local _ a b c d e f g h t1 i1 t2 i2
  read -r _ a b c d e f g h _ < /proc/stat; t1=$((a + b + c + d + e + f + g + h)); i1=$((d + e))
  sleep 2
  read -r _ a b c d e f g h _ < /proc/stat; t2=$((a + b + c + d + e + f + g + h)); i2=$((d + e))
  echo $(( (100 * ((t2 - t1) - (i2 - i1))) / ((t2 - t1) > 0 ? (t2 - t1) : 1) ))
}
wait_quiet() {  # wait_quiet LABEL -> appends "LABEL busy%" to $RAW/busy.tsv
  local waited=0 busy
  busy="$(cpu_busy_pct)"
  while [ "$busy" -gt "${BENCH_MAX_BUSY:-15}" ] && [ "$waited" -lt "${BENCH_WAIT:-300}" ]; do
    [ $((waited % 30)) -eq 0 ] && log "other processes keep the CPUs ${busy}% busy; waiting for a quiet machine"
    sleep 3; waited=$((waited + 5))
    busy="$(cpu_busy_pct)"
  done
  [ "$busy" -gt "${BENCH_MAX_BUSY:-15}" ] && log "still ${busy}% busy after ${waited} s; measuring anyway (noted in the report)"
  printf '%s\t%s\t%s\n' "$1" "$busy" "$waited" >> "$RAW/busy.tsv"
}

RAW="$bench/build/raw"
rm -rf "$RAW"; mkdir -p "$RAW"
TOOLS=(shardlint shardlint-j1 ruff-wasm ruff-wasm-liftoff pyflakes pylint parse-floor)

# tool_cmd TOOL DIR SAMPLEFILE -> sets the array CMD
tool_cmd() {
  local tool="$1" dir="$2" sample="$3"
  case "$tool" in
    shardlint) CMD=("$SL" check "$dir" -q) ;;
    shardlint-j1)
      if [ "$HAS_JOBS" = 1 ]; then CMD=("$SL" check "$dir" -q --jobs 1); else CMD=("$SL" check "$dir" -q); fi ;;
    ruff-wasm) CMD=(node "$bench/ruff_wasm.mjs" "$dir") ;;
    # V8's baseline wasm compiler only: no optimizing (TurboFan) compilation of the 10 MB module,
    # which otherwise runs on background threads and holds up the process exit
    ruff-wasm-liftoff) CMD=(node --liftoff-only "$bench/ruff_wasm.mjs" "$dir") ;;
    pyflakes) CMD=(pyflakes3 "$dir") ;;
    pylint)
      local files=()
      mapfile -t files < "$sample"
      CMD=(pylint --disable=all --enable=E,W --jobs=1 --score=n --persistent=n --reports=n "${files[@]}") ;;
    parse-floor) CMD=("$FLOOR" "$dir") ;;
  esac
}

# CPU jiffies the whole machine spent busy (user nice system irq softirq steal) since boot
busy_jiffies() {
  local _ a b c d e f g h
  read -r _ a b c d e f g h _ < /proc/stat
  echo $((a + b + c + f + g + h))
}
HZ="$(getconf CLK_TCK 2>/dev/null || echo 100)"

# measure CORPUS TOOL RUN DIR SAMPLE: one run under GNU time; appends a line to measurements.tsv with
# the CPU seconds that other processes used meanwhile (machine busy time minus the tool's own CPU time)
measure() {
  local corpus="$1" tool="$2" run="$3" dir="$4" sample="$5"
  local d="$RAW/$corpus/$tool"; mkdir -p "$d"
  tool_cmd "$tool" "$dir" "$sample"
  printf '%q ' "${CMD[@]:0:12}" > "$d/cmd.txt"; [ "${#CMD[@]}" -gt 12 ] && printf '... (%d args)' "${#CMD[@]}" >> "$d/cmd.txt"
  local rc=0 j0 j1
  j0="$(busy_jiffies)"
  (cd "$root" && /usr/bin/time -f '%e %U %S %M' -o "$d/time.$run" "${CMD[@]}" > "$d/out.$run" 2> "$d/err.$run") || rc=$?
  j1="$(busy_jiffies)"
  local t; t="$(tail -n 1 "$d/time.$run" 2>/dev/null || true)"
  local other; other="$(awk -v j="$((j1 - j0))" -v hz="$HZ" -v t="$t" 'BEGIN { split(t, f, " "); o = j / hz - f[2] - f[3]; if (o < 0) o = 0; printf "%.2f", o }')"
  grep -q 'Command terminated by signal' "$d/time.$run" 2>/dev/null && rc="signal:$(grep -o 'signal [0-9]*' "$d/time.$run" | cut -d' ' -f2)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$corpus" "$tool" "$run" "$rc" "$t" "$other" >> "$RAW/measurements.tsv"
  # contended: other processes used more than 10% of a core on average (and over 0.05 CPU-s); harness.py agrees
  LAST_CONTENDED="$(awk -v o="$other" -v t="$t" 'BEGIN { split(t, f, " "); print (o > 0.10 * f[1] && o > 0.05) ? 1 : 0 }')"
  log "  $corpus $tool run $run: rc=$rc wall/user/sys/rssKB=$t other-CPU=${other}s"
}

printf 'corpus\ttool\trun\trc\twall user sys maxrss_kb\tother_cpu_s\n' > "$RAW/measurements.tsv"
printf 'round\tbusy_pct\twaited_s\n' > "$RAW/busy.tsv"
printf 'corpus\tpath\n' > "$RAW/corpora.tsv"
for c in $CORPORA; do
  dir="$(corpus_path "$c")"
  printf '%s\t%s\n' "$c" "$dir" >> "$RAW/corpora.tsv"
  mkdir -p "$RAW/$c"
  # the file list shardlint's discovery sees, sorted; the pylint sample is its first 50 files
  "$PY" "$bench/harness.py" discover "$dir" > "$RAW/$c/files.txt"
  head -n "$PYLINT_SAMPLE" "$RAW/$c/files.txt" > "$RAW/$c/pylint_sample.txt"
  "$PY" "$bench/harness.py" count-all "$dir" > "$RAW/$c/all_py_count.txt"
  log "corpus $c: $dir ($(wc -l < "$RAW/$c/files.txt") files by shardlint's discovery)"
  # warm the page cache so no tool pays for the first read
  find "$dir" -name '*.py' -type f -print0 | xargs -0 cat > /dev/null
  if [ "$HAS_STATS" = 1 ]; then
    "$SL" check "$dir" -q --stats > /dev/null 2> "$RAW/$c/stats.default.txt" || true
    if [ "$HAS_JOBS" = 1 ]; then "$SL" check "$dir" -q --jobs 1 --stats > /dev/null 2> "$RAW/$c/stats.j1.txt" || true; fi
  fi
  declare -A clean=()
  for run in $(seq 1 "$RUNS"); do
    wait_quiet "$c/$run"
    for tool in "${TOOLS[@]}"; do
      measure "$c" "$tool" "$run" "$dir" "$RAW/$c/pylint_sample.txt"
      [ "$LAST_CONTENDED" = 1 ] || clean[$tool]=1
    done
  done
  # a tool whose every run was disturbed by other processes gets up to BENCH_RETRIES (default 2) more runs
  for tool in "${TOOLS[@]}"; do
    run="$RUNS"
    while [ -z "${clean[$tool]:-}" ] && [ "$run" -lt $((RUNS + ${BENCH_RETRIES:-2})) ]; do
      run=$((run + 1))
      wait_quiet "$c/$run"
      measure "$c" "$tool" "$run" "$dir" "$RAW/$c/pylint_sample.txt"
      [ "$LAST_CONTENDED" = 1 ] || clean[$tool]=1
    done
  done
  unset clean
done

# Ruff wasm's fixed cost (Node start-up + compiling the 10 MB wasm module), on an empty directory
empty="$bench/build/empty"; mkdir -p "$empty"
for run in $(seq 1 "$RUNS"); do
  measure _empty ruff-wasm "$run" "$empty" /dev/null
  measure _empty ruff-wasm-liftoff "$run" "$empty" /dev/null
done

# ------------------------------------------------------------------ environment + report
{
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'cpu\t%s\n' "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
  printf 'cores\t%s\n' "$(nproc)"
  printf 'memory\t%s\n' "$(free -h | awk '/^Mem:/ {print $2}')"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'shardlint_sha256\t%s\n' "$(sha256sum "$SL" | cut -c1-16)"
  printf 'shardlint\t%s (commit %s)\n' "$("$SL" --version 2>&1 | head -1)" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD -- analyzer rules CMakeLists.txt 2>/dev/null || echo ' + uncommitted changes in analyzer/, rules/ or CMakeLists.txt')"
  printf 'has_jobs\t%s\n' "$HAS_JOBS"
  printf 'has_stats\t%s\n' "$HAS_STATS"
  printf 'runs\t%s\n' "$RUNS"
  printf 'max_busy\t%s\n' "${BENCH_MAX_BUSY:-15}"
  printf 'retries\t%s\n' "${BENCH_RETRIES:-2}"
  printf 'pylint_sample\t%s\n' "$PYLINT_SAMPLE"
  printf 'ruff\t%s\n' "$(cd "$bench" && node -e 'console.log(require("@astral-sh/ruff-wasm-nodejs").Workspace.version())' 2>&1)"
  printf 'node\t%s\n' "$(node --version)"
  printf 'pyflakes\t%s\n' "$(pyflakes3 --version 2>&1 | head -1)"
  printf 'pylint\t%s\n' "$(pylint --version 2>&1 | head -2 | tr '\n' ' ')"
  printf 'torch\t%s\n' "$(dpkg-query -W -f='${Version}' python3-torch)"
  printf 'python\t%s\n' "$(/usr/bin/python3 --version 2>&1)"
  printf 'gcc\t%s\n' "$(gcc --version | head -1)"
} > "$RAW/env.tsv"
"$PY" "$bench/harness.py" report "$RAW" "$OUT"
log "wrote $OUT"
