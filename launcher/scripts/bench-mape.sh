#!/usr/bin/env bash
# bench-mape.sh: how repeatable the main job's MAPE is. Runs the whole local job (measurement, fit,
# validation: `itertime run jobs/local-cpu.json`) N times from scratch on a quiet machine, then once
# more under an intermittent outside load it starts itself (a busy loop on one core, on for LOAD_ON
# seconds, off for LOAD_OFF, repeated), and prints per run the overall MAPE of the aware predictor, the
# blind baseline with its own fitted terms and the raw blind baseline, leave-one-tuple-out and
# leave-one-precision-out, beside the run's stored measurement floor (validation.json
# mape_overall.floor_pct: the mean round spread of its ground truth, the same in both reports; "-" when
# null); per run its worst tuple under each holdout and how many configurations stayed disturbed; then
# the cross-run floor: per configuration, the absolute percentage difference of each quiet run's
# measured step time from the median of all quiet runs (mean and max over configurations), and each
# pair of consecutive quiet runs against each other. A benchmark, not a test: it prints figures and
# judges nothing.
#
# Usage: launcher/scripts/bench-mape.sh [-n N] [--itertime BIN] [--job JOB] [--out DIR] [--no-load]
#   -n N          quiet runs (default 3)
#   --itertime    the itertime binary (default: build/launcher/itertime)
#   --job         the job file (default: jobs/local-cpu.json)
#   --out         folder for the runs' files (default: out/bench-mape; emptied first)
#   --no-load     skip the run under outside load
# Environment: LOAD_ON, LOAD_OFF (seconds, default 3 and 3). Needs jq and python3.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUNS=3
ITERTIME="$ROOT/build/launcher/itertime"
JOB="$ROOT/jobs/local-cpu.json"
OUT="$ROOT/out/bench-mape"
WITH_LOAD=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) RUNS="$2"; shift 2 ;;
    --itertime) ITERTIME="$2"; shift 2 ;;
    --job) JOB="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --no-load) WITH_LOAD=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-mape: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "bench-mape: -n $RUNS: give a positive number of runs" >&2; exit 2; }
[[ -x "$ITERTIME" ]] || { echo "bench-mape: $ITERTIME: no itertime binary; build first (launcher/scripts/build.sh)" >&2; exit 2; }
[[ -f "$JOB" ]] || { echo "bench-mape: $JOB: no such job file" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench-mape: needs jq (apt-get install jq)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$OUT"
mkdir -p "$OUT"

LOAD_PID=""
stop_load() { [[ -n "$LOAD_PID" ]] && kill "$LOAD_PID" 2>/dev/null; wait "$LOAD_PID" 2>/dev/null || true; LOAD_PID=""; }
trap stop_load EXIT

# run NAME: one whole job into $OUT/NAME.h5 (its reports in $OUT/NAME-validation/), log in $OUT/NAME.log.
run() {
  local name="$1" t0
  t0=$(date +%s)
  "$ITERTIME" run "$JOB" -o "$OUT/$name.h5" >"$OUT/$name.log" 2>&1 || { echo "bench-mape: run $name failed; see $OUT/$name.log" >&2; exit 1; }
  echo "# $name: $(( $(date +%s) - t0 )) s"
}

for i in $(seq 1 "$RUNS"); do run "quiet-$i"; done
if [[ $WITH_LOAD -eq 1 ]]; then
  (while true; do timeout "${LOAD_ON:-3}" sh -c 'while :; do :; done' || true; sleep "${LOAD_OFF:-3}"; done) &
  LOAD_PID=$!
  run "loaded"
  stop_load
fi

# overall NAME STEM: "aware blind blind_raw" overall MAPE of one report.
overall() {
  jq -r '.mape_overall | "\(.mape_pct) \(.blind_mape_pct) \(.blind_raw_mape_pct)"' "$OUT/$1-validation/$2.json"
}
# floor_of NAME: the run's stored measurement floor (mape_overall.floor_pct, %.2f), or "-" when null.
floor_of() {
  local value
  value="$(jq -r '.mape_overall.floor_pct // "-"' "$OUT/$1-validation/validation.json")"
  if [[ "$value" == "-" ]]; then echo "-"; else printf '%.2f' "$value"; fi
}
echo "#"
printf '# %-10s %9s   %10s %10s %12s   %10s %10s %12s\n' "run" "floor(%)" "aware(%)" "blind(%)" "blind_raw(%)" "aware(%)" "blind(%)" "blind_raw(%)"
printf '# %-10s %9s   %35s   %35s\n' "" "" "leave-one-tuple-out" "leave-one-precision-out"
names=()
for i in $(seq 1 "$RUNS"); do names+=("quiet-$i"); done
[[ $WITH_LOAD -eq 1 ]] && names+=("loaded")
for name in "${names[@]}"; do
  read -r a b r <<<"$(overall "$name" validation)"
  read -r pa pb pr <<<"$(overall "$name" validation-precision)"
  printf '  %-10s %9s   %10.2f %10.2f %12.2f   %10.2f %10.2f %12.2f\n' "$name" "$(floor_of "$name")" "$a" "$b" "$r" "$pa" "$pb" "$pr"
done

# Per run: the worst tuple under each holdout, and how many configurations stayed disturbed; then how
# well the quiet runs' ground truth agrees across runs (the cross-run floor).
python3 - "$OUT" "$RUNS" "${names[@]}" <<'EOF'
import json, statistics, sys
out, runs, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def report(name, stem):
    with open(f"{out}/{name}-validation/{stem}.json") as f:
        return json.load(f)
print("#")
print(f"# {'run':<10} {'worst tuple (tuple holdout)':>30} {'worst tuple (precision holdout)':>34} {'disturbed':>10}")
for name in names:
    cells = []
    for stem in ("validation", "validation-precision"):
        worst = max(report(name, stem)["mape_per_tuple"], key=lambda e: e["mape_pct"])
        cells.append(f"{worst['group']} {worst['mape_pct']:.2f}%")
    disturbed = report(name, "validation")["mape_overall"].get("disturbed_count", "-")
    print(f"  {name:<10} {cells[0]:>30} {cells[1]:>34} {disturbed:>10}")
measured = []
for i in range(1, runs + 1):
    measured.append({c["key"]: c["measured_us"] for c in report(f"quiet-{i}", "validation")["configurations"]
                     if c["status"] == "ok"})
keys = set.intersection(*(set(m) for m in measured))
if runs < 2 or not keys:
    print("# cross-run floor: needs at least 2 quiet runs with common configurations")
    sys.exit(0)
apes = []
for key in keys:
    values = [m[key] for m in measured]
    centre = statistics.median(values)
    apes += [100.0 * abs(v - centre) / centre for v in values]
print(f"# cross-run floor over {runs} quiet runs, {len(keys)} configurations: each run's measured step time "
      f"from the median of the runs: mean {statistics.mean(apes):.2f}%, max {max(apes):.2f}%")
for i in range(1, runs):
    a, b = measured[i - 1], measured[i]
    pair = [100.0 * abs(a[k] - b[k]) / b[k] for k in keys]
    print(f"# quiet-{i} against quiet-{i + 1}: mean APE {statistics.mean(pair):.2f}%, max {max(pair):.2f}% per configuration")
EOF
