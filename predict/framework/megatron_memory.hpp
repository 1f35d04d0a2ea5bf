// megatron_memory.hpp: the per-GPU peak memory of one pipeline rank of a Megatron-Core + Transformer Engine
// training run (issue 32), with its breakdown, modelled from the source each term follows (docs/framework.md,
// "Memory of Megatron-Core + TE"; the .cpp names the file beside each term).
// Invariants:
//  - Only what PyTorch's caching allocator holds is counted (the CUDA context, NCCL's and cuBLAS's own
//    buffers and allocator fragmentation are not): total_bytes = weights + main_grad + optimizer + fp8 +
//    activations + other, each >= 0.
//  - Terms: bf16/fp16 parameters (2 B each); the fp32 gradient buffer (4 B each, grad_reduce_in_fp32);
//    the optimizer's fp32 main parameters and Adam's two fp32 moments (12 B each), sharded over dp * cp
//    with the distributed optimizer (ceil), whole on every rank without; with precision kFp8, TE's cached
//    fp8 weight and its transpose (2 B per decoder GEMM weight) and the scaling state; the activations
//    the rank holds at its peak (each chunk's per-micro-batch bytes times its micro-batches in flight
//    under 1F1B, interleaved with vp > 1); other = the largest transient of a backward on that rank (a
//    recomputed layer, the bf16 logits or their gradient). With vp > 1 the activations are the most bytes
//    held at once along Megatron's interleaved order (chunks differ in bytes: embedding, head, splits).
//  - Layers over virtual stages: megatron_virtual_stage_layers (Megatron's even split; its
//    account_for_embedding/loss_in_pipeline_split when L + 2 splits evenly and L does not; otherwise the
//    first L mod (pp*vp) virtual stages one layer more).
//  - megatron_te_peak_memory_bytes(...) == max over ranks of megatron_te_memory(...).total_bytes, in
//    O(pp * pp * vp) arithmetic without allocation.
//  - FrameworkRecipe::fp8_param_gather (Megatron's --fp8-param-gather, which NeMo's fp8 recipe sets;
//    only with kFp8): the decoder GEMM weights are TE fp8 parameters, 1 B each in weights_bytes, and only
//    their cached transpose (1 B) and the scaling state in fp8_bytes; no bf16 copy of them is kept.
//  - Refused with a UserError (one line): a precision other than amp-bf16, amp-fp16 or fp8; a layout
//    Megatron refuses (a degree < 1, heads, KV heads or the MLP not divisible by tp, the sequence not
//    divisible by cp (by tp too with sequence parallelism), fewer layers than virtual stages, vp > 1
//    with pp == 1 or with micro-batches not a multiple of pp); a pipeline rank outside [0, pp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/parallel_config.hpp"
#include "predict/framework/framework_types.hpp"

namespace itertime::predict::framework {

struct FrameworkMemory {
  int pipeline_rank = 0;
  int64_t weights_bytes = 0;      // bf16/fp16 parameters (Megatron's contiguous param buffer)
  int64_t main_grad_bytes = 0;    // fp32 main gradients (the DDP gradient buffer)
  int64_t optimizer_bytes = 0;    // fp32 main parameters + Adam exp_avg + exp_avg_sq (sharded or not)
  int64_t fp8_bytes = 0;          // TE's cached fp8 weights and transposes, and the fp8 scaling state
  int64_t activations_bytes = 0;  // saved for the backward, at the rank's 1F1B peak
  int64_t other_bytes = 0;        // the largest backward transient (recomputed layer, logits)
  int64_t total_bytes = 0;
  std::string to_string() const;  // one line, GiB with two decimals per term
};

// Megatron's padded vocabulary: the smallest multiple of 128 * tp (--make-vocab-size-divisible-by 128,
// megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding) not below `vocab`.
int64_t megatron_padded_vocab(int64_t vocab, int tp);

// One virtual stage (pipeline rank r's model chunk c is virtual stage c * pp + r).
struct VirtualStageLayers {
  int64_t num_layers = 0;
  bool has_embedding = false;  // virtual stage 0
  bool has_head = false;       // the last virtual stage: final norm, output layer, loss
};
std::vector<VirtualStageLayers> megatron_virtual_stage_layers(int64_t num_layers, int pp, int vp);

// Micro-batches of chunk c (c = 0..vp-1) pipeline rank `rank` holds when it holds the most of them:
// min(pp - rank, m) with vp == 1; with vp > 1 those among the first min(warm-up + 1, m * vp) forwards of
// Megatron's interleaved order (common/pipeline_order.hpp) that run chunk c. Writes vp counts to `counts`.
// (For information: the memory walks the bytes, whose peak can come a few forwards later when the chunks
// differ in size.)
void megatron_chunk_micro_batches_in_flight(const ParallelConfig& config, int rank, int64_t* counts);

// Switches of a Megatron launch the memory depends on that FrameworkRecipe does not carry.
FrameworkMemory megatron_te_memory(const TransformerShape& shape, const ParallelConfig& config, const FrameworkRecipe& recipe,
                                   int pipeline_rank);

// The largest total_bytes over the pipeline ranks (fast: no allocation, O(pp * pp * vp)).
int64_t megatron_te_peak_memory_bytes(const TransformerShape& shape, const ParallelConfig& config, const FrameworkRecipe& recipe);

// The breakdown of the first pipeline rank with that largest total: its total_bytes ==
// megatron_te_peak_memory_bytes(...).
FrameworkMemory megatron_te_peak_memory(const TransformerShape& shape, const ParallelConfig& config,
                                        const FrameworkRecipe& recipe);

}  // namespace itertime::predict::framework
