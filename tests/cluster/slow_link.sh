#!/usr/bin/env bash
# slow_link.sh: a slow node found by name (CTest `cluster_slow_link`, label cluster).
#
#   slow_link.sh ITERTIME LINK_DELAY
#
# Starts a 3-node emulated cluster (emulated_cluster.sh), links 1 Gbit/s and 100 us except node1's, at
# 200 Mbit/s (--node-bandwidth node1=200mbit: node1 sends slowly), runs `itertime calibrate comm` across
# it (one rank per node, a tiny sweep) and checks the node-pair report (common/node_link_report.hpp): it
# names node1 as the slow node (`slow: node1 (its 2 links ...)`), flags node1's two pairs and not
# node0-node2, and `itertime inspect` judges the stored pairs the same way.
# Exit status: 0 passed, 1 failed, 77 skipped (the machine cannot host the cluster).
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
cluster_test_start "ITERTIME LINK_DELAY" "$@"

run_in_cluster() {
  calibrate_comm_across_nodes 3 "$WORK/out" -o "$WORK/slow.h5" \
    --collectives all_reduce --dtypes fp32 -b 8 -e 1K -f 128 -n 10 --outside-load-cores 2 || return 1
  cat "$WORK/out"
}
export -f run_in_cluster
export ITERTIME WORK
"$HERE/emulated_cluster.sh" --nodes 3 --slots 1 --bandwidth 1gbit --latency-us 100 --node-bandwidth node1=200mbit \
  --link-delay "$LINK_DELAY" -- bash -c run_in_cluster
rc=$?
[[ $rc -eq 77 ]] && exit 77
[[ $rc -eq 0 ]] || { echo "FAIL: the calibration on the emulated cluster failed (exit $rc)"; exit 1; }
"$ITERTIME" inspect "$WORK/slow.h5" >"$WORK/inspect" 2>&1 || { cat "$WORK/inspect"; echo "FAIL: inspect"; exit 1; }
bad=0
for file in out inspect; do
  grep -Eq '^ +slow: node1 \(its 2 links at ' "$WORK/$file" || { echo "FAIL ($file): node1 not named as the slow node"; bad=1; }
  for pair in node0-node1 node1-node2; do
    grep -Eq "^ +$pair .* SLOW" "$WORK/$file" || { echo "FAIL ($file): $pair not flagged"; bad=1; }
  done
  grep -Eq '^ +node0-node2 +[0-9.]+ +[0-9.]+$' "$WORK/$file" || { echo "FAIL ($file): node0-node2 flagged or missing"; bad=1; }
done
grep -E '^ +slow: ' "$WORK/out"
exit $bad
