#!/usr/bin/env bash
# End to end: `itertime run` on the reduced CPU job (launching its own mpirun), then checks the report
# (every configuration present, errors finite, calibration fitted leave-one-tuple-out, and again
# leave-one-precision-out), runs the
# fit / predict / plan checks of predict_cli.sh on the file, and checks that a second run resumes
# without measuring anything again.
# Usage: run_reduced.sh ITERTIME CHECKER SOURCE_DIR
set -euo pipefail
ITERTIME="$1"; CHECKER="$2"; SRC="$3"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# What this stack can run decides the counts below, so that a stack that silently stops running fp16
# fails here: `itertime info` says whether LibTorch multiplies fp16 matrices on CPU (2.x yes, 1.13 no).
fp16_line="$("$ITERTIME" info | grep -E '^ +CPU fp16 matmul ' || true)"
case "$fp16_line" in
  *"CPU fp16 matmul"*" yes"*) fp16_cpu=1 ;;
  *"CPU fp16 matmul"*" no"*) fp16_cpu=0 ;;
  *) echo "itertime info has no 'CPU fp16 matmul yes|no' line: '$fp16_line'" >&2; exit 1 ;;
esac
expected_traced=$(( fp16_cpu ? 10 : 8 )); expected_one_rank=$(( fp16_cpu ? 2 : 1 ))
echo "stack: fp16 on CPU $([ "$fp16_cpu" = 1 ] && echo yes || echo no): expecting $expected_traced traced stages, $expected_one_rank one-rank configurations"
"$ITERTIME" run "$SRC/jobs/reduced-cpu.json" -o "$WORK/reduced.h5" | tee run1.log
"$CHECKER" "$WORK/reduced.h5" "$WORK/reduced-validation/validation.json"
# run validates leave-one-precision-out too (the unseen-precision setting).
"$CHECKER" "$WORK/reduced.h5" "$WORK/reduced-validation/validation-precision.json"
grep -q "overall MAPE (precision)" run1.log
test -s "$WORK/reduced-validation/validation.svg"
test -s "$WORK/reduced-validation/validation.csv"
grep -q "overall MAPE" run1.log
# fit, predict and plan on the calibration just written, with their user-error exits.
bash "$SRC/tests/pipeline/predict_cli.sh" "$ITERTIME" "$WORK/reduced.h5" "$SRC"
# A second run resumes: nothing is measured again.
"$ITERTIME" run "$SRC/jobs/reduced-cpu.json" -o "$WORK/reduced.h5" | tee run2.log
grep -q "0 points measured" run2.log
grep -q "0 measured, 0 skipped, 0 failed, 6 already present" run2.log
# 8 stage traces, 10 where the LibTorch runs the job's fp16 configuration on CPU (2.x): as many as run 1 traced.
traced="$(sed -n 's/^# \([0-9]*\) stages traced (0 present).*/\1/p' run1.log)"
[ "$traced" = "$expected_traced" ] || { echo "run 1 traced '$traced' stages, expected $expected_traced on this stack" >&2; exit 1; }
grep -q "0 stages traced ($traced present)" run2.log
# One rank and no comm stage, as on a machine of one GPU (docs/gpu.md): the file has no /comm, and
# validation still scores the configurations that do not communicate (one-rank fp32, and fp16 on 2.x).
"$ITERTIME" run "$SRC/jobs/reduced-cpu.json" -o "$WORK/one.h5" --ranks 1 --stages ops,groundtruth,validate | tee run3.log
grep -qE "overall MAPE \(tuple\): .* over $expected_one_rank configurations" run3.log   # 2 where fp16 runs on CPU (2.x)
if "$ITERTIME" inspect "$WORK/one.h5" | grep -q "/comm/points"; then echo "one.h5 has a /comm table" >&2; exit 1; fi
echo "pipeline test passed"
