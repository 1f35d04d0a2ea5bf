// llama_model.hpp: a LLaMA decoder (HF architecture) in the LibTorch C++ frontend, split into one
// pipeline stage and sharded over tensor parallelism, Megatron style.
// Invariants:
//  - Token embedding, RMSNorm (computed in fp32, as HF does), rotary embeddings, grouped-query causal
//    attention (softmax in fp32, as HF's eager attention), SwiGLU MLP, final norm, LM head and
//    cross-entropy (on fp32 logits). Linear layers have no bias.
//  - TP: q/k/v and gate/up are column-parallel (each rank holds heads / KV heads / FFN columns
//    [rank*n/tp, (rank+1)*n/tp)); o and down are row-parallel; one all-reduce in forward and one in
//    backward per attention block and per MLP block. The embedding and the LM head are replicated
//    on every TP rank (docs/method.md says why).
//  - With a vocabulary-parallel head (TpContext::vocab_parallel) each TP rank holds vocabulary rows
//    [rank*V/tp, (rank+1)*V/tp) of the embedding and the LM head: the embedding's partial rows are
//    summed over TP (all-reduce; with SP reduce-scatter), the head is column-parallel and the loss is
//    Megatron's parallel cross-entropy (tp_comm.hpp). Needs V % tp == 0.
//  - With sequence parallelism (TpContext::sequence_parallel, tp_comm.hpp) the all-reduces become an
//    all-gather into and a reduce-scatter out of each TP region; the norms and residual adds run on
//    the rank's sequence shard; the embedding's output is split to the shard and the final norm's
//    output gathered before the LM head. A non-first stage's input is then [batch, seq/tp, hidden].
//  - Initialization does not depend on the layout: every full (unsharded) weight is drawn from its own
//    generator seeded by (seed, layer, parameter), then sliced, so every (DP,TP,PP) layout starts
//    from the same model as single-rank training.
//  - The attention core is eager (matmul, masked_fill, fp32 softmax, matmul, as HF's eager attention) or
//    LibTorch's fused causal scaled_dot_product_attention (common/attention.hpp); both repeat the KV
//    heads for GQA first. The kernel is resolved (never kAuto) before the model is built.
//  - Context parallelism (a CpContext with size cp > 1, tp_comm.hpp): the stage's sequence dimension is
//    this CP rank's seq/cp tokens (chunks i and 2cp-1-i, context_parallel_positions; with SP its 1/tp
//    shard of them outside the TP regions). Rotary embeddings use the tokens' global positions; queries
//    stay local, keys and values are all-gathered over CP (cp_all_gather_sequence, before the KV heads
//    are repeated for GQA; its backward reduce-scatters their gradients), and the causal mask comes from
//    global positions: a query at position p sees a key at q iff q <= p (eager: masked_fill; sdpa: an
//    explicit boolean attn_mask instead of is_causal). Full recompute reruns the all-gather. Without a
//    CpContext, or with cp 1, the operators are exactly those of before (the tracer's and stage
//    builder's call-by-call tests hold the cp-1 model to them).
//  - Every submodule is registered; parameters are created in fp32 and cast to the policy's parameter
//    dtype by the trainer.
//  - A stage's forward calls its before-parameters hook (set_before_parameters; unset by default) before
//    each part that holds parameters first uses them, and runs no operator for it.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "calibrate/tp_comm.hpp"
#include "common/attention.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/training_techniques.hpp"

namespace itertime::calibrate {

// Activation recompute (common/training_techniques.hpp) is a reentrant checkpoint: the forward of the
// region runs without autograd, the backward reruns it under the forward's autocast state and
// back-propagates through the rerun.

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t hidden_size, double eps);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_;
  double eps_;
};
TORCH_MODULE(RMSNorm);

// Precomputed rotary cos/sin tables (buffers, fp32, not parameters).
class RotaryImpl : public torch::nn::Module {
 public:
  RotaryImpl(int64_t head_dim, int64_t max_seq_len, double theta);
  // x: [batch, heads, seq, head_dim], at positions 0..seq-1
  torch::Tensor apply(const torch::Tensor& x) const;
  // x: [batch, heads, n, head_dim] at the given global positions ([n], int64, on x's device)
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& positions) const;

 private:
  torch::Tensor cos_, sin_;
};
TORCH_MODULE(Rotary);

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const LlamaSpec& spec, int layer, uint64_t seed, TpContext* tp, int64_t max_seq_len, AttentionKernel kernel,
                Recompute recompute = Recompute::kNone, CpContext* cp = nullptr);
  torch::Tensor forward(const torch::Tensor& x);
  // The attention core: q [batch, heads, seq, head_dim], k and v with their KV heads repeated (with
  // context parallelism: q [.., seq/cp, ..], k and v [.., seq, ..] all-gathered, context_parallel_key_positions).
  torch::Tensor core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const;

 private:
  bool context_parallel() const { return cp_ != nullptr && cp_->active(); }
  AttentionKernel kernel_;
  Recompute recompute_;
  int64_t local_heads_, local_kv_heads_, head_dim_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr};
  Rotary rotary_{nullptr};
  TpContext* tp_;
  CpContext* cp_;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(const LlamaSpec& spec, int layer, uint64_t seed, TpContext* tp);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear gate_{nullptr}, up_{nullptr}, down_{nullptr};
  TpContext* tp_;
};
TORCH_MODULE(Mlp);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const LlamaSpec& spec, int layer, uint64_t seed, TpContext* tp, int64_t max_seq_len, AttentionKernel attention,
                   Recompute recompute = Recompute::kNone, CpContext* cp = nullptr);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor body(const torch::Tensor& x);  // the layer itself, whatever the recompute

 private:
  Recompute recompute_;
  RMSNorm input_norm_{nullptr}, post_attention_norm_{nullptr};
  Attention attention_{nullptr};
  Mlp mlp_{nullptr};
};
TORCH_MODULE(DecoderLayer);

// One pipeline stage: [embedding] + its decoder layers + [final norm, LM head, loss].
class LlamaStageImpl : public torch::nn::Module {
 public:
  LlamaStageImpl(const LlamaSpec& spec, const StageLayers& stage, uint64_t seed, TpContext* tp, int64_t max_seq_len,
                 AttentionKernel attention, Recompute recompute = Recompute::kNone, CpContext* cp = nullptr);
  // First stage: `input` holds token ids [batch, seq] (int64); other stages: hidden states
  // [batch, seq, hidden]. Returns hidden states, or (last stage) the mean cross-entropy against
  // `targets` [batch, seq]. With context parallelism seq is this CP rank's seq/cp tokens.
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& targets);
  bool is_first() const { return stage_.has_embedding; }
  bool is_last() const { return stage_.has_head; }
  // Called by forward() before each part that holds parameters (the embedding, each decoder layer, the
  // final norm with the LM head), with the range [first, end) of parameters() that the part holds; the
  // ranges cover parameters() in order. No tensor operation of its own; unset (the default), nothing.
  // The trainer's overlapped parameter gather waits there for the buckets holding them (trainer.hpp).
  using BeforeParameters = std::function<void(std::size_t first, std::size_t end)>;
  void set_before_parameters(BeforeParameters hook) { before_parameters_ = std::move(hook); }

 private:
  void before_parameters(std::size_t part) const;
  torch::Tensor embed(const torch::Tensor& tokens);
  torch::Tensor head_loss(const torch::Tensor& h, const torch::Tensor& targets);

  StageLayers stage_;
  int64_t first_id_ = 0;  // the first vocabulary id of this rank's rows (0 unless vocabulary-parallel)
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::ModuleList layers_;
  RMSNorm final_norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
  TpContext* tp_ = nullptr;
  // Where each part's parameters end in parameters(): [embedding], each layer, [final norm + LM head].
  std::vector<std::size_t> part_ends_;
  BeforeParameters before_parameters_;
};
TORCH_MODULE(LlamaStage);

// The deterministic initial value of a full weight: normal(0, 0.02) from a generator seeded by
// (seed, layer, parameter id).
torch::Tensor init_full_weight(uint64_t seed, int layer, int parameter_id, torch::IntArrayRef shape);

}  // namespace itertime::calibrate
