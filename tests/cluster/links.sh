#!/usr/bin/env bash
# links.sh: the emulated cluster's links measured by itertime itself (CTest `cluster_links`, label cluster).
#
#   links.sh ITERTIME LINK_DELAY
#
# Starts a 2-node emulated cluster (emulated_cluster.sh) with links shaped to 1 Gbit/s and 100 us, runs
# `itertime calibrate comm` across the nodes (one rank per node: send, 8 B .. 16 MiB) and checks that the
# measured inter-node bandwidth (the largest send) and latency (the smallest send: half of a ping-pong
# is what MPI's send in latency mode does not see, so the one-way time is the send's) lie within 10 % of
# the shaped ones. Exit status: 0 passed, 1 failed, 77 skipped (the machine cannot host the cluster).
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
take_args "ITERTIME LINK_DELAY" "$@"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

run_in_cluster() {
  "$ITERTIME_CLUSTER_DIR/mpirun" -n 2 --map-by node "$ITERTIME" calibrate comm -o "$WORK/links.h5" \
    --collectives send --dtypes fp32 -b 8 -e 16M -f 16 -n 30 --outside-load-cores 2 >"$WORK/out" 2>&1 ||
    { cat "$WORK/out"; return 1; }
  cat "$WORK/out"
}
export -f run_in_cluster
export ITERTIME WORK
"$HERE/emulated_cluster.sh" --nodes 2 --slots 1 --bandwidth 1gbit --latency-us 100 --link-delay "$LINK_DELAY" \
  -- bash -c run_in_cluster
rc=$?
[[ $rc -eq 77 ]] && exit 77
[[ $rc -eq 0 ]] || { echo "FAIL: the calibration on the emulated cluster failed (exit $rc)"; exit 1; }
# Rows: "  N/M  send  fp32  2 consecutive inter-node  BYTES  COUNT  MEDIAN ..."
awk '$2 == "send" && $6 == "inter-node" { bytes[n + 0] = $7; med[n + 0] = $9; n++ }
     END {
       if (n < 2) { print "FAIL: no inter-node send rows"; exit 1 }
       lat = med[0]; bw_gbit = bytes[n - 1] * 8 / med[n - 1] / 1000
       printf "latency: shaped 100 us, measured %.1f us (8 B send)\n", lat
       printf "bandwidth: shaped 1.000 Gbit/s, measured %.3f Gbit/s (%d B send)\n", bw_gbit, bytes[n - 1]
       bad = 0
       if (lat < 90 || lat > 110) { print "FAIL: latency off by more than 10 %"; bad = 1 }
       if (bw_gbit < 0.9 || bw_gbit > 1.1) { print "FAIL: bandwidth off by more than 10 %"; bad = 1 }
       exit bad
     }' "$WORK/out"
