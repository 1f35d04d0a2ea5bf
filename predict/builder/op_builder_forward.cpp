// op_builder_forward.cpp: the forward of one micro-batch through a stage (StageBuilder::forward, see
// op_builder_stage.hpp), as calibrate/llama_model.cpp runs it: the stage's inputs (token ids or a
// received activation), the embedding, each decoder layer's attention and MLP blocks (one layer is
// emitted and counted for all, OpEmitter::set_repeat), and on the last stage the head and the loss.
// Invariants: calls in LibTorch's order; autocast's casts only where the policy autocasts.
#include "common/errors.hpp"
#include "predict/builder/op_builder_stage.hpp"

namespace itertime::predict::builder {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kI64 = DType::kInt64;
constexpr DType kBool = DType::kBool;

}  // namespace

StageBuilder::StageBuilder(const PrecisionPolicy& policy, const StageRecipe& recipe, const StageShape& shape,
                           const StageLayers& layers, bool tensor_parallel)
    : policy_(policy),
      shape_(shape),
      layers_(layers),
      tensor_parallel_(tensor_parallel),
      sp_(tensor_parallel && recipe.techniques.sequence_parallel),
      vp_(tensor_parallel && recipe.techniques.vocab_parallel),
      recompute_(recipe.techniques.recompute),
      torch2_(recipe.dialect == TorchDialect::kTorch2),
      sdpa_(recipe.attention == AttentionKernel::kSdpa),
      grouped_kv_(shape.heads != shape.kv_heads),
      cp_(shape.cp > 1),
      param_(policy.param_dtype),
      activation_(policy.activation_dtype),
      grad_(policy.grad_dtype),
      compute_(policy.autocast ? policy.compute_dtype : policy.param_dtype),
      overlap_(recipe.techniques.overlap_gradient_reduction),
      dp_(recipe.dp),
      sharded_buckets_(overlap_ && recipe.techniques.distributed_optimizer) {
  if (overlap_) plan_buckets(recipe.techniques.gradient_bucket_bytes, sharded_buckets_ ? dp_ : 1);
}

Dims StageBuilder::heads_transposed_strides(int64_t heads) const {
  return {shape_.seq * heads * shape_.head_dim, shape_.head_dim, heads * shape_.head_dim, 1};
}

int64_t StageBuilder::residual_bytes(DType dtype) const {
  return shape_.batch * shape_.residual_seq * shape_.hidden * static_cast<int64_t>(dtype_bytes(dtype));
}

int64_t StageBuilder::region_bytes(DType dtype) const {
  return shape_.batch * shape_.seq * shape_.hidden * static_cast<int64_t>(dtype_bytes(dtype));
}

void StageBuilder::forward() {
  inputs_forward();
  emit_.set_repeat(layers_.num_layers);
  if (layers_.num_layers > 0) layer_forward();
  emit_.set_repeat(1);
  if (layers_.has_head) head_and_loss_forward();
}

// One decoder layer's body (under full recompute: the checkpoint's forward, and its rerun in the backward).
void StageBuilder::layer_forward() {
  attention_block_forward();
  mlp_block_forward();
}

// Token ids (first stage) or a received activation, the targets (last stage), the embedding lookup.
void StageBuilder::inputs_forward() {
  const Dims tokens{shape_.batch, shape_.seq};
  const auto random_tokens = [&] {
    emit_.call("aten::randint",
               {int_arg(shape_.vocab), int_list_arg(tokens), dtype_arg(kI64), none_arg(), cpu_device_arg(), none_arg()}, kI64);
  };
  if (layers_.has_embedding) {
    random_tokens();
  } else {
    emit_.call("aten::randn", {int_list_arg(residual_dims()), dtype_arg(activation_), none_arg(), cpu_device_arg(), none_arg()},
               activation_);
  }
  if (layers_.has_head) random_tokens();
  if (layers_.has_embedding) embedding_forward();
}

// The embedding lookup: replicated (with SP cut to the rank's shard), or vocabulary-parallel: ids outside
// the rank's rows masked, their rows zeroed, the partial rows summed over TP (with SP reduce-scattered).
// Traced on TP rank 0, whose first id is 0.
void StageBuilder::embedding_forward() {
  const Dims tokens{shape_.batch, shape_.seq};
  const TensorLayout ids = contiguous(kI64, tokens);
  const TensorLayout table = contiguous(param_, {shape_.local_vocab, shape_.hidden});
  const auto lookup = [&](const TensorLayout& indices) {
    emit_.call("aten::embedding", {tensor_arg(table), tensor_arg(indices), int_arg(-1), bool_arg(false), bool_arg(false)},
               param_);
    return contiguous(param_, region_dims());
  };
  if (!vp_) {
    const TensorLayout rows = lookup(ids);
    if (sp_) sp_own_shard(rows);
    return;
  }
  const TensorLayout outside = contiguous(kBool, tokens);
  emit_.call("aten::lt.Scalar", {tensor_arg(ids), int_arg(0)}, kBool);
  emit_.call("aten::ge.Scalar", {tensor_arg(ids), int_arg(shape_.local_vocab)}, kBool);
  logical_or(outside);
  emit_.call("aten::sub.Tensor", {tensor_arg(ids), tensor_arg(scalar_tensor(kI64)), int_arg(1)}, kI64);
  emit_.call("aten::masked_fill.Scalar", {tensor_arg(ids), tensor_arg(outside), int_arg(0)}, kI64);
  const TensorLayout rows = lookup(ids);
  emit_.call("aten::unsqueeze", {tensor_arg(outside), int_arg(-1)}, kBool);
  emit_.call("aten::masked_fill.Scalar",
             {tensor_arg(rows), tensor_arg(contiguous(kBool, {shape_.batch, shape_.seq, 1})), double_arg(0.0)}, param_);
  if (sp_) {
    sp_reduce_scatter(rows);
  } else {
    all_reduce_copy(rows, param_);
  }
}

// RMSNorm in fp32, cast back, times the weight.
TensorLayout StageBuilder::rmsnorm_forward(const TensorLayout& x) {
  const TensorLayout x32 = emit_.to_dtype(x, kF32);
  emit_.call("aten::pow.Tensor_Scalar", {tensor_arg(x32), int_arg(2)}, kF32);
  const TensorLayout stat = contiguous(kF32, {x.sizes[0], x.sizes[1], 1});
  emit_.call("aten::mean.dim", {tensor_arg(x32), int_list_arg({-1}), bool_arg(true), none_arg()}, kF32);
  emit_.call("aten::add.Tensor", {tensor_arg(stat), tensor_arg(scalar_tensor(kF64)), int_arg(1)}, kF32);
  emit_.call("aten::rsqrt", {tensor_arg(stat)}, kF32);
  emit_.call("aten::mul.Tensor", {tensor_arg(x32), tensor_arg(stat)}, kF32);
  const TensorLayout normalized = emit_.to_dtype(contiguous(kF32, x32.sizes), x.dtype);
  return emit_.mul(contiguous(param_, {shape_.hidden}), normalized);
}

// Linear without bias (t + matmul; autocast casts weight and input under AMP): x [b, s, in] -> [b, s, out].
TensorLayout StageBuilder::linear_forward(const TensorLayout& x, int64_t in, int64_t out) {
  const TensorLayout weight_t = emit_.t(contiguous(param_, {out, in}));
  TensorLayout weight = weight_t;
  TensorLayout input = x;
  if (policy_.autocast) {
    if (weight.dtype != compute_) weight = emit_.to_dtype(weight_t, compute_);
    if (input.dtype != compute_) input = emit_.to_dtype(x, compute_);
  }
  emit_.call("aten::matmul", {tensor_arg(input), tensor_arg(weight)}, compute_);
  return contiguous(compute_, {x.sizes[0], x.sizes[1], out});
}

// A q, k or v projection split into heads: [b, s, h] -> [b, heads, s, hd] (a transposed view).
TensorLayout StageBuilder::project_heads(const TensorLayout& x, int64_t heads) {
  const TensorLayout projected = linear_forward(x, shape_.hidden, heads * shape_.head_dim);
  return emit_.transpose(emit_.view(projected, {shape_.batch, shape_.seq, heads, shape_.head_dim}), 1, 2);
}

// Rotary embedding: the cos / sin tables (buffers in the parameter dtype) cut to the sequence and cast,
// x * cos + rotate_half(x) * sin.
// With context parallelism the tables (seq_len rows) are index_select-ed at the rank's global positions.
TensorLayout StageBuilder::rotary_forward(const TensorLayout& x, int64_t heads) {
  const int64_t seq = shape_.seq, head_dim = shape_.head_dim;
  const TensorLayout table = contiguous(param_, {shape_.kv_seq, head_dim});
  const TensorLayout rows = contiguous(param_, {seq, head_dim});
  for (int cos_then_sin = 0; cos_then_sin < 2; ++cos_then_sin) {
    if (cp_) {
      emit_.call("aten::index_select", {tensor_arg(table), int_arg(0), tensor_arg(contiguous(kI64, {seq}))}, param_);
    } else {
      emit_.call("aten::narrow", {tensor_arg(table), int_arg(0), int_arg(0), int_arg(seq)}, param_);
    }
    emit_.call("aten::to.dtype", {tensor_arg(rows), dtype_arg(x.dtype), bool_arg(false), bool_arg(false), none_arg()}, x.dtype);
  }
  const TensorLayout upper_half = emit_.narrow(x, -1, head_dim / 2, head_dim / 2);
  emit_.call("aten::neg", {tensor_arg(upper_half)}, x.dtype);
  const TensorLayout negated = unary_result(upper_half, x.dtype);
  const TensorLayout lower_half = emit_.narrow(x, -1, 0, head_dim / 2);
  emit_.call("aten::cat", {tensor_list_arg({negated, lower_half}), int_arg(-1)}, x.dtype);
  const TensorLayout rotated = contiguous(x.dtype, {shape_.batch, heads, seq, head_dim});
  emit_.mul(rotated, contiguous(x.dtype, {seq, head_dim}));
  const TensorLayout x_cos = emit_.mul(x, contiguous(x.dtype, {seq, head_dim}));
  return emit_.add(x_cos, rotated);
}

// K or V repeated to every head of its group: one call in 2.x; 1.13 builds the index and selects.
TensorLayout StageBuilder::repeat_kv_forward(const TensorLayout& x) {
  const int64_t group = shape_.heads / shape_.kv_heads;
  const TensorLayout repeated = contiguous(x.dtype, {shape_.batch, shape_.heads, shape_.kv_seq, shape_.head_dim});
  if (torch2_) {
    emit_.call("aten::repeat_interleave.self_int", {tensor_arg(x), int_arg(group), int_arg(1), none_arg()}, x.dtype);
    return repeated;
  }
  const TensorLayout one = contiguous(kI64, {1});
  emit_.call("aten::empty.memory_format",
             {int_list_arg({1}), dtype_arg(kI64), int_arg(0), cpu_device_arg(), none_arg(), none_arg()}, kI64);
  emit_.call("aten::fill_.Scalar", {tensor_arg(one), int_arg(group)}, kI64);
  emit_.call("aten::reshape", {tensor_arg(one), int_list_arg({1})}, kI64);
  emit_.call("aten::expand", {tensor_arg(one), int_list_arg({shape_.kv_heads}), bool_arg(false)}, kI64);
  emit_.call("aten::repeat_interleave.Tensor", {tensor_arg(strided(kI64, {shape_.kv_heads}, {0})), none_arg()}, kI64);
  emit_.call("aten::index_select", {tensor_arg(x), int_arg(1), tensor_arg(contiguous(kI64, {shape_.heads}))}, x.dtype);
  return repeated;
}

// softmax(q k^T / sqrt(hd) + causal mask) v, in the model's own code.
// With context parallelism: the mask of the global positions first (cp_mask), scores [.., seq/cp, seq].
TensorLayout StageBuilder::eager_attention_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v) {
  const int64_t seq = shape_.seq, kv_seq = shape_.kv_seq;
  const TensorLayout cp_hidden = cp_ ? cp_mask() : TensorLayout{};
  const TensorLayout k_t = emit_.transpose(k, 2, 3);
  emit_.call("aten::matmul", {tensor_arg(q), tensor_arg(k_t)}, compute_);
  const TensorLayout scores = contiguous(compute_, {shape_.batch, shape_.heads, seq, kv_seq});
  emit_.call("aten::div.Tensor", {tensor_arg(scores), tensor_arg(scalar_tensor(kF64))}, compute_);
  TensorLayout mask = cp_hidden;
  if (!cp_) {
    emit_.call("aten::ones", {int_list_arg({seq, seq}), dtype_arg(kBool), none_arg(), cpu_device_arg(), none_arg()}, kBool);
    mask = contiguous(kBool, {seq, seq});
    emit_.call("aten::triu", {tensor_arg(mask), int_arg(1)}, kBool);
  }
  emit_.call("aten::masked_fill.Scalar", {tensor_arg(scores), tensor_arg(mask), text_arg("-inf")}, compute_);
  emit_.call("aten::softmax.int", {tensor_arg(scores), int_arg(-1), dtype_arg(kF32)}, kF32);
  emit_.to_dtype(contiguous(kF32, scores.sizes), compute_);
  emit_.call("aten::matmul", {tensor_arg(scores), tensor_arg(v)}, compute_);
  return contiguous(compute_, {shape_.batch, shape_.heads, seq, shape_.head_dim});
}

// One fused call (autocast keeps it in the compute dtype: q, k, v already are); the CPU flash kernel
// writes its output laid out [b, s, heads, hd], so the transpose + reshape after it are views.
// With context parallelism: an explicit boolean mask (the global positions' causal mask, negated: true
// where a key is visible) and is_causal false.
TensorLayout StageBuilder::sdpa_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v) {
  if (cp_) {
    const TensorLayout hidden = cp_mask();
    logical_not(hidden);
    emit_.call("aten::scaled_dot_product_attention",
               {tensor_arg(q), tensor_arg(k), tensor_arg(v), tensor_arg(hidden), double_arg(0.0), bool_arg(false), none_arg(),
                bool_arg(false)},
               compute_);
  } else {
    emit_.call(
        "aten::scaled_dot_product_attention",
        {tensor_arg(q), tensor_arg(k), tensor_arg(v), none_arg(), double_arg(0.0), bool_arg(true), none_arg(), bool_arg(false)},
        compute_);
  }
  sdpa_inputs_ = {q, k, v};
  return strided(compute_, {shape_.batch, shape_.heads, shape_.seq, shape_.head_dim}, heads_transposed_strides(shape_.heads));
}

// tp_comm.cpp's context_parallel_positions(seq_len, cp, rank): chunks rank and 2cp-1-rank of seq_len / (2cp)
// tokens, each torch::arange (an empty int64 tensor, arange.start_out), then their cat.
void StageBuilder::cp_positions(int64_t rank) {
  const int64_t chunk = shape_.kv_seq / (2 * shape_.cp);
  for (const int64_t index : {rank, 2 * shape_.cp - 1 - rank}) {
    emit_.call("aten::empty.memory_format", {int_list_arg({0}), dtype_arg(kI64), none_arg(), none_arg(), none_arg(), none_arg()},
               kI64);
    emit_.call("aten::arange.start_out",
               {int_arg(index * chunk), int_arg((index + 1) * chunk), int_arg(1), tensor_arg(contiguous(kI64, {0}))}, kI64);
  }
  emit_.call("aten::cat", {tensor_list_arg({contiguous(kI64, {chunk}), contiguous(kI64, {chunk})}), int_arg(0)}, kI64);
}

// The attention's rotary positions (CP rank 0's), moved to the queries' device (recorded although a no-op on cpu).
void StageBuilder::cp_rotary_positions() {
  cp_positions(0);
  emit_.call("aten::to.dtype_layout",
             {tensor_arg(contiguous(kI64, {shape_.seq})), none_arg(), none_arg(), cpu_device_arg(), none_arg(), bool_arg(false),
              bool_arg(false), none_arg()},
             kI64);
}

// llama_model.cpp's context-parallel mask: the queries' positions [seq/cp, 1], every CP rank's key
// positions (context_parallel_key_positions: each rank's, cat) [1, seq], key > query (hidden), on the device.
TensorLayout StageBuilder::cp_mask() {
  const int64_t seq = shape_.seq, kv_seq = shape_.kv_seq;
  cp_positions(0);
  emit_.call("aten::unsqueeze", {tensor_arg(contiguous(kI64, {seq})), int_arg(1)}, kI64);
  for (int64_t rank = 0; rank < shape_.cp; ++rank) cp_positions(rank);
  emit_.call(
      "aten::cat",
      {tensor_list_arg(std::vector<TensorLayout>(static_cast<std::size_t>(shape_.cp), contiguous(kI64, {seq}))), int_arg(0)},
      kI64);
  emit_.call("aten::unsqueeze", {tensor_arg(contiguous(kI64, {kv_seq})), int_arg(0)}, kI64);
  emit_.call("aten::gt.Tensor", {tensor_arg(contiguous(kI64, {1, kv_seq})), tensor_arg(contiguous(kI64, {seq, 1}))}, kBool);
  const TensorLayout hidden = contiguous(kBool, {seq, kv_seq});
  emit_.call(
      "aten::to.dtype_layout",
      {tensor_arg(hidden), none_arg(), none_arg(), cpu_device_arg(), none_arg(), bool_arg(false), bool_arg(false), none_arg()},
      kBool);
  return hidden;
}

// tp_comm.cpp's CpAllGatherSequence forward: [b, kv heads, seq/cp, hd] made contiguous, gathered into
// [cp, b, kv heads, seq/cp, hd] (one rank's part moved), permuted and reshaped to [b, kv heads, seq, hd].
TensorLayout StageBuilder::cp_all_gather(const TensorLayout& x) {
  const TensorLayout part = contiguous_call(x);
  const int64_t cp = shape_.cp, batch = part.sizes[0], heads = part.sizes[1], local = part.sizes[2], dim = part.sizes[3];
  emit_.call(
      "aten::empty.memory_format",
      {int_list_arg({cp, batch, heads, local, dim}), dtype_arg(x.dtype), int_arg(0), cpu_device_arg(), none_arg(), none_arg()},
      x.dtype);
  emit_.comm(CommKind::kCpAllGather, x.dtype, batch * heads * local * dim * static_cast<int64_t>(dtype_bytes(x.dtype)));
  const TensorLayout gathered = emit_.permute(contiguous(x.dtype, {cp, batch, heads, local, dim}), {1, 2, 0, 3, 4});
  return emit_.reshape(gathered, {batch, heads, cp * local, dim});
}

// Tensor::contiguous(): no call when the tensor already is.
TensorLayout StageBuilder::contiguous_call(const TensorLayout& x) {
  if (x.is_contiguous()) return x;
  emit_.call("aten::contiguous", {tensor_arg(x), int_arg(0)}, x.dtype);
  return contiguous(x.dtype, x.sizes);
}

// tp_comm.cpp's timed_all_reduce: a contiguous copy, all-reduced in place.
TensorLayout StageBuilder::all_reduce_copy(const TensorLayout& x, DType comm_dtype) {
  const TensorLayout copy = emit_.clone(contiguous_call(x));
  int64_t bytes = static_cast<int64_t>(dtype_bytes(comm_dtype));
  for (int64_t size : x.sizes) bytes *= size;
  emit_.comm(CommKind::kTpAllReduce, comm_dtype, bytes);
  return copy;
}

// tp_comm.cpp's timed_all_gather_sequence: [b, s/tp, h] shards -> [tp, b, s/tp, h] -> [b, s, h].
TensorLayout StageBuilder::sp_all_gather(const TensorLayout& shard) {
  contiguous_call(shard);
  const int64_t tp = shape_.tp, batch = shard.sizes[0], part = shard.sizes[1], hidden = shard.sizes[2];
  emit_.call(
      "aten::empty.memory_format",
      {int_list_arg({tp, batch, part, hidden}), dtype_arg(shard.dtype), int_arg(0), cpu_device_arg(), none_arg(), none_arg()},
      shard.dtype);
  emit_.comm(CommKind::kTpAllGather, shard.dtype, batch * part * hidden * static_cast<int64_t>(dtype_bytes(shard.dtype)));
  const TensorLayout gathered = contiguous(shard.dtype, {tp, batch, part, hidden});
  return emit_.reshape(emit_.transpose(gathered, 0, 1), {batch, tp * part, hidden});
}

// tp_comm.cpp's timed_reduce_scatter_sequence: [b, s, h] -> [tp, b, s/tp, h] chunks -> this rank's [b, s/tp, h].
TensorLayout StageBuilder::sp_reduce_scatter(const TensorLayout& full) {
  const int64_t tp = shape_.tp, batch = full.sizes[0], seq = full.sizes[1], hidden = full.sizes[2];
  const TensorLayout chunks = emit_.transpose(emit_.reshape(full, {batch, tp, seq / tp, hidden}), 0, 1);
  contiguous_call(chunks);
  emit_.call(
      "aten::empty.memory_format",
      {int_list_arg({batch, seq / tp, hidden}), dtype_arg(full.dtype), int_arg(0), cpu_device_arg(), none_arg(), none_arg()},
      full.dtype);
  emit_.comm(CommKind::kTpReduceScatter, full.dtype, batch * (seq / tp) * hidden * static_cast<int64_t>(dtype_bytes(full.dtype)));
  return contiguous(full.dtype, {batch, seq / tp, hidden});
}

// tp_comm.cpp's own_sequence_shard: rank 0's positions of [b, s, h], made contiguous.
TensorLayout StageBuilder::sp_own_shard(const TensorLayout& full) {
  return contiguous_call(emit_.narrow(full, 1, 0, full.sizes[1] / shape_.tp));
}

// Into a TP region (attention, MLP, a vocabulary-parallel head): copy_to_tp's clone, or with SP the
// all-gather of the sequence.
TensorLayout StageBuilder::enter_region_forward(const TensorLayout& x) {
  if (!tensor_parallel_) return x;
  if (sp_) return sp_all_gather(x);
  return emit_.clone(x);
}

// A row-parallel projection's output under TP: copied out of the TP region and all-reduced, or with SP
// reduce-scattered to the rank's sequence shard.
TensorLayout StageBuilder::row_parallel_output(const TensorLayout& out) {
  if (!tensor_parallel_) return out;
  if (sp_) return sp_reduce_scatter(out);
  return all_reduce_copy(out, compute_);
}

// The attention core: the kernel's calls (under selective recompute the same, run by the checkpoint).
TensorLayout StageBuilder::attention_core_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v) {
  core_inputs_ = {q, k, v};
  return sdpa_ ? sdpa_forward(q, k, v) : eager_attention_forward(q, k, v);
}

// h = x + o_proj(attention(rotary(q), rotary(k), v)) of norm1(x).
void StageBuilder::attention_block_forward() {
  const TensorLayout x = residual();
  const TensorLayout normed = enter_region_forward(rmsnorm_forward(x));
  TensorLayout q = project_heads(normed, shape_.heads);
  TensorLayout k = project_heads(normed, shape_.kv_heads);
  TensorLayout v = project_heads(normed, shape_.kv_heads);
  if (cp_) cp_rotary_positions();
  q = rotary_forward(q, shape_.heads);
  k = rotary_forward(k, shape_.kv_heads);
  if (cp_) {  // every CP rank's keys (after rotary) and values, before the KV heads are repeated
    k = cp_all_gather(k);
    v = cp_all_gather(v);
  }
  if (grouped_kv_) {
    k = repeat_kv_forward(k);
    v = repeat_kv_forward(v);
  }
  const TensorLayout attended = attention_core_forward(q, k, v);
  const TensorLayout context = emit_.transpose(attended, 1, 2);
  const TensorLayout flat = emit_.reshape(context, {shape_.batch, shape_.seq, shape_.heads * shape_.head_dim});
  const TensorLayout out = row_parallel_output(linear_forward(flat, shape_.heads * shape_.head_dim, shape_.hidden));
  emit_.add(x, out);
}

// out = h + down(silu(gate(norm2(h))) * up(norm2(h))).
void StageBuilder::mlp_block_forward() {
  const TensorLayout h = residual();
  const TensorLayout normed = enter_region_forward(rmsnorm_forward(h));
  linear_forward(normed, shape_.hidden, shape_.ffn);
  linear_forward(normed, shape_.hidden, shape_.ffn);
  const TensorLayout wide = contiguous(compute_, {shape_.batch, shape_.seq, shape_.ffn});
  emit_.unary("aten::silu", wide);
  emit_.mul(wide, wide);
  const TensorLayout out = row_parallel_output(linear_forward(wide, shape_.ffn, shape_.hidden));
  emit_.add(h, out);
}

// Final norm, LM head, fp32 logits, cross entropy over the flattened tokens, and the loss * 0.25 of
// trace_stage's micro-batch scaling.
// With a vocabulary-parallel head the head is column-parallel (its input enters a TP region) and the loss
// is Megatron's parallel cross-entropy; a replicated head under SP gathers the sequence first.
void StageBuilder::head_and_loss_forward() {
  const int64_t tokens = shape_.batch * shape_.seq, vocab = shape_.local_vocab;
  TensorLayout normed = rmsnorm_forward(residual());
  if (vp_) {
    normed = enter_region_forward(normed);
  } else if (sp_) {
    normed = sp_all_gather(normed);  // gather_from_sp_replicated
  }
  const TensorLayout logits = linear_forward(normed, shape_.hidden, vocab);
  emit_.to_dtype(logits, kF32);
  emit_.call("aten::reshape", {tensor_arg(contiguous(kI64, {shape_.batch, shape_.seq})), int_list_arg({-1})}, kI64);
  emit_.call("aten::reshape", {tensor_arg(contiguous(kF32, {shape_.batch, shape_.seq, vocab})), int_list_arg({-1, vocab})}, kF32);
  if (vp_) {
    vocab_parallel_loss_forward(contiguous(kF32, {tokens, vocab}));
  } else {
    emit_.call("aten::cross_entropy_loss",
               {tensor_arg(contiguous(kF32, {tokens, vocab})), tensor_arg(contiguous(kI64, {tokens})), none_arg(), int_arg(1),
                int_arg(-100), double_arg(0.0)},
               kF32);
  }
  emit_.call("aten::mul.Tensor", {tensor_arg(scalar_tensor(kF32)), tensor_arg(scalar_tensor(kF64))}, kF32);
}

// tp_comm.cpp's VocabParallelCrossEntropy forward on [rows, V/tp] fp32 logits (TP rank 0: first id 0).
void StageBuilder::vocab_parallel_loss_forward(const TensorLayout& logits) {
  const int64_t rows = logits.sizes[0], local_vocab = logits.sizes[1], tp = shape_.tp;
  const TensorLayout row = contiguous(kF32, {rows});
  const TensorLayout column = contiguous(kF32, {rows, 1});
  const TensorLayout targets = contiguous(kI64, {rows});
  const TensorLayout outside = contiguous(kBool, {rows});
  const int64_t row_bytes = rows * static_cast<int64_t>(dtype_bytes(kF32));
  emit_.call("aten::max.dim", {tensor_arg(logits), int_arg(1), bool_arg(false)}, kF32);
  emit_.call("aten::empty.memory_format",
             {int_list_arg({tp, rows}), dtype_arg(kF32), int_arg(0), cpu_device_arg(), none_arg(), none_arg()}, kF32);
  emit_.comm(CommKind::kTpAllGather, kF32, row_bytes);
  emit_.call("aten::max.dim", {tensor_arg(contiguous(kF32, {tp, rows})), int_arg(0), bool_arg(false)}, kF32);
  emit_.call("aten::unsqueeze", {tensor_arg(row), int_arg(1)}, kF32);
  emit_.call("aten::sub.Tensor", {tensor_arg(logits), tensor_arg(column), int_arg(1)}, kF32);
  emit_.unary("aten::exp", logits);
  emit_.call("aten::sum.dim_IntList", {tensor_arg(logits), int_list_arg({1}), bool_arg(false), none_arg()}, kF32);
  all_reduce_copy(row, kF32);
  emit_.call("aten::lt.Scalar", {tensor_arg(targets), int_arg(0)}, kBool);
  emit_.call("aten::ge.Scalar", {tensor_arg(targets), int_arg(local_vocab)}, kBool);
  logical_or(outside);
  emit_.call("aten::sub.Tensor", {tensor_arg(targets), tensor_arg(scalar_tensor(kI64)), int_arg(1)}, kI64);
  emit_.call("aten::masked_fill.Scalar", {tensor_arg(targets), tensor_arg(outside), int_arg(0)}, kI64);
  emit_.call("aten::unsqueeze", {tensor_arg(targets), int_arg(1)}, kI64);
  emit_.call("aten::gather", {tensor_arg(logits), int_arg(1), tensor_arg(contiguous(kI64, {rows, 1})), bool_arg(false)}, kF32);
  emit_.call("aten::squeeze.dim", {tensor_arg(column), int_arg(1)}, kF32);
  emit_.call("aten::masked_fill.Scalar", {tensor_arg(row), tensor_arg(outside), double_arg(0.0)}, kF32);
  all_reduce_copy(row, kF32);
  emit_.call("aten::unsqueeze", {tensor_arg(row), int_arg(1)}, kF32);
  emit_.call("aten::div.Tensor", {tensor_arg(logits), tensor_arg(column)}, kF32);
  emit_.unary("aten::log", row);
  emit_.call("aten::sub.Tensor", {tensor_arg(row), tensor_arg(row), int_arg(1)}, kF32);
  emit_.call("aten::mean.dim", {tensor_arg(row), int_list_arg({}), bool_arg(false), none_arg()}, kF32);
}

// Boolean logical_or / logical_not: into a fresh empty result (their .out overloads).
void StageBuilder::logical_or(const TensorLayout& mask) {
  emit_.call("aten::empty.memory_format",
             {int_list_arg({0}), dtype_arg(kBool), int_arg(0), cpu_device_arg(), none_arg(), none_arg()}, kBool);
  emit_.call("aten::logical_or.out", {tensor_arg(mask), tensor_arg(mask), tensor_arg(contiguous(kBool, {0}))}, kBool);
}

void StageBuilder::logical_not(const TensorLayout& mask) {
  emit_.call("aten::empty.memory_format",
             {int_list_arg({0}), dtype_arg(kBool), int_arg(0), cpu_device_arg(), none_arg(), none_arg()}, kBool);
  emit_.call("aten::logical_not.out", {tensor_arg(mask), tensor_arg(contiguous(kBool, {0}))}, kBool);
}

}  // namespace itertime::predict::builder
