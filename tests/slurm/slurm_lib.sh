# slurm_lib.sh: what the real Slurm tests share (tests/slurm/slurm_cluster.sh on one node,
# tests/cluster/slurm_nodes.sh across emulated nodes): stopping a daemon, a job's fields and its end, the
# settings of their slurm.conf but the cluster's names, nodes and partition, and the requeue phase of a comm
# calibration job; a skip's exit and the logs' tails.
# Invariants: the sourcing script defines `slurm_cmd CMD...`, which runs a Slurm client command where
# slurmctld is reachable (on this machine; or inside a node of the emulated cluster), and `say`, `fail` and `skip`;
# these functions touch no variable of the script (requeue_comm_phase: only the array it is named).

# exit_skipped: ends a skipped test: status 77, or 1 (said) under ITERTIME_SLURM_TEST_REQUIRE=1.
exit_skipped() {
  if [[ "${ITERTIME_SLURM_TEST_REQUIRE:-0}" == 1 ]]; then
    say "ITERTIME_SLURM_TEST_REQUIRE=1: a skip counts as a failure"
    exit 1
  fi
  exit 77
}

# log_tails DIR: the last 25 lines of each log under DIR/log (the daemons' own and their stdout).
log_tails() {
  local f
  for f in "$1"/log/*.log; do
    [[ -f "$f" ]] || continue
    echo "----- tail of $f"
    tail -n 25 "$f"
  done
}

# stop_pid PID: stops a process the test started: TERM, then KILL after 10 s; reaps it.
stop_pid() {
  local pid="$1" i
  [[ -n "$pid" ]] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null
  for i in $(seq 1 20); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    sleep 0.5
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

# job_field ID FIELD: a field of `scontrol show job` (kept for MinJobAge after the end).
job_field() {
  slurm_cmd scontrol show job "$1" -o 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# wait_job ID SECONDS: waits for a terminal state; prints it.
wait_job() {
  local id="$1" limit="$2" state="" deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    state="$(job_field "$id" JobState)"
    case "$state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
        echo "$state"
        return 0
        ;;
    esac
    sleep 1
  done
  echo "TIMEOUT_WAITING(${state:-unknown} after ${limit}s)"
}

# check_line "TEXT" FIELD: the value of "FIELD N" in TEXT.
check_line() {
  sed -n "s/.* $2 \([0-9a-z]*\).*/\1/p" <<<"$1" | head -n 1
}

# requeue_comm_phase ID LOG MIN_POINTS START_S END_S IDLE_CMD RESULT: the requeue phase both Slurm tests run
# on a comm calibration job ID (its Slurm log LOG): wait up to START_S seconds until it runs with at least
# MIN_POINTS points measured, requeue it (scontrol requeue), wait for its restart, release it once IDLE_CMD
# (a command of the script: its nodes are idle again) succeeds and the second of the requeue has passed
# (slurmd refuses credentials issued up to then: "Job credential revoked"), and wait up to END_S seconds for
# it to complete, resumed. Sets the array named RESULT to (points before the requeue, the sweep's points,
# points kept across it). Calls the script's `say` and `fail` (which exits): never run it in $(...).
requeue_comm_phase() {
  local id="$1" log="$2" min_points="$3" start_s="$4" end_s="$5" idle_cmd="$6"
  local -n requeue_result="$7"
  local deadline state before total resumed end_state _
  deadline=$((SECONDS + start_s))
  while ((SECONDS < deadline)); do
    state="$(job_field "$id" JobState)"
    [[ "$state" == RUNNING && "$(sweep_points "$log")" -ge "$min_points" ]] && break
    case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
    sleep 0.5
  done
  state="$(job_field "$id" JobState)"
  before="$(sweep_points "$log")"
  [[ "$state" == RUNNING && "$before" -ge "$min_points" ]] ||
    { [[ -f "$log" ]] && tail -n 30 "$log"; fail "job $id is $state with $before points measured; cannot requeue it mid-run"; }
  total="$(sed -n 's/^# itertime calibrate comm: .*, \([0-9][0-9]*\) points.*/\1/p' "$log" | head -n 1)"
  [[ "$total" =~ ^[0-9]+$ ]] || fail "no sweep size in the log of job $id"
  [[ "$before" -lt "$total" ]] || fail "the sweep finished before the requeue; make it longer"
  say "b: requeueing job $id (on $(job_field "$id" NodeList)) after $before of $total points"
  slurm_cmd scontrol requeue "$id" || fail "scontrol requeue $id failed"
  for _ in $(seq 1 120); do
    [[ "$(job_field "$id" Restarts)" -ge 1 && "$(job_field "$id" JobState)" == PENDING ]] && break
    sleep 0.5
  done
  [[ "$(job_field "$id" Restarts)" -ge 1 ]] || fail "job $id shows no restart after scontrol requeue"
  # A requeued job waits for its BeginTime (about 2 minutes); release it once its nodes are idle again.
  for _ in $(seq 1 120); do
    "$idle_cmd" && break
    sleep 0.5
  done
  sleep 2
  say "b: job $id $(job_field "$id" JobState) ($(job_field "$id" Reason)), $(job_field "$id" Restarts) restart(s); releasing it"
  slurm_cmd scontrol update JobId="$id" StartTime=now || fail "cannot release the requeued job $id"
  end_state="$(wait_job "$id" "$end_s")"
  say "b: job $id ended $end_state after $(job_field "$id" Restarts) restart(s)"
  if [[ "$end_state" != COMPLETED ]]; then
    tail -n 40 "$log"
    fail "job $id ended $end_state after its requeue, expected COMPLETED"
  fi
  grep -q "DUE TO JOB REQUEUE" "$log" || fail "the log of job $id does not show the requeue"
  grep -q "restart 1: calibrate comm" "$log" || fail "the log of job $id does not show the restarted comm stage"
  resumed="$(sed -n 's/.*points (\([0-9][0-9]*\) already in .*, resuming).*/\1/p' "$log" | tail -n 1)"
  [[ "$resumed" =~ ^[0-9]+$ && "$resumed" -gt 0 ]] || fail "the restarted run did not resume (no 'already in ..., resuming' line)"
  requeue_result=("$before" "$total" "$resumed")
}

# slurm_conf_settings DIR MUNGE_SOCKET CTLD_PORT SLURMD_PORT KILL_WAIT [PER_NODE]: the slurm.conf lines both
# Slurm tests write alike (printed): root daemons, munge through MUNGE_SOCKET, state, spool, pid and log files
# under DIR, linuxproc tracking without task plugin, cons_tres by CPU, backfill, no accounting, jobs kept an
# hour after their end (MinJobAge, for job_field). PER_NODE "%n" gives each slurmd its own spool, pid and log
# file (several slurmd on one machine); empty (the default), one of each. The caller adds ClusterName,
# SlurmctldHost, the nodes and the partition.
slurm_conf_settings() {
  local dir="$1" munge_socket="$2" ctld_port="$3" slurmd_port="$4" kill_wait="$5" per_node="${6:-}"
  cat <<EOF
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$munge_socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool${per_node:+/$per_node}
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd${per_node:+.$per_node}.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd${per_node:+.$per_node}.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=$kill_wait
MinJobAge=3600
EOF
}

# sweep_points LOG: the comm sweep's progress rows in a job's log so far (0 before it starts).
sweep_points() { grep -cE '^  [0-9]+/[0-9]+ ' "$1" 2>/dev/null || true; }

# ensure_slurm_installed: slurm-wlm and munge from Debian when any of their commands is missing; the
# script's `skip` (which exits) when apt-get cannot install them.
ensure_slurm_installed() {
  local missing=() tool
  for tool in slurmctld slurmd sbatch squeue scontrol sinfo srun munged munge; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  say "installing slurm-wlm and munge from Debian (missing: ${missing[*]})"
  if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q >/tmp/itertime-slurm-apt.log 2>&1 ||
     ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends \
       slurm-wlm munge >>/tmp/itertime-slurm-apt.log 2>&1; then
    tail -n 20 /tmp/itertime-slurm-apt.log
    skip "apt-get could not install slurm-wlm and munge (see above)"
  fi
  for tool in "${missing[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool is still missing after installing slurm-wlm and munge"
  done
  rm -f /tmp/itertime-slurm-apt.log
}
