#!/usr/bin/env bash
# shardlint benchmark: one command, everything in one go. See scripts/bench/README.md.
#
#   scripts/bench/run.sh                 # install what is missing, build, generate corpora, measure, write results.md
#   BENCH_RUNS=1 scripts/bench/run.sh    # fewer repetitions (default 3; the best = minimum wall time is kept)
#   BENCH_CORPORA="synth-1x synth-4x" scripts/bench/run.sh   # a subset of: stdlib torch synth-1x synth-4x synth-16x
#                                        # dense torchtitan pytorch-lightning composer accelerate diffusers (checkouts)
#   BENCH_ECO_CACHE=~/eco scripts/bench/run.sh   # where the checkouts are (ecosystem/check.py's cache; default /work/eco-cache)
#   BENCH_LSP=0 scripts/bench/run.sh     # no editor-latency measurement on the checkouts
#   BENCH_OUT=/tmp/results.md scripts/bench/run.sh            # write the report elsewhere
#   SHARDLINT=/path/to/shardlint scripts/bench/run.sh         # measure another binary (skips the build)
#
# Idempotent: Debian packages are installed only when missing, native Ruff (PyPI, pinned by hash in
# requirements-bench.txt) only when that file changed, the parse floor is recompiled only when a source
# changed, corpora are regenerated only when the generator changed. Raw measurements go to scripts/bench/build/raw/ (git-ignored).
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$bench/../.." && pwd)"
cd "$root"

RUNS="${BENCH_RUNS:-3}"
# Checkouts of real training repositories, as ecosystem/check.py leaves them (CACHE/NAME/)
ECO="${BENCH_ECO_CACHE:-/work/eco-cache}"
export BENCH_ECO_CACHE="$ECO"
DEFAULT_CORPORA="stdlib torch synth-1x synth-4x synth-16x"
[ -d "$ECO" ] && DEFAULT_CORPORA+=" dense accelerate"
CORPORA="${BENCH_CORPORA:-$DEFAULT_CORPORA}"
OUT="${BENCH_OUT:-$bench/results.md}"
PYLINT_SAMPLE=50
log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] error: %s\n' "$*" >&2; exit 1; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

# ------------------------------------------------------------------ Debian packages
# pylint only for the corpora it runs on (not the checkouts), python3-torch only for the torch corpus
debs=(time gcc pyflakes3 python3 python3-venv)
for c in $CORPORA; do
  case "$c" in
    torch) debs+=(python3-torch pylint) ;;
    stdlib|synth-*) debs+=(pylint) ;;
  esac
done
mapfile -t debs < <(printf '%s\n' "${debs[@]}" | awk '!seen[$0]++')
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
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

# ------------------------------------------------------------------ native Ruff from PyPI, pinned by hash
# requirements-bench.txt pins the version and the wheel's sha256; pip installs it into a private venv
# (scripts/bench/build/venv, git-ignored) with --require-hashes, again only when that file changed.
VENV="$bench/build/venv"
REQ="$bench/requirements-bench.txt"
. "$root/scripts/lib/pinned-venv.sh"
if ! pinned_venv_current "$VENV" "$REQ" || [ ! -x "$VENV/bin/ruff" ]; then
  log "installing native Ruff pinned by hash in scripts/bench/requirements-bench.txt into scripts/bench/build/venv"
  pinned_venv_make "$PY" "$VENV" "$REQ" || die "could not make $VENV (Debian: apt-get install python3-venv)"
fi
RUFF="$VENV/bin/ruff"
[ -x "$RUFF" ] || die "no ruff at $RUFF after installing scripts/bench/requirements-bench.txt"

# ------------------------------------------------------------------ parse-only floor
mkdir -p "$bench/build"
# BENCH_THIRD_PARTY: the folder scripts/setup.sh extracts the pinned tree-sitter sources into (default: this
# checkout's third_party/src; a git worktree without one uses the main worktree's)
TP="${BENCH_THIRD_PARTY:-$root/third_party/src}"
if [ -z "${BENCH_THIRD_PARTY:-}" ] && [ ! -f "$TP/runtime/tree_sitter/core/lib/src/lib.c" ]; then
  main_wt="$(cd "$root" && cd "$(git rev-parse --git-common-dir 2>/dev/null || echo .)" && cd .. && pwd)"
  if [ -f "$main_wt/third_party/src/runtime/tree_sitter/core/lib/src/lib.c" ]; then
    TP="$main_wt/third_party/src"
    log "no third_party/src here: the parse floor uses $TP"
  fi
fi
TS="$TP/runtime/tree_sitter/core/lib"           # the runtime: include/ and src/lib.c
TSPY="$TP/python-grammar/src"                   # the grammar: parser.c, scanner.c
TSPY_INC="$TP/python-grammar-include"           # the grammar's tree_sitter/parser.h (as CMakeLists.txt uses it)
floor_src=("$bench/parse_floor.c" "$TS/src/lib.c" "$TSPY/parser.c" "$TSPY/scanner.c" "$TSPY_INC/tree_sitter/parser.h")
FLOOR="$bench/build/parse_floor"
for f in "${floor_src[@]}"; do [ -f "$f" ] || die "missing $f (run scripts/setup.sh)"; done
rebuild=0
[ -x "$FLOOR" ] || rebuild=1
for f in "${floor_src[@]}"; do [ "$f" -nt "$FLOOR" ] && rebuild=1; done
if [ "$rebuild" = 1 ]; then
  log "compiling the parse-only floor (gcc -O2, same tree-sitter sources as shardlint)"
  # each part with the include path CMakeLists.txt gives it: the runtime with its include/ and src/, the grammar
  # with its own src/ and the grammar header folder
  objs="$bench/build/parse_floor.objs"; rm -rf "$objs"; mkdir -p "$objs"
  cflags=(-O2 -DNDEBUG -std=gnu11 -w -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200112L)
  gcc "${cflags[@]}" -I"$TS/include" -I"$TS/src" -c "$TS/src/lib.c" -o "$objs/lib.o"
  gcc "${cflags[@]}" -I"$TSPY" -I"$TSPY_INC" -c "$TSPY/parser.c" -o "$objs/parser.o"
  gcc "${cflags[@]}" -I"$TSPY" -I"$TSPY_INC" -c "$TSPY/scanner.c" -o "$objs/scanner.o"
  gcc "${cflags[@]}" -I"$TS/include" -c "$bench/parse_floor.c" -o "$objs/parse_floor.o"
  gcc -o "$FLOOR.tmp" "$objs/parse_floor.o" "$objs/lib.o" "$objs/parser.o" "$objs/scanner.o"
  mv "$FLOOR.tmp" "$FLOOR"
fi

RAW="$bench/build/raw"
rm -rf "$RAW"; mkdir -p "$RAW"

# ------------------------------------------------------------------ corpora
# The checkout corpora: each NAME is $ECO/NAME; `dense` is three of them in one run (their three directories
# are passed on the command line of every tool).
eco_members() {
  case "$1" in
    dense) echo torchtitan pytorch-lightning composer ;;
    torchtitan|pytorch-lightning|composer|accelerate|diffusers) echo "$1" ;;
  esac
}
is_eco() { [ -n "$(eco_members "$1")" ]; }
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
printf 'corpus\twhy\n' > "$RAW/skipped.tsv"
MEASURED=()
for c in $CORPORA; do
  if is_eco "$c"; then
    missing=()
    for n in $(eco_members "$c"); do [ -d "$ECO/$n" ] || missing+=("$n"); done
    if [ "${#missing[@]}" -gt 0 ]; then
      why="no checkout of ${missing[*]} in $ECO (BENCH_ECO_CACHE). Produce it with ecosystem/check.py (see ecosystem/README.md): python3 ecosystem/check.py --cache $ECO --fetch$(printf ' --repo %s' "${missing[@]}") (network), or offline from a local git directory: python3 ecosystem/check.py --cache $ECO$(for m in "${missing[@]}"; do printf ' --from-git-dir %s=/path/to/%s.git' "$m" "$m"; done)"
      log "corpus $c skipped: $why"
      printf '%s\t%s\n' "$c" "$why" >> "$RAW/skipped.tsv"
      continue
    fi
    MEASURED+=("$c")
    continue
  fi
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
  MEASURED+=("$c")
done
[ "${#MEASURED[@]}" -gt 0 ] || log "no corpus left to measure"
# corpus_dirs CORPUS -> sets the array DIRS (what every tool is given) and, for the checkouts, COPY_DIRS
ECO_COPY="$bench/corpus/eco"
corpus_dirs() {
  DIRS=(); COPY_DIRS=()
  if is_eco "$1"; then
    local n
    for n in $(eco_members "$1"); do DIRS+=("$ECO/$n"); COPY_DIRS+=("$ECO_COPY/$n"); done
  else
    DIRS=("$(corpus_path "$1")")
  fi
}
# Private copies of the checkouts, made afresh in every run: the cache rows change a file and write a cache,
# the language server may write next to its workspace; the checkouts in $ECO are only ever read.
declare -A COPIED=()
copy_checkout() {
  [ -n "${COPIED[$1]:-}" ] && return 0
  mkdir -p "$ECO_COPY"
  rm -rf "$ECO_COPY/$1"
  cp -R -H --preserve=mode,timestamps "$ECO/$1" "$ECO_COPY/$1"   # -H: a symlinked checkout is copied, not linked
  COPIED[$1]=1
}

# ------------------------------------------------------------------ what this shardlint build supports
SL_HELP="$("$SL" check --help 2>&1 || true)"
HAS_JOBS=0; HAS_STATS=0
grep -q -- '--jobs' <<<"$SL_HELP" && HAS_JOBS=1
grep -q -- '--stats' <<<"$SL_HELP" && HAS_STATS=1
[ "$HAS_JOBS" = 1 ] || log "this shardlint has no --jobs: the '--jobs 1' row runs without the flag"
[ "$HAS_STATS" = 1 ] || log "this shardlint has no --stats: no per-phase statistics"
# A persistent cache (`check --cache-dir DIR`, `--no-cache`): cache rows on the checkout corpora, and the other
# shardlint rows must neither use a cache nor write one into the corpus (/usr/lib/python3.11, the checkouts).
SL_TOP_HELP="$("$SL" --help 2>&1 || true)"
HAS_CACHE=0; HAS_NO_CACHE=0
grep -q -- '--cache-dir' <<<"$SL_HELP$SL_TOP_HELP" && HAS_CACHE=1
grep -q -- '--no-cache' <<<"$SL_HELP$SL_TOP_HELP" && HAS_NO_CACHE=1
FRESH_CACHE="$bench/build/cache/fresh"
MAIN_CACHE=()
if [ "$HAS_NO_CACHE" = 1 ]; then
  MAIN_CACHE=(--no-cache)
elif [ "$HAS_CACHE" = 1 ]; then
  MAIN_CACHE=(--cache-dir "$FRESH_CACHE")   # emptied before each run
fi
if [ "$HAS_CACHE" = 1 ]; then
  log "this shardlint has a cache: the default rows run with ${MAIN_CACHE[*]}; cold/warm/one-file cache rows for the checkouts"
else
  log "this shardlint has no cache (no --cache-dir in its help): no cold/warm/one-file cache rows"
fi

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

# tools_for CORPUS -> sets the array TOOLS: pylint is not run on the checkouts (minutes for a 50-file sample
# that says little about them); the cache rows only on the checkouts, and only with a cache
tools_for() {
  TOOLS=(shardlint shardlint-j1 ruff pyflakes)
  is_eco "$1" || TOOLS+=(pylint)
  TOOLS+=(parse-floor)
  if is_eco "$1" && [ "$HAS_CACHE" = 1 ]; then
    [ "$HAS_NO_CACHE" = 1 ] && TOOLS+=(shardlint-cold)
    TOOLS+=(shardlint-cold-fill shardlint-warm shardlint-one-file)
  fi
}

# tool_cmd TOOL SAMPLEFILE -> sets the array CMD; the tools get DIRS (the cache rows: COPY_DIRS)
tool_cmd() {
  local tool="$1" sample="$2"
  case "$tool" in
    shardlint) CMD=("$SL" check "${DIRS[@]}" -q "${MAIN_CACHE[@]}") ;;
    shardlint-j1)
      if [ "$HAS_JOBS" = 1 ]; then CMD=("$SL" check "${DIRS[@]}" -q "${MAIN_CACHE[@]}" --jobs 1)
      else CMD=("$SL" check "${DIRS[@]}" -q "${MAIN_CACHE[@]}"); fi ;;
    # native Ruff, pyflakes rules only, on all cores (Ruff's own default parallelism), no cache; --exit-zero:
    # findings do not make the exit status non-zero, so any non-zero exit is a failure
    ruff) CMD=("$RUFF" check --select F --no-cache --exit-zero "${DIRS[@]}") ;;
    pyflakes) CMD=(pyflakes3 "${DIRS[@]}") ;;
    pylint)
      local files=()
      mapfile -t files < "$sample"
      CMD=(pylint --disable=all --enable=E,W --jobs=1 --score=n --persistent=n --reports=n "${files[@]}") ;;
    parse-floor) CMD=("$FLOOR" "${DIRS[@]}") ;;
    shardlint-cold) CMD=("$SL" check "${COPY_DIRS[@]}" -q --no-cache) ;;
    shardlint-cold-fill|shardlint-warm|shardlint-one-file) CMD=("$SL" check "${COPY_DIRS[@]}" -q --cache-dir "$CACHE_DIR") ;;
  esac
}

# ------------------------------------------------------------------ cache rows: state of the cache and the copy
# CACHE_DIR holds what the last cache run of this corpus left: CACHE_STATE is empty, orig (the copy as it is),
# changed (the one-file change, since undone) or unknown (that run failed). ONE_FILE is the file of the copy the
# one-file row appends a comment line to; ONE_FILE_ORIG its pristine bytes and mtime.
CACHE_DIR=""; CACHE_STATE=empty; ONE_FILE=""; ONE_FILE_ORIG=""
restore_one_file() {
  [ -n "$ONE_FILE" ] || return 0
  cmp -s "$ONE_FILE_ORIG" "$ONE_FILE" || cp -p "$ONE_FILE_ORIG" "$ONE_FILE"
}
fill_cache() {  # an untimed run that leaves the cache matching the copy
  "$SL" check "${COPY_DIRS[@]}" -q --cache-dir "$CACHE_DIR" > /dev/null 2>&1 || true
  CACHE_STATE=orig
}
before_run() {  # before_run TOOL: put the cache and the copy in the state the row measures
  case "$1" in
    shardlint|shardlint-j1) [ "$HAS_CACHE" = 1 ] && [ "$HAS_NO_CACHE" = 0 ] && rm -rf "$FRESH_CACHE" ;;
    shardlint-cold) restore_one_file ;;
    shardlint-cold-fill) restore_one_file; rm -rf "$CACHE_DIR"; CACHE_STATE=empty ;;
    shardlint-warm) restore_one_file; [ "$CACHE_STATE" = orig ] || fill_cache ;;
    shardlint-one-file)
      restore_one_file; [ "$CACHE_STATE" = orig ] || fill_cache
      [ -n "$(tail -c 1 "$ONE_FILE")" ] && printf '\n' >> "$ONE_FILE"   # no final newline: do not join the last line
      printf '# shardlint bench: a one-file change\n' >> "$ONE_FILE" ;;
  esac
  return 0
}
after_run() {  # after_run TOOL RC
  local ok=0
  [ "$2" = 0 ] || [ "$2" = 1 ] && ok=1
  case "$1" in
    shardlint-cold-fill|shardlint-warm) if [ "$ok" = 1 ]; then CACHE_STATE=orig; else CACHE_STATE=unknown; fi ;;
    shardlint-one-file) CACHE_STATE=changed; restore_one_file ;;
  esac
  return 0
}

# CPU jiffies the whole machine spent busy (user nice system irq softirq steal) since boot
busy_jiffies() {
  local _ a b c d e f g h
  read -r _ a b c d e f g h _ < /proc/stat
  echo $((a + b + c + f + g + h))
}
HZ="$(getconf CLK_TCK 2>/dev/null || echo 100)"

# measure CORPUS TOOL RUN SAMPLE: one run under GNU time on DIRS (or COPY_DIRS); appends a line to
# measurements.tsv with the CPU seconds that other processes used meanwhile (machine busy time minus the
# tool's own CPU time)
measure() {
  local corpus="$1" tool="$2" run="$3" sample="$4"
  local d="$RAW/$corpus/$tool"; mkdir -p "$d"
  tool_cmd "$tool" "$sample"
  before_run "$tool"
  printf '%q ' "${CMD[@]:0:12}" > "$d/cmd.txt"; [ "${#CMD[@]}" -gt 12 ] && printf '... (%d args)' "${#CMD[@]}" >> "$d/cmd.txt"
  local rc=0 j0 j1
  j0="$(busy_jiffies)"
  (cd "$root" && /usr/bin/time -f '%e %U %S %M' -o "$d/time.$run" "${CMD[@]}" > "$d/out.$run" 2> "$d/err.$run") || rc=$?
  j1="$(busy_jiffies)"
  local t; t="$(tail -n 1 "$d/time.$run" 2>/dev/null || true)"
  local other; other="$(awk -v j="$((j1 - j0))" -v hz="$HZ" -v t="$t" 'BEGIN { split(t, f, " "); o = j / hz - f[2] - f[3]; if (o < 0) o = 0; printf "%.2f", o }')"
  grep -q 'Command terminated by signal' "$d/time.$run" 2>/dev/null && rc="signal:$(grep -o 'signal [0-9]*' "$d/time.$run" | cut -d' ' -f2)"
  after_run "$tool" "$rc"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$corpus" "$tool" "$run" "$rc" "$t" "$other" >> "$RAW/measurements.tsv"
  # contended: other processes used more than 10% of a core on average (and over 0.05 CPU-s); harness.py agrees
  LAST_CONTENDED="$(awk -v o="$other" -v t="$t" 'BEGIN { split(t, f, " "); print (o > 0.10 * f[1] && o > 0.05) ? 1 : 0 }')"
  log "  $corpus $tool run $run: rc=$rc wall/user/sys/rssKB=$t other-CPU=${other}s"
}

printf 'corpus\ttool\trun\trc\twall user sys maxrss_kb\tother_cpu_s\n' > "$RAW/measurements.tsv"
printf 'round\tbusy_pct\twaited_s\n' > "$RAW/busy.tsv"
printf 'corpus\tpath...\n' > "$RAW/corpora.tsv"
ECO_MEASURED=()
for c in "${MEASURED[@]}"; do
  corpus_dirs "$c"
  tools_for "$c"
  { printf '%s' "$c"; printf '\t%s' "${DIRS[@]}"; printf '\n'; } >> "$RAW/corpora.tsv"
  mkdir -p "$RAW/$c"
  # the file list shardlint's discovery sees, sorted; the pylint sample is its first 50 files
  "$PY" "$bench/harness.py" discover "${DIRS[@]}" > "$RAW/$c/files.txt"
  head -n "$PYLINT_SAMPLE" "$RAW/$c/files.txt" > "$RAW/$c/pylint_sample.txt"
  "$PY" "$bench/harness.py" count-all "${DIRS[@]}" > "$RAW/$c/all_py_count.txt"
  # the files Ruff checks (its own discovery: .gitignore, its default excludes, the projects' own Ruff settings;
  # .py, .pyi, .ipynb and pyproject.toml by default), from an untimed --show-files run
  "$RUFF" check --select F --no-cache --exit-zero --show-files "${DIRS[@]}" > "$RAW/$c/ruff_files.txt" 2> /dev/null || true
  log "corpus $c: ${DIRS[*]} ($(wc -l < "$RAW/$c/files.txt") files by shardlint's discovery)"
  ONE_FILE=""; ONE_FILE_ORIG=""
  if is_eco "$c"; then
    for n in $(eco_members "$c"); do
      [[ " ${ECO_MEASURED[*]} " == *" $n "* ]] || ECO_MEASURED+=("$n")
      if [ "$HAS_CACHE" = 1 ] || [ "${BENCH_LSP:-1}" = 1 ]; then copy_checkout "$n"; fi
    done
    if [ "$HAS_CACHE" = 1 ]; then
      printf '%s\n' "${COPY_DIRS[*]}" > "$RAW/$c/copy_dirs.txt"
      CACHE_DIR="$bench/build/cache/$c"; rm -rf "$CACHE_DIR"; CACHE_STATE=empty
      ONE_FILE="$("$PY" "$bench/harness.py" pick-file "${COPY_DIRS[@]}")"
      [ -n "$ONE_FILE" ] || die "corpus $c: no .py file in ${COPY_DIRS[*]}"
      ONE_FILE_ORIG="$RAW/$c/one_file.orig"
      cp -p "$ONE_FILE" "$ONE_FILE_ORIG"
      echo "${ONE_FILE#"$ECO_COPY/"}" > "$RAW/$c/one_file.txt"
      log "corpus $c: cache rows on the private copy in $ECO_COPY; the one-file change appends to ${ONE_FILE#"$ECO_COPY/"}"
    fi
  fi
  # warm the page cache so no tool pays for the first read
  find "${DIRS[@]}" -name '*.py' -type f -print0 | xargs -0 cat > /dev/null
  if [ "$HAS_STATS" = 1 ]; then
    before_run shardlint
    "$SL" check "${DIRS[@]}" -q "${MAIN_CACHE[@]}" --stats > /dev/null 2> "$RAW/$c/stats.default.txt" || true
    before_run shardlint
    if [ "$HAS_JOBS" = 1 ]; then "$SL" check "${DIRS[@]}" -q "${MAIN_CACHE[@]}" --jobs 1 --stats > /dev/null 2> "$RAW/$c/stats.j1.txt" || true; fi
  fi
  declare -A clean=()
  for run in $(seq 1 "$RUNS"); do
    wait_quiet "$c/$run"
    for tool in "${TOOLS[@]}"; do
      measure "$c" "$tool" "$run" "$RAW/$c/pylint_sample.txt"
      [ "$LAST_CONTENDED" = 1 ] || clean[$tool]=1
    done
  done
  # a tool whose every run was disturbed by other processes gets up to BENCH_RETRIES (default 2) more runs
  for tool in "${TOOLS[@]}"; do
    run="$RUNS"
    while [ -z "${clean[$tool]:-}" ] && [ "$run" -lt $((RUNS + ${BENCH_RETRIES:-2})) ]; do
      run=$((run + 1))
      wait_quiet "$c/$run"
      measure "$c" "$tool" "$run" "$RAW/$c/pylint_sample.txt"
      [ "$LAST_CONTENDED" = 1 ] || clean[$tool]=1
    done
  done
  unset clean
  restore_one_file
done

# ------------------------------------------------------------------ editor latency on the checkouts
# One `shardlint server` per checkout measured above (on its private copy), a 30-file sample each.
if [ "${BENCH_LSP:-1}" = 1 ] && [ "${#ECO_MEASURED[@]}" -gt 0 ]; then
  mkdir -p "$RAW/lsp"
  for n in "${ECO_MEASURED[@]}"; do
    wait_quiet "lsp/$n"
    log "editor latency: shardlint server on $n (sample of ${BENCH_LSP_SAMPLE:-30} files)"
    if ! "$PY" "$bench/lsp_latency.py" --binary "$SL" --corpus "$ECO_COPY/$n" --sample "${BENCH_LSP_SAMPLE:-30}" \
         --largest "${BENCH_LSP_LARGEST:-3}" --edits-per-file "${BENCH_LSP_EDITS:-20}" --edit-kind both \
         --json "$RAW/lsp/$n.json" > "$RAW/lsp/$n.txt" 2> "$RAW/lsp/$n.err"; then
      log "editor latency on $n failed (see $RAW/lsp/$n.err and $n.txt)"
      [ -s "$RAW/lsp/$n.json" ] || { tail -n 3 "$RAW/lsp/$n.err"; echo "lsp_latency.py exited without a result"; } > "$RAW/lsp/$n.failed"
    fi
    sed -n '/^| checkout/,/^$/p' "$RAW/lsp/$n.txt" | tail -n +3 | grep -v '^$' | sed 's/^/[bench]   /' >&2 || true
  done
fi

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
  printf 'has_cache\t%s\n' "$HAS_CACHE"
  printf 'main_cache_flags\t%s\n' "${MAIN_CACHE[*]/#"$root/"/}"
  printf 'runs\t%s\n' "$RUNS"
  printf 'max_busy\t%s\n' "${BENCH_MAX_BUSY:-15}"
  printf 'retries\t%s\n' "${BENCH_RETRIES:-2}"
  printf 'pylint_sample\t%s\n' "$PYLINT_SAMPLE"
  printf 'ruff\t%s\n' "$("$RUFF" --version 2>&1 | head -1) (PyPI wheel, sha256 $(grep -o 'sha256:[0-9a-f]*' "$REQ" | head -1 | cut -c8-23)...)"
  printf 'pyflakes\t%s\n' "$(pyflakes3 --version 2>&1 | head -1)"
  printf 'pylint\t%s\n' "$(if command -v pylint > /dev/null; then pylint --version 2>&1 | head -2 | tr '\n' ' '; else echo 'not installed (no corpus measured needs it)'; fi)"
  printf 'torch\t%s\n' "$(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null || echo 'not installed (torch corpus not measured)')"
  printf 'python\t%s\n' "$(/usr/bin/python3 --version 2>&1)"
  printf 'gcc\t%s\n' "$(gcc --version | head -1)"
} > "$RAW/env.tsv"
[ "${#ECO_MEASURED[@]}" -gt 0 ] && "$PY" "$bench/harness.py" eco-info "$root/ecosystem/repos.toml" "${ECO_MEASURED[@]}" > "$RAW/eco.tsv"
"$PY" "$bench/harness.py" report "$RAW" "$OUT"
log "wrote $OUT"
