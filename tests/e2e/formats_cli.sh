#!/usr/bin/env bash
# formats_cli.sh: end-to-end tests of the users' own formats (issue 34): a Megatron-LM launch script, the same
# arguments as one quoted command line, a Megatron-Bridge YAML dump and a torchtitan TOML each predict exactly
# what the same configuration given as itertime's flags predicts (framework megatron-te on h100-sxm: the same
# iteration_us); a plan's emitted launch lines read back to the same candidates; hostile inputs are refused
# in one line naming file and line. Each case takes well under a second (described devices only).
#
#   formats_cli.sh ITERTIME SOURCE_DIR [CASE...]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v jq >/dev/null || { echo "SKIP: jq is not installed (apt-get install jq)"; exit 77; }
take_args "ITERTIME SOURCE_DIR [CASE...]" "$@"
MODELS="$SOURCE_DIR/data/models"
FIXTURES="$SOURCE_DIR/tests/formats/fixtures"
FLAGS=(--framework megatron-te --hardware h100-sxm --model "$MODELS/llama3.1-8b.json")

run() {
  (cd "$WORK" && "$ITERTIME" "$@" >"$OUT" 2>"$ERR")
  STATUS=$?
}

iteration() { jq -r '.iteration_us' "$OUT"; }

# same_as_flags "FLAGS..." -- runs the flags form after a --from run and compares iteration_us exactly.
same_as_flags() {
  local from_us
  from_us=$(iteration)
  run predict "${FLAGS[@]}" "$@" --json
  expect_status 0
  [[ -n "$from_us" && "$from_us" == "$(iteration)" ]] || fail "iteration_us $from_us from the file, $(iteration) from the flags"
}

case_megatron_file() {
  run predict --from "$FIXTURES/llama3_8b_megatron.sh" --hardware h100-sxm --json
  expect_status 0
  jq -e '.input.format == "megatron-args" and (.input.not_understood | index("--train-iters 100")) != null and
         (.input.assumed | length) == 1' "$OUT" >/dev/null || fail "the input's lists are missing"
  same_as_flags --dp 2 --tp 4 --pp 2 --mbs 1 --gbs 128 --seq 8192 --recipe sp+vp+dopt+ovl+opg
}

case_megatron_command_line() {
  run predict --hardware h100-sxm --gpus 8 --json --megatron-args "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \
    --num-attention-heads 32 --group-query-attention --num-query-groups 8 --seq-length 4096 --normalization RMSNorm \
    --position-embedding-type rope --swiglu --disable-bias-linear --untie-embeddings-and-output-weights --vocab-size 128256 \
    --micro-batch-size 2 --global-batch-size 64 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --num-layers-per-virtual-pipeline-stage 4 --bf16 --fp8-format hybrid --fp8-recipe tensorwise --sequence-parallel \
    --use-distributed-optimizer --overlap-grad-reduce --recompute-granularity selective --tp-comm-overlap"
  expect_status 0
  same_as_flags --dp 2 --tp 2 --pp 2 --vp 4 --mbs 2 --gbs 64 --seq 4096 --precision fp8 --fp8-recipe current \
    --recipe sp+vp+dopt+rc-sel+ovl --tp-comm-overlap
}

case_nemo() {
  # 16 GPUs: on 2 (dp 1) the run does not fit an H100 (about 110 GiB per GPU), which predict refuses (issue 44)
  run predict --from "$FIXTURES/llama3_8b_bridge.yaml" --hardware h100-sxm --gpus 16 --json
  expect_status 0
  jq -e '.input.format == "nemo" and (.input.not_understood | index("train.train_iters: 1168251")) != null' "$OUT" \
    >/dev/null || fail "the YAML's unused keys are not listed"
  same_as_flags --dp 8 --cp 2 --mbs 1 --gbs 512 --seq 8192 --recipe dopt+ovl+opg
}

case_torchtitan() {
  run predict --from "$FIXTURES/llama3_8b_torchtitan.toml" --hardware h100-sxm --json
  expect_status 0
  jq -e '.input.format == "torchtitan" and ([.input.assumed[] | select(test("FSDP2"))] | length) == 1' "$OUT" >/dev/null ||
    fail "the FSDP2 mapping is not stated"
  same_as_flags --dp 8 --tp 2 --mbs 1 --gbs 8 --seq 8192 --recipe sp+vp+dopt+rc-sel+ovl+opg
}

# Flags beside --from override its values, and the output says so.
case_override() {
  run predict --from "$FIXTURES/llama3_8b_megatron.sh" --hardware h100-sxm --tp 2 --dp 4
  expect_status 0
  expect_stdout "overridden by flags: --tp 2 (${FIXTURES}/llama3_8b_megatron.sh: 4), --dp 4"
  expect_stdout "dp4-tp2-pp2"
}

# Each shown candidate's launch line, read back by predict, is the same candidate: same layout, recipe, time.
case_plan_emit() {
  run plan --from "$FIXTURES/llama3_8b_megatron.sh" --hardware h100-sxm --recipes sp+vp+dopt+ovl+opg,sp+vp+dopt+rc-full+ovl+opg \
    --precisions amp-bf16,fp8 --vp 1,2 --emit megatron-args --json --top 4
  expect_status 0
  local plan="$WORK/plan.json" i
  cp "$OUT" "$plan"
  for i in 0 1 2 3; do
    local line planned us
    line=$(jq -r ".candidates[$i].megatron_args" "$plan")
    planned=$(jq -r ".candidates[$i] | [.dp, .tp, .pp, .cp, .vp, .micro_batch, .precision, .recipe] | @tsv" "$plan")
    us=$(jq -r ".candidates[$i].iteration_us" "$plan")
    run predict --megatron-args "$line" --hardware h100-sxm --json
    expect_status 0
    local read_back
    read_back=$(jq -r "[.dp, .tp, .pp, .cp, .vp, .micro_batch, .precision, .recipe] | @tsv" "$OUT")
    [[ "$read_back" == "$planned" ]] || fail "candidate $i: planned '$planned', read back '$read_back'"
    [[ "$(iteration)" == "$us" ]] || fail "candidate $i ($planned): planned $us, read back $(iteration)"
  done
  run plan --model "$MODELS/llama3.1-8b.json" --gpus 8 --gbs 8 --seq 1024 --emit megatron-args
  expect_status 2
  expect_stderr "give --framework megatron-te"
}

# one_line_error "EXPECTED" -- exit 2, one line on stderr containing EXPECTED, nothing on stdout.
one_line_error() {
  expect_status 2
  expect_stderr "$1"
  [[ "$(lines_of "$ERR")" -eq 1 ]] || fail "stderr has $(lines_of "$ERR") lines, expected 1"
  [[ ! -s "$OUT" ]] || fail "stdout is not empty"
}

# refused_from NAME CONTENT EXPECTED -- `predict --from` the file NAME under $WORK, written with CONTENT
# (its \n are line ends), on h100-sxm with 8 GPUs: refused with one line containing EXPECTED (one_line_error).
refused_from() {
  printf '%b' "$2" >"$WORK/$1"
  run predict --from "$WORK/$1" --hardware h100-sxm --gpus 8
  one_line_error "$3"
}

case_hostile() {
  refused_from a.args '--num-layers 32 --hidden-size 4096\n--num-attention-heads 32 --seq-length 4096\n--micro-batch-size one\n' \
    "a.args: normalization LayerNorm (Megatron-LM's default): itertime models LLaMA (RMSNorm)"
  refused_from b.args '--normalization RMSNorm --position-embedding-type rope --swiglu --disable-bias-linear --vocab-size 32000 --bf16\n--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096\n--micro-batch-size one\n' \
    "b.args:3: --micro-batch-size one: not a whole number"
  refused_from c.args '--normalization RMSNorm --position-embedding-type rope --swiglu --disable-bias-linear --vocab-size 32000 --bf16\n--num-layers 32 --num-attention-heads 32 --seq-length 4096 --micro-batch-size 1\n' \
    "c.args: no --hidden-size (the model's hidden size); give it"
  refused_from d.args '--num-layers 32\n--hidden-size 4096\n--num-layers 40\n' \
    "d.args:3: --num-layers 40 contradicts --num-layers 32 (line 1)"
  refused_from e.args '--normalization LayerNorm --num-layers 2\n' \
    "e.args:1: normalization LayerNorm: itertime models LLaMA (RMSNorm)"
  refused_from f.args '--normalization RMSNorm --num-experts 8\n' \
    "f.args:1: --num-experts 8: a mixture of experts"
  refused_from g.yaml 'model:\n  num_layers: 32\n  hidden_size: [4096\ntrain:\n' \
    "g.yaml:4: not valid YAML"
  refused_from h.yaml 'model:\n  seq_length: 4096\ndataset:\n  seq_length: 8192\n' \
    "h.yaml:4: dataset.seq_length: 8192 contradicts model.seq_length: 4096 (line 2)"
  refused_from i.toml '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nseq_len = "long"\n' \
    "i.toml:5: training.seq_len = long: not a whole number"
  refused_from j.toml '[model]\nname = "llama3\n' \
    "j.toml:2: not valid TOML"
  run predict --from "$FIXTURES/llama3_8b_bridge.yaml" --hardware h100-sxm
  one_line_error "llama3_8b_bridge.yaml fixes no data-parallel size (no world size): give --gpus N or --dp N"
  run predict --megatron-args "--num-layers 32 --hidden-size 'unclosed" --hardware h100-sxm
  one_line_error "--megatron-args: a quote (') is never closed"
  run predict --from "$FIXTURES/llama3_8b_megatron.sh" --model "$MODELS/llama3.1-8b.json" --hardware h100-sxm
  one_line_error "beside --from/--megatron-args: the model comes from"
}

ALL_CASES=(megatron_file megatron_command_line nemo torchtitan override plan_emit hostile)

run_cases
