#!/usr/bin/env bash
# drift_remeasure.sh: the speed reference and the re-measurement rule on real ranks (issue 36). A tiny job
# on 2 ranks whose drift_pct is 0, so that any drift of the speed reference (there always is some on a real
# machine) is above it: `calibrate ops`, then `calibrate groundtruth` (both record the reference at both
# occupancies), then `calibrate drift` profiles both occupancies again as pass 1, every signature, with its
# reference timings, and stops there (max_extra_rounds 1: two passes at most); a second `calibrate drift`
# measures nothing and leaves the file unchanged, and reports the pass the fit chose (common/speed_drift.hpp,
# whose choice and rule the unit tests check by hand); then `itertime validate` on the file prints the drift
# table and writes validation.json's drift object, each naming that pass per occupancy. Busy loops beside the ground truth were tried as a
# drift to induce: the probe, a median of short repeats, is built not to see time taken by other processes
# (that is the outside-load probe's), and on this machine it did not move reliably.
#
#   drift_remeasure.sh MPIEXEC "MPIEXEC_FLAGS" ITERTIME SOURCE_DIR READ_ROWS
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_args "MPIEXEC MPIEXEC_FLAGS ITERTIME SOURCE_DIR READ_ROWS" "$@"
probe_quiet
CASE=drift_remeasure

WORK="$(mktemp -d)"
OUT="$WORK/stdout"
ERR="$WORK/stderr"
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/job.json" <<JOB
{"name": "drift", "model": "$SOURCE_DIR/data/models/tiny-llama-gqa.json", "backend": "cpu", "ranks": 2,
 "groundtruth": {"warmup_iters": 1, "timed_iters": 2, "rounds": 2, "max_extra_rounds": 1, "min_timed_seconds": 0,
                 "outside_load_cores": 100, "drift_pct": 0},
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

mpi groundtruth
for occupancy in 1 2; do
  # before round 0, after round 0 (or 1), and after each configuration's rounds at its occupancy
  (( $(passes | awk -v o="$occupancy" '$1 == "probes" && $2 == "groundtruth" && $4 == o { n += $5 } END { print n + 0 }') >= 3 )) ||
    fail "groundtruth: fewer than 3 speed-reference timings at occupancy $occupancy"
done

mpi drift
for occupancy in 1 2; do
  grep -q "^# occupancy $occupancy drifted more than 0.0% from the ground truth's state: profiling it again (pass 1)" "$OUT" ||
    fail "drift: occupancy $occupancy not profiled again: $(grep '^# drift' "$OUT")"
  [[ "$(count timings 1 "$occupancy")" == "$(count timings 0 "$occupancy")" ]] ||
    fail "drift: pass 1 at occupancy $occupancy holds $(count timings 1 "$occupancy") timings, pass 0 $(count timings 0 "$occupancy")"
  (( $(count probes ops 1 "$occupancy") >= 2 )) || fail "drift: pass 1 at occupancy $occupancy has no speed reference"
done
grep -q "profiling it again (pass 2)" "$OUT" && fail "drift: a third pass with max_extra_rounds 1"

BEFORE="$(passes)"
mpi drift
grep -q "profiling it again" "$OUT" && fail "a second calibrate drift measured again: $(grep 'profiling it again' "$OUT")"
for occupancy in 1 2; do
  grep -q "^# drift at occupancy $occupancy (ground truth against profiling pass $(count chosen "$occupancy") of 2)" "$OUT" ||
    fail "the second calibrate drift does not report the chosen pass of 2 at occupancy $occupancy: $(grep '^# drift' "$OUT")"
done
[[ "$(passes)" == "$BEFORE" ]] || fail "a second calibrate drift changed the file"

# `itertime validate` on this calibration (probes at both occupancies, a re-measured pass 1 chosen or not):
# exit 0, the drift table on stdout with one line per occupancy naming the pass the fit used, and
# validation.json's drift object saying the same (known, both occupancies, ops_pass = the chosen pass).
"$ITERTIME" validate "$WORK/drift.h5" --out-dir "$WORK/val" >"$OUT" 2>"$ERR" ||
  fail "validate exited $?: $(tail -n 3 "$ERR")"
grep -q "^# machine drift (speed reference: ground truth against the operator profiles" "$OUT" ||
  fail "validate printed no drift table: $(grep -i drift "$OUT" | head -n 3)"
for occupancy in 1 2; do
  chosen="$(count chosen "$occupancy")"
  label="$occupancy rank"; [[ $occupancy -eq 1 ]] || label="$occupancy ranks"
  if [[ $chosen -eq 0 ]]; then expect="(profiling pass 0"; else expect="(pass $chosen, re-measured; pass 0 was"; fi
  grep -E "^#   $label *: matrix product" "$OUT" | grep -qF "$expect" ||
    fail "validate's drift line at occupancy $occupancy does not name pass $chosen: $(grep -E "^#   $label" "$OUT")"
  python3 - "$WORK/val/validation.json" "$occupancy" "$chosen" <<'PY' || fail "validation.json's drift at occupancy $occupancy"
import json, sys
drift = json.load(open(sys.argv[1]))["drift"]
occupancy, chosen = int(sys.argv[2]), int(sys.argv[3])
rows = [o for o in drift["occupancies"] if o["occupancy"] == occupancy]
ok = drift["known"] and len(rows) == 1 and rows[0]["ops_pass"] == chosen and len(rows[0]["passes"]) == 2
if not ok:
    print(f"drift object: {json.dumps(drift)}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
done

[[ $failures -eq 0 ]] && echo "drift_remeasure: passed"
exit $((failures > 0))
