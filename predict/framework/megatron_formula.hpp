// megatron_formula.hpp: Megatron-LM's own theoretical memory formula (megatron/training/
// theoretical_memory_usage.py, report_theoretical_memory) as a pure function of a TransformerShape, a
// ParallelConfig and a FrameworkRecipe: the independent reference megatron_memory.hpp is checked against
// (docs/framework.md).
// Invariants:
//  - kLiteral is the file as Megatron runs it: weight + optimizer bytes of the most loaded shard (the first
//    pipeline stage, with its embedding; with pp == 1 the output layer too) at 18 B per parameter, or
//    6 + 12 / data_parallel_size with the distributed optimizer, where data_parallel_size = dp (Megatron's
//    args.data_parallel_size leaves cp out); activations of the first stage from Korthikanti et al.'s
//    Table 2 (SP + selective recompute: 18 + 4 ffn / h bytes per token per layer, over tp) when sequence
//    parallelism is on (Megatron turns it off at tp 1) and recompute is selective, otherwise the file's
//    compute_activation_memory_without_sp (10 + 24 / tp, times 1.05); the interleaving penalty
//    1 + (pp - 1) / (pp * vp) with vp > 1, min(1, m / pp) without; the full sequence (the formula knows no
//    context parallelism). Parameter counts use megatron_padded_vocab, as Megatron's padded_vocab_size.
//  - kContextParallelAware reads the same formula for a rank of a context-parallel run: the sequence is
//    seq_len / cp and the optimizer is sharded over dp * cp (what the distributed optimizer does). With
//    cp == 1 both readings are equal.
//  - Bytes as doubles (the formula's fractional layers per stage), total = weights_and_optimizer + activations.
#pragma once

#include "common/parallel_config.hpp"
#include "predict/framework/framework_types.hpp"

namespace itertime::predict::framework {

enum class FormulaReading { kLiteral, kContextParallelAware };

struct MegatronFormulaMemory {
  double weight_and_optimizer_bytes = 0;
  double activation_bytes = 0;
  double total_bytes = 0;
  bool sequence_parallel_branch = false;  // compute_activation_memory (SP + selective) rather than _without_sp
  double parameters_on_most_loaded_shard = 0;
};

MegatronFormulaMemory megatron_formula_memory(const TransformerShape& shape, const ParallelConfig& config,
                                              const FrameworkRecipe& recipe, FormulaReading reading = FormulaReading::kLiteral);

}  // namespace itertime::predict::framework
