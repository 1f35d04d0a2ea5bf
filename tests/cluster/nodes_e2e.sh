#!/usr/bin/env bash
# nodes_e2e.sh: the pipeline across emulated nodes (CTest `cluster_nodes`, label cluster; docs/cluster.md).
#
#   nodes_e2e.sh ITERTIME LINK_DELAY SOURCE_DIR
#
# 1. 2 nodes x 2 ranks (1 Gbit/s, 100 us links): `itertime run jobs/cluster-2node.json` (comm, ops,
#    ground truth, validation) into one file. Checks: /meta names both hosts; /comm holds intra-node and
#    inter-node points; validation scores every configuration and shows each tuple's span.
# 2. 4 nodes x 1 rank: ground truth of jobs/cluster-4node.json (the same 4-rank layouts, every group now
#    across nodes, dp4 across all four).
# 3. Each 4-node configuration predicted from the 2-node calibration with one rank per node, beside its
#    4-node ground truth (APE per configuration, MAPE), and 8 nodes predicted. Checks: every 4-node
#    configuration is predicted with its groups placed on 4 nodes x 1 rank; dp4's DP all-reduce across
#    4 nodes costs more than dp2's across 2 (the 2-node table scaled by node count); the accuracy is
#    printed, not judged (a benchmark's figure, not a test's: the machine is shared).
# Exit status: 0 passed, 1 failed, 77 skipped (the machine cannot host the cluster).
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
cluster_test_start "ITERTIME LINK_DELAY SOURCE_DIR" "$@"
cd "$SOURCE_DIR" || exit 1
MODEL=data/models/tiny-llama-gqa.json
failed=0
check() {  # check CONDITION_STATUS MESSAGE
  if [[ "$1" -ne 0 ]]; then echo "FAIL: $2"; failed=1; else echo "ok: $2"; fi
}
cluster() {  # cluster NODES SLOTS CMD...
  local nodes=$1 slots=$2
  shift 2
  "$HERE/emulated_cluster.sh" --nodes "$nodes" --slots "$slots" --bandwidth 1gbit --latency-us 100 \
    --link-delay "$LINK_DELAY" -- "$@"
}

# ---- 1. the pipeline on 2 nodes x 2 ranks --------------------------------------------------------------
export ITERTIME WORK
cluster 2 2 bash -c '"$ITERTIME_CLUSTER_DIR/mpirun" -n 4 "$ITERTIME" run jobs/cluster-2node.json -o "$WORK/c2.h5"' \
  >"$WORK/run2.out" 2>&1
rc=$?
[[ $rc -eq 77 ]] && { cat "$WORK/run2.out"; exit 77; }
if [[ $rc -ne 0 ]]; then
  tail -n 60 "$WORK/run2.out"
  echo "FAIL: itertime run on 2 emulated nodes exited $rc"
  exit 1
fi
"$ITERTIME" inspect "$WORK/c2.h5" >"$WORK/inspect2" 2>&1
grep -Eq '^  hostnames +node0,node1$' "$WORK/inspect2"
check $? "/meta names the two nodes (hostnames node0,node1)"
grep -Eq ' intra-node ' "$WORK/run2.out" && grep -Eq ' inter-node ' "$WORK/run2.out"
check $? "/comm holds points inside a node and across nodes"
# The first validation table (leave-one-tuple-out): rows "  (dp,tp,pp) PRECISION ..." up to its next "#" line.
scored=$(awk '/^# \(dp,tp,pp\) precision/ { inside = 1; next } inside && /^#/ { exit } inside && /^  \(/ { n++ } END { print n + 0 }' "$WORK/run2.out")
[[ "$scored" -eq 8 ]]
check $? "validation scores the 8 configurations of the 2-node job (scored $scored)"
sed -n '/^# MAPE per tuple across nodes/,/^#$/p' "$WORK/run2.out" >"$WORK/spans2"
cat "$WORK/spans2"
grep -Eq '^  \(2,2,1\) +2 nodes: tp in, dp across 2 ' "$WORK/spans2" && grep -Eq '^  \(2,1,1\) +1 node ' "$WORK/spans2"
check $? "validation shows each tuple's span: (2,2,1) tp in, dp across 2; (2,1,1) on one node"

# ---- 2. ground truth on 4 nodes x 1 rank ---------------------------------------------------------------
cluster 4 1 bash -c '"$ITERTIME_CLUSTER_DIR/mpirun" -n 4 "$ITERTIME" calibrate groundtruth --job jobs/cluster-4node.json -o "$WORK/g4.h5"' \
  >"$WORK/run4.out" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  tail -n 40 "$WORK/run4.out"
  echo "FAIL: ground truth on 4 emulated nodes exited $rc"
  exit 1
fi

# ---- 3. the 4-node configurations predicted from the 2-node calibration -----------------------------------
# Ground-truth rows: "  1/5  tiny-llama-gqa/dp4-tp1-pp1/mbs1/gbs4/seq32/fp32  ok  4  TIME_US ..."
awk '$3 == "ok" { print $2, $5 }' "$WORK/run4.out" >"$WORK/g4.rows"
[[ -s "$WORK/g4.rows" ]]
check $? "4-node ground truth has measured configurations"
predict_us() {  # predict_us DP TP PP PRECISION RANKS_PER_NODE [GBS] -> iteration_us (empty on failure)
  "$ITERTIME" predict "$WORK/c2.h5" --model "$MODEL" --dp "$1" --tp "$2" --pp "$3" --precision "$4" --seq 32 \
    --gbs "${6:-4}" --ranks-per-node "$5" --json 2>"$WORK/predict.err" >"$WORK/predict.json" || { cat "$WORK/predict.err" >&2; return 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iteration_us"])' "$WORK/predict.json"
}
printf '%-48s %12s %12s %8s\n' "4 nodes x 1 rank" "measured_us" "predicted_us" "APE(%)"
sum_ape=0 n=0
while read -r key measured_us; do
  layout=$(echo "$key" | cut -d/ -f2)
  precision=$(echo "$key" | cut -d/ -f6)
  dp=$(echo "$layout" | sed -E 's/^dp([0-9]+)-.*/\1/') tp=$(echo "$layout" | sed -E 's/.*-tp([0-9]+)-.*/\1/')
  pp=$(echo "$layout" | sed -E 's/.*-pp([0-9]+).*/\1/')
  predicted_us=$(predict_us "$dp" "$tp" "$pp" "$precision" 1)
  if [[ -z "$predicted_us" ]]; then
    check 1 "$key predicted from the 2-node calibration at 1 rank per node"
    continue
  fi
  grep -q '"nodes": 4' "$WORK/predict.json"
  check $? "$key placed on 4 nodes"
  ape=$(awk -v m="$measured_us" -v p="$predicted_us" 'BEGIN { d = p - m; if (d < 0) d = -d; printf "%.1f", 100 * d / m }')
  printf '%-48s %12.0f %12.0f %8s\n' "$key" "$measured_us" "$predicted_us" "$ape"
  sum_ape=$(awk -v s="$sum_ape" -v a="$ape" 'BEGIN { print s + a }')
  n=$((n + 1))
done <"$WORK/g4.rows"
[[ $n -gt 0 ]] && awk -v s="$sum_ape" -v n="$n" 'BEGIN { printf "MAPE 4 nodes from the 2-node calibration: %.1f %% over %d configurations\n", s / n, n }'

# The DP all-reduce of dp4 across 4 nodes x 1 rank comes from the 2-node pairs' table scaled to 4 nodes
# (more ring steps, a larger bus factor), so it costs more than dp2's across 2 nodes x 1 rank, each link
# carrying one flow in both. (dp4 on 4 x 1 against 2 x 2 has no fixed order: 2 x 2 sums inside each node
# first, through shared memory that is slow on this oversubscribed machine, and shares each link by 2.)
dp_comm_us() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["breakdown_us"]["dp_comm"])' "$WORK/predict.json"; }
predict_us 2 1 1 fp32 1 >/dev/null && dp2_on_2x1=$(dp_comm_us)
predict_us 4 1 1 fp32 1 >/dev/null && dp4_on_4x1=$(dp_comm_us)
grep -q '"text": "4 nodes x 1 rank; dp across 4 nodes"' "$WORK/predict.json"
check $? "dp4 at 1 rank per node is placed as 4 nodes x 1 rank, dp across 4 nodes"
awk -v a="${dp4_on_4x1:-0}" -v b="${dp2_on_2x1:-0}" 'BEGIN { exit !(a > b && b > 0) }'
check $? "dp4's DP all-reduce across 4 nodes ($dp4_on_4x1 us) costs more than dp2's across 2 ($dp2_on_2x1 us)"
dp8_on_8x1=$(predict_us 8 1 1 fp32 1 8 2>/dev/null)
echo "8 nodes x 1 rank, dp8 fp32, gbs 8 (micro-batch 1 per rank): ${dp8_on_8x1:-not predicted: $(head -c 300 "$WORK/predict.err")} us"
exit $failed
