#!/usr/bin/env bash
# link_fault.sh: a node's link goes down in the middle of a collective across nodes (CTest
# `cluster_fault`, label cluster; docs/cli.md, "Across nodes").
#
#   link_fault.sh ITERTIME LINK_DELAY READ_ROWS FAULT_ROWS
#
# On a 2-node x 2-slot emulated cluster (emulated_cluster.sh; node0 holds ranks 0 1, node1 ranks 2 3):
#  1. `calibrate comm` of all-reduces in strided groups of 2 (every group crosses the nodes: ranks 0 2
#     and 1 3), 256 KiB .. 16 MiB, with ITERTIME_WATCHDOG_S=5. Once 2 points are in the file, node1's
#     link is taken down. Checks: every rank is gone within the watchdog's limit plus its poll period
#     plus RANK_SLACK_S, and every process of the job (mpirun, both orteds, the 4 ranks) within
#     JOB_BOUND_S (the limit + 20 s) of the fault; mpirun's status is non-zero; stderr holds the watchdog's line of the
#     ranks this side of the cut (0 and 1: the lines of ranks 2 and 3 go through node1's orted, which
#     cannot reach mpirun any more) naming the MPI operation; the file reads, every row is whole (its
#     samples within /comm/samples_us and its own, iters of them, checked, inter-node) and the spans
#     tile the samples (itertime_fault_rows: no damage, no orphan samples).
#  2. node1's link comes back: node0 and node1 talk again (a TCP ping-pong). The same command with
#     --resume completes, measures only the missing points, and the file then holds every point of the
#     sweep once (rows = distinct keys = the sweep's 7 points), the rows from before the fault unchanged
#     (the same text from read_rows: bit-equal values).
# Open MPI 4's daemons learn of a cut link only from TCP: mpirun, and the orted behind the cut, wait
# until their connection gives up retransmitting (net.ipv4.tcp_retries2; the kernel's default, 15, takes
# about 15 minutes). The test sets tcp_retries2=4 (about 6 s) in the cluster's namespaces (emulated_cluster.sh --tcp-retries2), as a cluster
# that wants a cut node's job to end should (docs/cli.md); the ranks themselves need no such setting:
# their watchdog ends them.
# Prints the times (fault -> ranks gone, fault -> job gone, resume duration). Exit status: 0 passed,
# 1 failed, 77 skipped (the machine cannot host the cluster).
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
cluster_test_start "ITERTIME LINK_DELAY READ_ROWS FAULT_ROWS" "$@"

WATCHDOG_S=5
RANK_SLACK_S=3    # past the limit and its poll period (limit / 10): the exit of a loaded machine
TCP_RETRIES2=4    # the connections of the daemons give up after 0.2 s x (2^5 - 1) = 6.2 s of retransmits
JOB_BOUND_S=$((WATCHDOG_S + 20))  # the ranks' exit (5.5 s), then the daemons' TCP timeout (6.2 s), + 8 s slack
SWEEP_POINTS=7
SWEEP=(--collectives all_reduce --dtypes fp32 --group-sizes 2 --layouts strided -b 256K -e 16M -f 2 -w 2 -n 10
  --outside-load-cores 2)
export ITERTIME LINK_DELAY READ_ROWS FAULT_ROWS WORK WATCHDOG_S RANK_SLACK_S TCP_RETRIES2 JOB_BOUND_S SWEEP_POINTS
export SWEEP_TEXT="${SWEEP[*]}"

in_cluster() {
  set -uo pipefail
  local F="$WORK/fault.h5"
  read -r -a SWEEP <<<"$SWEEP_TEXT"
  export HDF5_USE_FILE_LOCKING=FALSE  # read_rows reads the file while rank 0 commits new versions of it
  fail() { echo "FAIL: $*"; echo "--- stdout:"; tail -n 20 "$WORK/out"; echo "--- stderr:"; tail -n 30 "$WORK/err"; exit 1; }
  now_ms() { echo $(($(date +%s%N) / 1000000)); }
  seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
  # The namespaces emulated_cluster.sh made (itc-ID-node0, ...: its folder is /tmp/itc-ID).
  local ns=${ITERTIME_CLUSTER_DIR##*/}
  # Every process in the nodes belongs to the job (orted and its ranks); mpirun runs in the switch.
  node_pids() { ip netns pids "$ns-node0"; ip netns pids "$ns-node1"; }
  is_rank() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK='; }
  alive() { kill -0 "$1" 2>/dev/null && [[ "$(ps -o stat= -p "$1" 2>/dev/null)" != Z* ]]; }

  # ---- 1. the fault ----------------------------------------------------------------------------------
  # --output-filename: each orted also writes its ranks' output to files on its own node, so the lines
  # of node1's ranks, which cannot reach mpirun, are kept.
  ITERTIME_WATCHDOG_S=$WATCHDOG_S "$ITERTIME_CLUSTER_DIR/mpirun" -n 4 --output-filename "$WORK/ranks" "$ITERTIME" \
    calibrate comm -o "$F" "${SWEEP[@]}" >"$WORK/out" 2>"$WORK/err" &
  local launcher=$! started_ms
  started_ms=$(now_ms)
  local rows=0
  while ((rows < 2)); do
    alive "$launcher" || fail "the job ended before the fault ($(wc -l <"$WORK/out") lines of output)"
    (($(now_ms) - started_ms < 120000)) || fail "fewer than 2 points in the file after 120 s"
    sleep 0.2
    rows=$("$READ_ROWS" comm "$F" 2>/dev/null | wc -l)
  done
  local ranks=() orteds=() pid
  for pid in $(node_pids); do
    if is_rank "$pid"; then ranks+=("$pid"); else orteds+=("$pid"); fi
  done
  [[ ${#ranks[@]} -eq 4 ]] || fail "expected 4 ranks in the nodes, found ${#ranks[@]} (${ranks[*]})"
  [[ ${#orteds[@]} -eq 2 ]] || fail "expected 2 orteds in the nodes, found ${#orteds[@]}: $(for p in "${orteds[@]}"; do tr '\0' ' ' </proc/$p/cmdline | cut -c1-60; done)"
  "$READ_ROWS" comm "$F" >"$WORK/before" || fail "read_rows failed on the file before the fault"
  echo "fault: node1's link down after $(seconds $(($(now_ms) - started_ms))) s, $(wc -l <"$WORK/before") of $SWEEP_POINTS points in the file"
  "$ITERTIME_CLUSTER_DIR/link" node1 down || fail "cannot take node1's link down"
  local fault_ms ranks_gone_ms="" job_gone_ms="" t left
  fault_ms=$(now_ms)
  echo "switch routes with the link down: $(ip -n "$ITERTIME_CLUSTER_SWITCH_NS" -4 route show | tr '\n' ';')"
  while true; do
    t=$(now_ms)
    left=0
    for pid in "${ranks[@]}"; do alive "$pid" && left=$((left + 1)); done
    [[ $left -eq 0 && -z "$ranks_gone_ms" ]] && ranks_gone_ms=$((t - fault_ms))
    if [[ -n "$ranks_gone_ms" ]] && ! alive "$launcher" && [[ -z "$(node_pids)" ]]; then job_gone_ms=$((t - fault_ms)); break; fi
    ((t - fault_ms > (JOB_BOUND_S + 30) * 1000)) && break
    sleep 0.1
  done
  local status=""
  if ! alive "$launcher"; then wait "$launcher"; status=$?; fi
  local job_text="NOT within $((JOB_BOUND_S + 30)) s"
  [[ -n "$job_gone_ms" ]] && job_text="$(seconds "$job_gone_ms") s after it"
  echo "ranks gone $(seconds "${ranks_gone_ms:-0}") s after the fault; every process of the job gone $job_text;" \
    "mpirun status ${status:-(running)}"
  if [[ -z "$job_gone_ms" ]]; then
    for pid in $launcher $(node_pids); do alive "$pid" && echo "still alive: $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-100)"; done
    kill -KILL "$launcher" 2>/dev/null
    fail "the job outlived the fault by more than $((JOB_BOUND_S + 30)) s"
  fi
  [[ -n "$ranks_gone_ms" ]] && ((ranks_gone_ms <= (WATCHDOG_S + RANK_SLACK_S) * 1000 + WATCHDOG_S * 100)) ||
    fail "the ranks were gone only $(seconds "${ranks_gone_ms:-0}") s after the fault (bound: the limit $WATCHDOG_S s + a poll + $RANK_SLACK_S s)"
  ((job_gone_ms <= JOB_BOUND_S * 1000)) || fail "the job was gone only $(seconds "$job_gone_ms") s after the fault (bound $JOB_BOUND_S s)"
  [[ "$status" -ne 0 ]] || fail "mpirun exited 0 after the fault"
  local watched="^itertime: error: rank [0-9] of 4 waited [0-9.]+ s in MPI_[A-Za-z_]+ .*for its peers"
  grep -E "$watched" "$WORK/err" >"$WORK/lines"
  local r
  for r in 0 1; do
    grep -q "^itertime: error: rank $r of 4 " "$WORK/lines" || fail "no watchdog line from rank $r (node0) naming its MPI operation"
  done
  cat "$WORK/lines"
  # node1's ranks: ended by their own watchdog too (their lines, in node1's files, never reached mpirun).
  for r in 2 3; do
    grep -E "$watched" "$WORK"/ranks/*/rank.$r/stderr 2>/dev/null | grep -q "rank $r of 4 " ||
      fail "no watchdog line from rank $r (node1) in its output file"
    grep -E "$watched" "$WORK"/ranks/*/rank.$r/stderr | sed "s/^/(node1's file) /"
  done
  # The file after the fault: it reads, the rows are whole, the spans tile the samples.
  "$READ_ROWS" comm "$F" >"$WORK/after_fault" || fail "read_rows failed on the file after the fault (bad offsets?)"
  check_rows "$WORK/after_fault" || fail "a row of the file after the fault is not whole"
  "$FAULT_ROWS" "$F" >"$WORK/keys" || fail "itertime_fault_rows found damage: $(grep '^damage' "$WORK/keys")"
  ! grep -q "ORPHAN" "$WORK/keys" || fail "samples no row points at: $(grep ORPHAN "$WORK/keys")"
  # What was committed before the fault is still there, unchanged (the point in flight may have been
  # committed between our read and the cut: a row more, never a row less).
  [[ "$(head -n "$(wc -l <"$WORK/before")" "$WORK/after_fault")" == "$(cat "$WORK/before")" ]] ||
    fail "the rows written before the fault changed"
  local kept
  kept=$(wc -l <"$WORK/after_fault")
  [[ $kept -lt $SWEEP_POINTS ]] || fail "the sweep completed before the fault took effect"

  # ---- 2. the link returns; --resume ---------------------------------------------------------------
  "$ITERTIME_CLUSTER_DIR/link" node1 up || fail "cannot bring node1's link back"
  local talked=""
  for _ in $(seq 1 20); do
    "$ITERTIME_CLUSTER_DIR/on" node1 timeout 10 "$LINK_DELAY" --pingpong-server 7919 &
    local server=$!
    sleep 0.3
    if "$ITERTIME_CLUSTER_DIR/on" node0 timeout 5 "$LINK_DELAY" --pingpong-client 10.77.1.2 7919 20 >"$WORK/pingpong" 2>&1; then
      talked=$(cat "$WORK/pingpong")
    fi
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    [[ -n "$talked" ]] && break
    sleep 0.5
  done
  [[ -n "$talked" ]] || fail "node0 and node1 do not talk after node1's link came back"
  echo "link back: node0 <-> node1 ping-pong ${talked} us one way; switch routes: $(ip -n "$ITERTIME_CLUSTER_SWITCH_NS" -4 route show | tr '\n' ';')"
  local resume_started resume_ms
  resume_started=$(now_ms)
  ITERTIME_WATCHDOG_S=$WATCHDOG_S "$ITERTIME_CLUSTER_DIR/mpirun" -n 4 "$ITERTIME" calibrate comm -o "$F" --resume "${SWEEP[@]}" \
    >"$WORK/out" 2>"$WORK/err" || fail "the resumed run failed (status $?)"
  resume_ms=$(($(now_ms) - resume_started))
  local measured
  measured=$(grep -c "^ *[0-9]*/$SWEEP_POINTS " "$WORK/out")
  echo "resume: $(seconds "$resume_ms") s, measured $measured points; $(grep -E 'already' "$WORK/out" | tr '\n' ' ')"
  [[ $measured -eq $((SWEEP_POINTS - kept)) ]] || fail "the resumed run measured $measured points, expected $((SWEEP_POINTS - kept))"
  "$READ_ROWS" comm "$F" >"$WORK/resumed" || fail "read_rows failed on the resumed file"
  check_rows "$WORK/resumed" || fail "a row of the resumed file is not whole"
  "$FAULT_ROWS" "$F" >"$WORK/keys" || fail "itertime_fault_rows found damage in the resumed file"
  ! grep -q "ORPHAN" "$WORK/keys" || fail "samples no row points at in the resumed file"
  local total distinct
  total=$(wc -l <"$WORK/resumed")
  distinct=$(cut -f1 "$WORK/resumed" | sort -u | wc -l)
  [[ $total -eq $SWEEP_POINTS && $distinct -eq $SWEEP_POINTS ]] ||
    fail "the resumed file holds $total rows, $distinct distinct keys; expected $SWEEP_POINTS of each"
  [[ "$(head -n "$kept" "$WORK/resumed")" == "$(cat "$WORK/after_fault")" ]] || fail "the resume changed the rows written before the fault"
  echo "file: $total rows, $distinct distinct keys, the $kept rows from before the fault unchanged"
}

# check_rows FILE: each row (read_rows comm) checked clean, with iters (10) samples of its own (their
# min and max are the row's), min <= median <= max, inter-node, the key's size.
check_rows() {
  awk -F'\t' '
    {
      split($1, k, "/")
      if ($2 != 0) { print "row " NR " (" $1 "): check_errors " $2; bad++ }
      if ($4 != 10 || $6 != 10) { print "row " NR " (" $1 "): iters/samples " $4 "/" $6; bad++ }
      if (!($7 > 0 && $7 <= $8 && $8 <= $9)) { print "row " NR " (" $1 "): min/median/max " $7 "/" $8 "/" $9; bad++ }
      if ($10 != $7 || $11 != $9) { print "row " NR " (" $1 "): samples " $10 ".." $11 " are not the row min/max"; bad++ }
      if ($12 != "inter-node" || $15 != k[6]) { print "row " NR " (" $1 "): span " $12 ", bytes " $15; bad++ }
    }
    END { exit bad > 0 }' "$1"
}
export -f in_cluster check_rows

"$HERE/emulated_cluster.sh" --nodes 2 --slots 2 --bandwidth 1gbit --latency-us 100 --tcp-retries2 "$TCP_RETRIES2" --link-delay "$LINK_DELAY" \
  -- bash -c in_cluster
rc=$?
[[ $rc -eq 77 ]] && exit 77
[[ $rc -eq 0 ]] || { echo "FAIL: link_fault (exit $rc)"; exit 1; }
echo "PASS"
