// op_builder_stage.hpp: the stage builder's model (an internal part of predict/op_builder): one pipeline
// stage of calibrate/llama_model.cpp emitted call by call, piece by piece as the model is built:
// inputs and embedding, RMSNorm, attention (eager or sdpa, with rotary embedding and KV-head
// repetition), MLP, head and loss (op_builder_forward.cpp); their backward in the autograd engine's
// order (op_builder_backward.cpp); the SP norms' gradient sum, the DP gradient buffer (or the distributed
// optimizer's reduce-scatter and all-gather) and the AdamW step (op_builder_update.cpp). Training techniques: the TP regions'
// entry and exit (copy and all-reduce, or with sequence parallelism all-gather and reduce-scatter), the vocabulary-parallel
// embedding and loss, and recompute (the attention core or the whole layer rerun in the backward) are pieces of their own;
// overlapped gradient reduction (ovl at dp > 1) changes each parameter's AccumulateGrad and adds its
// buckets' reductions to the backward (GradientBucket); with the distributed optimizer too (dopt+ovl)
// the buckets are padded to multiples of dp and reduce-scattered into rank 0's shard, and gathered back
// bucket by bucket after the step (with opg in the next forward's order, the last bucket first, into the
// parameters themselves: views of the buffer, so nothing is copied back). Context parallelism (cp > 1) adds its pieces to the
// attention: the positions (cp_positions), the rotary tables index_select-ed at them, the K/V all-gather and its backward's
// reduce-scatter, and the mask of the global positions in the core. Invariants:
//  - Shapes are per TP rank (heads, KV heads and FFN width already divided by tp) and per CP rank 0
//    (StageShape::seq the rank's seq_len / cp queries; gathered keys and values kv_seq = seq_len).
//  - Where LibTorch 1.13 and 2.x differ, the piece says so and branches on torch2_ (docs/method.md).
//  - Backward gradient accumulation ("add" into an input buffer; "add_" in 2.x when the buffer holds a
//    fresh tensor, see GradBuffer) is emitted when a tensor's second and later gradient contributions
//    arrive, in the engine's order (most recently created node first).
//  - A parameter's AccumulateGrad runs right after its gradient is computed: without overlap it keeps the
//    gradient (detach); with overlap it adds it into the parameter's view of the flat buffer (add_), and
//    a bucket whose parameters are all final is cut out (narrow, backward), divided (div_, dp_buffer)
//    and all-reduced (a comm in the backward) right there. Under overlap the layers' backward is emitted
//    layer by layer (the buckets' boundaries differ between layers); elsewhere one layer stands for all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "predict/builder/op_builder.hpp"
#include "predict/builder/op_emitter.hpp"

namespace itertime::predict::builder {

// One TP rank's share of the model at one micro-batch.
struct StageShape {
  int64_t batch = 0, seq = 0, hidden = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // per TP rank
  int64_t ffn = 0;                                // intermediate size per TP rank
  int64_t vocab = 0;                              // the model's vocabulary (token ids)
  int64_t local_vocab = 0;                        // rows of the embedding and LM head on this rank
  int64_t tp = 1;
  int64_t residual_seq = 0;  // the residual stream's sequence length: seq, or seq / tp with sequence parallelism
  // Context parallelism: seq is CP rank 0's seq_len / cp tokens (its queries); keys and values, once
  // all-gathered, span kv_seq = seq_len, the rotary tables' rows too. cp 1: kv_seq == seq.
  int64_t cp = 1;
  int64_t kv_seq = 0;
};

// A parameter in registration order; `layer`: its decoder layer's index, -1 outside the layers.
struct StageParameter {
  Dims shape;
  int layer = -1;
};

// A tensor's gradient buffer in the autograd engine: the first contribution is stored, later ones are
// added. LibTorch 1.13 adds out of place; 2.x (InputBuffer::accumulate) adds in place into the buffered
// tensor when it holds the only reference to it and it is dense (fresh: not a view such as a linear's
// reshaped input gradient), else out of place, whose result is fresh.
struct GradBuffer {
  int contributions = 0;
  bool fresh = false;  // the buffered tensor is owned and dense (2.x may add into it)
};

// Overlapped gradient reduction's bucket (calibrate/gradient_buckets.hpp): a contiguous range of the flat
// gradient buffer (every parameter in registration order, at the parameters' dtype). Buckets are filled
// last parameter first and close once they hold at least gradient_bucket_bytes; the last may be smaller.
// With the distributed optimizer each bucket's range is padded to a multiple of dp (zeros after its
// parameters) and the buffer is the ranges back to back, the last bucket first.
struct GradientBucket {
  std::size_t first = 0, last = 0;  // parameter indices, inclusive
  int64_t offset = 0, count = 0;    // elements of the buffer, padding included
  std::size_t ready = 0;            // parameters whose gradient is final in this backward
};

struct AttentionGrads {
  TensorLayout query, key, value;
};

int64_t local_parameter_count(const std::vector<StageParameter>& parameters);
// The distributed optimizer's shard of one DP rank: ceil(local_params / dp) elements (trainer.cpp's make_shard).
int64_t shard_count(int64_t local_params, int dp);

class StageBuilder {
 public:
  StageBuilder(const PrecisionPolicy& policy, const StageRecipe& recipe, const StageShape& shape, const StageLayers& layers,
               bool tensor_parallel);

  // With overlap: the step's start, the flat gradient buffer zeroed (phase dp_buffer); else nothing.
  void begin_step();  // op_builder_update.cpp
  void forward();     // op_builder_forward.cpp
  void backward();    // op_builder_backward.cpp
  // op_builder_update.cpp: the DP gradient buffer and the AdamW step over `parameters`, then the
  // communication trace_stage appends; returns the stage, aggregated.
  std::vector<StageParameter> parameters() const;
  int64_t repeat_for(const StageParameter& parameter) const;
  void sp_gradients(const std::vector<StageParameter>& parameters);  // with SP: the norms' gradients summed over TP
  void dp_buffer(const std::vector<StageParameter>& parameters, int64_t local_params);
  // The distributed optimizer: trainer.cpp's reduce_scatter_gradients (phase dp_buffer), then, after
  // optimizer() on the one shard, its all_gather_parameters (phase optimizer); shard = shard_count().
  void dp_reduce_scatter(const std::vector<StageParameter>& parameters, int64_t local_params, int dp);
  void dp_all_gather(const std::vector<StageParameter>& parameters, int64_t shard, int dp);
  void optimizer(const std::vector<StageParameter>& parameters);
  bool overlaps_reduction() const { return overlap_; }
  // The distributed optimizer with overlapped reduction (trainer.cpp's make_bucketed_shard, as DP rank 0
  // runs it): the shard is rank 0's 1/dp slice of every padded bucket, bucket 0's first.
  int64_t bucketed_shard_count() const { return buffer_elements_ / dp_; }
  // With SP: trainer.cpp's all_reduce_shard_norm_gradients, the shard's norm elements summed over TP.
  void shard_norm_gradients(const std::vector<StageParameter>& parameters);
  // trainer.cpp's all_gather_bucketed_parameters (phase optimizer): each bucket's all-gather of one
  // rank's slice, then every parameter's values copied from the padded buffer.
  // overlapped (opg): the buckets in the next forward's order, no copy back (the parameters are the buffer).
  void bucketed_all_gather(const std::vector<StageParameter>& parameters, bool overlapped);
  // The P2P sends, and the DP gradient all-reduce unless the distributed optimizer or overlap replaces it.
  void stage_comms(int stage, int pp, int64_t local_params, bool dp_all_reduce);
  BuiltStage finish(int64_t local_params);

 private:
  using InputGradient = std::function<void(const TensorLayout&)>;

  // forward pieces
  void inputs_forward();
  TensorLayout rmsnorm_forward(const TensorLayout& x);
  TensorLayout linear_forward(const TensorLayout& x, int64_t in, int64_t out);
  TensorLayout project_heads(const TensorLayout& x, int64_t heads);
  TensorLayout rotary_forward(const TensorLayout& x, int64_t heads);
  TensorLayout repeat_kv_forward(const TensorLayout& x);
  // context parallelism (op_builder_forward.cpp / op_builder_backward.cpp): tp_comm.cpp's
  // context_parallel_positions of CP rank `rank` (two aranges and a cat), the rotary positions moved to
  // the device, the causal mask of the global positions (attention core), the K/V all-gather and its
  // backward's reduce-scatter.
  void cp_positions(int64_t rank);
  void cp_rotary_positions();
  TensorLayout cp_mask();
  TensorLayout cp_all_gather(const TensorLayout& x);
  TensorLayout cp_reduce_scatter(const TensorLayout& grad);
  TensorLayout eager_attention_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v);
  TensorLayout sdpa_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v);
  TensorLayout row_parallel_output(const TensorLayout& out);
  TensorLayout enter_region_forward(const TensorLayout& x);
  TensorLayout sp_all_gather(const TensorLayout& shard);
  TensorLayout sp_reduce_scatter(const TensorLayout& full);
  TensorLayout sp_own_shard(const TensorLayout& full);
  TensorLayout contiguous_call(const TensorLayout& x);
  TensorLayout all_reduce_copy(const TensorLayout& x, DType comm_dtype);
  void embedding_forward();
  void logical_or(const TensorLayout& mask);
  void logical_not(const TensorLayout& mask);
  void vocab_parallel_loss_forward(const TensorLayout& logits);
  TensorLayout attention_core_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v);
  void attention_block_forward();
  void mlp_block_forward();
  void layer_forward();
  void head_and_loss_forward();

  // update pieces: the gradients flattened into `into` (reshape each, cat.out), and `flat`'s elements
  // copied back into the parameters' gradients or values (narrow, view_as, copy_; tp_comm.hpp's
  // flatten_into / unflatten_from), each call at `dtype`.
  void flatten_gradients(const std::vector<StageParameter>& parameters, const TensorLayout& into);
  // `offsets` (when given): each parameter's offset in `flat` (a padded layout), else back to back.
  void unflatten(const std::vector<StageParameter>& parameters, const TensorLayout& flat, DType dtype,
                 const std::vector<int64_t>* offsets = nullptr);

  // overlap pieces (op_builder_update.cpp): the buckets of the parameters, and a parameter's AccumulateGrad
  // (index in registration order; `grad` the gradient it receives), which completes its bucket last.
  // pad_multiple: each bucket's range padded to a multiple of it (the distributed optimizer's dp), the
  // buffer laid out last bucket first, as gradient_buckets.cpp does.
  void plan_buckets(int64_t bucket_bytes, int64_t pad_multiple);
  void parameter_gradient(std::size_t index, const TensorLayout& grad);
  std::size_t layer_parameter(int slot) const;  // slot 0..8 of the layer being emitted (backward_layer_)
  std::size_t head_parameter(int slot) const;   // 0: the final norm, 1: the LM head

  // backward pieces
  void accumulate(GradBuffer& buffer, const TensorLayout& grad, bool grad_fresh);
  void linear_backward(const TensorLayout& grad, int64_t in, int64_t out, const InputGradient& input_grad, std::size_t parameter);
  InputGradient linear_input(GradBuffer& buffer);
  void rmsnorm_backward(GradBuffer& x_buffer, std::size_t parameter);
  TensorLayout rotary_backward(const TensorLayout& grad, int64_t heads);
  void residual_add_backward();
  void copy_to_tp_backward();
  void leave_region_backward();
  void loss_and_head_backward();
  void vocab_parallel_loss_backward();
  void layers_backward();
  void layer_backward(bool top_fresh);
  void mlp_block_backward(bool top_fresh);
  void attention_block_backward();
  AttentionGrads attention_core_backward(const TensorLayout& context_grad);
  void leaf_gradient(const TensorLayout& leaf, const TensorLayout& grad);
  AttentionGrads eager_attention_backward(const TensorLayout& context_grad);
  AttentionGrads sdpa_backward(const TensorLayout& context_grad);
  AttentionGrads repeat_kv_backward(const AttentionGrads& grads);
  void embedding_backward();

  // shapes: the residual stream between the TP regions ([b, s/tp, h] shards with SP) and a TP region's
  // whole sequence ([b, s, h]).
  Dims residual_dims() const { return {shape_.batch, shape_.residual_seq, shape_.hidden}; }
  TensorLayout residual() const { return contiguous(activation_, residual_dims()); }
  Dims region_dims() const { return {shape_.batch, shape_.seq, shape_.hidden}; }
  TensorLayout region() const { return contiguous(activation_, region_dims()); }
  // The strides of [b, heads, s, hd] transposed from a contiguous [b, s, heads, hd].
  Dims heads_transposed_strides(int64_t heads) const;
  int64_t residual_bytes(DType dtype) const;  // of the residual stream (a shard with SP)
  int64_t region_bytes(DType dtype) const;    // of a TP region's [b, s, h]

  OpEmitter emit_;
  const PrecisionPolicy& policy_;
  const StageShape shape_;
  const StageLayers layers_;
  const bool tensor_parallel_;
  const bool sp_;  // sequence parallelism with tp > 1
  const bool vp_;  // the vocabulary-parallel head with tp > 1
  const Recompute recompute_;
  const bool torch2_;      // TorchDialect::kTorch2
  const bool sdpa_;        // AttentionKernel::kSdpa
  const bool grouped_kv_;  // fewer KV heads than heads: K and V are repeated
  const bool cp_;          // context parallelism (cp > 1): K and V all-gathered, the mask from global positions
  const DType param_, activation_, grad_;
  const DType compute_;                     // matrix products: the autocast dtype under AMP, else the parameter dtype
  std::vector<TensorLayout> sdpa_inputs_;   // q, k, v as the fused kernel received them (its backward gets them again)
  std::vector<TensorLayout> core_inputs_;   // q, k, v as the attention core received them (selective recompute's leaves)
  bool core_leaves_ = false;                // the core's backward runs in a recompute: its inputs' gradients go to leaves
  const bool overlap_;                      // overlapped gradient reduction (the recipe already at its dp)
  const int dp_;                            // the recipe's DP degree
  const bool sharded_buckets_;              // the distributed optimizer with overlap: padded buckets, reduce-scattered
  std::vector<GradientBucket> buckets_;     // with overlap: bucket 0 holds the last parameters
  std::vector<std::size_t> bucket_of_;      // per parameter
  std::vector<int64_t> parameter_offsets_;  // per parameter: where its gradient view starts in the buffer
  std::vector<int64_t> shard_offsets_;      // per bucket (sharded_buckets_): where rank 0's slice lies in the shard
  int64_t buffer_elements_ = 0;             // the flat gradient buffer's (padding included)
  int backward_layer_ = 0;                  // the decoder layer whose backward is being emitted
};

}  // namespace itertime::predict::builder
