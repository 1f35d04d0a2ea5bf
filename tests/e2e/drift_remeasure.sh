#!/usr/bin/env bash
# drift_remeasure.sh: the speed reference and the re-measurement rule on real ranks (issue 36). A tiny job
# on 2 ranks: `calibrate ops` on a quiet machine; `calibrate groundtruth` while two busy loops take both
# cores (the machine the ground truth meets is slower: a drift far above the job's drift_pct of 3 %);
# `calibrate drift` with the loops still on profiles both occupancies again (pass 1), and the fit's choice
# (common/speed_drift.hpp) takes pass 1, measured in the ground truth's state; then, quiet again, a second
# `calibrate drift` measures nothing (max_extra_rounds 1: two passes at most), and the file is unchanged.
#
#   drift_remeasure.sh MPIEXEC "MPIEXEC_FLAGS" ITERTIME SOURCE_DIR READ_ROWS
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_args "MPIEXEC MPIEXEC_FLAGS ITERTIME SOURCE_DIR READ_ROWS" "$@"
probe_quiet
CASE=drift_remeasure

WORK="$(mktemp -d)"
OUT="$WORK/stdout"
ERR="$WORK/stderr"
LOADS=()
stop_load() {
  local pid
  for pid in "${LOADS[@]}"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  LOADS=()
}
cleanup() {
  stop_load
  rm -rf "$WORK"
}
trap cleanup EXIT
start_load() {
  local i
  for i in 1 2; do
    sh -c 'while :; do :; done' &
    LOADS+=($!)
  done
}

cat >"$WORK/job.json" <<JOB
{"name": "drift", "model": "$SOURCE_DIR/data/models/tiny-llama-gqa.json", "backend": "cpu", "ranks": 2,
 "groundtruth": {"warmup_iters": 1, "timed_iters": 2, "rounds": 2, "max_extra_rounds": 1, "min_timed_seconds": 0,
                 "outside_load_cores": 100, "drift_pct": 3},
 "configs": [
  {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "precision": "fp32"},
  {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2, "seq_len": 16, "precision": "fp32"}]}
JOB

# mpi VERB: `itertime calibrate VERB` of the job on 2 ranks into drift.h5.
mpi() {
  (cd "$WORK" && "$MPIEXEC" "${QUIET[@]}" -n 2 "${MPIEXEC_FLAGS[@]}" "$ITERTIME" calibrate "$1" --job "$WORK/job.json" \
    -o drift.h5 --resume >"$OUT" 2>"$ERR")
  STATUS=$?
  [[ $STATUS -eq 0 ]] || fail "calibrate $1 exited $STATUS: $(tail -n 5 "$ERR")"
}
passes() { "$READ_ROWS" passes "$WORK/drift.h5"; }
# count WHAT: the N of a "WHAT N" line of passes (0 when absent).
count() { passes | awk -v what="$*" 'index($0, what " ") == 1 { print $NF; found = 1 } END { if (!found) print 0 }'; }

mpi ops
for occupancy in 1 2; do
  (( $(count probes ops 0 "$occupancy") >= 2 )) || fail "ops: fewer than 2 speed-reference timings at occupancy $occupancy"
done
SIGNATURES="$(count timings 0 1)"
(( SIGNATURES > 0 )) || fail "ops: no timings at occupancy 1"

start_load
mpi groundtruth
for occupancy in 1 2; do
  # before round 0, after round 0 (or 1), and after each configuration's rounds at its occupancy
  (( $(passes | awk -v o="$occupancy" '$1 == "probes" && $2 == "groundtruth" && $4 == o { n += $5 } END { print n + 0 }') >= 3 )) ||
    fail "groundtruth: fewer than 3 speed-reference timings at occupancy $occupancy"
done

mpi drift
for occupancy in 1 2; do
  grep -q "^# occupancy $occupancy drifted more than 3.0% from the ground truth's state: profiling it again (pass 1)" "$OUT" ||
    fail "drift: occupancy $occupancy not profiled again under the ground truth's load: $(grep '^# drift' "$OUT")"
  [[ "$(count timings 1 "$occupancy")" == "$(count timings 0 "$occupancy")" ]] ||
    fail "drift: pass 1 at occupancy $occupancy holds $(count timings 1 "$occupancy") timings, pass 0 $(count timings 0 "$occupancy")"
  (( $(count probes ops 1 "$occupancy") >= 2 )) || fail "drift: pass 1 at occupancy $occupancy has no speed reference"
  [[ "$(count chosen "$occupancy")" == 1 ]] ||
    fail "the fit does not choose pass 1 (measured in the ground truth's state) at occupancy $occupancy: $(passes | grep chosen)"
done
grep -q "profiling it again (pass 2)" "$OUT" && fail "drift: a third pass with max_extra_rounds 1"
stop_load

BEFORE="$(passes)"
mpi drift
grep -q "profiling it again" "$OUT" && fail "a second calibrate drift measured again: $(grep 'profiling it again' "$OUT")"
grep -q "^# drift at occupancy 1 (ground truth against profiling pass 1 of 2)" "$OUT" ||
  fail "the second calibrate drift does not report pass 1 of 2: $(grep '^# drift' "$OUT")"
[[ "$(passes)" == "$BEFORE" ]] || fail "a second calibrate drift changed the file"

[[ $failures -eq 0 ]] && echo "drift_remeasure: passed"
exit $((failures > 0))
