// megatron_te_stage.hpp: the kernels and collectives one GPU runs when Megatron-Core with Transformer
// Engine trains a transformer (issue 32), per pass of one micro-batch and per iteration, as plain
// records: what runs, its shape and bytes, and what each collective overlaps. No timing here
// (framework_predictor.cpp times them with gpu_kernels.hpp and device/described_comm.hpp).
// Invariants (the Megatron-LM / TransformerEngine file each choice follows is named beside it in
// megatron_te_stage.cpp and docs/framework.md):
//  - A decoder layer is Megatron-Core's TE spec (megatron/core/models/gpt/gpt_layer_specs.py,
//    get_gpt_layer_with_transformer_engine_spec): TELayerNormColumnParallelLinear (the norm fused into
//    the QKV GEMM's prologue kernel), fused RoPE, TEDotProductAttention (a fused flash / cuDNN kernel),
//    TERowParallelLinear (proj), the fused bias-dropout-add, TELayerNormColumnParallelLinear (fc1),
//    the fused SwiGLU (megatron/core/fusions/fused_bias_swiglu.py) or GeLU, TERowParallelLinear (fc2).
//  - Context parallelism (cp > 1) is TE's ring (context_parallel.py, cp_comm_type p2p): cp attention
//    steps (one causal block, cp - 1 non-causal half blocks), each beside the exchange of the next K/V
//    block, with an output correction after each later step.
//  - Tokens per GPU per micro-batch: T = micro_batch * seq_len / cp; with sequence parallelism (tp > 1)
//    norms, residual adds and dropout work on T / tp tokens; the GEMMs on T tokens with N or K split by
//    tp. Where tp > 1: sequence parallelism's all-gather before each column-parallel GEMM and
//    reduce-scatter after each row-parallel one, else one all-reduce after each row-parallel GEMM
//    (megatron/core/tensor_parallel/mappings.py).
//  - Backward of every GEMM: a data-gradient GEMM and a weight-gradient GEMM; with gradient
//    accumulation fusion the weight gradient accumulates into the fp32 main_grad (TE's
//    fuse_wgrad_accumulation), costing no separate add. With sequence parallelism the column-parallel
//    input is all-gathered again for the weight gradient (hidden behind the data-gradient GEMM) and its
//    gradient reduce-scattered behind the weight-gradient GEMM (megatron/core/tensor_parallel/layers.py,
//    LinearWithGradAccumulationAndAsyncCommunication; TE's linear backward does the same).
//  - FP8 (precision kFp8): the four GEMMs of every layer run in fp8 (forward e4m3 x e4m3, backward with
//    e5m2 gradients: TE's Format.HYBRID); the attention core, the embedding and the output layer stay
//    bf16. Norm outputs are cast inside the norm kernel; the other GEMM inputs and every gradient get a
//    cast(-transpose) kernel; the weights are cast (and transposed) once per iteration, on the first
//    micro-batch (TE's is_first_microbatch weight cache, megatron/core/extensions/transformer_engine.py).
//    Delayed scaling adds one amax all-reduce over the data-, tensor- and context-parallel group per
//    forward pass (TE's reduce at fp8_autocast exit); current scaling adds an amax kernel before every
//    cast and, for the inputs all-gathered in fp8, an amax all-reduce over the TP group.
//  - FrameworkRecipe::unfused_attention (Megatron-LM of 2021-22, no TE): the attention core is the batched
//    GEMM Q K^T writing [b*heads, s, s] scores, the fused scale-mask-softmax, the probabilities' dropout
//    (with dropout), the batched GEMM with V; its backward the softmax's and dropout's backward and four
//    batched GEMMs. Each GEMM's time is bounded below by its bytes (the scores' GEMMs are memory-bound).
//    Context parallelism needs the fused kernel (refused without it).
//  - Recompute: selective recomputes the attention core in the backward (Megatron's 'core_attn'); full
//    recomputes the whole layer forward, its TP collectives included.
//  - The first virtual stage adds the vocabulary-parallel embedding (and positions), the last the final
//    norm, the output GEMM (bf16) and the fused vocabulary-parallel cross-entropy
//    (megatron/core/fusions/fused_cross_entropy.py: three TP all-reduces of [T] values).
//  - Per iteration: gradient buffers zeroed (fp32, all local parameters), the gradient norm for clipping,
//    the DP reduction of the fp32 main gradients over dp*cp (reduce-scatter with the distributed
//    optimizer, else all-reduce), Adam on the shard (fp32 main parameters and moments, written back to
//    bf16), the all-gather of the bf16 parameters (distributed optimizer). Buckets as
//    megatron/core/distributed/distributed_data_parallel.py: max(40M, 1M x dp) parameters each.
//  - Every byte count is of this GPU's tensors; counts are per pass of one micro-batch unless named
//    per iteration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/collective.hpp"
#include "common/hardware_spec.hpp"
#include "common/parallel_config.hpp"
#include "predict/framework/framework_types.hpp"
#include "predict/framework/gpu_kernels.hpp"

namespace itertime::predict::framework {

enum class KernelKind { kGemm, kAttention, kMemoryBound };

struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::kMemoryBound;
  ComputeDType dtype = ComputeDType::kBf16;  // GEMM and attention math
  GemmShape gemm;                            // kGemm
  double gemm_bytes = 0;                     // kGemm: A, B and C as read and written (its memory roofline)
  AttentionShape attention;                  // kAttention
  bool attention_backward = false;
  double bytes = 0;  // kMemoryBound: bytes read + written
};

enum class CommGroup { kTensor, kContext, kData, kPipeline, kModel };  // kModel: dp*cp*tp (FP8 amax reduction)

struct Comm {
  std::string name;
  Collective collective = Collective::kAllReduce;
  CommGroup group = CommGroup::kTensor;
  int64_t bytes = 0;    // the whole buffer, as nccl-tests sizes it (per step for the CP ring)
  int64_t repeats = 1;  // back-to-back calls (the CP ring's cp - 1 steps)
  // Index of the kernel of the same pass it runs beside (-1: none, exposed). With needs_tp_comm_overlap
  // it runs beside that GEMM only under --tp-comm-overlap (TE's userbuffers pipelining the GEMM in tp
  // chunks with the collective); otherwise it is exposed.
  int hidden_behind = -1;
  bool needs_tp_comm_overlap = false;
};

// One pass of one micro-batch through part of a stage (a layer, the embedding, the head).
struct PassWork {
  std::vector<Kernel> kernels;
  std::vector<Comm> comms;
};

struct MegatronTeStage {
  PassWork layer_forward, layer_backward;          // one decoder layer
  PassWork embedding_forward, embedding_backward;  // first virtual stage
  PassWork head_forward, head_backward;            // last virtual stage: final norm, output GEMM, loss
  PassWork first_micro_batch;                      // once per iteration per layer: FP8 weight casts
  PassWork stage_forward;                          // once per forward pass of a stage: FP8 amax reduction
  int64_t layer_params = 0;                        // per GPU (TP shard) of one layer
  int64_t layer_gemm_weights = 0;                  // of which the four GEMMs' weights (fp8 with --fp8-param-gather)
  int64_t embedding_params = 0, head_params = 0;   // per GPU
  int64_t tokens = 0;                              // T = micro_batch * seq_len / cp
  int64_t sequence_tokens = 0;                     // tokens of the norms and residual (T / tp with SP)
};

// Throws UserError when the recipe is one the framework model refuses (a precision other than
// amp-bf16, amp-fp16, fp8; tp_comm_overlap without sequence parallelism).
MegatronTeStage build_megatron_te_stage(const TransformerShape& shape, const ParallelConfig& config,
                                        const FrameworkRecipe& recipe);

// Per-iteration work of one pipeline rank holding `params` parameters (all its chunks): zeroing, clipping,
// the optimizer step, as kernels (its DP collectives are timed by the predictor from the bucket plan).
PassWork optimizer_step_work(int64_t params, const ParallelConfig& config, const FrameworkRecipe& recipe);

// Megatron's default DDP bucket: max(40M, 1M x dp) parameters (distributed_data_parallel.py).
int64_t megatron_bucket_params(int reduction_ranks);

}  // namespace itertime::predict::framework
