#!/usr/bin/env bash
# teardown.sh: the emulated cluster leaves nothing behind (CTest `cluster_teardown`, label cluster).
#
#   teardown.sh LINK_DELAY
#
# Three ways out, each followed by a check that no namespace of the cluster, no process in one, no delay
# line and no folder of it remains:
#   a. the command succeeds;  b. the command fails (its status is the script's);
#   c. the script itself is killed with SIGKILL while the command runs (no trap runs: the reaper must
#      tear the cluster down within 5 s).
# Exit status: 0 passed, 1 failed, 77 skipped (the machine cannot host the cluster).
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
take_args "LINK_DELAY" "$@"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
failed=0
check() { if [[ "$1" -ne 0 ]]; then echo "FAIL: $2"; failed=1; else echo "ok: $2"; fi; }
left_by() {  # left_by PID: what the cluster of owner PID left (namespaces, processes, folder); empty if nothing
  ip netns list 2>/dev/null | awk -v p="itc-$1-" 'index($1, p) == 1 { print "namespace " $1 }'
  pgrep -f -- "--ready /tmp/itc-$1/" | sed 's/^/delay line pid /'
  [[ -e "/tmp/itc-$1" ]] && echo "folder /tmp/itc-$1"
}
cluster() { "$HERE/emulated_cluster.sh" --nodes 2 --slots 1 --link-delay "$LINK_DELAY" -- "$@"; }

# a. success: the command sees the cluster (two hostnames through its mpirun) and returns 0.
out=$(cluster bash -c 'echo owner=$PPID; "$ITERTIME_CLUSTER_DIR/mpirun" -n 2 hostname' 2>/dev/null)
rc=$?
[[ $rc -eq 77 ]] && exit 77
owner=$(sed -n 's/^owner=//p' <<<"$out")
[[ $rc -eq 0 && "$(grep -c '^node' <<<"$out")" -eq 2 ]]
check $? "a command on the cluster runs on node0 and node1 (got: $(tr '\n' ' ' <<<"$out"))"
[[ -n "$owner" && -z "$(left_by "$owner")" ]]
check $? "nothing left after a command that succeeded: $(left_by "$owner")"

# b. failure: the command's status comes back, and nothing is left.
out=$(cluster bash -c 'echo owner=$PPID; exit 3' 2>/dev/null)
rc=$?
owner=$(sed -n 's/^owner=//p' <<<"$out")
[[ $rc -eq 3 ]]
check $? "the command's exit status (3) is the script's (got $rc)"
[[ -n "$owner" && -z "$(left_by "$owner")" ]]
check $? "nothing left after a command that failed: $(left_by "$owner")"

# c. SIGKILL of the script while its command runs.
"$HERE/emulated_cluster.sh" --nodes 2 --slots 1 --link-delay "$LINK_DELAY" -- sleep 60 >/dev/null 2>&1 &
owner=$!
for _ in $(seq 200); do [[ -n "$(ip netns list 2>/dev/null | grep "^itc-$owner-node1")" ]] && pgrep -f -- "--ready /tmp/itc-$owner/" >/dev/null && break; sleep 0.1; done
[[ -n "$(left_by "$owner")" ]]
check $? "the cluster is up before the kill"
sleep 2  # past the latency measurement: the command (sleep 60) runs
{ kill -KILL "$owner"; wait "$owner"; } 2>/dev/null
for _ in $(seq 50); do [[ -z "$(left_by "$owner")" ]] && break; sleep 0.1; done
[[ -z "$(left_by "$owner")" ]]
check $? "nothing left 5 s after the script was killed with SIGKILL: $(left_by "$owner" | tr '\n' ' ')"
pkill -f "^sleep 60$" 2>/dev/null
exit $failed
