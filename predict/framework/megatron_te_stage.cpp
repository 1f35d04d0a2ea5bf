// megatron_te_stage.cpp: the kernel and collective records of a Megatron-Core + Transformer Engine step
// (megatron_te_stage.hpp). Each block names the Megatron-LM / TransformerEngine source it follows
// (paths in NVIDIA/Megatron-LM and NVIDIA/TransformerEngine as of late 2026).
#include "predict/framework/megatron_te_stage.hpp"

#include <algorithm>
#include <cmath>

#include "common/errors.hpp"
#include "predict/framework/megatron_memory.hpp"

namespace itertime::predict::framework {
namespace {

constexpr double kFp32Bytes = 4.0;

// What one layer's GEMM inputs and outputs look like on this GPU.
struct LayerDims {
  int64_t tokens = 0;           // T: GEMM rows
  int64_t sequence_tokens = 0;  // T / tp with sequence parallelism (norms, residual)
  int64_t hidden = 0;
  int64_t q = 0, kv = 0;  // per GPU
  int64_t ffn = 0;        // per GPU
  int64_t fc1_out = 0;    // per GPU (2 ffn for SwiGLU)
  int64_t vocab = 0;      // per GPU (vocabulary-parallel)
  double act_bytes = 2;   // bf16 / fp16 activations
  bool fp8 = false;
  bool current_scaling = false;
  bool sp = false;
  bool unfused_attention = false;
  bool dropout = false;
  int tp = 1;
};

class PassBuilder {
 public:
  explicit PassBuilder(const LayerDims& dims) : dims_(dims) {}

  int memory(const std::string& name, double bytes) {
    Kernel kernel;
    kernel.name = name;
    kernel.kind = KernelKind::kMemoryBound;
    kernel.bytes = bytes;
    work_.kernels.push_back(kernel);
    return last();
  }
  int gemm(const std::string& name, int64_t m, int64_t n, int64_t k, bool fp8_eligible) {
    Kernel kernel;
    kernel.name = name;
    kernel.kind = KernelKind::kGemm;
    kernel.dtype = fp8_eligible && dims_.fp8 ? ComputeDType::kFp8 : ComputeDType::kBf16;
    kernel.gemm = GemmShape{m, n, k};
    const double element_bytes = kernel.dtype == ComputeDType::kFp8 ? 1.0 : dims_.act_bytes;
    kernel.gemm_bytes = static_cast<double>(m * k + k * n) * element_bytes + static_cast<double>(m * n) * dims_.act_bytes;
    work_.kernels.push_back(kernel);
    return last();
  }
  int attention(const std::string& name, const AttentionShape& shape, bool backward) {
    Kernel kernel;
    kernel.name = name;
    kernel.kind = KernelKind::kAttention;
    kernel.attention = shape;
    kernel.attention_backward = backward;
    work_.kernels.push_back(kernel);
    return last();
  }
  void comm(const std::string& name, Collective collective, CommGroup group, double bytes, int hidden_behind = -1,
            bool needs_tp_comm_overlap = false, int64_t repeats = 1) {
    Comm comm;
    comm.name = name;
    comm.collective = collective;
    comm.group = group;
    comm.bytes = static_cast<int64_t>(bytes);
    comm.repeats = repeats;
    comm.hidden_behind = hidden_behind;
    comm.needs_tp_comm_overlap = needs_tp_comm_overlap;
    work_.comms.push_back(comm);
  }
  // An FP8 cast(-transpose) of a tensor of `elements` bf16 values: TE's cast_transpose writes the fp8
  // tensor and its transpose (transformer_engine/common/transpose/cast_transpose.cu); current scaling
  // reads it once more for its amax first (Float8CurrentScaling).
  void fp8_cast(const std::string& name, double elements) {
    if (!dims_.fp8) return;
    if (dims_.current_scaling) memory(name + "_amax", elements * dims_.act_bytes);
    memory(name, elements * (dims_.act_bytes + 2.0));
  }
  // A norm over the sequence tokens; its output cast to fp8 inside the kernel when the GEMM after it
  // runs in fp8 (TE's LayerNormLinear: normalization with an fp8 output, transformer_engine/pytorch/
  // module/layernorm_linear.py).
  void norm_forward(const std::string& name, bool fp8_output) {
    const double elements = static_cast<double>(dims_.sequence_tokens * dims_.hidden);
    if (fp8_output && dims_.fp8 && dims_.current_scaling) memory(name + "_amax", elements * dims_.act_bytes);
    memory(name, elements * (dims_.act_bytes + (fp8_output && dims_.fp8 ? 1.0 : dims_.act_bytes)));
  }
  void norm_backward(const std::string& name) {
    const double elements = static_cast<double>(dims_.sequence_tokens * dims_.hidden);
    memory(name, elements * 4.0 * dims_.act_bytes);  // reads input and gradient (and stats), writes the gradient
  }
  // The fused bias-dropout-add (megatron/core/fusions/fused_bias_dropout.py): two inputs, one output,
  // and with dropout a one-byte mask.
  void residual_add(const std::string& name) {
    memory(name,
           static_cast<double>(dims_.sequence_tokens * dims_.hidden) * (3.0 * dims_.act_bytes + (dims_.dropout ? 1.0 : 0.0)));
  }
  // Before a column-parallel GEMM: sequence parallelism's all-gather of its input (fp8 when the GEMM
  // is, TE gathers the cast tensor), run beside the GEMM only with TP comm overlap.
  void gather_input(const std::string& name, int gemm_index, bool fp8_input) {
    if (dims_.tp == 1 || !dims_.sp) return;
    const double bytes = static_cast<double>(dims_.tokens * dims_.hidden) * (fp8_input && dims_.fp8 ? 1.0 : dims_.act_bytes);
    comm(name, Collective::kAllGather, CommGroup::kTensor, bytes, gemm_index, true);
    if (fp8_input && dims_.fp8 && dims_.current_scaling) comm(name + "_amax", Collective::kAllReduce, CommGroup::kTensor, 4);
  }
  // After a row-parallel GEMM: reduce-scatter (SP) or all-reduce of its [T, hidden] output.
  void reduce_output(const std::string& name, int gemm_index) {
    if (dims_.tp == 1) return;
    const double bytes = static_cast<double>(dims_.tokens * dims_.hidden) * dims_.act_bytes;
    if (dims_.sp) {
      comm(name, Collective::kReduceScatter, CommGroup::kTensor, bytes, gemm_index, true);
    } else {
      comm(name, Collective::kAllReduce, CommGroup::kTensor, bytes);
    }
  }
  PassWork take() { return std::move(work_); }
  int last() const { return static_cast<int>(work_.kernels.size()) - 1; }

 private:
  const LayerDims& dims_;
  PassWork work_;
};

AttentionShape attention_shape(const TransformerShape& shape, const ParallelConfig& config) {
  AttentionShape attention;
  attention.batch = config.micro_batch;
  attention.heads = shape.heads / config.tp;
  attention.kv_heads = std::max<int64_t>(1, shape.kv_heads / config.tp);
  attention.seq_q = config.seq_len;
  attention.seq_kv = config.seq_len;
  attention.head_dim = shape.head_dim;
  attention.causal = true;
  return attention;
}

// Megatron-Core's CP (TE's attention with cp_comm_type "p2p", transformer_engine/pytorch/attention/
// dot_product_attention/context_parallel.py, AttnFuncWithCPAndKVP2P): each rank holds the sequence chunks
// r and 2cp-1-r (load-balanced causal), and runs cp steps: step 0 the causal attention of its tokens over
// its own keys; step i > 0 a non-causal block of half the keys (i <= rank) or of half the queries
// (i > rank): both s/cp x s/(2cp). Each step's exchange of the next K/V block (backward: K/V and their
// gradients) runs beside that step's kernel; after each step i > 0 the output and its log-sum-exp are
// corrected (flash_attn_fwd_out_correction: the step's bf16 output read, the fp32 output read and
// written). Returns the index of the last kernel.
int context_parallel_attention(PassBuilder& pass, const LayerDims& dims, const TransformerShape& shape,
                               const ParallelConfig& config, const std::string& name, bool backward) {
  AttentionShape step = attention_shape(shape, config);
  const int64_t local = config.seq_len / config.cp;
  const double kv_block_bytes = static_cast<double>(dims.tokens * 2 * dims.kv) * dims.act_bytes;
  int last = -1;
  for (int i = 0; i < config.cp; ++i) {
    step.seq_q = local;
    step.seq_kv = i == 0 ? local : local / 2;
    step.causal = i == 0;
    last = pass.attention(name + "_cp_step" + std::to_string(i), step, backward);
    if (i + 1 < config.cp) {
      pass.comm(name + (backward ? "_cp_ring_kv_dkv" : "_cp_ring_kv"), Collective::kSendRecv, CommGroup::kContext,
                backward ? 2 * kv_block_bytes : kv_block_bytes, last);
    }
    if (i > 0 && !backward) {
      pass.memory(name + "_cp_out_correction", static_cast<double>(dims.tokens * dims.q) * (dims.act_bytes + 8.0));
    }
  }
  return last;
}

// The fused attention of one pass: one kernel, or the context-parallel steps.
void fused_attention(PassBuilder& pass, const LayerDims& dims, const TransformerShape& shape, const ParallelConfig& config,
                     const std::string& name, bool backward) {
  if (config.cp > 1) {
    context_parallel_attention(pass, dims, shape, config, name, backward);
  } else {
    pass.attention(name, attention_shape(shape, config), backward);
  }
}

// The attention core of Megatron-LM before TE (CoreAttention): the heads of this GPU stacked as the
// batched GEMMs' rows (m = b * heads * s), the scores [b * heads, s, s] at the activation dtype.
struct UnfusedAttention {
  int64_t rows = 0;  // b * heads/tp * s
  int64_t seq = 0;
  int64_t head_dim = 0;
  double score_elements = 0;  // b * heads/tp * s * s
};

UnfusedAttention unfused_attention(const TransformerShape& shape, const ParallelConfig& config) {
  const int64_t heads = shape.heads / config.tp;
  UnfusedAttention a;
  a.seq = config.seq_len;
  a.head_dim = shape.head_dim;
  a.rows = static_cast<int64_t>(config.micro_batch) * heads * a.seq;
  a.score_elements = static_cast<double>(a.rows) * static_cast<double>(a.seq);
  return a;
}

// Forward: Q K^T, scale-mask-softmax (megatron/model/fused_softmax.py), dropout, P V. Returns the index of
// its last kernel.
int unfused_attention_forward(PassBuilder& pass, const LayerDims& dims, const UnfusedAttention& a, const std::string& prefix) {
  pass.gemm(prefix + "scores_bmm", a.rows, a.seq, a.head_dim, false);
  pass.memory(prefix + "scale_mask_softmax", a.score_elements * 2.0 * dims.act_bytes);
  if (dims.dropout) pass.memory(prefix + "attention_dropout", a.score_elements * (2.0 * dims.act_bytes + 1.0));
  return pass.gemm(prefix + "context_bmm", a.rows, a.head_dim, a.seq, false);
}

// Backward: dV = P^T dO and dP = dO V^T, dropout's and softmax's backward, dQ = dS K and dK = dS^T Q.
void unfused_attention_backward(PassBuilder& pass, const LayerDims& dims, const UnfusedAttention& a) {
  pass.gemm("attention_dv_bmm", a.rows, a.head_dim, a.seq, false);
  pass.gemm("attention_dprobs_bmm", a.rows, a.seq, a.head_dim, false);
  if (dims.dropout) pass.memory("attention_dropout_backward", a.score_elements * (2.0 * dims.act_bytes + 1.0));
  pass.memory("scale_mask_softmax_backward", a.score_elements * 3.0 * dims.act_bytes);
  pass.gemm("attention_dq_bmm", a.rows, a.head_dim, a.seq, false);
  pass.gemm("attention_dk_bmm", a.rows, a.head_dim, a.seq, false);
}

void layer_forward(PassBuilder& pass, const TransformerShape& shape, const LayerDims& dims, const ParallelConfig& config) {
  const int64_t t = dims.tokens;
  // TELayerNormColumnParallelLinear: norm (+fp8 cast), SP all-gather, QKV GEMM.
  pass.norm_forward("input_norm", true);
  const int qkv_index = pass.gemm("qkv_gemm", t, dims.q + 2 * dims.kv, dims.hidden, true);
  pass.gather_input("sp_all_gather_qkv_input", qkv_index, true);
  // Fused RoPE on q and k (megatron/core/models/common/embeddings/rope_utils.py, TE's fused_rope).
  if (shape.rotary) pass.memory("fused_rope", static_cast<double>(t * (dims.q + dims.kv)) * 2.0 * dims.act_bytes);
  if (dims.unfused_attention) {
    unfused_attention_forward(pass, dims, unfused_attention(shape, config), "");
  } else {
    // TEDotProductAttention: one fused kernel per pass (per CP step), bf16 (fp8 attention is off by default).
    fused_attention(pass, dims, shape, config, "fused_attention", false);
  }
  // TERowParallelLinear: proj, then SP reduce-scatter (or all-reduce).
  pass.fp8_cast("proj_input_cast", static_cast<double>(t * dims.q));
  const int proj_index = pass.gemm("proj_gemm", t, dims.hidden, dims.q, true);
  pass.reduce_output("sp_reduce_scatter_proj", proj_index);
  pass.residual_add("bias_dropout_add_attention");  // megatron/core/fusions/fused_bias_dropout.py
  // MLP: TELayerNormColumnParallelLinear fc1, the activation, TERowParallelLinear fc2.
  pass.norm_forward("pre_mlp_norm", true);
  const int fc1_index = pass.gemm("fc1_gemm", t, dims.fc1_out, dims.hidden, true);
  pass.gather_input("sp_all_gather_fc1_input", fc1_index, true);
  const double ffn_elements = static_cast<double>(t * dims.ffn);
  if (shape.mlp == MlpKind::kSwiGlu) {
    pass.memory("fused_swiglu", ffn_elements * 3.0 * dims.act_bytes);  // reads both halves, writes one
  } else if (shape.mlp == MlpKind::kSquaredRelu) {
    // Unfused (megatron/core/transformer/mlp.py: no bias-activation fusion for it): relu, then pow.
    pass.memory("relu", ffn_elements * 2.0 * dims.act_bytes);
    pass.memory("pow_2", ffn_elements * 2.0 * dims.act_bytes);
  } else {
    pass.memory("fused_bias_gelu", ffn_elements * 2.0 * dims.act_bytes);
  }
  pass.fp8_cast("fc2_input_cast", ffn_elements);
  const int fc2_index = pass.gemm("fc2_gemm", t, dims.hidden, dims.ffn, true);
  pass.reduce_output("sp_reduce_scatter_fc2", fc2_index);
  pass.residual_add("bias_dropout_add_mlp");
}

// The backward of a column-parallel GEMM (input gathered over TP with SP): data gradient, weight
// gradient; the input re-gathered beside the data gradient and the input gradient reduce-scattered
// (all-reduced without SP) beside the weight gradient (LinearWithGradAccumulationAndAsyncCommunication).
void column_parallel_backward(PassBuilder& pass, const LayerDims& dims, const std::string& name, int64_t out_features, bool fp8) {
  const int64_t t = dims.tokens;
  pass.fp8_cast(name + "_grad_cast", static_cast<double>(t * out_features));
  const int dgrad = pass.gemm(name + "_dgrad", t, dims.hidden, out_features, fp8);
  const int wgrad = pass.gemm(name + "_wgrad", out_features, dims.hidden, t, fp8);
  if (dims.tp == 1) return;
  const double gathered = static_cast<double>(t * dims.hidden);
  if (dims.sp) {
    pass.comm(name + "_sp_regather_input", Collective::kAllGather, CommGroup::kTensor,
              gathered * (fp8 && dims.fp8 ? 1.0 : dims.act_bytes), dgrad);
    pass.comm(name + "_sp_reduce_scatter_dgrad", Collective::kReduceScatter, CommGroup::kTensor, gathered * dims.act_bytes,
              wgrad);
  } else {
    pass.comm(name + "_all_reduce_dgrad", Collective::kAllReduce, CommGroup::kTensor, gathered * dims.act_bytes, wgrad);
  }
}

// The backward of a row-parallel GEMM: its output gradient all-gathered (SP's reduce-scatter's
// backward) before the data gradient, which it could run beside only with TP comm overlap.
void row_parallel_backward(PassBuilder& pass, const LayerDims& dims, const std::string& name, int64_t in_features) {
  const int64_t t = dims.tokens;
  pass.fp8_cast(name + "_grad_cast", static_cast<double>(t * dims.hidden));
  const int dgrad = pass.gemm(name + "_dgrad", t, in_features, dims.hidden, true);
  pass.gemm(name + "_wgrad", dims.hidden, in_features, t, true);
  if (dims.tp > 1 && dims.sp) {
    pass.comm(name + "_sp_all_gather_grad", Collective::kAllGather, CommGroup::kTensor,
              static_cast<double>(t * dims.hidden) * dims.act_bytes, dgrad, true);
  }
}

void layer_backward(PassBuilder& pass, const TransformerShape& shape, const LayerDims& dims, const ParallelConfig& config,
                    Recompute recompute) {
  const int64_t t = dims.tokens;
  if (recompute == Recompute::kFull) layer_forward(pass, shape, dims, config);  // the layer rerun first
  pass.residual_add("residual_grad_mlp");
  row_parallel_backward(pass, dims, "fc2", dims.ffn);
  const double ffn_elements = static_cast<double>(t * dims.ffn);
  if (shape.mlp == MlpKind::kSquaredRelu) {  // autograd of pow (grad x 2 relu(x)), then of relu (threshold)
    pass.memory("pow_2_backward", ffn_elements * 3.0 * dims.act_bytes);
    pass.memory("relu_backward", ffn_elements * 3.0 * dims.act_bytes);
  } else {
    pass.memory(shape.mlp == MlpKind::kSwiGlu ? "fused_swiglu_backward" : "fused_bias_gelu_backward",
                ffn_elements * (shape.mlp == MlpKind::kSwiGlu ? 5.0 : 3.0) * dims.act_bytes);
  }
  column_parallel_backward(pass, dims, "fc1", dims.fc1_out, true);
  pass.norm_backward("pre_mlp_norm_backward");
  pass.residual_add("residual_grad_attention");
  row_parallel_backward(pass, dims, "proj", dims.q);
  if (dims.unfused_attention) {
    const UnfusedAttention unfused = unfused_attention(shape, config);
    if (recompute == Recompute::kSelective) unfused_attention_forward(pass, dims, unfused, "recompute_");
    unfused_attention_backward(pass, dims, unfused);
  } else {
    if (recompute == Recompute::kSelective) fused_attention(pass, dims, shape, config, "fused_attention_recompute", false);
    fused_attention(pass, dims, shape, config, "fused_attention_backward", true);
  }
  if (shape.rotary) pass.memory("fused_rope_backward", static_cast<double>(t * (dims.q + dims.kv)) * 2.0 * dims.act_bytes);
  column_parallel_backward(pass, dims, "qkv", dims.q + 2 * dims.kv, true);
  pass.norm_backward("input_norm_backward");
}

}  // namespace

int64_t megatron_bucket_params(int reduction_ranks) {
  return std::max<int64_t>(40'000'000, int64_t{1'000'000} * reduction_ranks);
}

// Long because it lays out one stage's passes in Megatron-Core's order (embedding, layers, head and loss,
// the fp8 casts and amax reductions), whose pieces are the pass builders above; they share the stage's dims.
MegatronTeStage build_megatron_te_stage(const TransformerShape& shape, const ParallelConfig& config,
                                        const FrameworkRecipe& recipe) {
  const PrecisionName precision = recipe.precision;
  if (precision != PrecisionName::kAmpBf16 && precision != PrecisionName::kAmpFp16 && precision != PrecisionName::kFp8) {
    throw UserError(
        "the megatron-te framework model runs amp-bf16, amp-fp16 or fp8 (Megatron's --bf16, --fp16, --fp8-format), not " +
        to_string(precision));
  }
  const bool sp = recipe.techniques.sequence_parallel && config.tp > 1;
  if (recipe.tp_comm_overlap && config.tp > 1 && !sp) {
    throw UserError("--tp-comm-overlap needs sequence parallelism (Megatron-LM refuses it without --sequence-parallel)");
  }
  if (recipe.unfused_attention && config.cp > 1) {
    throw UserError("context parallelism needs the fused attention of Transformer Engine (not unfused_attention)");
  }
  LayerDims dims;
  dims.unfused_attention = recipe.unfused_attention;
  dims.dropout = recipe.dropout;
  dims.tp = config.tp;
  dims.sp = sp;
  dims.fp8 = precision == PrecisionName::kFp8;
  dims.current_scaling = dims.fp8 && recipe.fp8_recipe == Fp8Recipe::kCurrent;
  dims.tokens = static_cast<int64_t>(config.micro_batch) * config.seq_len / config.cp;
  dims.sequence_tokens = sp ? dims.tokens / config.tp : dims.tokens;
  dims.hidden = shape.hidden;
  dims.q = shape.q_size() / config.tp;
  dims.kv = std::max<int64_t>(shape.head_dim, shape.kv_size() / config.tp);
  dims.ffn = shape.ffn / config.tp;
  dims.fc1_out = shape.mlp == MlpKind::kSwiGlu ? 2 * dims.ffn : dims.ffn;
  dims.vocab = megatron_padded_vocab(shape.vocab, config.tp) / config.tp;  // Megatron pads to 128 * tp rows

  MegatronTeStage stage;
  stage.tokens = dims.tokens;
  stage.sequence_tokens = dims.sequence_tokens;
  const int64_t layer_gemm_weights =
      (dims.q + 2 * dims.kv) * dims.hidden + dims.hidden * dims.q + dims.fc1_out * dims.hidden + dims.hidden * dims.ffn;
  stage.layer_params = layer_gemm_weights + 2 * shape.hidden * (shape.norm == NormKind::kLayerNorm ? 2 : 1);
  stage.layer_gemm_weights = layer_gemm_weights;
  stage.embedding_params = dims.vocab * shape.hidden + shape.learned_positions * shape.hidden;
  stage.head_params = (shape.tied_embeddings ? 0 : dims.vocab * shape.hidden) + shape.hidden;

  {
    PassBuilder pass(dims);
    layer_forward(pass, shape, dims, config);
    stage.layer_forward = pass.take();
  }
  {
    PassBuilder pass(dims);
    layer_backward(pass, shape, dims, config, recipe.techniques.recompute);
    stage.layer_backward = pass.take();
  }
  {
    // megatron/core/tensor_parallel/layers.py VocabParallelEmbedding: masked lookup, then the partial
    // rows summed over TP (reduce-scatter with SP, megatron/core/models/common/embeddings/
    // language_model_embedding.py).
    PassBuilder pass(dims);
    const double rows = static_cast<double>(dims.tokens * shape.hidden);
    const int lookup = pass.memory("embedding_lookup", rows * 2.0 * dims.act_bytes * (shape.learned_positions > 0 ? 2.0 : 1.0));
    (void)lookup;
    if (config.tp > 1) {
      pass.comm(sp ? "embedding_reduce_scatter" : "embedding_all_reduce",
                sp ? Collective::kReduceScatter : Collective::kAllReduce, CommGroup::kTensor, rows * dims.act_bytes);
    }
    stage.embedding_forward = pass.take();
  }
  {
    PassBuilder pass(dims);
    const double rows = static_cast<double>(dims.tokens * shape.hidden);
    if (config.tp > 1 && sp)
      pass.comm("embedding_grad_all_gather", Collective::kAllGather, CommGroup::kTensor, rows * dims.act_bytes);
    // The embedding's weight gradient accumulated into its fp32 main_grad rows.
    pass.memory("embedding_backward", rows * (dims.act_bytes + 2 * kFp32Bytes));
    stage.embedding_backward = pass.take();
  }
  {
    // The final norm, the output layer (ColumnParallelLinear, bf16: TE keeps it out of fp8), the fused
    // vocabulary-parallel cross-entropy (megatron/core/fusions/fused_cross_entropy.py): logits read
    // twice, the exp written in fp32, three [T] fp32 all-reduces over TP (max, sum, target logit).
    PassBuilder pass(dims);
    pass.norm_forward("final_norm", false);
    const int output_index = pass.gemm("output_gemm", dims.tokens, dims.vocab, shape.hidden, false);
    pass.gather_input("sp_all_gather_output_input", output_index, false);
    const double logits = static_cast<double>(dims.tokens * dims.vocab);
    pass.memory("fused_cross_entropy", logits * (2 * dims.act_bytes + kFp32Bytes));
    if (config.tp > 1) {
      for (const char* name :
           {"cross_entropy_max_all_reduce", "cross_entropy_sum_all_reduce", "cross_entropy_target_all_reduce"}) {
        pass.comm(name, Collective::kAllReduce, CommGroup::kTensor, static_cast<double>(dims.tokens) * kFp32Bytes);
      }
    }
    stage.head_forward = pass.take();
  }
  {
    PassBuilder pass(dims);
    const double logits = static_cast<double>(dims.tokens * dims.vocab);
    pass.memory("fused_cross_entropy_backward", logits * (kFp32Bytes + dims.act_bytes));
    column_parallel_backward(pass, dims, "output", dims.vocab, false);
    pass.norm_backward("final_norm_backward");
    stage.head_backward = pass.take();
  }
  {
    // FP8 weights: cast and transposed once per iteration (first micro-batch), per layer.
    PassBuilder pass(dims);
    if (dims.fp8 && recipe.fp8_param_gather) {
      // fp8 parameters (--fp8-param-gather): only the transposes are made (fp8 in, fp8 out).
      pass.memory("fp8_weight_transpose", 2.0 * static_cast<double>(layer_gemm_weights));
    } else {
      pass.fp8_cast("fp8_weight_cast_transpose", static_cast<double>(layer_gemm_weights));
    }
    stage.first_micro_batch = pass.take();
  }
  {
    PassBuilder pass(dims);
    if (dims.fp8 && !dims.current_scaling) {
      // TE DelayedScaling: the amax histories of the pass's GEMMs reduced once per forward
      // (transformer_engine/pytorch/fp8.py, reduce_and_update_fp8_tensors).
      pass.comm("fp8_amax_all_reduce", Collective::kAllReduce, CommGroup::kModel, 4 * 3 * 4 * kFp32Bytes);
    }
    stage.stage_forward = pass.take();
  }
  return stage;
}

PassWork optimizer_step_work(int64_t params, const ParallelConfig& config, const FrameworkRecipe& recipe) {
  PassWork work;
  const double local = static_cast<double>(params);
  const double shard = recipe.techniques.distributed_optimizer ? std::ceil(local / config.reduction_ranks()) : local;
  auto add = [&work](const std::string& name, double bytes) {
    Kernel kernel;
    kernel.name = name;
    kernel.bytes = bytes;
    work.kernels.push_back(kernel);
  };
  // megatron/core/distributed/param_and_grad_buffer.py: the fp32 grad buffer zeroed every iteration.
  add("zero_grad_buffer", local * kFp32Bytes);
  // megatron/core/optimizer/clip_grads.py: the gradient norm over this rank's (shard of) main grads.
  add("grad_norm", shard * kFp32Bytes);
  // Adam on fp32 main parameters (megatron/core/optimizer/distrib_optimizer.py, TE/apex FusedAdam):
  // reads parameter, gradient and both moments, writes parameter and moments, and the bf16 copy.
  add("fused_adam", shard * (4 * kFp32Bytes + 3 * kFp32Bytes + 2.0));
  return work;
}

}  // namespace itertime::predict::framework
