#!/usr/bin/env bash
# framework-table.sh: LLaMA 3.1 8B, 70B and 405B with NeMo's layouts (the trainer() defaults of NeMo's
# recipe sources llama3_8b.py, llama3_70b.py, llama31_405b.py, as docs/framework.md reads them: seq 8192,
# mbs 1, gbs 512, sp where tp > 1, the distributed optimizer, overlapped reduction and parameter gather,
# no recompute) in bf16 and fp8, predicted by the framework model (Megatron-Core + TE, --framework
# megatron-te) beside itertime's own trainer (--framework itertime, the same layout and recipe, on the
# GPU's kernel figures), on the h100-sxm description: iteration time, model TFLOP/s per GPU, MFU (against
# the peak of the precision's math: fp8's is twice bf16's on Hopper), tokens/s per GPU, peak memory.
# Issue 32's comparison table; prints markdown. Needs jq.
#
#   framework-table.sh [ITERTIME]     (default: build/launcher/itertime)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ITERTIME="${1:-$ROOT/build/launcher/itertime}"
command -v jq >/dev/null || { echo "framework-table.sh: needs jq (apt-get install jq)" >&2; exit 2; }
echo "| model | layout | precision | framework | iteration (s) | model TFLOP/s per GPU | MFU (%) | tokens/s per GPU | peak memory (GiB) |"
echo "|---|---|---|---|---|---|---|---|---|"
#      model          dp tp pp cp vp
rows=("llama3.1-8b    4  1  1  2  1"
      "llama3.1-70b   1  4  4  2  5"
      "llama3.1-405b  2  8  8  4  2")
for row in "${rows[@]}"; do
  read -r model dp tp pp cp vp <<<"$row"
  recipe="dopt+ovl+opg"
  [[ "$tp" -gt 1 ]] && recipe="sp+vp+dopt+ovl+opg"
  layout=(--dp "$dp" --tp "$tp" --pp "$pp" --cp "$cp" --vp "$vp" --mbs 1 --gbs 512 --seq 8192)
  for precision in amp-bf16 fp8; do
    for framework in megatron-te itertime; do
      extra=()
      [[ "$framework" == megatron-te && "$precision" == fp8 ]] && extra=(--fp8-param-gather)
      if out="$("$ITERTIME" predict --framework "$framework" --hardware h100-sxm --model "$ROOT/data/models/$model.json" \
                "${layout[@]}" --precision "$precision" --recipe "$recipe" "${extra[@]}" --json 2>&1)"; then
        jq -r --arg m "$model" --arg l "dp$dp-tp$tp-pp$pp-cp$cp-vp$vp" --arg p "$precision" --arg f "$framework" \
          --argjson gpus $((dp * tp * pp * cp)) \
          '"| \($m) | \($l) | \($p) | \($f) | \(.iteration_us / 1e6 * 1000 | round / 1000) | \(.model_flops_per_iteration / (.iteration_us / 1e6) / $gpus / 1e12 | round) | \(if .mfu then (.mfu * 1000 | round / 10) else "-" end) | \(.tokens_per_s_per_rank | round) | \(.peak_memory_bytes / 1073741824 * 100 | round / 100) |"' <<<"$out"
      else
        echo "| $model | dp$dp-tp$tp-pp$pp-cp$cp-vp$vp | $precision | $framework | not predicted: ${out//|/\\|} | | | | |"
      fi
    done
  done
done
