#!/usr/bin/env bash
# links.sh: the emulated cluster's links measured by itertime itself (CTest `cluster_links`, label cluster).
#
#   links.sh ITERTIME LINK_DELAY
#
# Starts a 2-node emulated cluster (emulated_cluster.sh) with links shaped to 1 Gbit/s and 100 us, runs
# `itertime calibrate comm` across the nodes (one rank per node; a small sweep: send and all_reduce, fp32)
# and checks:
#  - the node-pair probe's figures for node0-node1 (commbench/node_links.hpp: latency, half the median
#    round trip of 8 bytes; bandwidth, windows of back-to-back messages, the slower direction): bandwidth
#    within 10 % of the shaped one, latency within 0.5x..1.5x (see below why not 10 %);
#  - every /comm row of the sweep (groups of 2 ranks, one per node) says inter-node;
#  - `itertime inspect` lists /comm/node_links with its one pair, and a --resume run measures no pair again.
# It also prints the cluster's own socket ping-pong check (emulated_cluster.sh): the probe's latency follows
# it, and on a loaded machine that check itself lands well off the 100 us asked (docs/comm.md, Node-pair links).
# Exit status: 0 passed, 1 failed, 77 skipped (the machine cannot host the cluster).
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
cluster_test_start "ITERTIME LINK_DELAY" "$@"

run_in_cluster() {
  local sweep=(--collectives send,all_reduce --dtypes fp32 -b 8 -e 64K -f 64 -n 20 --outside-load-cores 2)
  calibrate_comm_across_nodes 2 "$WORK/out" -o "$WORK/links.h5" "${sweep[@]}" || return 1
  cat "$WORK/out"
  calibrate_comm_across_nodes 2 "$WORK/resumed" -o "$WORK/links.h5" --resume "${sweep[@]}" || return 1
  echo "socket ping-pong of the cluster (emulated_cluster.sh): $ITERTIME_CLUSTER_LATENCY_US_MEASURED us" >"$WORK/socket"
}
export -f run_in_cluster
export ITERTIME WORK
# Bandwidth must land within 10 % of the shaped 1 Gbit/s. Latency is defined socket to socket (the
# cluster corrects its delay line until a spinning TCP ping-pong reads 100 us within 5 %); MPI's TCP
# transport adds its own software path on top (it read 98-133 us here on a quiet machine, 122-133 in most
# runs), so MPI's latency is printed and held to the link being there and shaped: within 0.5x..1.5x of
# the shaped 100 us (an unshaped path reads 17-58 us, a broken line far more). Each attempt is a fresh
# cluster, printed; the first within both bounds passes; a link that is consistently off fails.
bad=1
for attempt in 1 2 3; do
  rm -f "$WORK/links.h5"
  "$HERE/emulated_cluster.sh" --nodes 2 --slots 1 --bandwidth 1gbit --latency-us 100 --link-delay "$LINK_DELAY" \
    -- bash -c run_in_cluster >"$WORK/attempt" 2>&1
  rc=$?
  [[ $rc -eq 77 ]] && { cat "$WORK/attempt"; exit 77; }
  [[ $rc -eq 0 ]] || { cat "$WORK/attempt"; echo "FAIL: the calibration on the emulated cluster failed (exit $rc)"; exit 1; }
  # The report's row: "    node0-node1    LATENCY_US    GBIT_S"
  echo "attempt $attempt: $(cat "$WORK/socket")"
  awk '$1 == "node0-node1" && $2 ~ /^[0-9.]+$/ { lat = $2; bw = $3; n++ }
       END {
         if (n != 1) { print "  no node0-node1 row in the node-link report"; exit 1 }
         printf "  latency: shaped 100 us, measured %.1f us\n", lat
         printf "  bandwidth: shaped 1.000 Gbit/s, measured %.3f Gbit/s\n", bw
         bad = 0
         if (lat < 50 || lat > 150) { print "  latency outside 0.5x..1.5x of the shaped link"; bad = 1 }
         if (bw < 0.9 || bw > 1.1) { print "  bandwidth off by more than 10 %"; bad = 1 }
         exit bad
       }' "$WORK/out" && { bad=0; break; }
done
[[ $bad -eq 0 ]] || echo "FAIL: no attempt measured bandwidth within 10 % and latency within 0.5x..1.5x of the shaped link"
# Sweep rows: "  N/M  COLLECTIVE  fp32  2 consecutive SPAN  BYTES ..."
awk '$1 ~ /^[0-9]+\/[0-9]+$/ { n++; if ($6 != "inter-node") { print "FAIL: a group across nodes labelled " $6 ": " $0; bad = 1 } }
     END { if (n == 0) { print "FAIL: no /comm rows"; exit 1 }; if (!bad) printf "span: all %d /comm rows inter-node\n", n; exit bad }' \
  "$WORK/out" || bad=1
grep -q "1 pairs measured one at a time.*(1 already in the file)" "$WORK/resumed" ||
  { echo "FAIL: --resume did not find the pair in the file"; cat "$WORK/resumed"; bad=1; }
grep -q "node0-node1: latency" "$WORK/resumed" && { echo "FAIL: --resume measured the pair again"; bad=1; }
"$ITERTIME" inspect "$WORK/links.h5" >"$WORK/inspect" 2>&1 || { cat "$WORK/inspect"; bad=1; }
grep -Eq '^ +/comm/node_links +1 rows' "$WORK/inspect" || { echo "FAIL: inspect does not list /comm/node_links"; cat "$WORK/inspect"; bad=1; }
grep -Eq '^ +node0-node1 +[0-9.]+ +[0-9.]+$' "$WORK/inspect" || { echo "FAIL: inspect does not show the pair"; cat "$WORK/inspect"; bad=1; }
exit $bad
