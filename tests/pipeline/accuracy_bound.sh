#!/usr/bin/env bash
# The accuracy bound of CI: `itertime validate` (fit, then predict every configuration
# leave-one-tuple-out) on the checked-in calibration tests/data/accuracy-cpu.h5, and the errors bounded.
# The file is measured once (tests/data/README.md says how), so the errors are a deterministic function
# of the predictor's code: no timing noise of the machine running the test enters them.
# Fails (exit 1, naming the figure) when:
#  - a configuration of the file is not scored (a prediction that silently became impossible), or
#  - the overall MAPE (traced, and builder-only) exceeds BOUND = max(3 x floor, 15%), where floor is the
#    file's measurement floor (mean round spread of its ground truth): no predictor can be asked to beat
#    the noise of what it is scored against, and 3x leaves room for the noise of the operator profiles
#    too; 15% is the bound when the floor is smaller (the project's documented MAPEs on CPU jobs are
#    2.5-6%; see the README's numbers for this file). The bound is capped at 45%, below the 50% APE that
#    any configuration predicted at 2x or at half its measured time has, or
#  - any one configuration is predicted at 1.5x or more of its measured time, or at 1/1.5 or less (APE
#    of 50% or 33%): a 2x error in one configuration fails even when the others keep the MAPE low, or
#  - a fitted calibration factor (measured / predicted, per occupancy) is outside [1/1.6, 1.6]: a
#    uniform error of the model, which the fitted factor absorbs by design (so no MAPE shows it), shows
#    there instead. The recorded file's factors are 0.842, 0.850, 1.386 and 1.543: the summed operator
#    profiles miss 40-75% of a measured CPU step at 2 ranks (the stage compute table of its validation),
#    most with TP, and the factor carries that. A uniform 2x error halves them (0.42-0.77), a uniform
#    0.5x doubles them (1.68-3.09): [1/1.6, 1.6] holds the recorded ones and leaves both out. (The first
#    bound, 1.5, was set before any quiet recording existed; the TP factor, 1.543, is above it.)
# Usage: accuracy_bound.sh ITERTIME SOURCE_DIR [CAL.h5]   (CAL: tests/data/accuracy-cpu.h5 by default)
set -euo pipefail
ITERTIME="$1"; SRC="$2"
# jq reads the report (setup-debian.sh installs it); without it the test is skipped, visibly (CTest's
# SKIP_RETURN_CODE 77), as in the bare root of the prediction-only check.
command -v jq >/dev/null 2>&1 || { echo "SKIP: jq is not installed (apt-get install jq)"; exit 77; }
CAL="${3:-$SRC/tests/data/accuracy-cpu.h5}"
MODEL="$SRC/data/models/tiny-llama-gqa.json"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cp "$CAL" "$WORK/cal.h5"
chmod u+w "$WORK/cal.h5"
"$ITERTIME" validate "$WORK/cal.h5" --no-store --out-dir "$WORK/report" --model "$MODEL" --holdout tuple > "$WORK/validate.log"
REPORT="$WORK/report/validation.json"

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# awk for the arithmetic (floats); prints 1 or 0.
check() { awk "BEGIN { print ($1) ? 1 : 0 }"; }

configs="$(jq '.configurations | length' "$REPORT")"
scored="$(jq '.mape_overall.count' "$REPORT")"
built="$(jq '.mape_overall.built_count' "$REPORT")"
[[ "$configs" -ge 8 ]] || fail "the report has $configs configurations, the file holds 8"
[[ "$scored" == "$configs" && "$built" == "$configs" ]] || fail "$scored traced and $built builder-only of $configs configurations scored"

floor="$(jq -r '.mape_overall.floor_pct // "null"' "$REPORT")"
if [[ "$floor" == "null" ]]; then
  bound=15
else
  bound="$(awk -v f="$floor" 'BEGIN { b = 3 * f; if (b < 15) b = 15; if (b > 45) b = 45; printf "%.4f", b }')"
fi
mape="$(jq '.mape_overall.mape_pct' "$REPORT")"
built_mape="$(jq '.mape_overall.built_mape_pct' "$REPORT")"
[[ "$(check "$mape <= $bound")" == 1 ]] || fail "overall MAPE $mape% is above the bound $bound% (floor $floor%)"
[[ "$(check "$built_mape <= $bound")" == 1 ]] || fail "builder-only MAPE $built_mape% is above the bound $bound% (floor $floor%)"

while IFS=$'\t' read -r key measured predicted built_predicted factor; do
  for figure in "traced $predicted" "builder-only $built_predicted"; do
    set -- $figure
    ratio="$(awk -v p="$2" -v m="$measured" 'BEGIN { printf "%.4f", p / m }')"
    [[ "$(check "$ratio < 1.5 && $ratio > 1 / 1.5")" == 1 ]] || fail "$key: $1 prediction $2 us is $ratio x the measured $measured us"
  done
  [[ "$(check "$factor < 1.6 && $factor > 1 / 1.6")" == 1 ]] || fail "$key: fitted calibration factor $factor is outside [1/1.6, 1.6]"
done < <(jq -r '.configurations[] | [.key, .measured_us, .predicted_us, .built_predicted_us, .calibration_factor] | @tsv' "$REPORT")

printf 'accuracy: %s configurations, MAPE %.2f%% (builder-only %.2f%%), bound %s%% (floor %s%%), factors %s\n' "$configs" "$mape" \
  "$built_mape" "$bound" "$floor" "$(jq -r '[.configurations[].calibration_factor | . * 1000 | round / 1000] | unique | map(tostring) | join(", ")' "$REPORT")"
if [[ $failures -gt 0 ]]; then
  cat "$WORK/validate.log" >&2
  exit 1
fi
echo "accuracy bound passed"
