#!/usr/bin/env bash
# The multi-node probe across a real network (ctest probe_two_nodes): two network namespaces joined by
# a veth pair (10.213.0.1/24 and 10.213.0.2/24), one `shardlint probe --nnodes 2 --nproc 1 --backend gloo
# --rdzv-endpoint 10.213.0.1:PORT` per namespace, at the same time, on FIXTURE (an FSDP2 finding the
# replay confirms on CPU). Each node must confirm the finding at world size 2 from its own rank's report,
# the two nodes between them rank 0 and rank 1. Alongside, two rendezvous that cannot complete: a node
# whose endpoint (10.213.0.9) nobody has, and a node that hosts the endpoint but whose peer never
# starts. Both must end `not-reached`, naming the rendezvous, long before --timeout (no hang). No
# process of any run and no `shardlint-probe-*` folder in the TMPDIR it was given may be left.
#
#   tests/probe_two_nodes.sh SHARDLINT PYTHON FIXTURE
#
# Exit 0: passed; 1: failed; 77 (ctest skip): not root, no `ip`/`unshare`, namespaces cannot be made,
# or PYTHON has no torch with gloo and FSDP2 (`fully_shard`).
#
# Both namespaces share this machine's /etc/hosts and hostname, whose name resolves to 127.0.0.1 here.
# Real nodes each have their own hostname that resolves to their address, and torch relies on it
# (c10d hosts the store on the node whose name or addresses match the endpoint, torchrun advertises
# the rank-0 node's name as MASTER_ADDR, gloo binds to the address its hostname resolves to). So each
# node gets its own hostname (`unshare --uts`) and a hosts file naming both nodes (`ip netns exec`
# puts /etc/netns/NS/hosts over /etc/hosts); the probe itself is given nothing else.
set -euo pipefail

me=probe_two_nodes
skip() { echo "$me: SKIP: $*"; exit 77; }
fail() { echo "$me: FAIL: $*" >&2; exit 1; }
abspath() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }  # keeps a venv's symlink

[ $# -eq 3 ] || { echo "usage: $0 SHARDLINT PYTHON FIXTURE" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
for tool in ip unshare hostname timeout; do
  command -v "$tool" >/dev/null || skip "no \`$tool\` here"
done
[ -x "$1" ] || fail "no shardlint executable at $1"
[ -f "$3" ] || fail "no fixture at $3"
[ -x "$2" ] || skip "no Python at $2 (make it with scripts/setup-probe.sh)"
SHARDLINT=$(abspath "$1"); PYTHON=$(abspath "$2"); FIXTURE=$(abspath "$3")
# torchrun takes any option from PET_<OPTION> in the environment: the probe gets nothing but its options.
for v in $(compgen -e | grep '^PET_' || true); do unset "$v"; done
# The replay of FIXTURE needs FSDP2 (`fully_shard`, torch 2.4 or later) and gloo.
"$PYTHON" -c '
import torch.distributed as d
assert d.is_available() and d.is_gloo_available()
try:
    from torch.distributed.fsdp import fully_shard
except ImportError:
    from torch.distributed._composable.fsdp import fully_shard' >/dev/null 2>&1 ||
  skip "$PYTHON has no torch with torch.distributed, gloo and FSDP2 fully_shard (2.4 or later)"

NS1="sl2n-$$-1" NS2="sl2n-$$-2"  # unique per run
VETH1="sl2n$$a" VETH2="sl2n$$b"  # interface names: at most 15 characters
HOST1="sl2n-node1" HOST2="sl2n-node2"
PORT=29400
WORK=$(mktemp -d "${TMPDIR:-/tmp}/$me.XXXXXX")
made_ns=()

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local ns pid pids
  for ns in "${made_ns[@]}"; do
    # Only processes of this run live in its namespaces (after a pass, none are: checked below); an
    # interrupted run's may still be forking, so until none is left.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -n "$pids" ] || break
      for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
      sleep 0.2
    done
    ip netns delete "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  ip link delete "$VETH1" 2>/dev/null || true  # only if it never moved into a namespace
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- The network ---------------------------------------------------------------------------------
# A run killed outright (SIGKILL: no trap) leaves its namespaces: remove those whose run is gone.
for ns in $(ip netns list 2>/dev/null | awk '/^sl2n-[0-9]+-[12]( |$)/ { print $1 }'); do
  owner=${ns#sl2n-}
  owner=${owner%-*}
  kill -0 "$owner" 2>/dev/null && continue
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  ip netns delete "$ns" 2>/dev/null || true
  rm -rf "/etc/netns/$ns"
done
for ns in "$NS1" "$NS2"; do
  ip netns add "$ns" 2>"$WORK/ip.err" || skip "cannot create a network namespace: $(cat "$WORK/ip.err")"
  made_ns+=("$ns")
done
ip link add "$VETH1" type veth peer name "$VETH2" 2>"$WORK/ip.err" ||
  skip "cannot create a veth pair: $(cat "$WORK/ip.err")"
ip link set "$VETH1" netns "$NS1"
ip link set "$VETH2" netns "$NS2"
ip -n "$NS1" addr add 10.213.0.1/24 dev "$VETH1"
ip -n "$NS2" addr add 10.213.0.2/24 dev "$VETH2"
for ns in "$NS1" "$NS2"; do
  ip -n "$ns" link set lo up
  mkdir -p "/etc/netns/$ns" 2>/dev/null || skip "cannot write /etc/netns (per-namespace hosts files)"
  printf '127.0.0.1 localhost\n10.213.0.1 %s\n10.213.0.2 %s\n' "$HOST1" "$HOST2" >"/etc/netns/$ns/hosts"
done
ip -n "$NS1" link set "$VETH1" up
ip -n "$NS2" link set "$VETH2" up
# The link is up when node 2 reaches node 1 (no ping here: a TCP connect, refused is fine).
for _ in $(seq 50); do
  if ip netns exec "$NS2" "$PYTHON" -c '
import socket, sys
try: socket.create_connection(("10.213.0.1", 9), timeout=1)
except ConnectionRefusedError: sys.exit(0)
except OSError: sys.exit(1)' 2>/dev/null; then break; fi
  sleep 0.2
done

T0=${EPOCHREALTIME/./}
since() { local us=$((${EPOCHREALTIME/./} - ${1:-$T0})); printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000)); }
stamp() { local line; while IFS= read -r line; do printf '%6s %s\n' "$(since)" "$line"; done; }  # seconds since start

# node NS HOSTNAME NAME ENDPOINT TIMEOUT [VAR=VALUE...]: one `shardlint probe` as one node, in the
# background, with VAR=VALUE in its environment; $WORK/NAME.json (stdout), .err (stderr, each line with
# the seconds since the test started), .rc and .secs. The outer `timeout` only stops a hang (a failure).
node() {
  local ns=$1 host=$2 name=$3 endpoint=$4 limit=$5
  shift 5
  mkdir -p "$WORK/$name.tmp"
  (
    start=${EPOCHREALTIME/./}
    set +e
    timeout -k 5 $((limit + 60)) ip netns exec "$ns" \
      unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$host" \
      env TMPDIR="$WORK/$name.tmp" "$@" "$SHARDLINT" probe --nnodes 2 --nproc 1 --backend gloo \
      --rdzv-endpoint "$endpoint" --timeout "$limit" --python "$PYTHON" --format json "$FIXTURE" \
      2>&1 >"$WORK/$name.json" | stamp >"$WORK/$name.err"
    echo "${PIPESTATUS[0]}" >"$WORK/$name.rc"
    since "$start" >"$WORK/$name.secs"
  ) &
}

# field NAME EXPR: a Python expression over the finding's probe object `p`.
field() {
  "$PYTHON" -c 'import json, sys
doc = json.load(open(sys.argv[1]))
p = [f["probe"] for f in doc["findings"] if "probe" in f][0]
print(eval(sys.argv[2]))' "$WORK/$1.json" "$2" 2>/dev/null || echo "(no probe result)"
}

failed=0
check() {  # check NAME WHAT CONDITION...
  local name=$1 what=$2
  shift 2
  if ! "$@"; then
    echo "$me: FAIL: $name: $what" >&2
    failed=1
  fi
}
timeline() {  # when a node checked torch, chose the backend, launched, and got its verdict
  grep -E '^ *[0-9.]+ (shardlint probe: (python|checking|backend|SL)|  SL[0-9]+ .*: [a-z-]+ \()' "$WORK/$1.err" |
    sed -E 's/^ *([0-9.]+) (shardlint probe: )?/    \1 s: /; s/(.{110}).*/\1.../' || true
}
show() {  # what a failing node printed
  echo "---- $1: exit $(cat "$WORK/$1.rc" 2>/dev/null), stderr:" >&2
  tail -n 40 "$WORK/$1.err" >&2 || true
  echo "---- $1: stdout:" >&2
  head -c 4000 "$WORK/$1.json" >&2 || true
}

# All four probes run at the same time: each first checks torch and runs the CPU self-test (most of
# the test's time and CPU); after that the two that cannot rendezvous only wait, beside the two-node run.
# 1. Two nodes, one rendezvous across the veth: the rendezvous waits are the orchestrator's own
#    (half of --timeout).
node "$NS1" "$HOST1" node1 "10.213.0.1:$PORT" 180
node "$NS2" "$HOST2" node2 "10.213.0.1:$PORT" 180
# 2. Rendezvous that cannot complete. Their waits come from $PET_RDZV_CONF (kept in front of the
#    orchestrator's --rdzv-conf, its keys win) so that they end soon, long before the --timeout kill.
waits=PET_RDZV_CONF=join_timeout=10,read_timeout=10
node "$NS2" "$HOST2" unreachable "10.213.0.9:$PORT" 120 "$waits"        # nobody has 10.213.0.9
node "$NS1" "$HOST1" alone "10.213.0.1:$((PORT + 1))" 120 "$waits"      # its peer never starts
wait
t1=$(since)

ranks=""
for n in node1 node2; do
  before=$failed
  check "$n" "exit code $(cat "$WORK/$n.rc") (want 1: a confirmed finding)" test "$(cat "$WORK/$n.rc")" = 1
  check "$n" "verdict '$(field $n 'p["verdict"]')' (want confirmed)" test "$(field $n 'p["verdict"]')" = confirmed
  check "$n" "world size $(field $n 'p["world_size"]') (want 2)" test "$(field $n 'p["world_size"]')" = 2
  check "$n" "the evidence does not say which node's rank judged it" \
    grep -q "multi-node: judged from this node's rank [01] of world size 2" <<<"$(field $n 'p["evidence"]')"
  check "$n" "the launch was not a c10d rendezvous at 10.213.0.1:$PORT with the orchestrator's waits" \
    grep -q -- "--rdzv-endpoint 10.213.0.1:$PORT --rdzv-backend c10d --rdzv-conf join_timeout=90,read_timeout=90 " \
    "$WORK/$n.err"
  ranks+="$(field $n 'p["evidence"].split("this node'"'"'s rank ")[1][0]')"
  [ "$failed" = "$before" ] || show "$n"
  echo "$me: $n ($(cat "$WORK/$n.secs") s): $(field $n 'p["verdict"] + " — " + p["evidence"]')"
  timeline "$n"
done
check both "ranks judged on the two nodes: '$ranks' (want 0 and 1)" \
  test "$(echo "$ranks" | fold -w1 | sort | tr -d '\n')" = 01

for n in unreachable alone; do
  before=$failed
  check "$n" "exit code $(cat "$WORK/$n.rc") (want 1: the finding not reached; 124/137: it hung)" \
    test "$(cat "$WORK/$n.rc")" = 1
  check "$n" "verdict '$(field $n 'p["verdict"]')' (want not-reached)" test "$(field $n 'p["verdict"]')" = not-reached
  check "$n" "the launch took $(field $n 'p["elapsed_seconds"]') s (want the rendezvous to end it, long before 120 s)" \
    test "$(field $n 'int(p["elapsed_seconds"] < 60)')" = 1
  check "$n" "the launch did not merge \$PET_RDZV_CONF" \
    grep -q -- "--rdzv-conf join_timeout=10,read_timeout=10 " "$WORK/$n.err"
  [ "$failed" = "$before" ] || show "$n"
  echo "$me: $n ($(cat "$WORK/$n.secs") s): $(field $n 'p["verdict"] + " — " + p["evidence"]')"
  timeline "$n"
done
check unreachable "the evidence does not name the unreachable rendezvous" \
  grep -q "cannot reach the rendezvous store at 10.213.0.9:$PORT" <<<"$(field unreachable 'p["evidence"]')"
check alone "the evidence does not say the rendezvous timed out" \
  grep -q "the rendezvous at 10.213.0.1:$((PORT + 1)) timed out: not every node joined (--nnodes 2)" \
  <<<"$(field alone 'p["evidence"]')"

# ---- Nothing left behind ------------------------------------------------------------------------
for ns in "$NS1" "$NS2"; do
  left=$(ip netns pids "$ns" | tr '\n' ' ')
  check "$ns" "processes left in the namespace: $left" test -z "$left"
done
left=$(pgrep -f "torch.distributed.run.*$WORK" | tr '\n' ' ' || true)
check all "torch.distributed.run processes left: $left" test -z "$left"
for n in node1 node2 unreachable alone; do
  left=$(cd "$WORK/$n.tmp" && ls -d shardlint-probe-* 2>/dev/null | tr '\n' ' ' || true)
  check "$n" "temporary folders left in its TMPDIR: $left" test -z "$left"
done

echo "$me: all four probes done after $t1 s, test total $(since) s"
[ "$failed" = 0 ] || fail "see above"
echo "$me: PASS"
