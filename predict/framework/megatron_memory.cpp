// megatron_memory.cpp: the memory of one pipeline rank of a Megatron-Core + Transformer Engine run. Each term
// names the source file it follows (Megatron-LM and TransformerEngine as fetched for issue 32; the commits are
// in docs/framework.md). Sizes per GPU; T = micro_batch * seq_len / cp tokens of each micro-batch on a rank.
#include "predict/framework/megatron_memory.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "common/errors.hpp"
#include "predict/framework/megatron_layout_rules.hpp"

namespace itertime::predict::framework {

namespace {

constexpr int64_t kVocabDivisor = 128;         // --make-vocab-size-divisible-by (NeMo's LLaMA configs: 128 too)
constexpr int64_t kAmaxHistoryLength = 1024;   // TE DelayedScaling's amax_history_len default (NeMo's fp8 recipe too)
constexpr int64_t kTeGemmModulesPerLayer = 4;  // qkv (TELayerNormColumnParallelLinear), proj, fc1, fc2

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// Everything that does not depend on the pipeline rank, computed once per call.
struct Terms {
  int pp = 1, vp = 1;
  int64_t layers = 0;
  int64_t stages = 1;
  std::vector<int64_t> stage_layers;  // per virtual stage (megatron_layout_rules.hpp megatron_stage_layer_counts)
  // Parameters on one GPU.
  int64_t layer_params = 0;       // one decoder layer's (TP-sharded GEMMs and column biases, replicated norms, row biases)
  int64_t layer_gemm_params = 0;  // its GEMM weights (what TE casts to fp8)
  int64_t embedding_params = 0;   // virtual stage 0: word embedding shard (+ learned positions)
  int64_t head_params = 0;        // last virtual stage: output layer shard (or the tied copy) + final norm
  // Optimizer sharding.
  bool distributed_optimizer = false;
  int64_t shard_ranks = 1;  // dp * cp
  // fp8.
  bool fp8 = false;
  bool fp8_params = false;  // --fp8-param-gather
  int64_t fp8_scaling_bytes_per_layer = 0;
  // Activations per micro-batch.
  int64_t layer_kept = 0;       // saved by one decoder layer
  int64_t layer_transient = 0;  // what its backward rebuilds at once (recompute)
  int64_t embedding_kept = 0;
  int64_t head_kept = 0;
  int64_t head_transient = 0;
  int64_t micro_batches = 1;
};

void refuse(const std::string& what) { throw UserError("megatron-te memory: " + what); }

// Long because each term is a Megatron-Core source line's figure, cited beside it, in the order of its code
// (parameters, then what each layer, the embedding and the head keep and rebuild); they share the shapes.
Terms make_terms(const TransformerShape& shape, const ParallelConfig& c, const FrameworkRecipe& recipe) {
  if (recipe.precision != PrecisionName::kAmpBf16 && recipe.precision != PrecisionName::kAmpFp16 &&
      recipe.precision != PrecisionName::kFp8) {
    refuse("precision " + itertime::to_string(recipe.precision) +
           " is not one Megatron-Core runs with TE here (use amp-bf16, amp-fp16 or fp8)");
  }
  // The one rule set (megatron_layout_rules.hpp): Megatron-LM's layout and recipe rules, the model's limits.
  const std::vector<std::string> broken = framework_violations(shape, c, recipe);
  if (!broken.empty()) refuse("illegal layout " + c.to_string() + " for " + shape.name + ": " + broken.front());
  const bool sp = recipe.techniques.sequence_parallel && c.tp > 1;
  Terms x;
  x.pp = c.pp;
  x.vp = c.vp;
  x.layers = shape.layers;
  x.stages = int64_t{c.pp} * c.vp;
  x.stage_layers = megatron_stage_layer_counts(shape.layers, c.pp, c.vp,
                                               resolve_pipeline_split(shape.layers, c.pp, c.vp, recipe.pipeline_split));
  x.micro_batches = c.num_micro_batches();

  const int64_t t = c.tp;
  const int64_t h = shape.hidden, q = shape.q_size(), kv = shape.kv_size();
  const int64_t fc1 = shape.mlp == MlpKind::kSwiGlu ? 2 * shape.ffn : shape.ffn;
  const int64_t norm = shape.norm == NormKind::kLayerNorm ? 2 * h : h;
  const int64_t vocab = megatron_padded_vocab(shape.vocab, c.tp);

  // --- Parameters (megatron/core/transformer/transformer_layer.py, attention.py, mlp.py with the TE spec of
  // megatron/core/models/gpt/gpt_layer_specs.py): column-parallel qkv and fc1 split their rows over tp,
  // row-parallel proj and fc2 their columns; row-parallel biases and the norms are whole on every rank.
  x.layer_gemm_params = ((q + 2 * kv) * h + h * q + fc1 * h + h * shape.ffn) / t;
  x.layer_params = x.layer_gemm_params + 2 * norm;
  if (shape.linear_bias) x.layer_params += (q + 2 * kv) / t + fc1 / t + 2 * h;
  // megatron/core/tensor_parallel/layers.py VocabParallelEmbedding: vocab rows split over tp;
  // megatron/core/models/common/embeddings/language_model_embedding.py: learned positions whole.
  x.embedding_params = vocab * h / t + shape.learned_positions * h;
  // megatron/core/models/gpt/gpt_model.py: the output layer (ColumnParallelLinear over the vocabulary) on
  // the last stage; with tied embeddings and pp > 1 the last stage keeps its own copy of the word
  // embedding (language_module.py setup_embeddings_and_output_layer), with pp == 1 it reuses stage 0's.
  x.head_params = norm + ((!shape.tied_embeddings || c.pp > 1) ? vocab * h / t : 0);

  // --- Optimizer (megatron/core/optimizer/distrib_optimizer.py: shard_fp32_from_float16_groups and Adam's
  // state over the DDP's intra_dp_cp_group, megatron/core/distributed/distributed_data_parallel.py).
  x.distributed_optimizer = recipe.techniques.distributed_optimizer;
  x.shard_ranks = int64_t{c.dp} * c.cp;

  // --- fp8 (transformer_engine/pytorch/module/base.py _fp8_workspaces, linear.py / layernorm_linear.py:
  // with is_first_microbatch set, which Megatron's TE wrappers pass (megatron/core/extensions/
  // transformer_engine.py, unless --disable-parameter-transpose-cache), the fp8 weight and its
  // column-wise copy (the transpose Hopper's fp8 GEMMs need for dgrad) are cached across micro-batches).
  x.fp8 = recipe.precision == PrecisionName::kFp8;
  // --fp8-param-gather (megatron/core/extensions/transformer_engine.py creates the TE modules under
  // fp8_model_init; distrib_optimizer.py takes the fp32 main parameters from their high-precision init
  // value and then clears it): the GEMM weights are fp8 tensors, and only their transpose is cached.
  x.fp8_params = x.fp8 && recipe.fp8_param_gather;
  if (x.fp8) {
    // Per TE GEMM module: forward input, weight, output and backward grad-output, grad-input meta, each an
    // fp32 scale, scale_inv and amax history (delayed: kAmaxHistoryLength rows, transformer_engine/common/
    // recipe/__init__.py; current: one amax).
    const int64_t history = recipe.fp8_recipe == Fp8Recipe::kDelayed ? kAmaxHistoryLength : 1;
    x.fp8_scaling_bytes_per_layer = kTeGemmModulesPerLayer * 5 * 4 * (history + 2);
  }

  // --- Activations of one micro-batch (what the backward needs, saved in the forward).
  // Tokens per rank (megatron/core/utils.py get_batch_on_this_cp_rank). With cp > 1 TE's ring attention
  // (dot_product_attention/context_parallel.py AttnFuncWithCPAndKVP2P) saves the local q, k + v, output and
  // lse, as below; the KV blocks from the ring are not kept (the backward runs the ring again).
  const int64_t T = int64_t{c.micro_batch} * (c.seq_len / c.cp);
  const int64_t d = sp ? t : 1;     // the residual stream is sequence-sharded with SP
  const int64_t g = x.fp8 ? 1 : 2;  // a TE GEMM's saved input: fp8 under fp8 autocast
  const int64_t heads_local = shape.heads / t;
  // Attention half. TE's LayerNormLinear (layernorm_linear.py) saves its input, the fp32 rsigma and the
  // normalized output (the local shard with SP; gathered again in the backward).
  int64_t attention = 2 * T * h / d + 4 * T / d + g * T * h / d;
  // The attention's inputs. attention.py get_query_key_value_tensors splits the fused QKV output with
  // SplitAlongDim: the value is a strided view of it; TE fused RoPE makes the query and key new tensors.
  const int64_t lse = 4 * T * heads_local;  // flash / cuDNN fused attention: the fp32 log-sum-exp, no scores
  const int64_t context_bf16 = 2 * T * q / t;
  const int64_t attention_no_recompute =
      attention + 2 * T * (q + 2 * kv) / t             // TE (dot_product_attention/utils.py get_qkv_layout) finds the
                                                       // strided value "not_supported", makes q, k, v contiguous and
                                                       // saves those; the QKV output is freed
      + context_bf16 + lse + (x.fp8 ? T * q / t : 0);  // its output (the projection's input; fp8 copy too)
  if (recipe.techniques.recompute == Recompute::kSelective) {
    // Megatron's selective recompute ('core_attn', transformer_config.py recompute_modules,
    // attention.py _checkpointed_attention_forward; tensor_parallel/random.py CheckpointFunction saves the
    // inputs): the rotary q and k and the value view, which keeps the whole QKV output alive, q + kv +
    // (q + 2 kv); the attention's own state is rebuilt and its output kept only as the projection's input.
    attention += 2 * T * (2 * q + 3 * kv) / t + g * T * q / t;
  } else {
    attention = attention_no_recompute;
  }
  // MLP half: norm as above, the SwiGLU's (or GeLU's) input, the fc1 output (megatron/core/fusions/
  // fused_bias_swiglu.py saves it), and fc2's input (fp8 under fp8). LLaMA's dropouts are 0: no masks
  // (bias-dropout-add with p = 0 keeps none).
  const int64_t mlp = 2 * T * h / d + 4 * T / d + g * T * h / d + 2 * T * fc1 / t + g * T * shape.ffn / t;
  const int64_t full_layer = attention_no_recompute + mlp;  // a layer as it runs without any recompute
  switch (recipe.techniques.recompute) {
    case Recompute::kNone:
      x.layer_kept = full_layer;
      x.layer_transient = 0;
      break;
    case Recompute::kSelective:
      x.layer_kept = attention + mlp;
      x.layer_transient = context_bf16 + lse;  // the recomputed attention's output and log-sum-exp
      break;
    case Recompute::kFull:
      // --recompute-granularity full --recompute-method uniform over every layer (transformer_block.py
      // _checkpointed_forward): only each layer's input is kept; its backward rebuilds the whole layer.
      x.layer_kept = 2 * T * h / d;
      x.layer_transient = full_layer;
      break;
  }
  // Embedding (tensor_parallel/layers.py VocabParallelEmbedding): the int64 token ids of the lookup, and
  // with tp > 1 the bool mask of rows outside this rank's vocabulary.
  x.embedding_kept = 8 * T + (t > 1 ? T : 0);
  // Head: the final norm (TENorm: input + rsigma), the output layer's input (Megatron's own
  // ColumnParallelLinear, bf16 even under fp8), and the vocabulary-parallel fused cross-entropy
  // (megatron/core/fusions/fused_cross_entropy.py: fp32 exp-logits [T, V/tp], target mask, int64 targets).
  x.head_kept = 2 * T * h / d + 4 * T / d + 2 * T * h / d + 4 * T * vocab / t + T + 8 * T;
  // The bf16 logits beside their fp32 copy in the forward, the bf16 gradient beside the fp32 one in the
  // backward (fused_cross_entropy.py casts grad_input to bf16).
  x.head_transient = 2 * T * vocab / t;
  return x;
}

// The most bytes of saved activations pipeline rank r holds at once under Megatron's interleaved order
// (schedules.py forward_backward_pipelining_with_interleaving, as common/pipeline_order.hpp states it):
// (pp - r - 1) * 2 + (vp - 1) * pp warm-up forwards (all m * vp when m == pp), then pairs of one forward
// and one backward; forward k runs chunk (k mod pp*vp) / pp, backward k chunk vp-1 - (k mod pp*vp) / pp.
// Chunks differ in bytes (the embedding, the head, uneven layer splits), so the peak is walked, not
// counted; by that order's periodicity it lies within the warm-up and the first pp*vp pairs.
// The chunk of the k-th pass of a kind in that order, (k mod pp*vp) / pp, walked k by k with counters
// (the walk is on every candidate of a plan: no division per pass).
class ChunkWalk {
 public:
  ChunkWalk(int64_t pp, int64_t vp, int64_t k) : pp_(pp), vp_(vp), chunk_((k % (pp * vp)) / pp), within_(k % pp) {}
  int64_t chunk() const { return chunk_; }
  void advance() {
    if (++within_ < pp_) return;
    within_ = 0;
    if (++chunk_ == vp_) chunk_ = 0;
  }

 private:
  int64_t pp_, vp_, chunk_, within_;
};

int64_t interleaved_peak_bytes(const Terms& x, int r, const int64_t* chunk_bytes) {
  const int64_t pp = x.pp, vp = x.vp, m = x.micro_batches;
  const int64_t total = m * vp, period = pp * vp;
  const int64_t warmup = m == pp ? total : std::min<int64_t>((pp - r - 1) * 2 + (vp - 1) * pp, total);
  // The warm-up's forwards: whole periods hold pp forwards of every chunk, then the part period's chunks.
  int64_t period_bytes = 0;
  for (int64_t c = 0; c < vp; ++c) period_bytes += chunk_bytes[c];
  const int64_t part = warmup % period;
  int64_t bytes = (warmup / period) * pp * period_bytes + (part % pp) * chunk_bytes[part / pp];
  for (int64_t c = 0; c < part / pp; ++c) bytes += pp * chunk_bytes[c];
  int64_t peak = bytes;
  const int64_t pairs = std::min(total - warmup, period);
  ChunkWalk forward(pp, vp, warmup), backward(pp, vp, 0);
  for (int64_t i = 0; i < pairs; ++i) {
    bytes += chunk_bytes[forward.chunk()];
    peak = std::max(peak, bytes);
    bytes -= chunk_bytes[vp - 1 - backward.chunk()];
    forward.advance();
    backward.advance();
  }
  return peak;
}

// Pipeline rank r's figures.
FrameworkMemory rank_memory(const Terms& x, int r) {
  int64_t chunk_bytes[64];
  int64_t params = 0, gemm_params = 0, layers_here = 0, transient = 0;
  for (int chunk = 0; chunk < x.vp; ++chunk) {
    const int64_t j = int64_t{chunk} * x.pp + r;
    const int64_t n = x.stage_layers[static_cast<std::size_t>(j)];
    const bool first = j == 0, last = j == x.stages - 1;
    params += n * x.layer_params + (first ? x.embedding_params : 0) + (last ? x.head_params : 0);
    gemm_params += n * x.layer_gemm_params;
    layers_here += n;
    chunk_bytes[chunk] = n * x.layer_kept + (first ? x.embedding_kept : 0) + (last ? x.head_kept : 0);
    if (n > 0) transient = std::max(transient, x.layer_transient);
    if (last) transient = std::max(transient, x.head_transient);
  }
  // 1F1B (schedules.py forward_backward_pipelining_without_interleaving): pp - r - 1 warm-up forwards and
  // one more before the first backward, min(pp - r, m) micro-batches of the one chunk.
  const int64_t activations =
      x.vp == 1 ? std::min<int64_t>(x.pp - r, x.micro_batches) * chunk_bytes[0] : interleaved_peak_bytes(x, r, chunk_bytes);
  FrameworkMemory m;
  m.pipeline_rank = r;
  // megatron/core/distributed/param_and_grad_buffer.py: bf16 parameters in the contiguous param buffer,
  // gradients in a grad buffer of grad_dtype fp32 (grad_reduce_in_fp32, which NeMo's recipes set and
  // megatron/training/arguments.py sets with --bf16; with --fp16 Megatron-LM alone keeps fp16 gradients
  // unless --accumulate-allreduce-grads-in-fp32, FrameworkRecipe states fp32); the 64-element alignment
  // and bucket padding are below 0.01% and left out.
  m.weights_bytes = x.fp8_params ? 2 * (params - gemm_params) + gemm_params : 2 * params;
  m.main_grad_bytes = 4 * params;
  // fp32 main parameters + exp_avg + exp_avg_sq: 12 B per parameter, the shard of dp*cp with the
  // distributed optimizer (distrib_optimizer.py), all of them otherwise (optimizer.py
  // Float16OptimizerWithFloat16Params).
  m.optimizer_bytes = x.distributed_optimizer ? 12 * ceil_div(params, x.shard_ranks) : 12 * params;
  if (x.fp8) m.fp8_bytes = (x.fp8_params ? 1 : 2) * gemm_params + layers_here * x.fp8_scaling_bytes_per_layer;
  m.activations_bytes = activations;
  m.other_bytes = transient;
  m.total_bytes = m.weights_bytes + m.main_grad_bytes + m.optimizer_bytes + m.fp8_bytes + m.activations_bytes + m.other_bytes;
  return m;
}

}  // namespace

std::string FrameworkMemory::to_string() const {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << "pipeline rank " << pipeline_rank << ": total " << gib(total_bytes)
      << " GiB (weights " << gib(weights_bytes) << ", main gradients " << gib(main_grad_bytes) << ", optimizer "
      << gib(optimizer_bytes) << ", fp8 " << gib(fp8_bytes) << ", activations " << gib(activations_bytes) << ", other "
      << gib(other_bytes) << ")";
  return out.str();
}

std::string RuntimeReserve::to_string() const {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << gib(total_bytes()) << " GiB (CUDA context " << gib(cuda_context_bytes)
      << ", cuBLAS workspace " << gib(cublas_workspace_bytes) << ", NCCL " << gib(nccl_bytes) << " over " << communicators
      << " communicator" << (communicators == 1 ? "" : "s") << ")";
  return out.str();
}

RuntimeReserve megatron_runtime_reserve(const ParallelConfig& c, bool hopper_or_later) {
  RuntimeReserve r;
  r.cuda_context_bytes = kCudaContextBytes;
  r.cublas_workspace_bytes = hopper_or_later ? int64_t{32} << 20 : int64_t{4} << 20;
  for (const int64_t ranks : {int64_t{c.tp}, int64_t{c.cp}, int64_t{c.dp} * c.cp, int64_t{c.pp}})
    if (ranks > 1) ++r.communicators;
  r.nccl_bytes = int64_t{r.communicators} * kNcclChannels * 2 * kNcclBuffSizeBytes;
  return r;
}

int64_t megatron_padded_vocab(int64_t vocab, int tp) {
  const int64_t multiple = kVocabDivisor * tp;
  return ceil_div(vocab, multiple) * multiple;
}

std::vector<VirtualStageLayers> megatron_virtual_stage_layers(int64_t num_layers, int pp, int vp, const PipelineSplit& split) {
  const PipelineSplit resolved = resolve_pipeline_split(num_layers, pp, vp, split);
  TransformerShape layers_only;
  layers_only.name = std::to_string(num_layers) + " layers";
  layers_only.layers = num_layers;
  layers_only.heads = layers_only.kv_heads = layers_only.ffn = 1;
  const std::vector<std::string> broken = layout_violations(layers_only, ParallelConfig{1, 1, pp, 1, pp, 1, 1, vp}, resolved);
  if (!broken.empty())
    refuse("no Megatron-LM split of " + layers_only.name + " over pp " + std::to_string(pp) + " vp " + std::to_string(vp) + ": " +
           broken.front());
  const std::vector<int64_t> counts = megatron_stage_layer_counts(num_layers, pp, vp, resolved);
  const int64_t stages = int64_t{pp} * vp;
  std::vector<VirtualStageLayers> out(static_cast<std::size_t>(stages));
  for (int64_t j = 0; j < stages; ++j)
    out[static_cast<std::size_t>(j)] = {counts[static_cast<std::size_t>(j)], j == 0, j == stages - 1};
  return out;
}

void megatron_chunk_micro_batches_in_flight(const ParallelConfig& config, int rank, int64_t* counts) {
  const int64_t m = config.num_micro_batches();
  const int64_t pp = config.pp, vp = config.vp;
  if (vp == 1) {
    // megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_without_interleaving:
    // pp - rank - 1 warm-up forwards, then one more before the first backward.
    counts[0] = std::min<int64_t>(pp - rank, m);
    return;
  }
  // schedules.py forward_backward_pipelining_with_interleaving: (pp - rank - 1) * 2 + (vp - 1) * pp warm-up
  // forwards (all m * vp when m == pp), then one more before the first backward; forward k runs chunk
  // (k mod pp*vp) / pp. After it each backward frees one (chunk, micro-batch) as a forward adds one, so
  // the count peaks there (common/pipeline_order.hpp; the test checks it against that order's walk).
  const int64_t total = m * vp;
  const int64_t warmup = m == pp ? total : std::min<int64_t>((pp - rank - 1) * 2 + (vp - 1) * pp, total);
  const int64_t forwards = std::min<int64_t>(warmup + 1, total);
  const int64_t period = pp * vp;
  const int64_t rest = forwards % period;
  for (int64_t c = 0; c < vp; ++c) {
    counts[c] = (forwards / period) * pp + std::min<int64_t>(pp, std::max<int64_t>(0, rest - c * pp));
  }
}

FrameworkMemory megatron_te_memory(const TransformerShape& shape, const ParallelConfig& config, const FrameworkRecipe& recipe,
                                   int pipeline_rank) {
  const Terms x = make_terms(shape, config, recipe);
  if (pipeline_rank < 0 || pipeline_rank >= config.pp) {
    refuse("pipeline rank " + std::to_string(pipeline_rank) + " is outside [0, " + std::to_string(config.pp) + ")");
  }
  if (config.vp > 64) refuse("at most 64 virtual pipeline stages per rank");
  return rank_memory(x, pipeline_rank);
}

int64_t megatron_te_peak_memory_bytes(const TransformerShape& shape, const ParallelConfig& config,
                                      const FrameworkRecipe& recipe) {
  const Terms x = make_terms(shape, config, recipe);
  if (config.vp > 64) refuse("at most 64 virtual pipeline stages per rank");
  int64_t peak = 0;
  for (int r = 0; r < config.pp; ++r) peak = std::max(peak, rank_memory(x, r).total_bytes);
  return peak;
}

FrameworkMemory megatron_te_peak_memory(const TransformerShape& shape, const ParallelConfig& config,
                                        const FrameworkRecipe& recipe) {
  const Terms x = make_terms(shape, config, recipe);
  if (config.vp > 64) refuse("at most 64 virtual pipeline stages per rank");
  FrameworkMemory peak = rank_memory(x, 0);
  for (int r = 1; r < config.pp; ++r) {
    FrameworkMemory m = rank_memory(x, r);
    if (m.total_bytes > peak.total_bytes) peak = std::move(m);
  }
  return peak;
}

}  // namespace itertime::predict::framework
