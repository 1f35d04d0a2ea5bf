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
//  - Layers over virtual stages: megatron_virtual_stage_layers, the split of the one rule set
//    (megatron_layout_rules.hpp: the recipe's pipeline_split, resolved; an illegal split is refused).
//  - megatron_te_peak_memory_bytes(...) == max over ranks of megatron_te_memory(...).total_bytes, in
//    O(pp * pp * vp) arithmetic with one allocation (the per-stage layer counts).
//  - FrameworkRecipe::fp8_param_gather (Megatron's --fp8-param-gather, which NeMo's fp8 recipe sets;
//    only with kFp8): the decoder GEMM weights are TE fp8 parameters, 1 B each in weights_bytes, and only
//    their cached transpose (1 B) and the scaling state in fp8_bytes; no bf16 copy of them is kept.
//  - Refused with a UserError (one line): a precision other than amp-bf16, amp-fp16 or fp8; whatever
//    framework_violations (megatron_layout_rules.hpp, the one rule set) lists for the layout and recipe,
//    its first phrase; a pipeline rank outside [0, pp).
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
// Megatron's split (megatron_layout_rules.hpp resolve_pipeline_split of `split`); a UserError when
// Megatron-LM refuses it.
std::vector<VirtualStageLayers> megatron_virtual_stage_layers(int64_t num_layers, int pp, int vp,
                                                              const PipelineSplit& split = {});

// Micro-batches of chunk c (c = 0..vp-1) pipeline rank `rank` holds when it holds the most of them:
// min(pp - rank, m) with vp == 1; with vp > 1 those among the first min(warm-up + 1, m * vp) forwards of
// Megatron's interleaved order (common/pipeline_order.hpp) that run chunk c. Writes vp counts to `counts`.
// (For information: the memory walks the bytes, whose peak can come a few forwards later when the chunks
// differ in size.)
void megatron_chunk_micro_batches_in_flight(const ParallelConfig& config, int rank, int64_t* counts);

// Switches of a Megatron launch the memory depends on that FrameworkRecipe does not carry.
FrameworkMemory megatron_te_memory(const TransformerShape& shape, const ParallelConfig& config, const FrameworkRecipe& recipe,
                                   int pipeline_rank);

// What a Megatron-LM process holds on the GPU outside PyTorch's allocations (issue 44), each term from a
// documented figure (docs/framework.md "Memory headroom" lists the sources):
//  - the CUDA context with lazy module loading (CUDA >= 11.7, PyTorch's default): 400 MiB
//    (pytorch/pytorch#109888, a PyTorch CUDA maintainer's figure);
//  - Transformer Engine's cuBLASLt workspace: 32 MiB on Hopper and later (transformer_engine/pytorch/
//    module/base.py get_cublas_workspace_size_bytes), 4 MiB before;
//  - NCCL's buffers: for each communicator of more than one rank the step uses (tp, cp, dp x cp, pp),
//    kNcclChannels channels x 2 connections (send, receive) x NCCL_BUFFSIZE (4 MiB, NCCL's documented
//    default, the Simple protocol's buffer); LL / LL128 buffers and proxy state are left out (a lower bound).
// The caching allocator's fragmentation has no public figure: plan keeps a stated margin for it
// (framework_plan.hpp FrameworkPlanSpace::memory_margin_bytes).
struct RuntimeReserve {
  int64_t cuda_context_bytes = 0;
  int64_t cublas_workspace_bytes = 0;
  int64_t nccl_bytes = 0;
  int communicators = 0;
  int64_t total_bytes() const { return cuda_context_bytes + cublas_workspace_bytes + nccl_bytes; }
  std::string to_string() const;  // "0.93 GiB (CUDA context 0.39, cuBLAS workspace 0.03, NCCL 0.50 over 4 communicators)"
};
inline constexpr int64_t kCudaContextBytes = int64_t{400} << 20;
inline constexpr int64_t kNcclBuffSizeBytes = int64_t{4} << 20;
inline constexpr int kNcclChannels = 16;
// hopper_or_later: compute capability >= 9 (the description's GPU).
RuntimeReserve megatron_runtime_reserve(const ParallelConfig& config, bool hopper_or_later);

// The largest total_bytes over the pipeline ranks (fast: no allocation, O(pp * pp * vp)).
int64_t megatron_te_peak_memory_bytes(const TransformerShape& shape, const ParallelConfig& config, const FrameworkRecipe& recipe);

// The breakdown of the first pipeline rank with that largest total: its total_bytes ==
// megatron_te_peak_memory_bytes(...).
FrameworkMemory megatron_te_peak_memory(const TransformerShape& shape, const ParallelConfig& config,
                                        const FrameworkRecipe& recipe);

}  // namespace itertime::predict::framework
