#!/usr/bin/env bash
# emulated_cluster.sh: a cluster of N nodes on this machine, made of Linux namespaces, for as long as one
# command runs (docs/cluster.md).
#
#   emulated_cluster.sh [--nodes N] [--slots S] [--bandwidth RATE] [--latency-us US]
#                       [--node-bandwidth NODE=RATE]... [--tcp-retries2 N] --link-delay PATH -- COMMAND [ARGS...]
#   emulated_cluster.sh --clean        (removes every emulated cluster whose owner is gone)
#
# Each node is a network namespace and a UTS namespace of its own (hostname node0, node1, ...), with one
# interface eth0 (MTU 9000), 10.77.k.2/24 on node k. A switch namespace holds the other end of every
# node's link and routes between them; node-to-node packets pass through a delay line there
# (itertime_link_delay, a TUN device: this kernel has no netem), so the traffic of the cluster never
# leaves the namespaces made here. Links:
#   - bandwidth: HTB on each node's eth0 at RATE (tc syntax: 1gbit, 500mbit), both directions shaped
#     at their sender; --node-bandwidth node1=200mbit gives one node a slower link (a slow node by name);
#   - latency: one-way, socket to socket: the script measures the path's own latency with no added delay
#     (TCP ping-pong between node0 and node1) and delays by the rest, corrects the delay by further
#     measurements until one lands within 5 % (at most four), and reports the last one
#     (ITERTIME_CLUSTER_LATENCY_US_MEASURED).
# Inside a node, ranks share memory (Open MPI's vader, as on a real node); across nodes they use TCP.
# --tcp-retries2 N sets net.ipv4.tcp_retries2 in every namespace of the cluster: a TCP connection over a
# link that went down then gives up after 0.2 s x (2^(N+1) - 1) instead of ~15 minutes (the default 15),
# which is how soon Open MPI's mpirun and daemons learn of a cut node (docs/cli.md, the watchdog).
#
# COMMAND runs in this (the root) namespace with:
#   ITERTIME_CLUSTER_DIR     a folder with `hostfile`, and these commands:
#     $ITERTIME_CLUSTER_DIR/mpirun ARGS...   Open MPI's mpirun started in the switch namespace with the
#                                            cluster's hostfile, a launch agent that enters each node's
#                                            namespaces (no ssh) and the interfaces to use (with the
#                                            folder first on PATH, `itertime run --launcher mpirun` uses it);
#     $ITERTIME_CLUSTER_DIR/on NODE CMD...   runs CMD inside NODE (its network, its hostname);
#     $ITERTIME_CLUSTER_DIR/link NODE down|up  takes NODE's link down or brings it back (a fault);
#   ITERTIME_CLUSTER_NODES   "node0 node1 ..."; ITERTIME_CLUSTER_SLOTS; ITERTIME_CLUSTER_BANDWIDTH;
#   ITERTIME_CLUSTER_SWITCH_NS (the switch's network namespace, for `ip -n` reads of its routes);
#   ITERTIME_CLUSTER_LATENCY_US (asked) and ITERTIME_CLUSTER_LATENCY_US_MEASURED.
# Teardown: on exit, interrupt or failure every process in the cluster's namespaces is killed and the
# namespaces and the folder removed; a detached reaper does the same if this script is killed (SIGKILL),
# within a second or two (COMMAND itself runs in the machine's namespace and is not killed by it; its
# mpirun and ranks are, being in the cluster's). --clean removes what a crash of the machine's own tooling
# may still have left.
# Exit status: COMMAND's; 77 when the machine cannot host the cluster (not root, no namespaces, no TUN,
# no HTB; the reason is printed; 1 instead with ITERTIME_CLUSTER_TEST_REQUIRE=1); 2 for a usage error.
set -uo pipefail

PREFIX=itc
SKIP=77

usage() { echo "emulated_cluster.sh: $*" >&2; exit 2; }
skip() {
  echo "emulated_cluster.sh: SKIP: $*" >&2
  # CI's native leg must run the cluster tests, not skip them (.ci/run sets this).
  [[ "${ITERTIME_CLUSTER_TEST_REQUIRE:-0}" == 1 ]] && { echo "emulated_cluster.sh: ITERTIME_CLUSTER_TEST_REQUIRE=1: a skip is a failure" >&2; exit 1; }
  exit "$SKIP"
}
say() { echo "[cluster] $*" >&2; }

# ---- teardown (also used by the reaper and --clean) -------------------------------------------------
teardown_id() {  # teardown_id ID: kill everything in the cluster's namespaces, delete them and its folder
  local id=$1 ns pids
  for ns in $(ip netns list 2>/dev/null | awk -v p="$PREFIX-$id-" 'index($1, p) == 1 {print $1}'); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
  done
  sleep 0.2
  for ns in $(ip netns list 2>/dev/null | awk -v p="$PREFIX-$id-" 'index($1, p) == 1 {print $1}'); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "/tmp/$PREFIX-$id"
}

if [[ "${1:-}" == "--teardown" ]]; then teardown_id "$2"; exit 0; fi
if [[ "${1:-}" == "--clean" ]]; then
  for id in $(ip netns list 2>/dev/null | awk -v p="$PREFIX-" 'index($1, p) == 1 {split($1, a, "-"); print a[2]}' | sort -u); do
    kill -0 "$id" 2>/dev/null && continue  # its owner still runs
    say "removing cluster $id (owner gone)"
    teardown_id "$id"
  done
  exit 0
fi

# ---- options ---------------------------------------------------------------------------------------
NODES=2 SLOTS=2 BANDWIDTH=1gbit LATENCY_US=100 LINK_DELAY="" TCP_RETRIES2=""
declare -A NODE_BANDWIDTH=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --slots) SLOTS=$2; shift 2 ;;
    --bandwidth) BANDWIDTH=$2; shift 2 ;;
    --latency-us) LATENCY_US=$2; shift 2 ;;
    --node-bandwidth) NODE_BANDWIDTH[${2%%=*}]=${2#*=}; shift 2 ;;
    --link-delay) LINK_DELAY=$2; shift 2 ;;
    --tcp-retries2) TCP_RETRIES2=$2; shift 2 ;;
    --) shift; break ;;
    *) usage "unknown option '$1' (see the comment at the top of this script)" ;;
  esac
done
[[ $# -gt 0 ]] || usage "no command given after --"
[[ "$NODES" =~ ^[0-9]+$ && "$NODES" -ge 2 && "$NODES" -le 64 ]] || usage "--nodes $NODES: want 2..64"
[[ "$SLOTS" =~ ^[0-9]+$ && "$SLOTS" -ge 1 ]] || usage "--slots $SLOTS: want a positive whole number"
[[ "$LATENCY_US" =~ ^[0-9]+([.][0-9]+)?$ ]] || usage "--latency-us $LATENCY_US: want microseconds"
[[ -z "$TCP_RETRIES2" || "$TCP_RETRIES2" =~ ^[0-9]+$ ]] || usage "--tcp-retries2 $TCP_RETRIES2: want a whole number"
[[ -x "$LINK_DELAY" ]] || usage "--link-delay '$LINK_DELAY': the built itertime_link_delay is needed"

[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
for tool in ip tc unshare mpirun; do command -v "$tool" >/dev/null || skip "no '$tool' on this machine"; done
MPIRUN=$(command -v mpirun)  # the real one: COMMAND may put $ITERTIME_CLUSTER_DIR (its mpirun) first on PATH
[[ -c /dev/net/tun ]] || skip "no /dev/net/tun"
mpirun --version 2>/dev/null | grep -q 'Open MPI) 4\.' ||
  skip "the launch agent is written for Open MPI 4 (orted and plm_rsh_agent); this is $(mpirun --version 2>&1 | head -1)"

ID=$$
HEAD="$PREFIX-$ID-switch"
T="/tmp/$PREFIX-$ID"
NET=10.77
node_ns() { echo "$PREFIX-$ID-$1"; }
mkdir -p "$T" || skip "cannot create $T"

cleanup() {
  if [[ -n "${LINE_PID:-}" ]]; then kill "$LINE_PID" 2>/dev/null; wait "$LINE_PID" 2>/dev/null; fi
  teardown_id "$ID"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The reaper: if this script dies without running its trap (SIGKILL), the cluster goes with it.
setsid bash -c "while kill -0 $ID 2>/dev/null; do sleep 1; done; '$(realpath "$0")' --teardown $ID" </dev/null >/dev/null 2>&1 &

# ---- the switch and the nodes -------------------------------------------------------------------------
ip netns add "$HEAD" 2>/dev/null || skip "cannot create a network namespace ($(ip netns add "$HEAD" 2>&1))"
ip -n "$HEAD" link set lo up
[[ -z "$TCP_RETRIES2" ]] || ip netns exec "$HEAD" sysctl -qw net.ipv4.tcp_retries2="$TCP_RETRIES2"
ip netns exec "$HEAD" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
HOSTS=()
for ((k = 0; k < NODES; ++k)); do
  node=node$k ns=$(node_ns "$node")
  HOSTS+=("$node")
  ip netns add "$ns" || skip "cannot create namespace $ns"
  [[ -z "$TCP_RETRIES2" ]] || ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2="$TCP_RETRIES2"
  ip link add "v$k" netns "$HEAD" mtu 9000 type veth peer name eth0 netns "$ns" mtu 9000 || skip "cannot create a veth pair"
  ip -n "$HEAD" addr add "$NET.$k.1/24" dev "v$k"
  ip -n "$HEAD" link set "v$k" up
  ip netns exec "$HEAD" sysctl -qw "net.ipv4.conf.v$k.rp_filter=0"
  ip -n "$HEAD" rule add iif "v$k" lookup 100 pref 100  # node-to-node packets: through the delay line
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$NET.$k.2/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "$NET.$k.1"
  rate=${NODE_BANDWIDTH[$node]:-$BANDWIDTH}
  tc -n "$ns" qdisc add dev eth0 root handle 1: htb default 10 r2q 1000 2>/dev/null &&
    tc -n "$ns" class add dev eth0 parent 1: classid 1:10 htb rate "$rate" ceil "$rate" 2>/dev/null ||
    skip "cannot shape $node's link with HTB at '$rate' (tc qdisc htb)"
done
for node in "${!NODE_BANDWIDTH[@]}"; do
  [[ " ${HOSTS[*]} " == *" $node "* ]] || usage "--node-bandwidth $node: no such node (node0..node$((NODES - 1)))"
done

LINE_PID=""
start_line() {  # start_line DELAY_US: (re)starts the delay line and routes node-to-node traffic through it
  if [[ -n "$LINE_PID" ]]; then kill "$LINE_PID" 2>/dev/null; wait "$LINE_PID" 2>/dev/null; fi
  rm -f "$T/line.ready"
  ip netns exec "$HEAD" "$LINK_DELAY" --tun delay --delay-us "$1" --ready "$T/line.ready" 2>>"$T/line.log" &
  LINE_PID=$!
  for _ in $(seq 100); do [[ -s "$T/line.ready" ]] && break; sleep 0.05; done
  [[ -s "$T/line.ready" ]] || skip "the delay line did not start: $(tail -n 2 "$T/line.log")"
  ip -n "$HEAD" link set delay mtu 9000 up
  ip netns exec "$HEAD" sysctl -qw net.ipv4.conf.delay.rp_filter=0
  ip -n "$HEAD" route replace "$NET.0.0/16" dev delay table 100
}
measure_latency_us() {  # one-way socket latency node0 -> node1, median of 400 ping-pongs
  ip netns exec "$(node_ns node1)" "$LINK_DELAY" --pingpong-server 7911 &
  local server=$! value
  value=$(ip netns exec "$(node_ns node0)" "$LINK_DELAY" --pingpong-client "$NET.1.2" 7911 400)
  wait "$server" 2>/dev/null
  echo "$value"
}
start_line 0
base_us=$(measure_latency_us)
delay_us=$(awk -v t="$LATENCY_US" -v b="$base_us" 'BEGIN { d = t - b; printf "%.1f", (d > 0 ? d : 0) }')
# The path's own latency moves with the machine's load: correct the delay until a measurement lands
# within 5 % of the latency asked (at most four corrections; the last measurement is reported either way).
for _ in 1 2 3 4; do
  start_line "$delay_us"
  measured_us=$(measure_latency_us)
  awk -v t="$LATENCY_US" -v m="$measured_us" 'BEGIN { exit !(m >= 0.95 * t && m <= 1.05 * t) }' && break
  delay_us=$(awk -v t="$LATENCY_US" -v m="$measured_us" -v d="$delay_us" 'BEGIN { d += t - m; printf "%.1f", (d > 0 ? d : 0) }')
done
say "$NODES nodes x $SLOTS slots; links $BANDWIDTH; latency asked ${LATENCY_US} us: path alone ${base_us} us," \
  "line delay ${delay_us} us, measured ${measured_us} us (socket ping-pong node0-node1)"

# ---- the commands it offers ----------------------------------------------------------------------------
: >"$T/hostfile"
for node in "${HOSTS[@]}"; do echo "$node slots=$SLOTS" >>"$T/hostfile"; done
cat >"$T/on" <<EOF
#!/bin/sh
# on NODE CMD...: runs CMD inside NODE's network and UTS namespaces, with NODE's hostname.
node=\$1; shift
exec ip netns exec "$PREFIX-$ID-\$node" unshare --uts sh -c 'hostname "\$0" && exec "\$@"' "\$node" "\$@"
EOF
cat >"$T/agent" <<EOF
#!/bin/sh
# Open MPI's launch agent (plm_rsh_agent): called as 'agent [ssh options] HOST COMMAND...'; like ssh, it
# runs COMMAND with a shell, on HOST: inside that node's namespaces.
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
node=\$1; shift
exec ip netns exec "$PREFIX-$ID-\$node" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$node" "\$*"
EOF
cat >"$T/mpirun" <<EOF
#!/bin/sh
# mpirun ARGS...: Open MPI's mpirun on the emulated cluster (from the switch namespace: the nodes reach it
# through their links, and nothing leaves the cluster's namespaces).
exec ip netns exec "$HEAD" unshare --uts sh -c 'hostname switch && exec "\$@"' mpirun "$MPIRUN" \\
  --hostfile "$T/hostfile" --mca plm_rsh_agent "$T/agent" --mca plm_rsh_no_tree_spawn 1 \\
  --mca oob_tcp_if_include $NET.0.0/16 --mca btl_tcp_if_include $NET.0.0/16 --mca btl self,vader,tcp \\
  --mca mpi_yield_when_idle 1 "\$@"
EOF
cat >"$T/link" <<EOF
#!/bin/sh
# link NODE down|up: takes NODE's link down (its switch port) or brings it back.
case "\$2" in down|up) ;; *) echo "link NODE down|up" >&2; exit 2 ;; esac
exec ip -n "$HEAD" link set "v\${1#node}" "\$2"
EOF
chmod +x "$T/on" "$T/agent" "$T/mpirun" "$T/link"

export ITERTIME_CLUSTER_DIR="$T" ITERTIME_CLUSTER_NODES="${HOSTS[*]}" ITERTIME_CLUSTER_SLOTS="$SLOTS" ITERTIME_CLUSTER_SWITCH_NS="$HEAD"
export ITERTIME_CLUSTER_BANDWIDTH="$BANDWIDTH" ITERTIME_CLUSTER_LATENCY_US="$LATENCY_US"
export ITERTIME_CLUSTER_LATENCY_US_MEASURED="$measured_us"
"$@"
