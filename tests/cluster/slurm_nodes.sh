#!/usr/bin/env bash
# slurm_nodes.sh: itertime's multi-node Slurm batch scripts on the emulated cluster, with a real slurmctld
# and one slurmd per node (CTest `cluster_slurm`, label cluster; docs/slurm.md, "Across nodes, on the
# emulated cluster").
#
#   slurm_nodes.sh ITERTIME SOURCE_DIR H5CHECK LINK_DELAY
#
# ITERTIME is the built binary, SOURCE_DIR the project root, H5CHECK the built itertime_slurm_h5check,
# LINK_DELAY the built itertime_link_delay. What it does:
#   0. installs slurm-wlm and munge with apt-get when they are missing (as tests/slurm/slurm_cluster.sh),
#      then starts a 2-node emulated cluster (tests/cluster/emulated_cluster.sh: node0 and node1, 2 slots
#      each, links 1 Gbit/s and 100 us) and, inside it, every daemon in a node's namespaces:
#        - munged in node0 (its socket is a file under the cluster's folder, which a unix socket on the
#          file system stays: network namespaces do not isolate it, so every node's Slurm reaches it);
#        - slurmctld in node0 (SlurmctldHost=node0(10.77.0.2)); slurmd in node0 and in node1
#          (`slurmd -N nodeK`, NodeAddr=10.77.K.2; each node has its own network namespace, so both
#          listen on the same SlurmdPort; spool, pid and log files are per node through %n);
#      sbatch, squeue and scontrol run inside node0 (`$ITERTIME_CLUSTER_DIR/on node0 ...`);
#   a. `itertime slurm submit --nodes 2 --ntasks-per-node 2` (srun --mpi=pmix, the default launcher) of a
#      job whose comm sweep is small and whose ground truth has two 4-rank layouts (dp2-tp2: TP inside a
#      node, DP across; dp2-pp2); waits for COMPLETED and checks the file: rows == distinct keys in
#      every table, /comm samples consistent, both configurations measured, hostnames node0 and node1 in /meta
#      (`itertime inspect`), `itertime info` saw 2 nodes, and the comm sweep measured groups across
#      the nodes as inter-node (strided pairs, the group of 4) and groups inside a node as intra-node;
#   b. submits a longer comm calibration with `--launcher mpirun` (Open MPI's mpirun inside the allocation
#      starts its daemon on node1 with srun: plm_slurm, no ssh), requeues it with `scontrol requeue`
#      while it runs, releases it, waits for COMPLETED and checks that every point of the sweep is in the
#      file once (rows == distinct keys == the sweep's size) and that the second run resumed;
#   c. teardown on any exit: scancel, the daemons stopped by their process ids (TERM, then KILL), then the
#      emulated cluster's own teardown kills whatever is left in its namespaces and removes its folder,
#      which holds everything of this test (Slurm's state, spool, logs, munge key and socket, the HDF5
#      files). Nothing of it runs outside the namespaces, so a SIGKILL of this script leaves nothing
#      either (the cluster's reaper).
# How ranks start across nodes, and why: srun --mpi=pmix (Slurm 22.05's pmix plugin, Open MPI 4.1 with
# Debian's external PMIx; pmi2 does not start Debian's Open MPI) starts every rank from its node's slurmd,
# so each rank lives in its node's namespaces; Open MPI's mpirun inside the allocation reads it (ras_slurm)
# and starts its daemon on the other node with srun (plm_slurm is chosen over plm_rsh inside an
# allocation, so no ssh is tried). The ranks use shared memory inside a node and TCP over eth0 across
# (Open MPI's default excludes only lo). The jobs run with OMPI_MCA_mpi_yield_when_idle=1 exported: the 4
# ranks share this machine's cores, where busy-polling ranks starve the one they wait for.
# Exit status: 0 passed, 1 failed, 77 skipped (not root, Slurm or munge cannot be installed or started,
# the machine cannot host the emulated cluster; the reason is printed). ITERTIME_SLURM_TEST_REQUIRE=1
# turns a skip into a failure; ITERTIME_SLURM_TEST_KEEP=1 copies the test's folder to /tmp before the
# cluster's teardown removes it.
SKIP_CODE=77

if [[ "${1:-}" != --inside ]]; then
  # ---- outside the cluster: install what is missing, then start the cluster with this script inside --
  source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
  source "$(dirname "${BASH_SOURCE[0]}")/../slurm/slurm_lib.sh"
  take_args "ITERTIME SOURCE_DIR H5CHECK LINK_DELAY" "$@"
  HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  STARTED=$SECONDS
  say() { printf '[slurm-nodes %4ds] %s\n' $((SECONDS - STARTED)) "$*"; }
  skip() {
    say "SKIP: $*"
    exit_skipped
  }
  [[ "$(id -u)" -eq 0 ]] || skip "the emulated cluster and the Slurm daemons need root"
  ensure_slurm_installed
  say "starting a 2-node emulated cluster (1 Gbit/s, 100 us)"
  "$HERE/emulated_cluster.sh" --nodes 2 --slots 2 --bandwidth 1gbit --latency-us 100 --link-delay "$LINK_DELAY" \
    -- bash "${BASH_SOURCE[0]}" --inside "$ITERTIME" "$SOURCE_DIR" "$H5CHECK"
  rc=$?
  if [[ $rc -eq $SKIP_CODE ]]; then skip "see the reason above"; fi
  say "done (status $rc) in $((SECONDS - STARTED)) s"
  exit "$rc"
fi

# ---- inside: this (root) namespace, with the cluster's commands in $ITERTIME_CLUSTER_DIR ---------------
shift
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../slurm/slurm_lib.sh"
take_args "ITERTIME SOURCE_DIR H5CHECK" "$@"
STARTED=$SECONDS
ON="$ITERTIME_CLUSTER_DIR/on"
T="$ITERTIME_CLUSTER_DIR/slurm"  # removed with the cluster, however this script ends
NODES=(node0 node1)
DAEMONS=()  # "name pid" of every daemon started, stopped in reverse order

say() { printf '[slurm-nodes %4ds] %s\n' $((SECONDS - STARTED)) "$*"; }
dump_logs() { log_tails "$T"; }
skip() { say "SKIP: $*"; dump_logs; exit "$SKIP_CODE"; }
fail() { say "FAIL: $*"; dump_logs; exit 1; }

# Slurm's commands, run where slurmctld is reachable: inside node0 (slurm_cmd for slurm_lib.sh).
s0() { "$ON" node0 "$@"; }
slurm_cmd() { s0 "$@"; }

cleanup() {
  local code=$? i ids
  trap - EXIT INT TERM
  if [[ ${#DAEMONS[@]} -gt 1 ]]; then
    ids="$(s0 squeue -h -o %i 2>/dev/null | tr '\n' ' ')"
    if [[ -n "${ids// /}" ]]; then
      say "teardown: cancelling jobs $ids"
      # shellcheck disable=SC2086
      s0 scancel $ids 2>/dev/null
      for i in $(seq 1 20); do
        [[ -z "$(s0 squeue -h -o %i 2>/dev/null)" ]] && break
        sleep 1
      done
    fi
  fi
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; --i)); do stop_pid "${DAEMONS[i]#* }"; done
  if [[ "${ITERTIME_SLURM_TEST_KEEP:-0}" == 1 && -d "$T" ]]; then
    local kept
    kept="$(mktemp -d /tmp/itertime-slurm-nodes.XXXXXX)" && cp -a "$T/." "$kept/" && say "teardown: kept $T as $kept"
  fi
  say "teardown done (status $code); the cluster's teardown follows"
  exit "$code"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

# start_daemon NAME NODE CMD...: CMD in the background inside NODE; its process id (the same through
# `on`, which execs) goes to DAEMONS.
start_daemon() {
  local name=$1 node=$2
  shift 2
  "$ON" "$node" "$@" >>"$T/log/$name.stdout.log" 2>&1 &
  DAEMONS+=("$name $!")
}
daemon_alive() {  # daemon_alive NAME
  local d
  for d in "${DAEMONS[@]}"; do [[ "${d%% *}" == "$1" ]] && { kill -0 "${d#* }" 2>/dev/null; return; }; done
  return 1
}

# ---------------------------------------------------------------------------------------------------
# 0. munged, slurmctld and one slurmd per node.

mkdir -p "$T/munge-key" "$T/run" "$T/state" "$T/spool" "$T/log" "$T/work" || fail "cannot create $T"
chmod 755 "$ITERTIME_CLUSTER_DIR" "$T" "$T/run"
chmod 700 "$T/munge-key"
dd if=/dev/urandom of="$T/munge-key/munge.key" bs=1024 count=1 status=none || fail "cannot write a munge key"
chmod 400 "$T/munge-key/munge.key"
MUNGE_SOCKET="$T/run/munge.socket"
start_daemon munged node0 munged -F --key-file="$T/munge-key/munge.key" --socket="$MUNGE_SOCKET" \
  --pid-file="$T/run/munged.pid" --log-file="$T/log/munged.log" --seed-file="$T/munge-key/munged.seed"
for _ in $(seq 1 50); do
  [[ -S "$MUNGE_SOCKET" ]] && break
  daemon_alive munged || break
  sleep 0.2
done
for node in "${NODES[@]}"; do  # the one munged answers every node
  "$ON" "$node" sh -c 'munge -S "$1" -n </dev/null | unmunge -S "$1" >/dev/null' sh "$MUNGE_SOCKET" 2>/dev/null ||
    skip "munged did not start or does not answer on $MUNGE_SOCKET from $node (see its log)"
done

# Fresh network namespaces: Slurm's usual ports are free there.
export SLURM_CONF="$T/slurm.conf"
{
  echo "# Two-node Slurm cluster on the emulated cluster (tests/cluster/slurm_nodes.sh); everything lives in $T."
  echo "ClusterName=itertimenodes"
  echo "SlurmctldHost=node0(10.77.0.2)"
  slurm_conf_settings "$T" "$MUNGE_SOCKET" 6817 6818 5 %n
  echo "TmpFS=$T/tmp/%n"
  for k in "${!NODES[@]}"; do
    echo "NodeName=${NODES[k]} NodeAddr=10.77.$k.2 CPUs=$ITERTIME_CLUSTER_SLOTS State=UNKNOWN"
  done
  echo "PartitionName=ci Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
} >"$SLURM_CONF"

start_daemon slurmctld node0 slurmctld -D -i -f "$SLURM_CONF"
# `ip netns exec` gives each command a mount namespace of its own with a fresh /sys, where /sys/fs/cgroup is
# empty; slurmd refuses to start without a file system there ("No filesystem mounted on /sys/fs/cgroup").
# A tmpfs is enough for its cgroup/v1 plugin to load (proctrack/linuxproc and task/none use no controller);
# it stays in the slurmd's own mount namespace.
for node in "${NODES[@]}"; do
  mkdir -p "$T/spool/$node" "$T/tmp/$node"
  start_daemon "slurmd.$node" "$node" sh -c 'mount -t tmpfs itertime-cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/systemd &&
    mount -t cgroup -o none,name=systemd itertime-cgroup /sys/fs/cgroup/systemd && exec "$@"' sh \
    slurmd -D -N "$node" -f "$SLURM_CONF"
done

idle_nodes() { s0 sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l; }
for _ in $(seq 1 60); do
  for d in slurmctld slurmd.node0 slurmd.node1; do daemon_alive "$d" || skip "$d exited at start (see its log)"; done
  [[ "$(idle_nodes)" -eq ${#NODES[@]} ]] && break
  sleep 1
done
[[ "$(idle_nodes)" -eq ${#NODES[@]} ]] ||
  skip "the nodes did not become idle within 60 s: $(s0 sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' ')"
say "Slurm up: $(s0 sinfo -h -N -o '%N %T' | tr '\n' ' ')"
s0 srun -N2 -n2 hostname >"$T/srun-hostname.txt" 2>&1 || { cat "$T/srun-hostname.txt"; skip "srun cannot run a trivial step on both nodes"; }
[[ "$(sort "$T/srun-hostname.txt" | tr '\n' ' ')" == "node0 node1 " ]] ||
  fail "srun -N2 -n2 hostname printed '$(tr '\n' ' ' <"$T/srun-hostname.txt")', not node0 and node1"

# ---------------------------------------------------------------------------------------------------
# Helpers.

two_nodes() {  # two_nodes LOG: `itertime info` (the script's preflight) saw 4 ranks, 2 on node0 and 2 on node1
  local want
  for want in "ranks +4" "nodes +2" "node 0 +node0, 2 rank\\(s\\)" "node 1 +node1, 2 rank\\(s\\)"; do
    grep -qE "^  $want\$" "$1" || fail "itertime info in $1 does not show '$want' (the MPI world across both nodes)"
  done
}
check_tables() {  # check_tables FILE: h5check's lines, each table with as many distinct keys as rows
  local check table rows unique
  check="$("$H5CHECK" "$1")" || fail "itertime_slurm_h5check could not read $1"
  echo "$check" | sed 's/^/    /' >&2
  while read -r table _ rows _ unique _; do
    [[ "$rows" == "$unique" ]] || fail "$table has $rows rows but $unique distinct keys (duplicates)"
  done <<<"$check"
  [[ "$(check_line "$(grep '^/comm/points' <<<"$check")" consistent)" == yes ]] || fail "/comm samples inconsistent in $1"
  echo "$check"
}
# Progress rows of calibrate comm: "  N/M  COLLECTIVE  DTYPE  G LAYOUT SPAN  BYTES ..."
span_rows() {  # span_rows LOG LAYOUT GROUP [SPAN]: progress rows of that layout and group size (with SPAN)
  awk -v l="$2" -v g="$3" -v s="${4:-}" \
    '$1 ~ /^[0-9]+\/[0-9]+$/ && $4 == g && $5 == l && (s == "" || $6 == s) { n++ } END { print n + 0 }' "$1"
}

# Exported to the jobs (sbatch's --export=ALL). The 4 ranks of the 2 "nodes" share this machine's cores:
# ranks that busy-poll take whole scheduler slices from the rank they wait for (an 8-byte send took 8 ms),
# so they yield when idle, as the cluster's own mpirun has them do (mpirun would itself where it sees
# more ranks than slots, srun and mpirun inside an allocation of 2 CPUs per node do not).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
cd "$T/work" || fail "cannot enter $T/work"
MODEL="$SOURCE_DIR/data/models/tiny-llama-gqa.json"

# ---------------------------------------------------------------------------------------------------
# a. comm + ground truth over 2 nodes x 2 ranks, launched with srun --mpi=pmix.

JOB_A="$T/nodes-job.json"
cat >"$JOB_A" <<EOF
{
  "name": "slurm-nodes",
  "model": "$MODEL",
  "backend": "cpu",
  "seed": 7,
  "ranks": 4,
  "groundtruth": {"warmup_iters": 1, "timed_iters": 2, "rounds": 2, "max_extra_rounds": 0, "min_timed_seconds": 0,
                  "outside_load_cores": 100},
  "comm": {"min_bytes": "8", "max_bytes": "8K", "step_factor": 1024, "warmup_iters": 1, "iters": 3},
  "configs": [
    {"dp": 2, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 4, "seq_len": 16, "precision": "fp32"},
    {"dp": 2, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 4, "seq_len": 16, "precision": "fp32"}
  ]
}
EOF
H5A="$T/nodes.h5"
say "a: itertime slurm submit --nodes 2 --ntasks-per-node 2 (srun --mpi=pmix), comm + groundtruth -> $H5A"
ID_A="$(s0 "$ITERTIME" slurm submit "$JOB_A" --nodes 2 --ntasks-per-node 2 --partition ci --time 10:00 \
  --stages comm,groundtruth --output "$H5A" --parsable)" || fail "itertime slurm submit failed (a)"
[[ "$ID_A" =~ ^[0-9]+$ ]] || fail "itertime slurm submit --parsable printed '$ID_A', not a job id"
grep -q -- '--nodes=2 --ntasks=4 --ntasks-per-node=2' "$H5A.sbatch" || fail "the script does not launch 4 ranks on 2 nodes"
STATE_A="$(wait_job "$ID_A" 300)"
LOG_A="$H5A.slurm-$ID_A.log"
say "a: job $ID_A on $(job_field "$ID_A" NodeList) ended $STATE_A (exit code $(job_field "$ID_A" ExitCode)) after $(job_field "$ID_A" RunTime)"
if [[ "$STATE_A" != COMPLETED ]]; then
  [[ -f "$LOG_A" ]] && tail -n 40 "$LOG_A"
  fail "job $ID_A ended $STATE_A, expected COMPLETED"
fi
[[ "$(job_field "$ID_A" NodeList)" == "node[0-1]" ]] || fail "job $ID_A ran on $(job_field "$ID_A" NodeList), not node[0-1]"
grep -q "all stages complete" "$LOG_A" || fail "the log of job $ID_A does not say 'all stages complete'"
two_nodes "$LOG_A"
"$ITERTIME" inspect "$H5A" >"$T/inspect-a.txt" || fail "itertime inspect failed on $H5A"
for want in "comm_hostnames +node0,node1" "comm_node_of_rank +0,0,1,1" "comm_num_nodes +2"; do
  grep -qE "^  $want\$" "$T/inspect-a.txt" || { cat "$T/inspect-a.txt"; fail "itertime inspect: no '$want' in /meta"; }
done
grep -q "# 2 measured, 0 skipped, 0 failed" "$LOG_A" || fail "the ground truth of job $ID_A did not measure both configurations"
CHECK_A="$(check_tables "$H5A")"
GT_ROWS="$(check_line "$(grep '^/groundtruth/configs' <<<"$CHECK_A")" rows)"
[[ "$GT_ROWS" == 2 ]] || fail "/groundtruth/configs has $GT_ROWS rows, the job lists 2 configurations"
COMM_ROWS="$(check_line "$(grep '^/comm/points' <<<"$CHECK_A")" rows)"
[[ "$COMM_ROWS" -gt 0 ]] || fail "/comm/points is empty"
# Under srun's block distribution ranks 0,1 are on node0 and 2,3 on node1: consecutive pairs lie inside a
# node, strided pairs ({0,2}, {1,3}) and the group of 4 span both.
for want in "consecutive 2 intra-node" "strided 2 inter-node" "consecutive 4 inter-node"; do
  read -r layout group span <<<"$want"
  n="$(span_rows "$LOG_A" "$layout" "$group" "$span")"
  all="$(span_rows "$LOG_A" "$layout" "$group")"
  [[ "$n" -gt 0 && "$n" == "$all" ]] || fail "g$group $layout: $n of $all points measured as $span"
  say "a: g$group $layout: $n points, all $span"
done
say "a: passed ($COMM_ROWS comm points, $GT_ROWS ground-truth configurations, hosts ${NODES[*]})"

# ---------------------------------------------------------------------------------------------------
# b. A longer comm calibration with mpirun inside the allocation, requeued while it runs.

JOB_B="$T/requeue-job.json"
cat >"$JOB_B" <<EOF
{
  "name": "slurm-nodes-requeue",
  "model": "$MODEL",
  "backend": "cpu",
  "ranks": 4,
  "groundtruth": {"max_extra_rounds": 0, "outside_load_cores": 100},
  "comm": {"min_bytes": "8", "max_bytes": "256K", "step_factor": 8, "warmup_iters": 1, "iters": 10},
  "configs": [{"dp": 4, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 4, "seq_len": 16, "precision": "fp32"}]
}
EOF
H5B="$T/requeue.h5"
say "b: comm calibration over 2 nodes (mpirun inside the allocation) -> $H5B"
ID_B="$(s0 "$ITERTIME" slurm submit "$JOB_B" --nodes 2 --ntasks-per-node 2 --partition ci --time 10:00 \
  --launcher mpirun --stages comm --output "$H5B" --parsable)" || fail "itertime slurm submit failed (b)"
LOG_B="$H5B.slurm-$ID_B.log"
all_idle() { [[ "$(idle_nodes)" -eq ${#NODES[@]} ]]; }
requeue_comm_phase "$ID_B" "$LOG_B" 40 180 300 all_idle PHASE_B
TOTAL="${PHASE_B[1]}" RESUMED="${PHASE_B[2]}"
CHECK_B="$(check_tables "$H5B")"
UNIQUE_B="$(check_line "$(grep '^/comm/points' <<<"$CHECK_B")" unique)"
[[ "$UNIQUE_B" == "$TOTAL" ]] || fail "/comm/points has $UNIQUE_B distinct points, the sweep has $TOTAL: rows missing"
two_nodes "$LOG_B"
n="$(span_rows "$LOG_B" strided 2 inter-node)"
[[ "$n" -gt 0 ]] || fail "job $ID_B measured no strided pair as inter-node (mpirun's ranks are not spread over the nodes)"
# mpirun started its daemon on node1 through Slurm (plm_slurm: a step of the job on node1), not ssh.
grep -q "launch task StepId=$ID_B\." "$T/log/slurmd.node1.log" ||
  fail "node1's slurmd launched no step of job $ID_B: mpirun did not start its daemon there with srun"
say "b: passed ($RESUMED points kept across the requeue, $TOTAL in all, no duplicate, none missing)"

say "all multi-node Slurm checks passed in $((SECONDS - STARTED)) s"
exit 0
