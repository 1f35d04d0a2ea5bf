#!/usr/bin/env bash
# import_cli.sh: end-to-end tests of `itertime import` and `validate` on imported ground truth (issue 34
# part 2), on the logs of tests/data/logs (built from the frameworks' own format strings; README there):
# a Megatron-LM log imported and scored by the framework model and a described device; a NeMo and a
# torchtitan log with their run given; every hostile log refused with its one line, exit 2, and the
# calibration file untouched (not created, or byte-identical). Each case well under a second.
#
#   import_cli.sh ITERTIME SOURCE_DIR [CASE...]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_args "ITERTIME SOURCE_DIR [CASE...]" "$@"
LOGS="$SOURCE_DIR/tests/data/logs"
MODELS="$SOURCE_DIR/data/models"

run() {
  (cd "$LOGS" && "$ITERTIME" "$@" >"$OUT" 2>"$ERR")
  STATUS=$?
}

# The one line a refused import prints, and nothing written.
expect_refused() {
  expect_status 2
  [[ "$(lines_of "$ERR")" -eq 1 ]] || fail "stderr has $(lines_of "$ERR") lines, expected 1"
  expect_stderr "$1"
  [[ ! -s "$OUT" ]] || fail "stdout is not empty"
}

case_megatron_validated() {
  run import megatron_llama8b_tp2.log -o "$WORK/cal.h5"
  expect_status 0
  expect_stdout "imported megatron_llama8b_tp2.log (megatron-log, sha256 "
  expect_stdout "run        megatron_llama8b_tp2 dp4-tp2-pp1 mbs1 gbs128 seq8192, amp-bf16, recipe sp+vp+dopt+ovl+opg, framework megatron-te"
  expect_stdout "timing     10 line(s): 2 dropped as warm-up (20 iterations), 8 steady from line 52 to 59 (80 iterations)"
  expect_stdout "floor 0.10%"
  run validate "$WORK/cal.h5" --framework megatron-te --hardware h100-sxm
  expect_status 0
  expect_stdout "scored by framework megatron-te on h100-sxm"
  expect_stdout "megatron_llama8b_tp2.log     (4,2,1)        amp-bf16  sp+vp+dopt+ovl+opg        16.50 s"
  expect_stdout "overall"
  expect_stdout "floor ±0.10%"
  run validate "$WORK/cal.h5" --hardware h100-sxm --store
  expect_refused "--store, --out-dir, --compute-report, --memory-report, --model and --holdout are CAL's own validation's"
  run validate "$WORK/cal.h5" --hardware h100-sxm
  expect_status 0
  expect_stdout "scored by described h100-sxm"
  # Without a source, a file of imports only is refused with the choices.
  run validate "$WORK/cal.h5"
  expect_refused "holds imported ground truth and no calibration of its own (/ops): score it with --hardware NAME"
  # The same log again: refused, the file unchanged.
  local before
  before="$(md5sum <"$WORK/cal.h5")"
  run import megatron_llama8b_tp2.log -o "$WORK/cal.h5"
  expect_refused "already holds ground truth log-"
  [[ "$(md5sum <"$WORK/cal.h5")" == "$before" ]] || fail "a refused import changed the file"
}

case_nemo_torchtitan() {
  run import nemo_llama8b.log -o "$WORK/cal.h5"
  expect_refused "nemo_llama8b.log: a NeMo log does not state its layout: give the run's --config FILE, or --model and the layout flags"
  [[ ! -e "$WORK/cal.h5" ]] || fail "a refused import created the file"
  # Two logs of one layout (the progress printer's and the per-step callback's): two runs, two rows.
  run import nemo_llama8b.log nemo_delta_timing.log --model "$MODELS/llama3.1-8b.json" --dp 8 --tp 2 --pp 4 --gbs 512 \
    --seq 8192 --recipe sp+dopt+ovl+opg -o "$WORK/cal.h5"
  expect_status 0
  expect_stdout "iteration  7.56 s median"
  expect_stdout "# 2 log(s) into"
  # The same NeMo log with its run as a NeMo 2 recipe's YAML dump (formats/nemo_config).
  run import nemo_llama8b.log --config nemo_llama8b.yaml -o "$WORK/yaml.h5"
  expect_status 0
  expect_stdout "run        nemo_llama8b.yaml dp8-tp2-pp4 mbs1 gbs512 seq8192, amp-bf16, recipe sp+vp+dopt+ovl+opg"
  run import torchtitan_llama8b.log --config torchtitan_llama8b.toml --dp 8 -o "$WORK/cal.h5"
  expect_status 0
  expect_stdout "iteration  1.27 s median"  # 8 x 8192 tokens / (6,433 tps x 8 GPUs)
  run validate "$WORK/cal.h5" --framework megatron-te --hardware h100-sxm
  expect_status 0
  expect_stdout "nemo_llama8b.log"
  expect_stdout "torchtitan_llama8b.log"
  expect_stdout "MAPE"
  # Beside the described model, on the same rows: a constant MFU and the model fitted on the other logs
  # (three logs of one model: leave-one-log-out only, no other model to leave out).
  expect_stdout "beside it, on the same rows: constant MFU (leave-one-out)"
  expect_stdout "beside it, on the same rows: fitted, leave-one-log-out"
  expect_stdout "overall: none (it needs other logs of other models)"
}

# predict_on_fitted TERMS -- predict the logged runs' layout (llama3.1-8b, dp 8 tp 2 pp 4, gbs 512, seq 8192,
# sp+dopt+ovl+opg) on h100-sxm with the megatron-te terms in the file TERMS: it must succeed.
predict_on_fitted() {
  run predict --framework megatron-te --hardware h100-sxm --model "$MODELS/llama3.1-8b.json" --dp 8 --tp 2 --pp 4 \
    --gbs 512 --seq 8192 --recipe sp+dopt+ovl+opg --fitted "$1"
  expect_status 0
}

# itertime fit --framework megatron-te on imported logs and on published figures (issue 46), and predict
# --fitted quoting the fit's range.
case_framework_fit() {
  run import nemo_llama8b.log nemo_delta_timing.log --model "$MODELS/llama3.1-8b.json" --dp 8 --tp 2 --pp 4 --gbs 512 \
    --seq 8192 --recipe sp+dopt+ovl+opg -o "$WORK/cal.h5"
  expect_status 0
  run fit --framework megatron-te "$WORK/cal.h5" -o "$WORK/terms.json"
  expect_refused "imported logs do not name their GPU; pass --hardware NAME"
  [[ ! -e "$WORK/terms.json" ]] || fail "a refused fit wrote its file"
  run fit --framework megatron-te "$WORK/cal.h5" --hardware h100-sxm -o "$WORK/terms.json"
  expect_status 0
  expect_stdout "framework megatron-te on h100-sxm, 2 rows of 1 model(s)"
  expect_stdout "gemm16_efficiency"
  expect_stdout "leave-one-model-out: not measured (rows of one model only)"
  predict_on_fitted "$WORK/terms.json"
  expect_stdout "on fitted ($WORK/terms.json) h100-sxm, framework megatron-te"
  expect_stdout "range: none: the fit in $WORK/terms.json saw one model only"
  run fit --framework megatron-te "$WORK/cal.h5" --hardware h100-sxm -o "$WORK/terms.json"
  expect_refused "terms.json"
  # Published figures of two models: a leave-one-model-out range, quoted by predict.
  run fit --framework megatron-te "$SOURCE_DIR/data/published/nemotron4-dgxc-h100.json" -o "$WORK/nemotron.json"
  expect_status 0
  expect_stdout "26 rows of 2 model(s)"
  expect_stdout "leave-one-model-out: MAPE"
  predict_on_fitted "$WORK/nemotron.json"
  expect_stdout "the fit's leave-one-model-out MAPE on 26 logged runs of 2 models"
  # A fit of another GPU, and --fitted without the framework model: one line each.
  run predict --framework megatron-te --hardware b200 --model "$MODELS/llama3.1-8b.json" --dp 8 --gbs 512 --seq 8192 \
    --fitted "$WORK/nemotron.json"
  expect_refused "fitted on h100-sxm, not b200"
  run predict --framework itertime --hardware h100-sxm --model "$MODELS/llama3.1-8b.json" --tp 8 --gbs 8 --seq 8192 \
    --fitted "$WORK/nemotron.json"
  expect_refused "--fitted need --framework megatron-te"
}

case_hostile() {
  run import megatron_truncated.log -o "$WORK/cal.h5"
  expect_refused "itertime: error: megatron_truncated.log:58: the log ends mid-line (a timing line without its elapsed time)"
  run import megatron_interleaved.log -o "$WORK/cal.h5"
  expect_refused "itertime: error: megatron_interleaved.log:55: iteration 10 after iteration 50: two runs interleaved, or a restart in one log"
  run import megatron_not_a_number.log -o "$WORK/cal.h5"
  expect_refused "itertime: error: megatron_not_a_number.log:54: elapsed time per iteration (ms) 'nan(ind)' is not a positive number"
  run import megatron_no_arguments.log -o "$WORK/cal.h5"
  expect_refused "itertime: error: megatron_no_arguments.log:2: a timing line before any arguments block"
  [[ ! -e "$WORK/cal.h5" ]] || fail "a refused import created the file"
  # The same lines with the run given are read as a Megatron-Bridge log (which prints no arguments block).
  run import megatron_no_arguments.log --model "$MODELS/llama3.1-8b.json" --dp 4 --tp 2 --gbs 128 --seq 8192 \
    --recipe sp+dopt+ovl+opg -o "$WORK/bridge.h5"
  expect_status 0
  expect_stdout "iteration  16.50 s median"
  # A Megatron-LM log with a run given beside its arguments: refused.
  run import megatron_llama8b_tp2.log --model "$MODELS/llama3.1-8b.json" --gbs 128 --seq 8192 -o "$WORK/other.h5"
  expect_refused "megatron_llama8b_tp2.log: a Megatron-LM log states its run in its arguments block"
  # A good log and a hostile one: neither is written into an existing file.
  run import megatron_llama8b_tp2.log -o "$WORK/cal.h5"
  expect_status 0
  local before
  before="$(md5sum <"$WORK/cal.h5")"
  run import torchtitan_llama8b.log megatron_truncated.log --config torchtitan_llama8b.toml --dp 8 -o "$WORK/cal.h5"
  expect_refused "megatron_truncated.log:58: the log ends mid-line"
  [[ "$(md5sum <"$WORK/cal.h5")" == "$before" ]] || fail "a refused import changed the file"
}

# A calibration with its own ground truth (tests/data/accuracy-cpu.h5): its validation is the same, reports
# included, after an import; the imported configuration is then scored by that calibration (a CPU one:
# unpredicted, with the reason).
case_calibrated_unchanged() {
  cp "$SOURCE_DIR/tests/data/accuracy-cpu.h5" "$WORK/acc.h5"
  run validate "$WORK/acc.h5" --out-dir "$WORK/before"
  expect_status 0
  grep -v "^# reports in" "$OUT" >"$WORK/before.txt"
  run import nemo_llama8b.log --model "$MODELS/llama3.1-8b.json" --dp 8 --tp 2 --pp 4 --gbs 512 --seq 8192 -o "$WORK/acc.h5"
  expect_status 0
  run validate "$WORK/acc.h5" --out-dir "$WORK/after"
  expect_status 0
  expect_stdout "imported ground truth of $WORK/acc.h5 scored by calibrated"
  expect_stdout "nemo_llama8b.log             (8,2,4)        amp-bf16  plain                      7.56 s            -  unpredicted: "
  head -n "$(lines_of "$WORK/before.txt")" "$OUT" | grep -v "^# reports in" | diff -q - "$WORK/before.txt" >/dev/null ||
    fail "the calibration's own validation changed after an import"
  diff -r "$WORK/before" "$WORK/after" >/dev/null || fail "the validation reports changed after an import"
}

ALL_CASES=(megatron_validated nemo_torchtitan framework_fit hostile calibrated_unchanged)

run_cases
