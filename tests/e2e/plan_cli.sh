#!/usr/bin/env bash
# plan_cli.sh: end-to-end tests of what `itertime plan` tells its user (issue 33): the summary counts, the
# guidance when nothing fits, one layout notation, the refusal of an empty space, and --json's header and
# --top. Each case takes well under a second (described devices, no calibration).
#
#   plan_cli.sh ITERTIME SOURCE_DIR [CASE...]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v jq >/dev/null || { echo "SKIP: jq is not installed (apt-get install jq)"; exit 77; }
take_args "ITERTIME SOURCE_DIR [CASE...]" "$@"
MODELS="$SOURCE_DIR/data/models"

run() {
  (cd "$WORK" && "$ITERTIME" "$@" >"$OUT" 2>"$ERR")
  STATUS=$?
}

# LLaMA 3.1-405B on 128 DGX H100 nodes, plain training: nothing fits 80 GiB; the summary says so, the table
# of '-' rows is replaced by the closest candidates and what would make them fit, with a hint.
case_nothing_fits() {
  run plan --framework itertime --hardware h100-sxm --nodes 128 --model "$MODELS/llama3.1-405b.json" --gbs 512 --seq 8192
  expect_status 0
  expect_stdout "summary: layouts 264 considered, 92 legal; candidates 92, 0 fit in 79.65 GiB, 0 predicted"
  expect_stdout "none of the 92 candidates fits in 79.65 GiB"
  expect_stdout "dp4-tp8-pp32 mbs1 amp-bf16 plain needs 664.93 GiB of 79.65 GiB"
  expect_stdout "hint: run with --recipes sp+rc-full"
  if grep -q "exceeds the device memory" "$OUT"; then fail "a table of rows that do not fit is still printed"; fi
}

# fp8 on an A100: no candidate at all is a refusal with the reason, one line, exit 2.
case_empty_space() {
  run plan --framework megatron-te --hardware a100-sxm-80gb --nodes 16 --model "$MODELS/llama3.1-405b.json" --gbs 512 \
    --seq 8192 --precisions fp8
  expect_status 2
  expect_stderr "a100-sxm-80gb has no fp8 peak"
  [[ "$(lines_of "$ERR")" -eq 1 ]] || fail "stderr has $(lines_of "$ERR") lines, expected 1"
  [[ ! -s "$OUT" ]] || fail "stdout is not empty"
}

# One notation (ParallelConfig::layout_text) in every row, cp and vp included; both MFU columns; ties.
case_table() {
  run plan --framework itertime --hardware h100-sxm --gpus 4 --model "$MODELS/tiny-llama-gqa.json" --gbs 8 --seq 32 --vp 1,2 \
    --top 40
  expect_status 0
  grep -qE "dp2-tp1-pp2(-cp1)?-vp2 " "$OUT" || fail "no vp2 layout in layout_text's notation"
  expect_stdout "dp4-tp1-pp1 "
  expect_stdout "MFU_bf16(%)"
  expect_stdout "MFU_own(%)"
  expect_stdout "ties: choices within +10.0% of the best"
  expect_stdout "why: fastest"
  if grep -qE '\([0-9]+,[0-9]+,[0-9]+' "$OUT"; then fail "a tuple notation is still printed"; fi
}

case_json_top() {
  run plan --framework megatron-te --hardware h100-sxm --nodes 128 --model "$MODELS/llama3.1-405b.json" --gbs 512 \
    --seq 8192 --json --top 3 --tie-pct 2
  expect_status 0
  jq -e '.candidates | length == 3' "$OUT" >/dev/null || fail "--json ignores --top"
  jq -e '.candidates_total > 3 and .candidates_shown == 3' "$OUT" >/dev/null || fail "no candidates_total"
  jq -e '.question.model == "llama3.1-405b" and .question.nodes == 128 and .question.gpus == 1024 and
         .question.framework == "megatron-te" and .question.hardware == "h100-sxm" and .question.global_batch == 512 and
         .question.seq_len == 8192 and (.question.space.recipes | length) == 3' "$OUT" >/dev/null ||
    fail "the header lacks the question"
  jq -e '.summary.predicted > 0 and .summary.candidates == .candidates_total and .ties.fraction == 0.02 and
         .ties.source == "--tie-pct" and .mfu.peak_flops_per_s_per_device > 0' "$OUT" >/dev/null ||
    fail "the header lacks the counts, the tie rule or the peak"
  jq -e '.candidates[0] | .layout == "dp4-tp8-pp16-cp2-vp4" and .rank == 1 and (.mfu_bf16_peak > 0)' "$OUT" >/dev/null ||
    fail "the first candidate lacks its layout, rank or bf16-peak MFU"
  # issue 47: megatron-te's default axes (cp 1 and 2 at 8,192 tokens, vp 1 to 8); distinct choices, each
  # with why it ranks there and its other recipes.
  jq -e '.question.space.context_parallel == [1,2] and .question.space.virtual_stages == [1,2,3,4,5,6,7,8]' "$OUT" \
    >/dev/null || fail "the default space is not cp 1,2 and vp 1-8"
  jq -e '[.candidates[] | [.layout, .micro_batch, .precision]] | unique | length == 3' "$OUT" >/dev/null ||
    fail "the top 3 are not distinct choices"
  jq -e '[.candidates[] | (.why | length > 0) and (.variants | length > 0)] | all' "$OUT" >/dev/null ||
    fail "a shown choice lacks its why or its variants"
  jq -e '.candidates[0].why | test("ahead of #2 by memory headroom")' "$OUT" >/dev/null ||
    fail "rank 1 does not say why it is ahead of the faster #2"
}

# --progress (issue 47): the same stdout as without it; on stderr only progress lines, one per shown
# moment, the first at once (after the first layout), the last with the final count and every layout; the
# fastest so far named. Without --progress, --json keeps stderr empty (the search is well under 2 s).
case_progress() {
  local args=(plan --framework megatron-te --hardware h100-sxm --nodes 16 --model "$MODELS/llama3.1-8b.json" --gbs 128
    --seq 8192 --json --top 3)
  run "${args[@]}"
  expect_status 0
  [[ ! -s "$ERR" ]] || fail "--json without --progress wrote on stderr: $(cat "$ERR")"
  cp "$OUT" "$WORK/quiet.json"
  run "${args[@]}" --progress
  expect_status 0
  cmp -s "$OUT" "$WORK/quiet.json" || fail "--progress changed stdout"
  local total
  total="$(jq -r '.candidates_total' "$OUT" | sed -E ':a;s/([0-9])([0-9]{3})($|,)/\1,\2\3/;ta')"  # 12,720
  [[ "$(lines_of "$ERR")" -ge 2 ]] || fail "--progress showed $(lines_of "$ERR") lines, expected the first and the last"
  if grep -qv '^plan: ' "$ERR"; then fail "stderr holds other lines than progress: $(grep -v '^plan: ' "$ERR")"; fi
  head -1 "$ERR" | grep -qE '^plan: [0-9,]+ of about [0-9,]+ candidates \(layouts 1 of [0-9,]+\), [0-9.]+ s; ' ||
    fail "the first line is not the first layout's: $(head -1 "$ERR")"
  tail -1 "$ERR" | grep -qE "^plan: ${total} candidates \(all [0-9,]+ layouts\), [0-9.]+ s; fastest so far: dp" ||
    fail "the last line does not give the final count ${total} and the fastest: $(tail -1 "$ERR")"
}

ALL_CASES=(nothing_fits empty_space table json_top progress)

run_cases
