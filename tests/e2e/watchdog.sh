#!/usr/bin/env bash
# watchdog.sh: end-to-end tests of the watchdog (runtime/watchdog.hpp) on a real `mpiexec -n 2` of
# `itertime calibrate comm`.
#
#   watchdog.sh MPIEXEC "MPIEXEC_FLAGS" ITERTIME CASE
#
# Cases:
#   stop       rank 1 is stopped (SIGSTOP) while the job communicates (a long warm-up of 8-byte
#              all-reduces, each after a barrier), with ITERTIME_WATCHDOG_S=5: every process (mpiexec
#              and both ranks, the stopped one included) must be gone within 30 s of the stop, the status
#              must be non-zero and stderr must hold rank 0's line naming itself and the MPI operation.
#   bad_value  --watchdog-s soon: status 2 and one `itertime: error:` line naming --watchdog-s.
# Each case runs in a fresh temporary folder. As root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (CTest sets them). Whatever the outcome, no process of the case is
# left behind: the stopped rank is continued and killed on the way out.
set -uo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 MPIEXEC MPIEXEC_FLAGS ITERTIME CASE" >&2
  exit 64
fi
MPIEXEC="$1"
read -r -a MPIEXEC_FLAGS <<<"$2"
ITERTIME="$(realpath "$3")"
CASE="$4"
LIMIT_S=30  # the issue's bound: every rank gone within 30 s of a rank stopping

WORK="$(mktemp -d)"
LAUNCHER=""
RANKS=()
cleanup() {
  for pid in "${RANKS[@]}" $LAUNCHER; do
    kill -CONT "$pid" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL [$CASE]: $*" >&2
  echo "--- stdout:" >&2; tail -n 20 "$WORK/out" >&2
  echo "--- stderr:" >&2; tail -n 40 "$WORK/err" >&2
  exit 1
}

alive() { kill -0 "$1" 2>/dev/null && [[ "$(ps -o stat= -p "$1" 2>/dev/null)" != Z* ]]; }

# The world rank of an Open MPI process, from its environment.
rank_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }

case "$CASE" in
  stop)
    cd "$WORK" || exit 1
    ITERTIME_WATCHDOG_S=5 "$MPIEXEC" -n 2 "${MPIEXEC_FLAGS[@]}" "$ITERTIME" calibrate comm -o comm.h5 \
      --collectives all_reduce --dtypes fp32 --group-sizes 2 --layouts consecutive -b 8 -e 8 \
      -w 1000000000 -n 1 >"$WORK/out" 2>"$WORK/err" &
    LAUNCHER=$!
    # Wait for both ranks to be up.
    victim=""
    for _ in $(seq 1 200); do
      RANKS=()
      # The ranks run itertime-calibrate (the itertime front execs it; the kernel keeps 15 characters).
      for pid in $(pgrep -x 'itertime|itertime-calibr' 2>/dev/null); do
        # This case's ranks: they run in its folder (other tests may run meanwhile).
        [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == "$WORK" ]] || continue
        [[ -n "$(rank_of "$pid")" ]] && RANKS+=("$pid")
      done
      if [[ ${#RANKS[@]} -eq 2 ]]; then break; fi
      alive "$LAUNCHER" || fail "the job ended before both ranks were seen"
      sleep 0.1
    done
    [[ ${#RANKS[@]} -eq 2 ]] || fail "did not find the two ranks of the job"
    for pid in "${RANKS[@]}"; do [[ "$(rank_of "$pid")" == 1 ]] && victim="$pid"; done
    [[ -n "$victim" ]] || fail "no process has OMPI_COMM_WORLD_RANK=1"
    # Into the measurement: rank 0 printed the table's header, then the warm-up loop (a barrier and an
    # all-reduce, 10^9 times) runs.
    for _ in $(seq 1 600); do
      grep -q "^# point" "$WORK/out" 2>/dev/null && break
      alive "$LAUNCHER" || fail "the job ended before rank 1 was stopped"
      sleep 0.1
    done
    grep -q "^# point" "$WORK/out" || fail "the job did not start measuring within 60 s"
    sleep 1
    alive "$LAUNCHER" || fail "the job ended before rank 1 was stopped"
    kill -STOP "$victim"
    stopped_ms=$(($(date +%s%N) / 1000000))
    gone_ms=""
    while true; do
      now_ms=$(($(date +%s%N) / 1000000))
      if ! alive "$LAUNCHER" && ! alive "${RANKS[0]}" && ! alive "${RANKS[1]}"; then gone_ms=$now_ms; break; fi
      if ((now_ms - stopped_ms > LIMIT_S * 1000)); then break; fi
      sleep 0.2
    done
    [[ -n "$gone_ms" ]] || fail "processes still alive $LIMIT_S s after rank 1 was stopped (launcher alive: $(alive "$LAUNCHER" && echo yes || echo no))"
    wait "$LAUNCHER"
    status=$?
    elapsed_ms=$((gone_ms - stopped_ms))
    echo "[$CASE] all processes gone $((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) s after SIGSTOP of rank 1 (pid $victim); mpiexec status $status"
    [[ $status -ne 0 ]] || fail "mpiexec exited 0 after a rank was stopped"
    grep -q "^itertime: error: rank 0 of 2 waited [0-9.]* s in MPI_[A-Za-z_]* (.*) for its peers: a rank stopped, died or deadlocked" "$WORK/err" ||
      fail "no watchdog line from rank 0 naming the operation on stderr"
    grep "^itertime: error: rank" "$WORK/err"
    ;;
  bad_value)
    cd "$WORK" || exit 1
    "$MPIEXEC" -n 2 "${MPIEXEC_FLAGS[@]}" "$ITERTIME" calibrate comm -o comm.h5 --watchdog-s soon >"$WORK/out" 2>"$WORK/err"
    status=$?
    [[ $status -eq 2 ]] || fail "status $status, expected 2"
    [[ "$(grep -c '^itertime: error: .*--watchdog-s' "$WORK/err")" -eq 1 ]] || fail "expected one error line naming --watchdog-s"
    [[ ! -e comm.h5 ]] || fail "an output file was created"
    ;;
  *)
    echo "unknown case $CASE" >&2
    exit 64
    ;;
esac
echo "PASS [$CASE]"
