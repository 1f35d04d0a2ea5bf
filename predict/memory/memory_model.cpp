// memory_model.cpp: the memory model of memory_model.hpp.
// Invariants: all arithmetic in int64_t bytes; the activation terms follow the derivation below, which
// reads calibrate/llama_model.cpp and calibrate/trainer.cpp against LibTorch's autograd formulas (what
// each backward node saves). Tensors under 1 KiB (scalars, [heads] index vectors) are left out.
//
// Notation: b micro-batch, s sequence, h hidden, hd head dim, nh = heads/tp, hl = nh*hd, fl = FFN/tp,
// V vocab; A activation (residual stream) bytes, C compute bytes, P param bytes; "autocast" = AMP.
//
// RMSNorm(x), x at A:  h32 = x.to(f32) [x itself when A == 4]; pow saves h32; h32 * rsqrt(var) saves
//   h32 and rsqrt [b,s,1] f32; the weight product saves the normalized value at A (when A == 4 that is
//   the f32 normalized tensor, otherwise its A copy; the f32 one is then freed).
//   => (4 + A) * b*s*h + 4 * b*s, whatever A is.
// Attention (input y = norm output at A):
//   - copy_to_tp clones y when tp > 1 (the clone replaces y). Linear q/k/v save their input:
//     one shared A tensor without autocast; under autocast each linear casts the (non-leaf) input to C
//     on its own (the autocast cache holds leaf weights only) => 3 C copies.
//   - rotary: x*cos and rotated*sin save cos/sin only: views of the buffers, or under autocast
//     (C != P) fresh [s,hd] C casts, 2 per apply, q and k => 4*s*hd*C, independent of b.
//   - GQA repeat_interleave (index_select) saves an index only. q @ k^T (bmm) saves q and the
//     (expanded) k: 2 * b*nh*s*hd * C; probs @ v saves probs and the expanded / copied v: b*nh*s*hd*C.
//   - scale (div by scalar) saves nothing; masked_fill saves the fresh causal mask [s,s] bool (1 byte,
//     independent of b); softmax(dtype=f32) saves its f32 result 4*b*nh*s*s; .to(C) adds a C copy
//     b*nh*s*s*C when C != 4 (the bmm saves it).
//   - context transpose+reshape copies: b*s*hl*C, saved by o_proj. reduce_from_tp saves nothing.
// Attention through sdpa (a fused kernel, see memory_model.hpp): the rotary, GQA repeat and linears as
//   above; the kernel saves q, the expanded k and v, its output [b,nh,s,hd] at C and the log-sum-exp
//   [b,nh,s] f32 (4*C*b*s*hl + 4*b*nh*s). Its output is laid out [b,s,nh,hd] in memory, so the
//   transpose+reshape for o_proj is a view (saved already), and there is no mask.
//   => sharded (attention part) = 4*C*b*s*hl + 4*b*nh*s instead of 4*C*b*s*hl + the scores; fixed = rotary only.
// MLP (input y2 at A): gate/up inputs like q/k/v (1 A tensor, or 2 C casts under autocast); silu saves
//   the gate output, the product saves silu(gate) and up, down saves the product: 4 * b*s*fl * C.
// Residual adds save nothing.
// Per layer: hidden = 2*((4+A)*bsh + 4bs) + (autocast ? 5*C : 2*A)*bsh
//            sharded = 4*C*b*s*hl + 4*b*nh*s*s + (C != 4 ? C*b*nh*s*s : 0) + 4*C*b*s*fl
//            fixed = s*s + (C != P ? 4*s*hd*C : 0)
// Stage extras per micro-batch:
//   - first or last stage: the token ids [b, s+1] int64 (embedding saves its indices, the loss its
//     targets; both views of one tensor) => 8*b*(s+1).
//   - last stage: final norm (4+A)*bsh + 4bs; LM head input (autocast ? C : A)*bsh; logits cast to
//     f32, log_softmax saves its f32 result (nll_loss shares it) => 4*b*s*V.
//   - not the last stage: the stage output [b,s,h] at A, held in the trainer's InFlight until the
//     backward (nothing on this stage saves it).
//   - not the first stage: the received input [b,s,h] at A, held in InFlight; when A == 4 it is the
//     first layer's saved norm input already, so it adds A*bsh only when A != 4.
//   - autocast: the C copies of every local linear weight (q,k,v,o,gate,up,down, LM head) are saved by
//     the matmuls; the autocast cache is cleared after every micro-batch's forward, so each micro-batch
//     in flight keeps its own copies (independent of b).
// Recompute (calibrate/llama_model.cpp, reentrant checkpoints):
//   - selective: the core's Function saves q and the repeated k and v (as the two bmm / the kernel did);
//     o_proj still saves the context. So the scores (sdpa: the log-sum-exp) and the causal mask go; the
//     backward reruns one core of one micro-batch: + scores (+ mask) transiently.
//   - full: the layer's Function saves its input [b,s,h] at A, nothing inside the layer is saved (its
//     forward runs without autograd; the autocast copies of its weights die with the cache at the end of
//     the micro-batch's forward). The received input of a non-first stage is layer 0's input (no extra
//     boundary term). The backward reruns one layer of one micro-batch: + that layer's hidden, sharded and
//     fixed bytes and, under autocast, its weights' C copies, transiently.
// Sequence parallelism (tp > 1, sl = s/tp): the norms run on [b,sl,h] shards (norm bytes at sl); the
//   gather into a TP region returns a fresh [b,s,h] A tensor that the linears save as copy_to_tp's clone
//   was (or cast to C under autocast), so the linears' terms stay at s; the reduce-scatter out saves
//   nothing. The received input and the stage output are [b,sl,h]; the final norm is at sl, and the
//   head's input is the gathered [b,s,h]. Transients (the [tp,b,sl,h] collective buffers) are left out.
// Interleaved 1F1B (vp = v > 1): each chunk of the rank is a stage of its own for the terms above (its
//   layers; the embedding and the tokens only in virtual stage 0, the head only in pp*v-1; the received
//   input unless virtual stage 0, the output unless pp*v-1: run_interleaved_schedule keeps both in its
//   InFlight until the chunk's backward, as run_schedule does). A chunk's saved bytes live from its
//   forward to its backward of the same micro-batch, so the rank's activations peak at the largest sum
//   over the points of its pass order (common/pipeline_order.hpp), walked pass by pass.
// Context parallelism (cp > 1, sq = s/cp, calibrate/llama_model.cpp's CP path): every term above that
//   scales with the tokens is at sq (bs = b*sq, bsh = b*sq*h, sl = sq/tp with SP), except inside the
//   attention: rotary q and k at sq; k (after rotary) and v all-gathered over CP into fresh [b,kv,s,hd]
//   C tensors (the autograd Function saves nothing; its [cp,...] buffer is a transient), then repeated
//   for GQA, so the two bmm save q [b,nh,sq,hd], k and v [b,nh,s,hd]: 2*C*b*sq*hl + 2*C*b*s*hl (with
//   cp 1 the 4*C*b*s*hl above); the scores [b,nh,sq,s] (softmax f32 + its C copy) and the mask
//   key_positions.gt(query_positions) [sq,s] bool, fresh per layer. sdpa gets that mask explicitly
//   (logical_not); LibTorch 2.x casts it to the query dtype and the fused CPU kernel saves it: C*sq*s,
//   beside its [b,nh,sq] log-sum-exp (not measured here: Debian's 1.13 has no sdpa). Rotary:
//   cos_.index_select(0, positions) of the buffer (no autograd: it saves nothing) is a fresh [sq,hd]
//   tensor, cast to C when P != C (the P one dies): x*cos and rotated*sin save 4 of them per layer
//   => 4*sq*hd*C at any precision. Token ids: the trainer's tokens.index_select(1, positions) and
//   (positions + 1) are two fresh [b,sq] int64 tensors (the [b,s+1] tokens die): the embedding saves the
//   first, the loss the second => 8*b*sq per stage end. The DP collectives run over dp*cp ranks.
// Vocabulary-parallel head (tp > 1, Vl = V/tp): the embedding saves its local ids [b,s] int64 and the
//   rows' mask [b,s] bool; the parallel cross-entropy saves its [b*s,Vl] fp32 softmax, the local
//   targets [b*s] int64 and the mask; nothing keeps the token ids themselves (no tokens term). The head's
//   input is copy_to_tp's clone (or, with SP, the gathered input), as the replicated head's was.
#include "predict/memory/memory_model.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "common/pipeline_order.hpp"

namespace itertime::predict {
namespace {

// s is the whole sequence (the keys' and the rotary tables' length); sq the tokens this rank holds,
// s/cp (s with cp 1): its queries, residual stream, projections and loss.
struct LocalShapes {
  int64_t b, s, sq, h, hd, nh, hl, kvl, fl, vocab;
};

void require_legal(const LlamaSpec& model, const ParallelConfig& config, int stage) {
  if (model.tie_word_embeddings) {
    throw UserError("model " + model.name +
                    " ties its embeddings; the memory model follows the trainer, which supports untied LLaMA "
                    "models only");
  }
  config.require_valid(model, 0);
  if (stage < 0 || stage >= config.pp) {
    throw UserError("pipeline stage " + std::to_string(stage) + " does not exist in " + config.to_string() +
                    ": use a stage between 0 and " + std::to_string(config.pp - 1));
  }
}

LocalShapes local_shapes(const LlamaSpec& model, const ParallelConfig& config) {
  LocalShapes x{};
  x.b = config.micro_batch;
  x.s = config.seq_len;
  x.sq = config.seq_len / config.cp;
  x.h = model.hidden_size;
  x.hd = model.head_dim;
  x.nh = model.num_heads / config.tp;
  x.hl = x.nh * model.head_dim;
  x.kvl = (model.num_kv_heads / config.tp) * model.head_dim;
  x.fl = model.intermediate_size / config.tp;
  x.vocab = model.vocab_size;
  return x;
}

// The layers of each model chunk pipeline rank `rank` holds, in chunk order: with vp = 1 its one stage of
// stage_layers(L, pp), else virtual stage c*pp + rank of stage_layers(L, pp*vp) for chunk c (as
// calibrate/trainer.cpp builds them).
std::vector<StageLayers> rank_chunks(const LlamaSpec& model, const ParallelConfig& config, int rank) {
  const int v = config.vp;
  const std::vector<StageLayers> stages = stage_layers(static_cast<int>(model.num_layers), config.pp * v);
  std::vector<StageLayers> chunks;
  for (int c = 0; c < v; ++c) chunks.push_back(stages[static_cast<std::size_t>(c * config.pp + rank)]);
  return chunks;
}

// Parameters of the TP-sharded linears of one layer (q, k, v, o, gate, up, down) on one GPU.
int64_t layer_linear_params(const LocalShapes& x) { return x.h * x.hl + 2 * x.h * x.kvl + x.hl * x.h + 3 * x.h * x.fl; }

int64_t bytes_of(DType dtype) { return static_cast<int64_t>(dtype_bytes(dtype)); }

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// The elements of the stage's parameters in registration order (calibrate/llama_model.cpp): embedding;
// per layer input norm, q, k, v, o, post-attention norm, gate, up, down; final norm, LM head.
std::vector<int64_t> stage_parameter_elements(const LocalShapes& x, const StageLayers& layers, int64_t vocab) {
  std::vector<int64_t> sizes;
  if (layers.has_embedding) sizes.push_back(vocab * x.h);
  for (int64_t l = 0; l < layers.num_layers; ++l) {
    for (int64_t n : {x.h, x.h * x.hl, x.h * x.kvl, x.h * x.kvl, x.hl * x.h, x.h, x.h * x.fl, x.h * x.fl, x.fl * x.h}) {
      sizes.push_back(n);
    }
  }
  if (layers.has_head) {
    sizes.push_back(x.h);
    sizes.push_back(vocab * x.h);
  }
  return sizes;
}

// calibrate/gradient_buckets.cpp's buffer: buckets of at least bucket_bytes, last parameter first, each
// padded with zeros to a multiple of pad elements; its elements.
int64_t padded_bucket_elements(const std::vector<int64_t>& sizes, int64_t element_bytes, int64_t bucket_bytes, int64_t pad) {
  int64_t total = 0, filled = 0;
  bool open = false;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    if (open && filled * element_bytes >= bucket_bytes) {
      total += (filled + pad - 1) / pad * pad;
      filled = 0;
    }
    open = true;
    filled += *it;
  }
  if (open) total += (filled + pad - 1) / pad * pad;
  return total;
}

}  // namespace

// The vocabulary rows one GPU holds of the embedding and of the LM head.
int64_t local_vocab(const LocalShapes& x, const ParallelConfig& config, const TrainingTechniques& techniques) {
  return techniques.vocab_parallel ? x.vocab / config.tp : x.vocab;
}

namespace {

// One chunk's parameters (one stage's when vp = 1) on one GPU.
int64_t chunk_local_params(const LocalShapes& x, const StageLayers& layers, int64_t vocab) {
  int64_t params = layers.num_layers * (layer_linear_params(x) + 2 * x.h);
  if (layers.has_embedding) params += vocab * x.h;
  if (layers.has_head) params += x.h + vocab * x.h;
  return params;
}

// What one micro-batch through one chunk (one stage when vp = 1) saves: every per-micro-batch field and
// recompute_transient_bytes; chunks, the chunk vectors, micro_batches_in_flight and total_bytes are left
// to the caller.
ActivationBreakdown chunk_activations(const LocalShapes& x, const ParallelConfig& config, const PrecisionPolicy& policy,
                                      const StageLayers& layers, AttentionKernel attention,
                                      const TrainingTechniques& techniques) {
  const int64_t A = bytes_of(policy.activation_dtype);
  const int64_t C = bytes_of(policy.compute_dtype);
  const bool autocast = policy.autocast;
  const bool sequence_parallel = techniques.sequence_parallel && config.tp > 1;
  const bool vocab_parallel = techniques.vocab_parallel && config.tp > 1;
  const int64_t vocab = local_vocab(x, config, techniques);
  const bool context_parallel = config.cp > 1;
  const int64_t bsh = x.b * x.sq * x.h;
  const int64_t bs = x.b * x.sq;
  const int64_t shard_s = sequence_parallel ? x.sq / config.tp : x.sq;  // the residual stream's sequence
  const int64_t shard_bsh = x.b * shard_s * x.h;
  const int64_t norm_bytes = (4 + A) * shard_bsh + 4 * x.b * shard_s;

  ActivationBreakdown a;
  a.num_layers = layers.num_layers;
  a.layer_hidden_bytes = 2 * norm_bytes + (autocast ? 5 * C : 2 * A) * bsh;
  const bool fused = attention == AttentionKernel::kSdpa;
  const int64_t scores = x.b * x.nh * x.sq * x.s;       // [b, nh, sq, s]: this rank's queries, every key
  a.layer_scores_bytes = fused ? 4 * x.b * x.nh * x.sq  // log-sum-exp
                               : 4 * scores + (C != 4 ? C * scores : 0);
  // q and the context at sq, the (gathered, repeated) k and v at s.
  a.layer_sharded_bytes = 2 * C * bs * x.hl + 2 * C * x.b * x.s * x.hl + a.layer_scores_bytes + 4 * C * bs * x.fl;
  // The mask: eager's [sq, s] bool; sdpa's explicit mask (cp > 1 only) cast to C.
  const int64_t mask_bytes = fused ? (context_parallel ? C * x.sq * x.s : 0) : x.sq * x.s;
  // Rotary casts: with cp > 1 index_select makes fresh [sq, hd] tables for every apply.
  const int64_t rotary_bytes =
      context_parallel ? 4 * x.sq * x.hd * C : (policy.compute_dtype != policy.param_dtype ? 4 * x.s * x.hd * C : 0);
  a.layer_fixed_bytes = mask_bytes + rotary_bytes;
  if (vocab_parallel) {
    if (layers.has_embedding) a.tokens_bytes += 8 * bs + bs;  // local ids, rows' mask
    if (layers.has_head) a.tokens_bytes += 8 * bs + bs;       // local targets, mask
  } else if (context_parallel) {
    if (layers.has_embedding) a.tokens_bytes += 8 * bs;  // the input ids index_select gathered
    if (layers.has_head) a.tokens_bytes += 8 * bs;       // the targets, a second gather
  } else if (layers.has_embedding || layers.has_head) {
    a.tokens_bytes = 8 * x.b * (x.s + 1);
  }
  if (layers.has_head) a.head_bytes = norm_bytes + (autocast ? C : A) * bsh + 4 * bs * vocab;
  if (!layers.has_head) a.boundary_bytes += A * shard_bsh;
  if (!layers.has_embedding && A != 4) a.boundary_bytes += A * shard_bsh;
  if (autocast) {
    a.autocast_weight_bytes = C * (layers.num_layers * layer_linear_params(x) + (layers.has_head ? vocab * x.h : 0));
  }
  if (techniques.recompute == Recompute::kSelective) {
    a.layer_sharded_bytes -= a.layer_scores_bytes;
    a.layer_fixed_bytes -= mask_bytes;
    a.recompute_transient_bytes = a.layer_scores_bytes + mask_bytes;
  } else if (techniques.recompute == Recompute::kFull && layers.num_layers > 0) {
    a.recompute_transient_bytes =
        a.layer_hidden_bytes + a.layer_sharded_bytes + a.layer_fixed_bytes + (autocast ? C * layer_linear_params(x) : 0);
    a.layer_hidden_bytes = A * shard_bsh;  // the layer's input, and nothing else
    a.layer_sharded_bytes = 0;
    a.layer_fixed_bytes = 0;
    if (!layers.has_embedding && A != 4) a.boundary_bytes -= A * shard_bsh;  // the received input is layer 0's
    if (autocast) a.autocast_weight_bytes = C * (layers.has_head ? vocab * x.h : 0);
  }
  a.batch_scaled_bytes =
      a.num_layers * (a.layer_hidden_bytes + a.layer_sharded_bytes) + a.tokens_bytes + a.head_bytes + a.boundary_bytes;
  a.fixed_bytes = a.num_layers * a.layer_fixed_bytes + a.autocast_weight_bytes;
  a.per_micro_batch_bytes = a.batch_scaled_bytes + a.fixed_bytes;
  return a;
}

}  // namespace

int64_t stage_local_params(const LlamaSpec& model, const ParallelConfig& config, int stage,
                           const TrainingTechniques& techniques) {
  require_legal(model, config, stage);
  const LocalShapes x = local_shapes(model, config);
  const int64_t vocab = local_vocab(x, config, techniques);
  int64_t params = 0;
  for (const StageLayers& chunk : rank_chunks(model, config, stage)) params += chunk_local_params(x, chunk, vocab);
  return params;
}

std::vector<int64_t> chunk_micro_batches_in_flight_at_peak(const ParallelConfig& config, int rank,
                                                           const std::vector<int64_t>& chunk_bytes) {
  ITERTIME_CHECK(chunk_bytes.size() == static_cast<std::size_t>(config.vp), "one byte count per model chunk");
  std::vector<int64_t> live(chunk_bytes.size(), 0);
  std::vector<int64_t> at_peak = live;
  int64_t bytes = 0, peak = -1;
  // The peak lies within the warm-up and the steady state's first period (common/pipeline_order.hpp).
  for (const PipelinePass& pass : interleaved_passes_to_first_period(config.pp, rank, config.num_micro_batches(), config.vp)) {
    const auto c = static_cast<std::size_t>(pass.chunk);
    if (pass.kind == PipelinePassKind::kForward) {
      ++live[c];
      bytes += chunk_bytes[c];
      if (bytes > peak) {
        peak = bytes;
        at_peak = live;
      }
    } else {
      --live[c];
      bytes -= chunk_bytes[c];
    }
  }
  return at_peak;
}

ActivationBreakdown activation_memory(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy,
                                      int stage, AttentionKernel attention, const TrainingTechniques& techniques) {
  if (attention == AttentionKernel::kAuto) {
    throw UserError("the memory model needs the attention kernel the job ran (eager or sdpa), not auto");
  }
  require_legal(model, config, stage);
  const LocalShapes x = local_shapes(model, config);
  const std::vector<StageLayers> chunks = rank_chunks(model, config, stage);
  ActivationBreakdown a;
  if (config.vp == 1) {
    // One chunk, the stage: 1F1B holds min(pp - stage, m) micro-batches at its peak (the closed form of
    // chunk_micro_batches_in_flight_at_peak with v = 1, without walking the order).
    a = chunk_activations(x, config, policy, chunks.front(), attention, techniques);
    a.micro_batches_in_flight = std::min<int64_t>(config.pp - stage, config.num_micro_batches());
    a.chunk_per_micro_batch_bytes = {a.per_micro_batch_bytes};
    a.chunk_micro_batches_in_flight = {a.micro_batches_in_flight};
    a.total_bytes = a.per_micro_batch_bytes * a.micro_batches_in_flight + a.recompute_transient_bytes;
  } else {
    // The per-layer terms are alike in every chunk (same shapes); the rest adds up over the chunks.
    for (const StageLayers& layers : chunks) {
      const ActivationBreakdown c = chunk_activations(x, config, policy, layers, attention, techniques);
      a.layer_hidden_bytes = c.layer_hidden_bytes;
      a.layer_sharded_bytes = c.layer_sharded_bytes;
      a.layer_scores_bytes = c.layer_scores_bytes;
      a.layer_fixed_bytes = c.layer_fixed_bytes;
      a.num_layers += c.num_layers;
      a.tokens_bytes += c.tokens_bytes;
      a.head_bytes += c.head_bytes;
      a.boundary_bytes += c.boundary_bytes;
      a.autocast_weight_bytes += c.autocast_weight_bytes;
      a.batch_scaled_bytes += c.batch_scaled_bytes;
      a.fixed_bytes += c.fixed_bytes;
      a.per_micro_batch_bytes += c.per_micro_batch_bytes;
      a.recompute_transient_bytes = std::max(a.recompute_transient_bytes, c.recompute_transient_bytes);
      a.chunk_per_micro_batch_bytes.push_back(c.per_micro_batch_bytes);
    }
    a.chunk_micro_batches_in_flight = chunk_micro_batches_in_flight_at_peak(config, stage, a.chunk_per_micro_batch_bytes);
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      a.micro_batches_in_flight += a.chunk_micro_batches_in_flight[c];
      a.total_bytes += a.chunk_per_micro_batch_bytes[c] * a.chunk_micro_batches_in_flight[c];
    }
    a.total_bytes += a.recompute_transient_bytes;
  }
  a.chunks = config.vp;
  ITERTIME_CHECK(a.total_bytes >= 0, "negative activation memory");
  return a;
}

// The distributed optimizer's share of memory_per_gpu: with it, `m`'s optimizer, gradients, flat buffer and
// distributed-optimizer bytes (and, with the overlapped parameter gather, its weights) are those of one shard
// of the dp*cp (`reduction`) ranks; returns AdamW's largest tensor then, the largest chunk's shard.
static int64_t distributed_optimizer_memory(MemoryBreakdown& m, const std::vector<std::vector<int64_t>>& chunk_elements,
                                            const PrecisionPolicy& policy, const TrainingTechniques& techniques,
                                            int64_t reduction) {
  // calibrate/trainer.cpp make_shard(): AdamW updates one flat shard; the buffers exist at any dp.
  // With overlapped reduction (dp > 1, make_bucketed_shard) every bucket is padded to a multiple of dp
  // and the gradients are views of that padded buffer: no separate flat gradient copy. Each model chunk
  // has its own buckets and shard (calibrate/gradient_sync.hpp, Megatron-Core's DDP per chunk): the
  // padding is per chunk, and AdamW's largest tensor the largest chunk's shard.
  const bool bucketed = techniques.overlap_gradient_reduction && reduction > 1;
  int64_t padded = 0, largest_shard = 0;
  if (bucketed) {
    for (const std::vector<int64_t>& sizes : chunk_elements) {
      const int64_t chunk_padded =
          padded_bucket_elements(sizes, bytes_of(policy.param_dtype), techniques.gradient_bucket_bytes, reduction);
      padded += chunk_padded;
      largest_shard = std::max(largest_shard, chunk_padded / reduction);
    }
  } else {
    padded = (m.local_params + reduction - 1) / reduction * reduction;
    largest_shard = padded / reduction;
  }
  const int64_t shard = padded / reduction;
  m.optimizer_bytes = 2 * shard * bytes_of(policy.optimizer_dtype);
  if (bucketed) {
    m.gradients_bytes = padded * bytes_of(policy.grad_dtype);
    m.dp_flat_buffer_bytes = 0;
  } else {
    m.dp_flat_buffer_bytes = padded * bytes_of(policy.grad_dtype);
  }
  m.distributed_optimizer_bytes =
      padded * bytes_of(policy.param_dtype) + shard * bytes_of(policy.param_dtype) + shard * bytes_of(policy.grad_dtype);
  // Overlapped parameter gather (opg, bucketed only: at_dp drops it with ovl at one rank): the
  // parameters are views of the padded parameter buffer (Megatron's param buffer), counted once, as
  // weights, like the gradients above.
  if (bucketed && techniques.overlap_parameter_gather) {
    m.weights_bytes = padded * bytes_of(policy.param_dtype);
    m.distributed_optimizer_bytes = shard * bytes_of(policy.param_dtype) + shard * bytes_of(policy.grad_dtype);
  }
  return largest_shard;
}

MemoryBreakdown memory_per_gpu(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy, int stage,
                               AttentionKernel attention, const TrainingTechniques& techniques) {
  MemoryBreakdown m;
  m.stage = stage;
  m.local_params = stage_local_params(model, config, stage, techniques);
  m.activations = activation_memory(model, config, policy, stage, attention, techniques);
  const LocalShapes x = local_shapes(model, config);
  const int64_t vocab = local_vocab(x, config, techniques);
  const std::vector<StageLayers> chunks = rank_chunks(model, config, stage);
  int64_t layer_count = 0;
  bool has_vocabulary = false;                       // the embedding or the LM head
  std::vector<std::vector<int64_t>> chunk_elements;  // per chunk, its parameters' elements (the trainer's, chunk after chunk)
  for (const StageLayers& layers : chunks) {
    layer_count += layers.num_layers;
    has_vocabulary = has_vocabulary || layers.has_embedding || layers.has_head;
    chunk_elements.push_back(stage_parameter_elements(x, layers, vocab));
  }

  m.weights_bytes = m.local_params * bytes_of(policy.param_dtype);
  m.gradients_bytes = m.local_params * bytes_of(policy.grad_dtype);
  m.optimizer_bytes = 2 * m.local_params * bytes_of(policy.optimizer_dtype);
  m.activations_bytes = m.activations.total_bytes;
  m.rotary_tables_bytes = layer_count * 2 * x.s * x.hd * bytes_of(policy.param_dtype);
  // Every DP collective runs over the dp*cp ranks (calibrate/trainer.cpp reduction_size): the flat buffer,
  // the buckets and the distributed optimizer's shard are those of dp*cp ranks.
  const int64_t reduction = static_cast<int64_t>(config.dp) * config.cp;
  // Overlapped reduction's gradients are views of its flat buffer (calibrate/trainer.cpp make_buckets):
  // counted once, as gradients.
  const bool gradients_in_buffer = techniques.overlap_gradient_reduction && !techniques.distributed_optimizer;
  m.dp_flat_buffer_bytes = reduction > 1 && !gradients_in_buffer ? m.local_params * bytes_of(policy.grad_dtype) : 0;

  // AdamW: denom = (exp_avg_sq.sqrt() / c).add_(eps) holds two temporaries of the parameter's size.
  int64_t largest_tensor = std::max({x.h * x.hl, x.h * x.kvl, x.h * x.fl, x.h});
  if (has_vocabulary) largest_tensor = std::max(largest_tensor, vocab * x.h);
  if (techniques.distributed_optimizer) {
    largest_tensor = distributed_optimizer_memory(m, chunk_elements, policy, techniques, reduction);
  }
  m.buffers_bytes = m.rotary_tables_bytes + m.dp_flat_buffer_bytes + m.distributed_optimizer_bytes;
  m.optimizer_workspace_bytes = 2 * largest_tensor * bytes_of(policy.optimizer_dtype);

  // The DP buffer is made at the first step and kept (calibrate/tp_comm.hpp), so from the second step on
  // it is resident beside the activations.
  m.total_bytes = m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.buffers_bytes +
                  std::max(m.activations_bytes, m.optimizer_workspace_bytes);
  return m;
}

std::vector<MemoryBreakdown> memory_all_stages(const LlamaSpec& model, const ParallelConfig& config,
                                               const PrecisionPolicy& policy, AttentionKernel attention,
                                               const TrainingTechniques& techniques) {
  std::vector<MemoryBreakdown> stages;
  for (int s = 0; s < config.pp; ++s) stages.push_back(memory_per_gpu(model, config, policy, s, attention, techniques));
  return stages;
}

MemoryBreakdown peak_memory_breakdown(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy,
                                      AttentionKernel attention, const TrainingTechniques& techniques) {
  MemoryBreakdown peak;
  bool first = true;
  const auto consider = [&](int stage) {
    MemoryBreakdown m = memory_per_gpu(model, config, policy, stage, attention, techniques);
    if (first || m.total_bytes > peak.total_bytes) peak = std::move(m);
    first = false;
  };
  if (config.vp == 1) {
    consider(0);
    if (config.pp > 1) consider(config.pp - 1);
  } else {
    for (int stage = 0; stage < config.pp; ++stage) consider(stage);
  }
  return peak;
}

int64_t peak_memory_bytes(const LlamaSpec& model, const ParallelConfig& config, const PrecisionPolicy& policy,
                          AttentionKernel attention, const TrainingTechniques& techniques) {
  return peak_memory_breakdown(model, config, policy, attention, techniques).total_bytes;
}

std::string MemoryBreakdown::to_string() const {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << "stage " << stage << ": total " << gib(total_bytes) << " GiB (weights "
      << gib(weights_bytes) << ", gradients " << gib(gradients_bytes) << ", optimizer " << gib(optimizer_bytes)
      << ", activations " << gib(activations_bytes) << " for " << activations.micro_batches_in_flight << " micro-batches";
  if (activations.chunks > 1) out << " over " << activations.chunks << " model chunks";
  out << ", buffers " << gib(buffers_bytes) << ", optimizer workspace " << gib(optimizer_workspace_bytes) << ")";
  return out.str();
}

}  // namespace itertime::predict
