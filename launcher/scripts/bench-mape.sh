#!/usr/bin/env bash
# bench-mape.sh: how repeatable the main job's MAPE is. Runs the whole local job (measurement, fit,
# validation: `itertime run jobs/local-cpu.json`) N times from scratch, back to back, on a quiet machine;
# with --load, every run under an intermittent outside load the script starts itself before the first run
# and stops after the last (a busy loop on one core, on for LOAD_ON seconds, off for LOAD_OFF, repeated).
# Prints per run the overall MAPE of the aware predictor, the blind baseline with its own fitted terms and
# the raw blind baseline, leave-one-tuple-out and leave-one-precision-out, beside the run's stored
# measurement floor (validation.json mape_overall.floor_pct: the mean round spread of its ground truth,
# the same in both reports; "-" when null); per run its machine drift (validation.json
# drift.largest_compute_pct: the speed reference's largest compute drift between the operator profiles
# and the ground truth, for the passes the fit used; "-" when unknown) and the aware MAPE with the first
# profiles only (mape_overall.first_pass_mape_pct, both holdouts; "-" when every occupancy used pass 0);
# then the spread of the aware MAPE across the runs (max - min, in points, both holdouts); per run its
# worst tuple under each holdout and how many configurations stayed disturbed; then the cross-run floor:
# per configuration, the absolute percentage difference of each run's measured step time from the median
# of all runs (mean and max over configurations), and each pair of consecutive runs against each other.
# A benchmark, not a test: it prints figures and judges nothing.
#
# Usage: launcher/scripts/bench-mape.sh [-n N] [--load] [--itertime BIN] [--job JOB] [--out DIR]
#   -n N          runs (default 3)
#   --load        make every run under the intermittent outside load (default: none, a quiet machine)
#   --itertime    the itertime binary (default: build/launcher/itertime)
#   --job         the job file (default: jobs/local-cpu.json)
#   --out         folder for the runs' files (default: out/bench-mape; emptied first)
# Environment: LOAD_ON, LOAD_OFF (seconds, default 3 and 3). Needs python3.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUNS=3
ITERTIME="$ROOT/build/launcher/itertime"
JOB="$ROOT/jobs/local-cpu.json"
OUT="$ROOT/out/bench-mape"
WITH_LOAD=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) RUNS="$2"; shift 2 ;;
    --load) WITH_LOAD=1; shift ;;
    --itertime) ITERTIME="$2"; shift 2 ;;
    --job) JOB="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-mape: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "bench-mape: -n $RUNS: give a positive number of runs" >&2; exit 2; }
[[ -x "$ITERTIME" ]] || { echo "bench-mape: $ITERTIME: no itertime binary; build first (launcher/scripts/build.sh)" >&2; exit 2; }
[[ -f "$JOB" ]] || { echo "bench-mape: $JOB: no such job file" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench-mape: needs python3" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$OUT"
mkdir -p "$OUT"

LOAD_PID=""
# Ends the loop; a busy child it started ends by its own timeout (LOAD_ON seconds at most).
stop_load() {
  if [[ -n "$LOAD_PID" ]]; then
    kill "$LOAD_PID" 2>/dev/null || true
    wait "$LOAD_PID" 2>/dev/null || true
    LOAD_PID=""
  fi
}
trap stop_load EXIT

# run NAME: one whole job into $OUT/NAME.h5 (its reports in $OUT/NAME-validation/), log in $OUT/NAME.log.
run() {
  local name="$1" t0
  t0=$(date +%s)
  "$ITERTIME" run "$JOB" -o "$OUT/$name.h5" >"$OUT/$name.log" 2>&1 || { echo "bench-mape: run $name failed; see $OUT/$name.log" >&2; exit 1; }
  echo "# $name: $(( $(date +%s) - t0 )) s"
}

if [[ $WITH_LOAD -eq 1 ]]; then
  (while true; do timeout "${LOAD_ON:-3}" sh -c 'while :; do :; done' || true; sleep "${LOAD_OFF:-3}"; done) &
  LOAD_PID=$!
  echo "# every run under an intermittent outside load: a busy core ${LOAD_ON:-3} s on, ${LOAD_OFF:-3} s off"
else
  echo "# quiet runs (no outside load started)"
fi
names=()
for i in $(seq 1 "$RUNS"); do
  names+=("run-$i")
  run "run-$i"
done
stop_load

# The tables: every figure read from the runs' validation.json and validation-precision.json.
python3 - "$OUT" "${names[@]}" <<'PYEOF'
import json, statistics, sys
out, names = sys.argv[1], sys.argv[2:]
def report(name, stem):
    with open(f"{out}/{name}-validation/{stem}.json") as f:
        return json.load(f)
def pct(value, fmt="{:.2f}"):
    return "-" if value is None else fmt.format(value)
reports = {name: {stem: report(name, stem) for stem in ("validation", "validation-precision")} for name in names}

print("#")
print(f"# {'run':<8} {'floor(%)':>9}   {'aware(%)':>10} {'blind(%)':>10} {'blind_raw(%)':>12}   "
      f"{'aware(%)':>10} {'blind(%)':>10} {'blind_raw(%)':>12}")
print(f"# {'':<8} {'':>9}   {'leave-one-tuple-out':>34}   {'leave-one-precision-out':>34}")
for name in names:
    t, p = (reports[name][s]["mape_overall"] for s in ("validation", "validation-precision"))
    print(f"  {name:<8} {pct(t.get('floor_pct')):>9}   {t['mape_pct']:>10.2f} {t['blind_mape_pct']:>10.2f} "
          f"{t['blind_raw_mape_pct']:>12.2f}   {p['mape_pct']:>10.2f} {p['blind_mape_pct']:>10.2f} {p['blind_raw_mape_pct']:>12.2f}")

# Machine drift per run, and the aware MAPE with the first profiles only where the fit used another pass.
print("#")
print("# drift(%): largest compute drift of the speed reference, ground truth against the operator profiles the fit")
print("#   used (+: slower during the ground truth); first-pass: aware MAPE with the first profiles only (- : pass 0 used)")
print(f"# {'run':<8} {'floor(%)':>9} {'drift(%)':>9} {'above floor':>12}   {'aware(%)':>9} {'first-pass(%)':>14}   "
      f"{'aware(%)':>9} {'first-pass(%)':>14}")
print(f"# {'':<8} {'':>9} {'':>9} {'':>12}   {'leave-one-tuple-out':>24}   {'leave-one-precision-out':>24}")
for name in names:
    t, p = (reports[name][s] for s in ("validation", "validation-precision"))
    drift = t.get("drift") or {}
    above = "-" if not drift.get("known") else ("yes" if drift.get("above_floor") else "no")
    print(f"  {name:<8} {pct(t['mape_overall'].get('floor_pct')):>9} {pct(drift.get('largest_compute_pct'), '{:+.2f}'):>9} "
          f"{above:>12}   {t['mape_overall']['mape_pct']:>9.2f} {pct(t['mape_overall'].get('first_pass_mape_pct')):>14}   "
          f"{p['mape_overall']['mape_pct']:>9.2f} {pct(p['mape_overall'].get('first_pass_mape_pct')):>14}")
for stem, holdout in (("validation", "leave-one-tuple-out"), ("validation-precision", "leave-one-precision-out")):
    aware = [reports[name][stem]["mape_overall"]["mape_pct"] for name in names]
    print(f"# aware MAPE across the {len(names)} runs, {holdout}: {min(aware):.2f}% .. {max(aware):.2f}%, "
          f"spread {max(aware) - min(aware):.2f} points")

# Per run: the worst tuple under each holdout, and how many configurations stayed disturbed; then how
# well the runs' ground truth agrees across runs (the cross-run floor).
print("#")
print(f"# {'run':<8} {'worst tuple (tuple holdout)':>30} {'worst tuple (precision holdout)':>34} {'disturbed':>10}")
for name in names:
    cells = []
    for stem in ("validation", "validation-precision"):
        worst = max(reports[name][stem]["mape_per_tuple"], key=lambda e: e["mape_pct"])
        cells.append(f"{worst['group']} {worst['mape_pct']:.2f}%")
    disturbed = reports[name]["validation"]["mape_overall"].get("disturbed_count", "-")
    print(f"  {name:<8} {cells[0]:>30} {cells[1]:>34} {disturbed:>10}")
measured = [{c["key"]: c["measured_us"] for c in reports[name]["validation"]["configurations"] if c["status"] == "ok"}
            for name in names]
keys = set.intersection(*(set(m) for m in measured))
if len(names) < 2 or not keys:
    print("# cross-run floor: needs at least 2 runs with common configurations")
    sys.exit(0)
apes = []
for key in keys:
    values = [m[key] for m in measured]
    centre = statistics.median(values)
    apes += [100.0 * abs(v - centre) / centre for v in values]
print(f"# cross-run floor over {len(names)} runs, {len(keys)} configurations: each run's measured step time "
      f"from the median of the runs: mean {statistics.mean(apes):.2f}%, max {max(apes):.2f}%")
for i in range(1, len(names)):
    a, b = measured[i - 1], measured[i]
    pair = [100.0 * abs(a[k] - b[k]) / b[k] for k in keys]
    print(f"# {names[i - 1]} against {names[i]}: mean APE {statistics.mean(pair):.2f}%, max {max(pair):.2f}% per configuration")
PYEOF
