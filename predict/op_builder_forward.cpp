// op_builder_forward.cpp: the forward of one micro-batch through a stage (StageBuilder::forward, see
// op_builder_stage.hpp), as calibrate/llama_model.cpp runs it: the stage's inputs (token ids or a
// received activation), the embedding, each decoder layer's attention and MLP blocks (one layer is
// emitted and counted for all, OpEmitter::set_repeat), and on the last stage the head and the loss.
// Invariants: calls in LibTorch's order; autocast's casts only where the policy autocasts.
#include "common/errors.hpp"
#include "predict/op_builder_stage.hpp"

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
      torch2_(recipe.dialect == TorchDialect::kTorch2),
      sdpa_(recipe.attention == AttentionKernel::kSdpa),
      grouped_kv_(shape.heads != shape.kv_heads),
      param_(policy.param_dtype),
      activation_(policy.activation_dtype),
      grad_(policy.grad_dtype),
      compute_(policy.autocast ? policy.compute_dtype : policy.param_dtype) {}

Dims StageBuilder::heads_transposed_strides(int64_t heads) const {
  return {shape_.seq * heads * shape_.head_dim, shape_.head_dim, heads * shape_.head_dim, 1};
}

int64_t StageBuilder::residual_bytes(DType dtype) const {
  return shape_.batch * shape_.seq * shape_.hidden * static_cast<int64_t>(dtype_bytes(dtype));
}

void StageBuilder::forward() {
  inputs_forward();
  emit_.set_repeat(layers_.num_layers);
  if (layers_.num_layers > 0) {
    attention_block_forward();
    mlp_block_forward();
  }
  emit_.set_repeat(1);
  if (layers_.has_head) head_and_loss_forward();
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
  if (layers_.has_embedding) {
    emit_.call("aten::embedding",
               {tensor_arg(contiguous(param_, {shape_.vocab, shape_.hidden})), tensor_arg(contiguous(kI64, tokens)), int_arg(-1),
                bool_arg(false), bool_arg(false)},
               param_);
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
TensorLayout StageBuilder::rotary_forward(const TensorLayout& x, int64_t heads) {
  const int64_t seq = shape_.seq, head_dim = shape_.head_dim;
  const TensorLayout table = contiguous(param_, {seq, head_dim});
  for (int cos_then_sin = 0; cos_then_sin < 2; ++cos_then_sin) {
    emit_.call("aten::narrow", {tensor_arg(table), int_arg(0), int_arg(0), int_arg(seq)}, param_);
    emit_.call("aten::to.dtype", {tensor_arg(table), dtype_arg(x.dtype), bool_arg(false), bool_arg(false), none_arg()}, x.dtype);
  }
  const TensorLayout upper_half = emit_.narrow(x, -1, head_dim / 2, head_dim / 2);
  emit_.call("aten::neg", {tensor_arg(upper_half)}, x.dtype);
  const TensorLayout negated = elementwise_result(upper_half, x.dtype);
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
  const TensorLayout repeated = contiguous(x.dtype, {shape_.batch, shape_.heads, shape_.seq, shape_.head_dim});
  if (torch2_) {
    emit_.call("aten::repeat_interleave.self_int", {tensor_arg(x), int_arg(group), int_arg(1), none_arg()}, x.dtype);
    return repeated;
  }
  const TensorLayout one = contiguous(kI64, {1});
  emit_.call("aten::empty.memory_format", {int_list_arg({1}), dtype_arg(kI64), int_arg(0), cpu_device_arg(), none_arg(), none_arg()},
             kI64);
  emit_.call("aten::fill_.Scalar", {tensor_arg(one), int_arg(group)}, kI64);
  emit_.call("aten::reshape", {tensor_arg(one), int_list_arg({1})}, kI64);
  emit_.call("aten::expand", {tensor_arg(one), int_list_arg({shape_.kv_heads}), bool_arg(false)}, kI64);
  emit_.call("aten::repeat_interleave.Tensor", {tensor_arg(strided(kI64, {shape_.kv_heads}, {0})), none_arg()}, kI64);
  emit_.call("aten::index_select", {tensor_arg(x), int_arg(1), tensor_arg(contiguous(kI64, {shape_.heads}))}, x.dtype);
  return repeated;
}

// softmax(q k^T / sqrt(hd) + causal mask) v, in the model's own code.
TensorLayout StageBuilder::eager_attention_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v) {
  const int64_t seq = shape_.seq;
  const TensorLayout k_t = emit_.transpose(k, 2, 3);
  emit_.call("aten::matmul", {tensor_arg(q), tensor_arg(k_t)}, compute_);
  const TensorLayout scores = contiguous(compute_, {shape_.batch, shape_.heads, seq, seq});
  emit_.call("aten::div.Tensor", {tensor_arg(scores), tensor_arg(scalar_tensor(kF64))}, compute_);
  emit_.call("aten::ones", {int_list_arg({seq, seq}), dtype_arg(kBool), none_arg(), cpu_device_arg(), none_arg()}, kBool);
  const TensorLayout mask = contiguous(kBool, {seq, seq});
  emit_.call("aten::triu", {tensor_arg(mask), int_arg(1)}, kBool);
  emit_.call("aten::masked_fill.Scalar", {tensor_arg(scores), tensor_arg(mask), text_arg("-inf")}, compute_);
  emit_.call("aten::softmax.int", {tensor_arg(scores), int_arg(-1), dtype_arg(kF32)}, kF32);
  emit_.to_dtype(contiguous(kF32, scores.sizes), compute_);
  emit_.call("aten::matmul", {tensor_arg(scores), tensor_arg(v)}, compute_);
  return contiguous(compute_, {shape_.batch, shape_.heads, seq, shape_.head_dim});
}

// One fused call (autocast keeps it in the compute dtype: q, k, v already are); the CPU flash kernel
// writes its output laid out [b, s, heads, hd], so the transpose + reshape after it are views.
TensorLayout StageBuilder::sdpa_forward(const TensorLayout& q, const TensorLayout& k, const TensorLayout& v) {
  emit_.call("aten::scaled_dot_product_attention",
             {tensor_arg(q), tensor_arg(k), tensor_arg(v), none_arg(), double_arg(0.0), bool_arg(true), none_arg(), bool_arg(false)},
             compute_);
  sdpa_inputs_ = {q, k, v};
  return strided(compute_, {shape_.batch, shape_.heads, shape_.seq, shape_.head_dim}, heads_transposed_strides(shape_.heads));
}

// A row-parallel projection's output under TP: copied out of the TP region and all-reduced.
TensorLayout StageBuilder::row_parallel_output(const TensorLayout& out) {
  if (!tensor_parallel_) return out;
  const TensorLayout copy = emit_.clone(out);
  emit_.comm(CommKind::kTpAllReduce, compute_, residual_bytes(compute_));
  return copy;
}

// h = x + o_proj(attention(rotary(q), rotary(k), v)) of norm1(x).
void StageBuilder::attention_block_forward() {
  const TensorLayout x = residual();
  TensorLayout normed = rmsnorm_forward(x);
  if (tensor_parallel_) normed = emit_.clone(normed);
  TensorLayout q = project_heads(normed, shape_.heads);
  TensorLayout k = project_heads(normed, shape_.kv_heads);
  TensorLayout v = project_heads(normed, shape_.kv_heads);
  q = rotary_forward(q, shape_.heads);
  k = rotary_forward(k, shape_.kv_heads);
  if (grouped_kv_) {
    k = repeat_kv_forward(k);
    v = repeat_kv_forward(v);
  }
  const TensorLayout attended = sdpa_ ? sdpa_forward(q, k, v) : eager_attention_forward(q, k, v);
  const TensorLayout context = emit_.transpose(attended, 1, 2);
  const TensorLayout flat = emit_.reshape(context, {shape_.batch, shape_.seq, shape_.heads * shape_.head_dim});
  const TensorLayout out = row_parallel_output(linear_forward(flat, shape_.heads * shape_.head_dim, shape_.hidden));
  emit_.add(x, out);
}

// out = h + down(silu(gate(norm2(h))) * up(norm2(h))).
void StageBuilder::mlp_block_forward() {
  const TensorLayout h = residual();
  TensorLayout normed = rmsnorm_forward(h);
  if (tensor_parallel_) normed = emit_.clone(normed);
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
void StageBuilder::head_and_loss_forward() {
  const int64_t tokens = shape_.batch * shape_.seq, vocab = shape_.vocab;
  const TensorLayout logits = linear_forward(rmsnorm_forward(residual()), shape_.hidden, vocab);
  emit_.to_dtype(logits, kF32);
  emit_.call("aten::reshape", {tensor_arg(contiguous(kI64, {shape_.batch, shape_.seq})), int_list_arg({-1})}, kI64);
  emit_.call("aten::reshape", {tensor_arg(contiguous(kF32, {shape_.batch, shape_.seq, vocab})), int_list_arg({-1, vocab})}, kF32);
  emit_.call("aten::cross_entropy_loss",
             {tensor_arg(contiguous(kF32, {tokens, vocab})), tensor_arg(contiguous(kI64, {tokens})), none_arg(), int_arg(1),
              int_arg(-100), double_arg(0.0)},
             kF32);
  emit_.call("aten::mul.Tensor", {tensor_arg(scalar_tensor(kF32)), tensor_arg(scalar_tensor(kF64))}, kF32);
}

}  // namespace itertime::predict::builder
