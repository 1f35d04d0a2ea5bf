// llama_model.cpp: the LibTorch LLaMA pipeline stage: embedding, decoder layers, norm, head and loss (llama_model.hpp).
#include "calibrate/llama_model.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>

#include "calibrate/torch_compat.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {
namespace {

enum ParameterId { kQ = 1, kK, kV, kO, kGate, kUp, kDown, kEmbedding, kLmHead };
constexpr int kGlobalLayer = -1;  // embedding and LM head

torch::nn::Linear make_linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

// Copies rows [first, first+count) (dim 0) or columns (dim 1) of a full weight into `linear`.
void load_shard(torch::nn::Linear& linear, const torch::Tensor& full, int dim, int64_t first, int64_t count) {
  torch::NoGradGuard no_grad;
  linear->weight.copy_(full.narrow(dim, first, count));
}

// The autocast state of a recomputed region, kept in the autograd context.
void save_autocast(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
  const AutocastState state = autocast_state(x.device().type());
  ctx->saved_data["autocast_enabled"] = state.enabled;
  ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(state.dtype);
}

AutocastGuard restore_autocast(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
  return AutocastGuard(x.device().type(), static_cast<torch::Dtype>(ctx->saved_data["autocast_dtype"].toInt()),
                       ctx->saved_data["autocast_enabled"].toBool());
}

}  // namespace

// Full recompute: one decoder layer, keeping only its input (llama_model.hpp).
struct RecomputedLayer : public torch::autograd::Function<RecomputedLayer> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, int64_t layer_address) {
    ctx->saved_data["layer"] = layer_address;
    save_autocast(ctx, x);
    ctx->save_for_backward({x});
    return reinterpret_cast<DecoderLayerImpl*>(static_cast<intptr_t>(layer_address))->body(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    torch::Tensor y;
    {
      torch::AutoGradMode enable_grad(true);
      const AutocastGuard autocast = restore_autocast(ctx, x);
      y = reinterpret_cast<DecoderLayerImpl*>(static_cast<intptr_t>(ctx->saved_data["layer"].toInt()))->body(x);
    }
    torch::autograd::backward({y}, {grads[0]});
    return {x.grad(), torch::Tensor()};
  }
};

// Selective recompute: one attention core, keeping only q, k and v (llama_model.hpp).
struct RecomputedCore : public torch::autograd::Function<RecomputedCore> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t attention_address) {
    ctx->saved_data["attention"] = attention_address;
    save_autocast(ctx, q);
    ctx->save_for_backward({q, k, v});
    return reinterpret_cast<const AttentionImpl*>(static_cast<intptr_t>(attention_address))->core(q, k, v);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor q = saved[0].detach().requires_grad_(true);
    const torch::Tensor k = saved[1].detach().requires_grad_(true);
    const torch::Tensor v = saved[2].detach().requires_grad_(true);
    torch::Tensor attended;
    {
      torch::AutoGradMode enable_grad(true);
      const AutocastGuard autocast = restore_autocast(ctx, q);
      attended =
          reinterpret_cast<const AttentionImpl*>(static_cast<intptr_t>(ctx->saved_data["attention"].toInt()))->core(q, k, v);
    }
    torch::autograd::backward({attended}, {grads[0]});
    return {q.grad(), k.grad(), v.grad(), torch::Tensor()};
  }
};

torch::Tensor init_full_weight(uint64_t seed, int layer, int parameter_id, torch::IntArrayRef shape) {
  const uint64_t mixed = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(layer + 2) * 1000003ull +
                         static_cast<uint64_t>(parameter_id) * 7919ull;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(mixed);
  return at::normal(0.0, 0.02, shape, generator, torch::TensorOptions().dtype(torch::kFloat32));
}

// ---- RMSNorm -----------------------------------------------------------------------------------

RMSNormImpl::RMSNormImpl(int64_t hidden_size, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", torch::ones({hidden_size}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  const auto input_dtype = x.scalar_type();
  torch::Tensor h = x.to(torch::kFloat32);
  const torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + eps_);
  return weight_ * h.to(input_dtype);
}

// ---- Rotary ------------------------------------------------------------------------------------

RotaryImpl::RotaryImpl(int64_t head_dim, int64_t max_seq_len, double theta) {
  const torch::Tensor exponents = torch::arange(0, head_dim, 2, torch::kFloat64) / static_cast<double>(head_dim);
  const torch::Tensor inverse_frequency = 1.0 / torch::pow(theta, exponents);
  const torch::Tensor positions = torch::arange(max_seq_len, torch::kFloat64);
  const torch::Tensor angles = torch::outer(positions, inverse_frequency);  // [seq, head_dim/2]
  const torch::Tensor both = torch::cat({angles, angles}, -1);              // [seq, head_dim]
  cos_ = register_buffer("cos", both.cos().to(torch::kFloat32));
  sin_ = register_buffer("sin", both.sin().to(torch::kFloat32));
}

torch::Tensor RotaryImpl::apply(const torch::Tensor& x) const {
  const int64_t seq = x.size(2);
  const int64_t half = x.size(3) / 2;
  const torch::Tensor cos = cos_.narrow(0, 0, seq).to(x.scalar_type());
  const torch::Tensor sin = sin_.narrow(0, 0, seq).to(x.scalar_type());
  const torch::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

torch::Tensor RotaryImpl::apply(const torch::Tensor& x, const torch::Tensor& positions) const {
  const int64_t half = x.size(3) / 2;
  const torch::Tensor cos = cos_.index_select(0, positions).to(x.scalar_type());
  const torch::Tensor sin = sin_.index_select(0, positions).to(x.scalar_type());
  const torch::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

// ---- Attention ---------------------------------------------------------------------------------

AttentionImpl::AttentionImpl(const LlamaSpec& spec, int layer, uint64_t seed, TpContext* tp, int64_t max_seq_len,
                             AttentionKernel kernel, Recompute recompute, CpContext* cp)
    : kernel_(kernel), recompute_(recompute), tp_(tp), cp_(cp) {
  ITERTIME_CHECK(kernel != AttentionKernel::kAuto, "attention kernel must be resolved before the model is built");
  const int tp_size = tp ? tp->size : 1;
  const int tp_rank = tp ? tp->rank : 0;
  ITERTIME_CHECK(spec.num_heads % tp_size == 0 && spec.num_kv_heads % tp_size == 0, "TP must divide heads");
  local_heads_ = spec.num_heads / tp_size;
  local_kv_heads_ = spec.num_kv_heads / tp_size;
  head_dim_ = spec.head_dim;
  const int64_t hidden = spec.hidden_size;
  q_ = register_module("q_proj", make_linear(hidden, local_heads_ * head_dim_));
  k_ = register_module("k_proj", make_linear(hidden, local_kv_heads_ * head_dim_));
  v_ = register_module("v_proj", make_linear(hidden, local_kv_heads_ * head_dim_));
  o_ = register_module("o_proj", make_linear(local_heads_ * head_dim_, hidden));
  rotary_ = register_module("rotary", Rotary(head_dim_, max_seq_len, spec.rope_theta));

  const int64_t q_rows = local_heads_ * head_dim_;
  const int64_t kv_rows = local_kv_heads_ * head_dim_;
  load_shard(q_, init_full_weight(seed, layer, kQ, {spec.num_heads * head_dim_, hidden}), 0, tp_rank * q_rows, q_rows);
  load_shard(k_, init_full_weight(seed, layer, kK, {spec.num_kv_heads * head_dim_, hidden}), 0, tp_rank * kv_rows, kv_rows);
  load_shard(v_, init_full_weight(seed, layer, kV, {spec.num_kv_heads * head_dim_, hidden}), 0, tp_rank * kv_rows, kv_rows);
  load_shard(o_, init_full_weight(seed, layer, kO, {hidden, spec.num_heads * head_dim_}), 1, tp_rank * q_rows, q_rows);
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const torch::Tensor input = enter_tp_region(x, tp_);  // with SP: the whole sequence, gathered
  const int64_t batch = input.size(0);
  const int64_t seq = input.size(1);
  torch::Tensor q = q_(input).view({batch, seq, local_heads_, head_dim_}).transpose(1, 2);
  torch::Tensor k = k_(input).view({batch, seq, local_kv_heads_, head_dim_}).transpose(1, 2);
  torch::Tensor v = v_(input).view({batch, seq, local_kv_heads_, head_dim_}).transpose(1, 2);
  if (context_parallel()) {
    // This CP rank's tokens at their global positions; every CP rank's keys and values (before the
    // KV heads are repeated: fewer bytes).
    const torch::Tensor positions = context_parallel_positions(seq * cp_->size, cp_->size, cp_->rank).to(q.device());
    q = rotary_->apply(q, positions);
    k = cp_all_gather_sequence(rotary_->apply(k, positions), cp_);
    v = cp_all_gather_sequence(v, cp_);
  } else {
    q = rotary_->apply(q);
    k = rotary_->apply(k);
  }
  if (local_heads_ != local_kv_heads_) {
    const int64_t group = local_heads_ / local_kv_heads_;
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  const torch::Tensor attended = recompute_ == Recompute::kSelective
                                     ? RecomputedCore::apply(q, k, v, static_cast<int64_t>(reinterpret_cast<intptr_t>(this)))
                                     : core(q, k, v);
  const torch::Tensor context = attended.transpose(1, 2).reshape({batch, seq, local_heads_ * head_dim_});
  return leave_tp_region(o_(context), tp_);
}

torch::Tensor AttentionImpl::core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const {
  if (context_parallel()) {
    // Causal over global positions: this rank's queries against every CP rank's keys.
    const int64_t seq = k.size(2);
    const torch::Tensor query_positions = context_parallel_positions(seq, cp_->size, cp_->rank).unsqueeze(1);
    const torch::Tensor key_positions = context_parallel_key_positions(seq, cp_->size).unsqueeze(0);
    const torch::Tensor hidden = key_positions.gt(query_positions).to(q.device());  // [seq/cp, seq]
    if (kernel_ == AttentionKernel::kSdpa) {
#if ITERTIME_TORCH_AT_LEAST(2, 0)
      return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/hidden.logical_not(), /*dropout_p=*/0.0,
                                              /*is_causal=*/false);
#else
      throw InternalError("sdpa on LibTorch < 2.0 (resolve_attention refuses it)", __FILE__, __LINE__);
#endif
    }
    torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(head_dim_));
    scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
    const torch::Tensor probabilities = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
    return torch::matmul(probabilities, v);
  }
  if (kernel_ == AttentionKernel::kSdpa) return causal_sdpa(q, k, v);
  const int64_t seq = q.size(2);
  torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(head_dim_));
  const torch::Tensor mask = torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  const torch::Tensor probabilities = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
  return torch::matmul(probabilities, v);
}

// ---- MLP ---------------------------------------------------------------------------------------

MlpImpl::MlpImpl(const LlamaSpec& spec, int layer, uint64_t seed, TpContext* tp) : tp_(tp) {
  const int tp_size = tp ? tp->size : 1;
  const int tp_rank = tp ? tp->rank : 0;
  ITERTIME_CHECK(spec.intermediate_size % tp_size == 0, "TP must divide the FFN size");
  const int64_t local = spec.intermediate_size / tp_size;
  const int64_t hidden = spec.hidden_size;
  gate_ = register_module("gate_proj", make_linear(hidden, local));
  up_ = register_module("up_proj", make_linear(hidden, local));
  down_ = register_module("down_proj", make_linear(local, hidden));
  load_shard(gate_, init_full_weight(seed, layer, kGate, {spec.intermediate_size, hidden}), 0, tp_rank * local, local);
  load_shard(up_, init_full_weight(seed, layer, kUp, {spec.intermediate_size, hidden}), 0, tp_rank * local, local);
  load_shard(down_, init_full_weight(seed, layer, kDown, {hidden, spec.intermediate_size}), 1, tp_rank * local, local);
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  const torch::Tensor input = enter_tp_region(x, tp_);
  return leave_tp_region(down_(torch::silu(gate_(input)) * up_(input)), tp_);
}

// ---- Decoder layer -----------------------------------------------------------------------------

DecoderLayerImpl::DecoderLayerImpl(const LlamaSpec& spec, int layer, uint64_t seed, TpContext* tp, int64_t max_seq_len,
                                   AttentionKernel attention, Recompute recompute, CpContext* cp)
    : recompute_(recompute) {
  input_norm_ = register_module("input_layernorm", RMSNorm(spec.hidden_size, spec.rms_norm_eps));
  attention_ = register_module("self_attn", Attention(spec, layer, seed, tp, max_seq_len, attention, recompute, cp));
  post_attention_norm_ = register_module("post_attention_layernorm", RMSNorm(spec.hidden_size, spec.rms_norm_eps));
  mlp_ = register_module("mlp", Mlp(spec, layer, seed, tp));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x) {
  if (recompute_ == Recompute::kFull) return RecomputedLayer::apply(x, static_cast<int64_t>(reinterpret_cast<intptr_t>(this)));
  return body(x);
}

torch::Tensor DecoderLayerImpl::body(const torch::Tensor& x) {
  const torch::Tensor h = x + attention_(input_norm_(x));
  return h + mlp_(post_attention_norm_(h));
}

// ---- Stage -------------------------------------------------------------------------------------

LlamaStageImpl::LlamaStageImpl(const LlamaSpec& spec, const StageLayers& stage, uint64_t seed, TpContext* tp, int64_t max_seq_len,
                               AttentionKernel attention, Recompute recompute, CpContext* cp)
    : stage_(stage), tp_(tp) {
  // Vocabulary-parallel: this TP rank's rows [first_id_, first_id_ + local_vocab) of the embedding and head.
  const bool vocab_parallel = tp != nullptr && tp->vp();
  ITERTIME_CHECK(!vocab_parallel || spec.vocab_size % tp->size == 0, "TP must divide the vocabulary");
  const int64_t local_vocab = vocab_parallel ? spec.vocab_size / tp->size : spec.vocab_size;
  first_id_ = vocab_parallel ? tp->rank * local_vocab : 0;
  if (stage.has_embedding) {
    embedding_ = register_module("embed_tokens", torch::nn::Embedding(local_vocab, spec.hidden_size));
    torch::NoGradGuard no_grad;
    embedding_->weight.copy_(
        init_full_weight(seed, kGlobalLayer, kEmbedding, {spec.vocab_size, spec.hidden_size}).narrow(0, first_id_, local_vocab));
  }
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < stage.num_layers; ++i) {
    layers_->push_back(DecoderLayer(spec, stage.first_layer + i, seed, tp, max_seq_len, attention, recompute, cp));
  }
  if (stage.has_head) {
    final_norm_ = register_module("norm", RMSNorm(spec.hidden_size, spec.rms_norm_eps));
    lm_head_ = register_module("lm_head", make_linear(spec.hidden_size, local_vocab));
    torch::NoGradGuard no_grad;
    lm_head_->weight.copy_(
        init_full_weight(seed, kGlobalLayer, kLmHead, {spec.vocab_size, spec.hidden_size}).narrow(0, first_id_, local_vocab));
  }
  std::size_t end = 0;
  if (stage.has_embedding) part_ends_.push_back(end += embedding_->parameters().size());
  for (const auto& layer : *layers_) part_ends_.push_back(end += layer->parameters().size());
  if (stage.has_head) part_ends_.push_back(end += final_norm_->parameters().size() + lm_head_->parameters().size());
  ITERTIME_CHECK(end == parameters().size(), "a stage's parts do not hold its parameters in registration order");
}

void LlamaStageImpl::before_parameters(std::size_t part) const {
  if (!before_parameters_) return;
  before_parameters_(part == 0 ? 0 : part_ends_.at(part - 1), part_ends_.at(part));
}

torch::Tensor LlamaStageImpl::embed(const torch::Tensor& tokens) {
  if (tp_ == nullptr || !tp_->vp()) return scatter_to_sp(embedding_(tokens), tp_);  // replicated
  // Vocabulary-parallel (Megatron's VocabParallelEmbedding): rows of ids outside this rank's range are
  // zero, and the sum over TP (with SP: its reduce-scatter along the sequence) completes every row.
  const int64_t local_vocab = embedding_->weight.size(0);
  const torch::Tensor outside = (tokens < first_id_).logical_or(tokens >= first_id_ + local_vocab);
  const torch::Tensor rows = embedding_((tokens - first_id_).masked_fill(outside, 0)).masked_fill(outside.unsqueeze(-1), 0.0);
  return leave_tp_region(rows, tp_);
}

torch::Tensor LlamaStageImpl::head_loss(const torch::Tensor& h, const torch::Tensor& targets) {
  if (tp_ == nullptr || !tp_->vp()) {  // replicated head: every TP rank computes the whole loss
    const torch::Tensor logits = lm_head_(gather_from_sp_replicated(final_norm_(h), tp_)).to(torch::kFloat32);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  // Vocabulary-parallel: a column-parallel head (its input enters a TP region) and the parallel loss.
  const torch::Tensor logits = lm_head_(enter_tp_region(final_norm_(h), tp_)).to(torch::kFloat32);
  return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), first_id_, tp_);
}

torch::Tensor LlamaStageImpl::forward(const torch::Tensor& input, const torch::Tensor& targets) {
  // With SP the residual stream between the TP regions is this rank's sequence shard.
  std::size_t part = 0;
  if (stage_.has_embedding) before_parameters(part++);
  torch::Tensor h = stage_.has_embedding ? embed(input) : input;
  for (const auto& layer : *layers_) {
    before_parameters(part++);
    h = layer->as<DecoderLayer>()->forward(h);
  }
  if (!stage_.has_head) return h;
  before_parameters(part);
  return head_loss(h, targets);
}

}  // namespace itertime::calibrate
