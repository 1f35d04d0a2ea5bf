# slurm_lib.sh: what the real Slurm tests share (tests/slurm/slurm_cluster.sh on one node,
# tests/cluster/slurm_nodes.sh across emulated nodes): stopping a daemon, a job's fields and its end.
# Invariants: the sourcing script defines `slurm_cmd CMD...`, which runs a Slurm client command where
# slurmctld is reachable (on this machine; or inside a node of the emulated cluster); these functions
# touch no variable of the script.

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
