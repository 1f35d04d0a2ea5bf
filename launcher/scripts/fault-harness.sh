#!/usr/bin/env bash
# fault-harness.sh: proves the store's crash consistency (common/h5store.hpp) by killing real calibrations.
#
#   fault-harness.sh [--kills N] [--seed S] [--stages comm,ops,groundtruth] [--build DIR] [--work DIR]
#                    [--pause-us US] [--keep]
#
# Runs the small 2-rank job jobs/fault-cpu.json. For each stage, in the order comm, ops, groundtruth (all
# into one file, as `itertime run` does): first an uninterrupted reference run, into its own file; then
# chains of runs into a victim file that starts as the reference's file before that stage (none before
# comm): each run is started with --resume, and SIGKILLed at a random instant (to mpiexec or to one
# random rank, half each) while it runs, until a run ends before its kill; the victim's row keys are then
# compared with the reference's (itertime_fault_rows), and a new chain starts. N kills per stage.
# ITERTIME_TEST_COMMIT_PAUSE_US (--pause-us, default 20000) makes each commit and append pause, so that
# many kills land inside them.
# After every kill the victim file must still be whole: `h5dump` reads it, itertime_fault_rows finds no
# span out of place, and it exists if it existed before the kill; a file that fails is a damaged file.
# At the end: `itertime fit` after the ops stage, `itertime validate` after ground truth, on the victim.
# Prints a table per stage: kills (to mpiexec, to a rank), kills that left a half-written commit file
# (inside a commit's copy), resumes, chains compared, damaged files, lost, duplicate and extra rows, and
# (ground truth) configurations recorded failed because a kill landed while they were measured (by
# design: calibrate/groundtruth.cpp; their child rows are left out of the comparison).
# MPIEXEC and MPIEXEC_FLAGS (environment) name the launcher and its extra flags (default: mpiexec, none).
# Exit status 1 when damaged, lost, duplicate or extra is not 0 in some stage (or fit/validate fail), 2
# on a usage error or a missing tool.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

die() {
  echo "fault-harness.sh: error: $*" >&2
  exit 2
}

KILLS=100
SEED=$$
STAGES="comm,ops,groundtruth"
BUILD="${ITERTIME_BUILD_DIR:-$ROOT/build}"
WORK=""
PAUSE_US=20000
KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kills) KILLS="${2:?}"; shift 2 ;;
    --seed) SEED="${2:?}"; shift 2 ;;
    --stages) STAGES="${2:?}"; shift 2 ;;
    --build) BUILD="${2:?}"; shift 2 ;;
    --work) WORK="${2:?}"; shift 2 ;;
    --pause-us) PAUSE_US="${2:?}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$KILLS" =~ ^[0-9]+$ ]] || die "--kills $KILLS: not a count"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed $SEED: not a number"
[[ "$PAUSE_US" =~ ^[0-9]+$ ]] || die "--pause-us $PAUSE_US: not a number"
IFS=, read -r -a STAGE_LIST <<<"$STAGES"
for stage in "${STAGE_LIST[@]}"; do
  case "$stage" in comm|ops|groundtruth) ;; *) die "--stages: unknown stage $stage (comm, ops, groundtruth)" ;; esac
done

ITERTIME="$BUILD/launcher/itertime"
ROWS="$BUILD/tests/e2e/itertime_fault_rows"
JOB="$ROOT/jobs/fault-cpu.json"
[[ -x "$ITERTIME" ]] || die "$ITERTIME not found; build itertime (launcher/scripts/build.sh -DITERTIME_BUILD_TESTS=ON)"
[[ -x "$ROWS" ]] || die "$ROWS not found; build it (ninja -C $BUILD itertime_fault_rows; needs -DITERTIME_BUILD_TESTS=ON)"
MPIEXEC="${MPIEXEC:-$(command -v mpiexec || true)}"
[[ -n "$MPIEXEC" ]] || die "mpiexec not found"
read -r -a MPIEXEC_EXTRA <<<"${MPIEXEC_FLAGS:-}"  # e.g. --oversubscribe
command -v h5dump > /dev/null || die "h5dump not found (apt-get install hdf5-tools)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_btl=^tcp
QUIET=(--quiet)
if ! "$MPIEXEC" --quiet -n 1 true > /dev/null 2>&1; then QUIET=(); fi
# The launcher's session directories go to a folder of the harness's own, removed at the end: a SIGKILLed
# launcher cannot remove its own (Open MPI 5's prterun leaves /tmp/prterun.HOST.PID.UID), and one left in
# /tmp makes a later mpiexec that gets the same pid fail ("PMIX_ERR_EXISTS"). A short path under /tmp, as
# the PMIx sockets in it must fit in 108 bytes.
MPI_TMP="$(mktemp -d /tmp/itertime-fault-mpi.XXXXXX)" || die "cannot create a folder in /tmp"
CLEANUP=("$MPI_TMP")
trap 'rm -rf "${CLEANUP[@]}"' EXIT
if [[ -z "$WORK" ]]; then
  WORK="$(mktemp -d /tmp/itertime-fault.XXXXXX)"
  [[ "$KEEP" == 1 ]] || CLEANUP+=("$WORK")
else
  mkdir -p "$WORK" || die "cannot create $WORK"
fi
RANDOM=$SEED

# stage_args STAGE: the calibration's arguments (the output file follows).
stage_args() {
  case "$1" in
    comm) echo "calibrate comm -b 8 -e 4K -f 8 -w 1 -n 3 --dtypes fp32 --outside-load-cores 100" ;;
    ops) echo "calibrate ops --job $JOB" ;;
    groundtruth) echo "calibrate groundtruth --job $JOB" ;;
  esac
}

# start STAGE FILE LOG: starts the stage under mpiexec in the background; PID holds mpiexec's pid.
start() {
  local -a args
  read -r -a args <<<"$(stage_args "$1")"
  TMPDIR="$MPI_TMP" "$MPIEXEC" "${QUIET[@]}" -n 2 ${MPIEXEC_EXTRA[@]+"${MPIEXEC_EXTRA[@]}"} "$ITERTIME" "${args[@]}" -o "$2" --resume > "$3" 2>&1 &
  PID=$!
}

# A random number in [0, $1).
random_below() { echo $(((RANDOM * 32768 + RANDOM) % $1)); }

now_ms() { date +%s%3N; }

# whole FILE: 0 when the file reads (h5dump, fault_rows); the reason on stdout otherwise.
whole() {
  if ! h5dump "$1" > /dev/null 2>&1; then echo "h5dump fails"; return 1; fi
  if ! "$ROWS" "$1" > /dev/null 2>&1; then echo "$("$ROWS" "$1" | grep '^damage' | head -n 1)"; return 1; fi
  return 0
}

# compare REF VICTIM OUTPREFIX: sets LOST, DUP, EXTRA, FAILED_BY_KILL (rows, by key; see fault_rows).
compare() {
  local ref="$3.ref" vic="$3.vic" changed="$3.changed"
  "$ROWS" "$1" > "$ref.raw" 2>&1
  "$ROWS" "$2" > "$vic.raw" 2>&1
  # Configurations whose status differs (a kill in flight records one failed): their child rows are left out.
  join -t $'\t' -j 2 <(grep '^status' "$ref.raw" | sort -t $'\t' -k 2,2) <(grep '^status' "$vic.raw" | sort -t $'\t' -k 2,2) |
    awk -F '\t' '$3 != $5 { print $1 }' > "$changed"
  FAILED_BY_KILL=$(wc -l < "$changed")
  local filter='BEGIN { while ((getline k < CH) > 0) skip[k] = 1 }
    $1 == "status" { next }
    $1 == "/groundtruth/ranks" { split($2, p, "|"); if (p[1] in skip) next }
    { print }'
  awk -F '\t' -v CH="$changed" "$filter" "$ref.raw" | sort > "$ref"
  awk -F '\t' -v CH="$changed" "$filter" "$vic.raw" | sort > "$vic"
  LOST=$(comm -23 "$ref" "$vic" | wc -l)
  # Lines the victim has beyond the reference: another copy of a reference row is a duplicate.
  comm -13 "$ref" "$vic" > "$3.more"
  DUP=$(sort -u "$ref" | comm -12 - <(sort "$3.more") | wc -l)
  EXTRA=$(($(wc -l < "$3.more") - DUP))
}

# The processes of a job: mpiexec's children (the ranks).
ranks_of() { pgrep -P "$1" 2> /dev/null || true; }

# wait_gone PIDS...: waits up to 60 s for them to end, then kills what is left (a straggler).
wait_gone() {
  local deadline=$(($(date +%s) + 60)) pid alive
  while :; do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    [[ $alive == 0 ]] && return 0
    if (($(date +%s) > deadline)); then
      for pid in "$@"; do kill -KILL "$pid" 2> /dev/null; done
      STRAGGLERS=$((STRAGGLERS + 1))
      return 0
    fi
    sleep 0.05
  done
}

FAILURES=0
declare -A TABLE
PREVIOUS_REF=""  # the reference's file before this stage ("" before the first)
STAGE_INDEX=0
for stage in "${STAGE_LIST[@]}"; do
  STAGE_INDEX=$((STAGE_INDEX + 1))
  REF="$WORK/ref-$stage.h5"
  rm -f "$REF"
  [[ -n "$PREVIOUS_REF" ]] && cp "$PREVIOUS_REF" "$REF"
  t0=$(now_ms)
  start "$stage" "$REF" "$WORK/ref-$stage.log"
  if ! wait "$PID"; then
    cat "$WORK/ref-$stage.log" >&2
    die "the reference run of $stage failed (see above)"
  fi
  DURATION_MS=$(($(now_ms) - t0))
  echo "# $stage: reference run $((DURATION_MS / 1000)).$((DURATION_MS % 1000 / 100)) s; killing within $((DURATION_MS * 6 / 5)) ms of each start (ITERTIME_TEST_COMMIT_PAUSE_US=$PAUSE_US)"
  VICTIM="$WORK/victim-$stage.h5"
  kills=0 to_mpiexec=0 to_rank=0 in_commit=0 resumes=0 chains=0 damaged=0 lost=0 dup=0 extra=0 failed_by_kill=0
  STRAGGLERS=0
  new_chain=1
  while ((kills < KILLS || new_chain == 0)); do
    if ((new_chain)); then
      rm -f "$VICTIM" "$VICTIM".itertime-* "$VICTIM".inflight
      [[ -n "$PREVIOUS_REF" ]] && cp "$PREVIOUS_REF" "$VICTIM"
      new_chain=0
    fi
    existed=0
    [[ -e "$VICTIM" ]] && existed=1
    delay_ms=$(random_below $((DURATION_MS * 6 / 5 + 1)))
    if ((kills >= KILLS)); then delay_ms=-1; fi  # the chain's last run goes to its end
    ITERTIME_TEST_COMMIT_PAUSE_US=$PAUSE_US start "$stage" "$VICTIM" "$WORK/victim-$stage.log"
    t0=$(now_ms)
    killed=0
    ranks=()
    if ((delay_ms >= 0)); then
      while kill -0 "$PID" 2> /dev/null && (($(now_ms) - t0 < delay_ms)); do sleep 0.01; done
      ranks=($(ranks_of "$PID"))
      if kill -0 "$PID" 2> /dev/null; then
        if ((RANDOM % 2 == 0)) && ((${#ranks[@]} > 0)); then
          kill -KILL "${ranks[$((RANDOM % ${#ranks[@]}))]}" 2> /dev/null && { killed=1; to_rank=$((to_rank + 1)); }
        else
          kill -KILL "$PID" 2> /dev/null && { killed=1; to_mpiexec=$((to_mpiexec + 1)); }
        fi
      fi
    fi
    # Ranks seen before the kill count too: once mpiexec is dead its ranks are no children of it any more
    # (each rank's watchdog ends it then: runtime/watchdog.hpp).
    ranks+=($(ranks_of "$PID"))
    { wait "$PID"; } 2> /dev/null  # not bash's "Killed" line
    status=$?
    ((${#ranks[@]} > 0)) && wait_gone "${ranks[@]}"
    if ((killed)); then
      kills=$((kills + 1))
      [[ -e "$VICTIM.itertime-commit" ]] && in_commit=$((in_commit + 1))
      if [[ -e "$VICTIM" ]]; then
        if ! reason=$(whole "$VICTIM"); then
          damaged=$((damaged + 1))
          cp "$VICTIM" "$WORK/damaged-$stage-$kills.h5"
          echo "# $stage: kill $kills left a damaged file: $reason (kept as $WORK/damaged-$stage-$kills.h5)"
          new_chain=1
          continue
        fi
      elif ((existed)); then
        damaged=$((damaged + 1))
        echo "# $stage: kill $kills removed the file"
        new_chain=1
        continue
      fi
      resumes=$((resumes + 1))  # the next start resumes what the kill left
      continue
    fi
    if ((status != 0)); then
      # Ended by itself, not killed: a resume that fails is a damaged file too.
      damaged=$((damaged + 1))
      echo "# $stage: a run ended with status $status without a kill:"
      tail -n 5 "$WORK/victim-$stage.log"
      new_chain=1
      continue
    fi
    # The chain's run went to its end: compare.
    chains=$((chains + 1))
    if ! reason=$(whole "$VICTIM"); then
      damaged=$((damaged + 1))
      echo "# $stage: the finished file is damaged: $reason"
    fi
    compare "$REF" "$VICTIM" "$WORK/compare-$stage"
    if ((LOST + DUP + EXTRA > 0)); then
      echo "# $stage: chain $chains: $LOST lost, $DUP duplicate, $EXTRA extra rows:"
      { comm -23 "$WORK/compare-$stage.ref" "$WORK/compare-$stage.vic" | sed 's/^/#   lost /'; sed 's/^/#   more /' "$WORK/compare-$stage.more"; } | head -n 10
    fi
    lost=$((lost + LOST)) dup=$((dup + DUP)) extra=$((extra + EXTRA)) failed_by_kill=$((failed_by_kill + FAILED_BY_KILL))
    new_chain=1
    if ((kills >= KILLS)); then break; fi
  done
  # What the stage's file allows: fit after ops, validate after ground truth (on the last chain's file).
  after=""
  if [[ "$stage" == ops ]]; then
    if "$ITERTIME" fit "$VICTIM" -o "$WORK/fitted.bin" --force > "$WORK/fit.log" 2>&1; then after="fit ok"; else after="fit FAILED"; FAILURES=$((FAILURES + 1)); fi
  elif [[ "$stage" == groundtruth && " ${STAGE_LIST[*]} " == *" ops "* && " ${STAGE_LIST[*]} " == *" comm "* ]]; then
    if "$ITERTIME" validate "$VICTIM" --out-dir "$WORK/validation" > "$WORK/validate.log" 2>&1; then after="validate ok"; else after="validate FAILED"; FAILURES=$((FAILURES + 1)); fi
  fi
  TABLE[$stage]="$(printf '%-12s %6d %9d %7d %10d %8d %7d %8d %5d %10d %6d %15d  %s' "$stage" "$kills" "$to_mpiexec" "$to_rank" "$in_commit" \
    "$resumes" "$chains" "$damaged" "$lost" "$dup" "$extra" "$failed_by_kill" "$after")"
  ((STRAGGLERS > 0)) && echo "# $stage: $STRAGGLERS job(s) left ranks running 60 s after the kill (killed)"
  ((damaged + lost + dup + extra > 0)) && FAILURES=$((FAILURES + 1))
  PREVIOUS_REF="$REF"
done

echo "# fault harness: seed $SEED, $KILLS kills per stage, job $JOB"
printf '%-12s %6s %9s %7s %10s %8s %7s %8s %5s %10s %6s %15s  %s\n' stage kills to-mpiexec to-rank in-commit resumes chains damaged lost duplicate extra failed-by-kill after
for stage in "${STAGE_LIST[@]}"; do echo "${TABLE[$stage]}"; done
[[ "$FAILURES" == 0 ]] || exit 1
exit 0
