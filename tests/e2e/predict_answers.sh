#!/usr/bin/env bash
# predict_answers.sh: `itertime predict` answers a person can trust (issue 33), on the checked-in
# calibration tests/data/accuracy-cpu.h5 (tiny-llama-gqa at seq 32, fp32 only, with /validation) and on
# described devices. One CTest test per case (label `cli`), each a fraction of a second.
#
#   predict_answers.sh ITERTIME SOURCE_DIR CASE
#
# Cases:
#   refuse_precision   fp16 on an fp32-only calibration: exit 2, one stderr line naming the finding and the
#                      flag that shows it anyway, nothing on stdout (before issue 33: exit 0, 33 ms)
#   refuse_far         llama3.1-70b on the tiny calibration: exit 2, far_extrapolation (before: exit 0)
#   allow_implausible  the same with --allow-implausible: exit 0, FLAG lines, a "flags" array in JSON, no range
#   breakdown_sums     the JSON breakdown plus its adjustments add up to iteration_us (dp2, tp2, pp2, ovl,
#                      the framework model); the memory split adds up to the peak; durations read "ms"
#   defaults           --dp 2 alone predicts (gbs defaulted to 2, said so); --hardware h100-sxm defaults
#                      to amp-bf16; a calibration without --hardware to fp32 (before: --dp 2 alone failed)
#   range              a calibrated prediction quotes /validation's MAPE; the framework model its
#                      published-check MAPE; a described device none
set -uo pipefail
command -v jq >/dev/null || { echo "SKIP: jq is not installed (apt-get install jq)"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_args "ITERTIME SOURCE_DIR CASE" "$@"
CAL="$SOURCE_DIR/tests/data/accuracy-cpu.h5"
TINY="$SOURCE_DIR/data/models/tiny-llama-gqa.json"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ -f "$CAL" ]] || { echo "SKIP: $CAL is not recorded"; exit 0; }

# expect_refused CODE ARGS...: exit 2, one stderr line naming CODE and --allow-implausible, empty stdout.
expect_refused() {
  local code="$1"
  shift
  "$ITERTIME" "$@" >"$WORK/out" 2>"$WORK/err"
  local status=$?
  [[ $status -eq 2 ]] || fail "itertime $* exited with $status, expected 2: $(cat "$WORK/out")"
  [[ "$(wc -l <"$WORK/err")" -eq 1 ]] || fail "itertime $*: $(wc -l <"$WORK/err") stderr lines: $(cat "$WORK/err")"
  [[ ! -s "$WORK/out" ]] || fail "itertime $*: wrote on stdout when refusing"
  grep -q "prediction refused ($code)" "$WORK/err" || fail "itertime $*: refusal lacks '$code': $(cat "$WORK/err")"
  grep -q -- "--allow-implausible" "$WORK/err" || fail "itertime $*: refusal does not say how to see it anyway"
}

# sums FILE: breakdown_us + adjustments_us == iteration_us (relative 1e-9), every breakdown part >= 0,
# and the memory split == peak_memory_bytes.
sums() {
  jq -e '(([.breakdown_us[]] | add) + ([.adjustments_us[]] | add) - .iteration_us | fabs) <= 1e-9 * .iteration_us' "$1" \
    >/dev/null || fail "$1: the breakdown does not add up: $(jq -c '{iteration_us, breakdown_us, adjustments_us}' "$1")"
  jq -e '[.breakdown_us[]] | all(. >= 0)' "$1" >/dev/null || fail "$1: a negative part: $(jq -c .breakdown_us "$1")"
  jq -e '.memory_split_bytes as $m | ($m.weights + $m.gradients + $m.optimizer + $m.activations + $m.other) == .peak_memory_bytes' \
    "$1" >/dev/null || fail "$1: the memory split does not add up: $(jq -c '{peak_memory_bytes, memory_split_bytes}' "$1")"
}

case "$CASE" in
  refuse_precision)
    expect_refused precision_not_calibrated predict "$CAL" --model "$TINY" --gbs 4 --seq 32 --precision fp16
    expect_refused precision_not_calibrated predict "$CAL" --model "$TINY" --gbs 4 --seq 32 --precision bf16 --json
    ;;
  refuse_far)
    expect_refused far_extrapolation predict "$CAL" --model "$SOURCE_DIR/data/models/llama3.1-70b.json" --tp 2 --gbs 8 --seq 4096
    ;;
  allow_implausible)
    "$ITERTIME" predict "$CAL" --model "$TINY" --gbs 4 --seq 32 --precision fp16 --allow-implausible >"$WORK/t" ||
      fail "--allow-implausible exited $?"
    grep -q "^  FLAG               precision_not_calibrated: " "$WORK/t" || fail "no FLAG line: $(cat "$WORK/t")"
    grep -q "^  FLAG               operators_without_time: " "$WORK/t" || fail "no FLAG line for zero-priced operators"
    "$ITERTIME" predict "$CAL" --model "$TINY" --gbs 4 --seq 32 --precision fp16 --allow-implausible --json >"$WORK/j" ||
      fail "--allow-implausible --json exited $?"
    jq -e '[.flags[].code] == ["precision_not_calibrated", "operators_without_time"] and .range_pct == null' "$WORK/j" \
      >/dev/null || fail "flags: $(jq -c '{flags, range_pct}' "$WORK/j")"
    "$ITERTIME" predict "$CAL" --model "$TINY" --gbs 4 --seq 32 --json >"$WORK/ok" || fail "a plain prediction exited $?"
    jq -e '.flags == []' "$WORK/ok" >/dev/null || fail "a plain prediction has flags: $(jq -c .flags "$WORK/ok")"
    ;;
  breakdown_sums)
    n=0
    for args in "--gbs 4" "--dp 2 --gbs 4" "--tp 2 --gbs 4" "--pp 2 --gbs 8" "--pp 2 --vp 2 --gbs 4" "--cp 2 --gbs 4" \
      "--dp 2 --gbs 4 --recipe ovl" "--dp 2 --gbs 4 --recipe dopt+ovl+opg"; do
      n=$((n + 1))
      # shellcheck disable=SC2086
      "$ITERTIME" predict "$CAL" --model "$TINY" --seq 32 $args --json >"$WORK/c$n.json" || fail "predict $args exited $?"
      sums "$WORK/c$n.json"
    done
    "$ITERTIME" predict --framework megatron-te --hardware h100-sxm --model "$SOURCE_DIR/data/models/llama3.1-8b.json" --tp 2 --pp 2 \
      --vp 2 --dp 2 --gbs 16 --seq 4096 --recipe sp+dopt+ovl+opg --json >"$WORK/f.json" || fail "framework predict exited $?"
    sums "$WORK/f.json"
    "$ITERTIME" predict "$CAL" --model "$TINY" --seq 32 --dp 2 --gbs 4 >"$WORK/t" || fail "table exited $?"
    grep -qE "^  iteration +[0-9]+\.[0-9] ms" "$WORK/t" || fail "the iteration is not in ms: $(grep iteration "$WORK/t")"
    grep -q "= iteration" "$WORK/t" || fail "the breakdown has no total line"
    ;;
  defaults)
    "$ITERTIME" predict "$CAL" --model "$TINY" --seq 32 --dp 2 --json >"$WORK/d.json" || fail "--dp 2 alone exited $?"
    jq -e '.global_batch == 2 and .precision == "fp32" and (.defaults | length) == 2' "$WORK/d.json" >/dev/null ||
      fail "defaults: $(jq -c '{global_batch, precision, defaults}' "$WORK/d.json")"
    "$ITERTIME" predict --framework itertime --hardware h100-sxm --model "$TINY" --seq 32 --tp 2 --pp 2 --vp 2 --json >"$WORK/h.json" ||
      fail "--hardware h100-sxm without --precision exited $?"
    jq -e '.precision == "amp-bf16" and .global_batch == 2' "$WORK/h.json" >/dev/null ||
      fail "h100 defaults: $(jq -c '{global_batch, precision, defaults}' "$WORK/h.json")"
    "$ITERTIME" predict --framework itertime --hardware h100-sxm --model "$TINY" --seq 32 --precision bf16 --gbs 4 --json >"$WORK/g.json" ||
      fail "given options exited $?"
    jq -e '.defaults == []' "$WORK/g.json" >/dev/null || fail "given options reported as defaults"
    # Only options left out are defaulted: a given bad value is refused.
    "$ITERTIME" predict "$CAL" --model "$TINY" --seq 32 --gbs 0 >/dev/null 2>&1
    [[ $? -eq 2 ]] || fail "--gbs 0 was not refused"
    ;;
  range)
    "$ITERTIME" predict "$CAL" --model "$TINY" --seq 32 --dp 2 --gbs 4 --json >"$WORK/c.json" || fail "predict exited $?"
    jq -e '.range_pct > 0 and (.range_basis | test("validation"))' "$WORK/c.json" >/dev/null ||
      fail "calibrated range: $(jq -c '{range_pct, range_basis}' "$WORK/c.json")"
    "$ITERTIME" fit "$CAL" -o "$WORK/m.itm" >/dev/null || fail "fit exited $?"
    "$ITERTIME" predict "$WORK/m.itm" --model "$TINY" --seq 32 --dp 2 --gbs 4 --json >"$WORK/m.json" || fail "predict .itm exited $?"
    jq -e '.range_pct == null and (.range_basis | test("itertime validate"))' "$WORK/m.json" >/dev/null ||
      fail "no-validation range: $(jq -c '{range_pct, range_basis}' "$WORK/m.json")"
    "$ITERTIME" predict --framework megatron-te --hardware h100-sxm --model "$SOURCE_DIR/data/models/llama3.1-8b.json" --tp 8 \
      --seq 4096 --json >"$WORK/f.json" || fail "framework predict exited $?"
    jq -e '.range_pct > 0 and (.range_basis | test("published"))' "$WORK/f.json" >/dev/null ||
      fail "framework range: $(jq -c '{range_pct, range_basis}' "$WORK/f.json")"
    "$ITERTIME" predict --framework itertime --hardware h100-sxm --model "$TINY" --seq 32 --tp 2 --json >"$WORK/h.json" ||
      fail "described exited $?"
    # Without --framework a GPU question gets the GPU's framework (issue 44): Megatron-Core + TE, a published range.
    "$ITERTIME" predict --hardware h100-sxm --model "$SOURCE_DIR/data/models/llama3.1-8b.json" --tp 8 --seq 4096 --json \
      >"$WORK/g.json" || fail "default-framework predict exited $?"
    jq -e '(.range_basis | test("published"))' "$WORK/g.json" >/dev/null || fail "a GPU question did not get megatron-te"
    jq -e '.range_pct == null' "$WORK/h.json" >/dev/null || fail "a described device quotes a range"
    ;;
  *)
    echo "unknown case $CASE" >&2
    exit 64
    ;;
esac
echo "ok: $CASE"
