// memory_model.hpp: per-GPU peak memory of one pipeline rank of a (DP, TP, PP, CP, VP) configuration under a
// precision policy, as calibrate/trainer.cpp and calibrate/llama_model.cpp really hold it. "stage" below is
// the pipeline rank r in [0, pp): with vp 1 it holds the one stage r of stage_layers(L, pp); with vp = v > 1
// it holds v model chunks, chunk c being virtual stage c*pp + r of stage_layers(L, pp*v) (the first
// virtual stage has the embedding, the last the final norm and the LM head).
// Invariants:
//  - Local parameters: per decoder layer the TP shards of q/k/v/o and gate/up/down plus both RMSNorm
//    weights (replicated); the first stage adds the embedding, the last the final norm and the LM head,
//    both REPLICATED over TP (the model keeps them whole on every TP rank). Tied embeddings are refused,
//    as the trainer refuses them.
//  - Weights at the param dtype, gradients at the grad dtype, AdamW moments (2 per parameter) at the
//    optimizer dtype; the flat DP gradient buffer (dp > 1: one copy of all local gradients, grad dtype);
//    the rotary cos/sin tables of every layer ([seq, head_dim] each, cast to the param dtype).
//  - The attention core saves what its kernel saves: eager attention keeps the [b, heads, s, s] scores
//    (fp32 softmax output, and its compute-dtype copy); sdpa (AttentionKernel::kSdpa) is assumed to run a
//    fused kernel (flash or memory-efficient: CUDA, and CPU from LibTorch 2.2 on), which keeps its output
//    and a [b, heads, s] fp32 log-sum-exp instead. SDPA's math kernel (CPU before 2.2, masks, odd head
//    sizes) materializes the scores and is not modelled.
//  - Activations: the tensors autograd saves per micro-batch (derivation in memory_model.cpp), times
//    the micro-batches in flight on the stage under 1F1B, min(pp - stage, m).
//  - Interleaved 1F1B (vp = v > 1): parameters, gradients, moments, rotary tables and the AdamW workspace
//    are the sums (the largest tensor) over the rank's chunks, with one flat DP buffer and one
//    distributed-optimizer shard over all of them (the trainer's one `parameters` list, chunk after
//    chunk); overlapped buckets (at dp*cp > 1) are cut per chunk, each chunk's buckets padded and
//    sharded on their own (calibrate/gradient_sync.hpp), AdamW's largest tensor the largest chunk shard.
//    Each chunk saves per micro-batch what a stage of its layers would (its own boundary, token and head
//    terms). The activations are the peak, over the points of the rank's pass order
//    (common/pipeline_order.hpp interleaved_passes: a forward adds its chunk's per-micro-batch bytes, a
//    backward frees them), of the sum of the in-flight (chunk, micro-batch) pairs' bytes; the peak is
//    taken at its first occurrence. With v 1 that walk gives min(pp - stage, m) micro-batches of the one
//    chunk, so vp 1 keeps the closed form and every figure of before. The recompute transient is
//    counted once (the same for every chunk: one layer or core of one micro-batch).
//  - total_bytes is the peak: weights + gradients + optimizer + rotary tables + the DP flat buffer
//    (dp > 1: made at the first step and kept, as Megatron-LM's contiguous gradient buffer) + the larger
//    of (activations, AdamW step workspace). The AdamW workspace exists only during the step, after every
//    activation is freed, so the two do not coexist. The figure is an upper bound when m <= pp - stage (gradients are then still
//    being allocated while the activations peak), and with vp > 1 when m == pp (the warm-up runs every forward; the trainer drops
//    the gradients every step, and chunks other than the last allocate theirs only after the last chunk's backwards freed
//    activations). Not modelled: transient tensors of one operator (e.g. the logits' gradient), allocator fragmentation, CUDA
//    context, MPI/NCCL internal buffers.
//  - Techniques (common/training_techniques.hpp): the distributed optimizer keeps AdamW's moments for a
//    ceil(P/dp) shard only, plus the flat parameters padded to dp shards, the shard and its gradient, and
//    the padded flat gradient buffer at any dp; selective recompute keeps no attention scores (sdpa: no
//    log-sum-exp) and recomputes one layer's during the backward; full recompute keeps each layer's input
//    only (the received input is layer 0's) and recomputes one layer's activations, with its autocast
//    weight copies, during the backward; with overlapped reduction the gradients are views of the flat DP
//    buffer (Megatron's main_grad), so the buffer adds nothing beside them. Both (dp > 1): the gradients
//    are views of the buckets' buffer, each bucket padded to a multiple of dp (counted as gradients, no
//    separate flat gradient buffer), plus the padded parameter buffer of the same layout, the shard
//    (padded / dp) and its gradient; AdamW's moments for the shard. With overlapped parameter gather too
//    (opg, dp > 1) the parameters are views of that padded parameter buffer: weights_bytes is the padded
//    buffer and distributed_optimizer_bytes holds the shard and its gradient only (the parameters are
//    not counted a second time).
//    With sequence parallelism (tp > 1) the norms, the residual stream between TP regions, the stage
//    boundary and the final norm hold [b, s/tp, h]; the linears entering a TP region save the gathered
//    full-sequence input as before. With the vocabulary-parallel head (tp > 1) the embedding and the LM
//    head hold V/tp rows, the loss keeps its [b*s, V/tp] fp32 softmax instead of [b*s, V]
//    log-probabilities, and the token ids are replaced by the local ids and masks the embedding and
//    the loss save (docs/method.md).
//  - Context parallelism (cp > 1): every per-token term (residual stream, norms, projections, MLP, the
//    boundary tensors, the head and the loss, the token ids) is at this CP rank's s/cp tokens; the
//    attention saves q and the context at s/cp and the keys and values, all-gathered over CP and
//    repeated for GQA, at s; eager scores are [b, heads, s/cp, s] and the mask [s/cp, s] bool (sdpa: a
//    [b, heads, s/cp] log-sum-exp and its explicit mask, [s/cp, s] at the compute dtype); the rotary
//    tables' index_select makes fresh [s/cp, head_dim] cos/sin for q and k in every layer (at any
//    precision); the input ids and the targets are two [b, s/cp] int64 gathers. The rotary buffers stay
//    [s, head_dim]. The DP flat buffer, the buckets and the distributed optimizer's shard are those of
//    dp*cp ranks (shard ceil(P/(dp*cp))), as the trainer reduces over dp*cp. With cp 1 every figure is
//    that of before.
//  - Every figure is an exact integer number of bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/attention.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"

namespace itertime::predict {

// Saved-for-backward memory of one micro-batch on one stage, and over the micro-batches in flight.
struct ActivationBreakdown {
  int64_t num_layers = 0;
  int64_t layer_hidden_bytes = 0;         // per layer, [b, s, hidden]-sized tensors (not sharded over TP)
  int64_t layer_sharded_bytes = 0;        // per layer, tensors sharded over TP (heads, FFN columns)
  int64_t layer_scores_bytes = 0;         // per layer, the part of layer_sharded_bytes that is attention scores
  int64_t layer_fixed_bytes = 0;          // per layer, independent of the micro-batch (causal mask, rotary casts)
  int64_t tokens_bytes = 0;               // token ids kept by the embedding / loss backward (first, last stage)
  int64_t head_bytes = 0;                 // last stage: final norm, LM head input, fp32 log-probabilities
  int64_t boundary_bytes = 0;             // received stage input / stage output held until the backward
  int64_t autocast_weight_bytes = 0;      // autocast's low-precision weight copies, saved per micro-batch
  int64_t batch_scaled_bytes = 0;         // the part proportional to the micro-batch size
  int64_t fixed_bytes = 0;                // the part independent of it
  int64_t per_micro_batch_bytes = 0;      // batch_scaled_bytes + fixed_bytes
  int64_t micro_batches_in_flight = 0;    // min(pp - stage, m); vp > 1: (chunk, micro-batch) pairs at the peak
  int64_t recompute_transient_bytes = 0;  // recompute: one layer's (or core's) rerun during the backward
  int64_t total_bytes = 0;                // per_micro_batch_bytes * micro_batches_in_flight + recompute_transient_bytes;
                                          // vp > 1: sum over chunks of chunk bytes * chunk in flight, + the transient
  // Model chunks (vp). With vp > 1 num_layers and the tokens, head, boundary, autocast, batch-scaled,
  // fixed and per-micro-batch bytes are sums over the chunks (one micro-batch through each), the layer_*
  // terms per layer of any chunk (all alike).
  int64_t chunks = 1;
  std::vector<int64_t> chunk_per_micro_batch_bytes;    // per chunk c: one micro-batch's saved bytes
  std::vector<int64_t> chunk_micro_batches_in_flight;  // per chunk c: its micro-batches in flight at the peak
};

struct MemoryBreakdown {
  int stage = 0;  // the pipeline rank (vp > 1: its chunks' virtual stages are c*pp + stage)
  int64_t local_params = 0;
  int64_t weights_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activations_bytes = 0;
  int64_t buffers_bytes = 0;  // rotary_tables_bytes + dp_flat_buffer_bytes + distributed_optimizer_bytes
  int64_t rotary_tables_bytes = 0;
  int64_t dp_flat_buffer_bytes = 0;
  int64_t distributed_optimizer_bytes = 0;  // padded flat parameters (opg: in weights_bytes), the shard and its gradient
  int64_t optimizer_workspace_bytes = 0;    // AdamW step temporaries (sqrt and division of the largest tensor)
  int64_t total_bytes = 0;                  // peak, see the invariants above
  ActivationBreakdown activations;

  bool exceeds(double device_memory_bytes) const { return static_cast<double>(total_bytes) > device_memory_bytes; }
  std::string to_string() const;  // one line, GiB
};

// Parameters held by one GPU of stage `stage` (vp > 1: of all its chunks; the vocabulary-parallel head
// divides the embedding and the LM head by tp).
int64_t stage_local_params(const LlamaSpec& model, const ParallelConfig& config, int stage,
                           const TrainingTechniques& techniques = {});

// Per chunk of pipeline rank `rank`, its micro-batches in flight at the first point of the rank's pass
// order (interleaved_passes(pp, rank, m, vp)) where the in-flight bytes, chunk_bytes[c] per micro-batch of
// chunk c (vp entries), peak. With vp 1: {min(pp - rank, m)} for positive bytes. Needs a valid config.
std::vector<int64_t> chunk_micro_batches_in_flight_at_peak(const ParallelConfig& config, int rank,
                                                           const std::vector<int64_t>& chunk_bytes);

// Throws UserError on an illegal configuration, a stage outside [0, pp), or tied embeddings.
ActivationBreakdown activation_memory(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy,
                                      int stage, AttentionKernel attention = AttentionKernel::kEager,
                                      const TrainingTechniques& techniques = {});
MemoryBreakdown memory_per_gpu(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy, int stage,
                               AttentionKernel attention = AttentionKernel::kEager, const TrainingTechniques& techniques = {});
// Every stage (pipeline rank), in order; the configuration fits when no stage exceeds the device memory.
std::vector<MemoryBreakdown> memory_all_stages(const LlamaSpec& model, const ParallelConfig& config,
                                               const PrecisionPolicy& policy, AttentionKernel attention = AttentionKernel::kEager,
                                               const TrainingTechniques& techniques = {});
// The largest total_bytes over every stage, as memory_all_stages would give it, for plan's memory
// filter. Without interleaving, only stages 0 and pp-1 are evaluated: a stage between them holds no
// embedding or head, no more layers than stage 0 (stage_layers gives the extra layers to the first
// stages) and no more micro-batches in flight (min(pp - s, m) falls with s), and every term of its
// breakdown grows with those, so stage 0 bounds them all. With interleaving, every rank.
int64_t peak_memory_bytes(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy,
                          AttentionKernel attention = AttentionKernel::kEager, const TrainingTechniques& techniques = {});
// The breakdown of the stage peak_memory_bytes takes its figure from (the first stage with the largest
// total over the stages it evaluates): its total_bytes == peak_memory_bytes(...).
MemoryBreakdown peak_memory_breakdown(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy,
                                      AttentionKernel attention = AttentionKernel::kEager,
                                      const TrainingTechniques& techniques = {});

}  // namespace itertime::predict
