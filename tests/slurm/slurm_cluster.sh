#!/usr/bin/env bash
# slurm_cluster.sh: the real Slurm test (CTest `slurm_cluster`, label slurm; docs/slurm.md).
#
#   slurm_cluster.sh ITERTIME SOURCE_DIR H5CHECK
#
# ITERTIME is the built binary, SOURCE_DIR the project root, H5CHECK the built itertime_slurm_h5check.
# It makes this machine a one-node Slurm cluster in a temporary folder and runs itertime on it:
#   0. installs slurm-wlm and munge from Debian with apt-get when they are missing (idempotent), then
#      starts munged (own key and socket), slurmctld and slurmd (own slurm.conf, ports, state and spool
#      folders) and waits until the node is idle;
#   a. `itertime slurm submit jobs/reduced-cpu.json` (srun --mpi=pmix) into a folder whose name holds
#      spaces, quotes, $(...) and ';', waits for the job and checks the HDF5 file: rows in /comm/points,
#      /ops/stages and /groundtruth/configs, no duplicate keys, and nothing injected;
#   b. submits a longer comm calibration (launched with mpirun inside the allocation), requeues it with
#      `scontrol requeue` while it runs, lets it restart, waits for it to complete and checks that the
#      file holds every point of the sweep once: rows == distinct keys == the sweep's size, samples
#      consistent, and the second run resumed;
#   c. tears everything down (scancel, daemons stopped by their process ids, temporary folder removed)
#      on success, failure or interrupt.
# Exit status: 0 passed, 1 failed, 77 skipped (Slurm or munge cannot be installed or started on this
# machine; the reason is printed). ITERTIME_SLURM_TEST_REQUIRE=1 turns a skip into a failure;
# ITERTIME_SLURM_TEST_KEEP=1 keeps the temporary folder.
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/slurm_lib.sh"
slurm_cmd() { "$@"; }  # Slurm's client commands, on this machine (slurm_lib.sh)
take_args "ITERTIME SOURCE_DIR H5CHECK" "$@"
STARTED=$SECONDS

T=""
MUNGED_PID=""
SLURMCTLD_PID=""
SLURMD_PID=""

say() { printf '[slurm-test %4ds] %s\n' $((SECONDS - STARTED)) "$*"; }

dump_logs() {
  [[ -n "$T" && -d "$T" ]] || return 0
  log_tails "$T"
}

skip() {
  say "SKIP: $*"
  dump_logs
  exit_skipped
}

fail() {
  say "FAIL: $*"
  dump_logs
  exit 1
}

cleanup() {
  local code=$?
  trap - EXIT INT TERM
  if [[ -n "$SLURMCTLD_PID" ]] && kill -0 "$SLURMCTLD_PID" 2>/dev/null; then
    local ids i
    ids="$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')"
    if [[ -n "${ids// /}" ]]; then
      say "teardown: cancelling jobs $ids"
      # shellcheck disable=SC2086
      scancel $ids 2>/dev/null
      for i in $(seq 1 30); do
        [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break
        sleep 1
      done
    fi
  fi
  stop_pid "$SLURMD_PID"
  stop_pid "$SLURMCTLD_PID"
  stop_pid "$MUNGED_PID"
  if [[ -n "$T" && -d "$T" ]]; then
    if [[ "${ITERTIME_SLURM_TEST_KEEP:-0}" == 1 ]]; then
      say "teardown: keeping $T"
    else
      rm -rf -- "$T"
    fi
  fi
  say "teardown done (status $code)"
  exit "$code"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

# ---------------------------------------------------------------------------------------------------
# 0. Install (when missing) and start munge and Slurm.

if [[ "$(id -u)" -ne 0 ]]; then
  skip "the one-node cluster runs munged, slurmctld and slurmd as root; run this test as root"
fi

ensure_slurm_installed
command -v mpirun >/dev/null 2>&1 || fail "mpirun is missing (openmpi-bin; launcher/scripts/setup-debian.sh installs it)"

# The munge socket's folder must be reachable by everyone (munged checks), hence 755 on the top folder.
T="$(mktemp -d /tmp/itertime-slurm.XXXXXX)" || fail "mktemp failed"
chmod 755 "$T"
mkdir -p "$T/munge-key" "$T/run" "$T/state" "$T/spool" "$T/log" "$T/work"
chmod 700 "$T/munge-key"
chmod 755 "$T/run"
say "temporary cluster in $T"

dd if=/dev/urandom of="$T/munge-key/munge.key" bs=1024 count=1 status=none || fail "cannot write a munge key"
chmod 400 "$T/munge-key/munge.key"
MUNGE_SOCKET="$T/run/munge.socket"
munged -F --key-file="$T/munge-key/munge.key" --socket="$MUNGE_SOCKET" --pid-file="$T/run/munged.pid" \
  --log-file="$T/log/munged.log" --seed-file="$T/munge-key/munged.seed" >>"$T/log/munged.log" 2>&1 &
MUNGED_PID=$!
for _ in $(seq 1 50); do
  [[ -S "$MUNGE_SOCKET" ]] && break
  kill -0 "$MUNGED_PID" 2>/dev/null || break
  sleep 0.2
done
if ! munge -S "$MUNGE_SOCKET" -n </dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; then
  skip "munged did not start or does not answer on $MUNGE_SOCKET (see its log)"
fi

# Two free TCP ports for slurmctld and slurmd (the usual 6817/6818 may belong to a real cluster).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORTS=()
for port in $(seq $((20000 + RANDOM % 20000)) 1 $((41000 + RANDOM % 1000))); do
  port_free "$port" && PORTS+=("$port")
  [[ ${#PORTS[@]} -ge 2 ]] && break
done
[[ ${#PORTS[@]} -ge 2 ]] || skip "no free TCP port for slurmctld and slurmd"

NODE="$(hostname -s)"
CPUS="$(nproc)"
export SLURM_CONF="$T/slurm.conf"
{
  echo "# One-node Slurm cluster for itertime's CI test (tests/slurm/slurm_cluster.sh); everything lives in $T."
  echo "ClusterName=itertimeci"
  echo "SlurmctldHost=$NODE(127.0.0.1)"
  slurm_conf_settings "$T" "$MUNGE_SOCKET" "${PORTS[0]}" "${PORTS[1]}" 10
  echo "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN"
  echo "PartitionName=ci Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
} >"$SLURM_CONF"

slurmctld -D -i -f "$SLURM_CONF" >>"$T/log/slurmctld.stdout.log" 2>&1 &
SLURMCTLD_PID=$!
slurmd -D -f "$SLURM_CONF" >>"$T/log/slurmd.stdout.log" 2>&1 &
SLURMD_PID=$!

node_state=""
for _ in $(seq 1 60); do
  kill -0 "$SLURMCTLD_PID" 2>/dev/null || skip "slurmctld exited at start (see its log)"
  kill -0 "$SLURMD_PID" 2>/dev/null || skip "slurmd exited at start (see its log)"
  node_state="$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n 1)"
  [[ "$node_state" == idle ]] && break
  sleep 1
done
[[ "$node_state" == idle ]] || skip "node $NODE did not become idle within 60 s (state '${node_state:-none}')"
say "cluster up: $(sinfo -h -o '%P %a %D %T %N' | head -n 1), $CPUS CPUs"
srun -N1 -n1 true || skip "srun cannot run a trivial step on the cluster"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$T/work" || fail "cannot enter $T/work"

# ---------------------------------------------------------------------------------------------------
# a. The reduced job through `itertime slurm submit`, into a hostile folder name.

OUTDIR="$T/out dir 'q' \"d\" \$(touch INJECTED) ; \`touch INJECTED\` %j & #x"
mkdir -p "$OUTDIR"
H5A="$OUTDIR/r.h5"
say "a: itertime slurm submit jobs/reduced-cpu.json (srun --mpi=pmix) -> $H5A"
ID_A="$("$ITERTIME" slurm submit "$SOURCE_DIR/jobs/reduced-cpu.json" --nodes 1 --ntasks-per-node 2 \
  --partition ci --time 15:00 --output "$H5A" --parsable)" || fail "itertime slurm submit failed"
[[ "$ID_A" =~ ^[0-9]+$ ]] || fail "itertime slurm submit --parsable printed '$ID_A', not a job id"
[[ -f "$H5A.sbatch" ]] || fail "the batch script was not written next to the output ($H5A.sbatch)"
STATE_A="$(wait_job "$ID_A" 420)"
LOG_A="$OUTDIR/r.h5.slurm-$ID_A.log"
say "a: job $ID_A ended $STATE_A (exit code $(job_field "$ID_A" ExitCode)) after $(job_field "$ID_A" RunTime)"
if [[ "$STATE_A" != COMPLETED ]]; then
  [[ -f "$LOG_A" ]] && tail -n 40 "$LOG_A"
  fail "job $ID_A ended $STATE_A, expected COMPLETED"
fi
[[ -f "$LOG_A" ]] || fail "no Slurm log at $LOG_A (the #SBATCH --output path was not kept intact)"
grep -q "all stages complete" "$LOG_A" || fail "the log of job $ID_A does not say 'all stages complete'"
[[ -f "$H5A" ]] || fail "job $ID_A wrote no HDF5 file at $H5A"
if find "$T" "$SOURCE_DIR/jobs" -name 'INJECTED*' 2>/dev/null | grep -q .; then
  fail "a file named INJECTED appeared: a path was not quoted safely"
fi
"$ITERTIME" inspect "$H5A" >"$T/inspect-a.txt" || fail "itertime inspect failed on $H5A"
for table in /comm/points /ops/stages /groundtruth/configs; do
  grep -qE "^  $table +[1-9][0-9]* rows" "$T/inspect-a.txt" || { cat "$T/inspect-a.txt"; fail "itertime inspect shows no rows in $table"; }
done
CHECK_A="$("$H5CHECK" "$H5A")" || fail "itertime_slurm_h5check could not read $H5A"
echo "$CHECK_A" | sed 's/^/    /'
while read -r table _ rows _ unique _; do
  [[ "$rows" -gt 0 ]] || fail "$table has no rows"
  [[ "$rows" == "$unique" ]] || fail "$table has $rows rows but $unique distinct keys (duplicates)"
done <<<"$CHECK_A"
[[ "$(check_line "$(grep '^/comm/points' <<<"$CHECK_A")" consistent)" == yes ]] || fail "/comm samples inconsistent"
GT_ROWS="$(grep '^/groundtruth/configs' <<<"$CHECK_A" | awk '{print $3}')"
[[ "$GT_ROWS" == 6 ]] || fail "/groundtruth/configs has $GT_ROWS rows, reduced-cpu.json lists 6 configurations"
say "a: passed"

# ---------------------------------------------------------------------------------------------------
# b. A longer comm calibration, requeued while it runs; launched with mpirun inside the allocation.

JOB_B="$T/requeue-job.json"
cat >"$JOB_B" <<EOF
{
  "name": "requeue-comm",
  "model": "$SOURCE_DIR/data/models/tiny-llama-gqa.json",
  "backend": "cpu",
  "ranks": 2,
  "comm": {"min_bytes": "8", "max_bytes": "1M", "step_factor": 4, "warmup_iters": 2, "iters": 150},
  "configs": [{"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 4, "seq_len": 32, "precision": "fp32"}]
}
EOF
H5B="$T/requeue.h5"
say "b: comm calibration (mpirun inside the allocation) -> $H5B"
ID_B="$("$ITERTIME" slurm submit "$JOB_B" --nodes 1 --ntasks-per-node 2 --partition ci --time 15:00 \
  --launcher mpirun --stages comm --output "$H5B" --parsable)" || fail "itertime slurm submit failed (b)"
LOG_B="$T/requeue.h5.slurm-$ID_B.log"
node_idle() { [[ "$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n 1)" == idle ]]; }
requeue_comm_phase "$ID_B" "$LOG_B" 20 240 420 node_idle PHASE_B
TOTAL="${PHASE_B[1]}" RESUMED="${PHASE_B[2]}"
CHECK_B="$("$H5CHECK" "$H5B")" || fail "itertime_slurm_h5check could not read $H5B"
echo "$CHECK_B" | sed 's/^/    /'
COMM_B="$(grep '^/comm/points' <<<"$CHECK_B")"
ROWS_B="$(check_line "$COMM_B" rows)"
UNIQUE_B="$(check_line "$COMM_B" unique)"
[[ "$ROWS_B" == "$UNIQUE_B" ]] || fail "/comm/points has $ROWS_B rows but $UNIQUE_B distinct keys: duplicates after the requeue"
[[ "$UNIQUE_B" == "$TOTAL" ]] || fail "/comm/points has $UNIQUE_B distinct points, the sweep has $TOTAL: rows missing"
[[ "$(check_line "$COMM_B" consistent)" == yes ]] || fail "/comm samples inconsistent after the requeue"
say "b: passed ($RESUMED points kept across the requeue, $TOTAL in all, no duplicate, none missing)"

say "all Slurm checks passed in $((SECONDS - STARTED)) s"
exit 0
