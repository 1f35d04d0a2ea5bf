// op_builder_backward.cpp: the backward of one micro-batch through a stage (StageBuilder::backward, see
// op_builder_stage.hpp) in the order the CPU autograd engine runs it: the loss and head (or the
// received gradient), each decoder layer's MLP and attention blocks from the top, the embedding.
// Invariants: a tensor's gradient contributions meet in a GradBuffer (the engine's InputBuffer), whose
// additions are emitted as the second and later contributions arrive; 1.13 and 2.x differ where a
// piece says so. Each parameter's AccumulateGrad (parameter_gradient, by its registration index) runs
// where the engine runs it, right after the gradient is computed; with overlapped reduction the layers
// are emitted one by one, top first, each with the same top_fresh as the repeated layers would have.
#include "predict/builder/op_builder_stage.hpp"

namespace itertime::predict::builder {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kI64 = DType::kInt64;

}  // namespace

void StageBuilder::backward() {
  emit_.set_phase(Phase::kBackward);
  if (layers_.has_head) {
    loss_and_head_backward();
  } else {
    emit_.call("aten::randn_like", {tensor_arg(residual()), none_arg(), none_arg(), none_arg(), none_arg(), none_arg()},
               activation_);
  }
  layers_backward();
  emit_.set_repeat(1);
  embedding_backward();
}

void StageBuilder::accumulate(GradBuffer& buffer, const TensorLayout& grad, bool grad_fresh) {
  if (buffer.contributions++ == 0) {
    buffer.fresh = grad_fresh;
    return;
  }
  if (torch2_ && buffer.fresh) {
    emit_.call("aten::add_.Tensor", {tensor_arg(grad), tensor_arg(grad), int_arg(1)}, grad.dtype);
  } else {
    emit_.add(grad, grad);
  }
  buffer.fresh = true;
}

// Linear backward, from the matmul's output-fold reshape to the weight's AccumulateGrad; `input_grad`
// receives the input gradient [b, s, in] before the weight's path runs.
void StageBuilder::linear_backward(const TensorLayout& grad, int64_t in, int64_t out, const InputGradient& input_grad,
                                   std::size_t parameter) {
  const int64_t tokens = shape_.batch * shape_.seq;
  const TensorLayout grad2 = emit_.reshape(grad, {tokens, out});
  const TensorLayout grad2_t = emit_.t(grad2);
  emit_.t(emit_.mm(grad2_t, contiguous(compute_, {tokens, in})));
  const TensorLayout weight = emit_.t(strided(compute_, {in, out}, {1, in}));
  const TensorLayout input_gradient = emit_.reshape(emit_.mm(grad2, weight), {shape_.batch, shape_.seq, in});
  input_grad(input_gradient);
  if (policy_.autocast) emit_.to_layout(strided(compute_, {in, out}, {1, in}), param_);
  emit_.t(strided(param_, {in, out}, {1, in}));
  parameter_gradient(parameter, contiguous(param_, {out, in}));
}

// The gradient of a linear's input reaching its (shared) source: through autocast's cast, then added.
StageBuilder::InputGradient StageBuilder::linear_input(GradBuffer& buffer) {
  return [this, target = &buffer](const TensorLayout& input_gradient) {
    if (policy_.autocast && activation_ != compute_) {
      accumulate(*target, emit_.to_layout(input_gradient, activation_), true);
    } else {
      accumulate(*target, input_gradient, false);  // a view of the matmul's result
    }
  };
}

// RMSNorm backward; `x_buffer` holds the gradients its input already has.
void StageBuilder::rmsnorm_backward(GradBuffer& x_buffer, std::size_t parameter) {
  const int64_t batch = shape_.batch, seq = shape_.residual_seq, hidden = shape_.hidden;
  const TensorLayout grad = residual();
  emit_.mul(grad, contiguous(param_, {hidden}));
  emit_.mul(grad, grad);
  emit_.call("aten::sum.dim_IntList", {tensor_arg(grad), int_list_arg({0, 1}), bool_arg(true), none_arg()}, activation_);
  emit_.call("aten::view", {tensor_arg(contiguous(activation_, {1, 1, hidden})), int_list_arg({hidden})}, activation_);
  parameter_gradient(parameter, contiguous(param_, {hidden}));
  const bool cast = activation_ != kF32;  // the norm computes in fp32
  if (cast) emit_.to_layout(grad, kF32);
  const TensorLayout grad32 = contiguous(kF32, {batch, seq, hidden});
  const TensorLayout stat = contiguous(kF32, {batch, seq, 1});
  emit_.mul(grad32, grad32);
  emit_.mul(grad32, stat);
  emit_.call("aten::sum.dim_IntList", {tensor_arg(grad32), int_list_arg({2}), bool_arg(true), none_arg()}, kF32);
  GradBuffer x32_buffer;  // the fp32 copy's gradient, when there is a cast
  accumulate(cast ? x32_buffer : x_buffer, grad32, true);
  emit_.call("aten::pow.Tensor_Scalar", {tensor_arg(stat), int_arg(3)}, kF32);
  emit_.call("aten::mul.Tensor", {tensor_arg(stat), tensor_arg(scalar_tensor(kF64))}, kF32);
  emit_.mul(stat, stat);
  emit_.call("aten::expand", {tensor_arg(stat), int_list_arg({batch, seq, hidden}), bool_arg(false)}, kF32);
  emit_.call("aten::div.Tensor", {tensor_arg(strided(kF32, {batch, seq, hidden}, {seq, 1, 0})), tensor_arg(scalar_tensor(kI64))},
             kF32);
  emit_.call("aten::pow.Tensor_Scalar", {tensor_arg(grad32), double_arg(1.0)}, kF32);
  emit_.call("aten::mul.Tensor", {tensor_arg(grad32), tensor_arg(scalar_tensor(kF64))}, kF32);
  emit_.mul(grad32, grad32);
  if (cast) {
    accumulate(x32_buffer, grad32, true);
    accumulate(x_buffer, emit_.to_layout(grad32, activation_), true);
  } else {
    accumulate(x_buffer, grad32, true);
  }
}

// Rotary backward: x * cos's gradient, then rotate_half's two slices added into it (in place in 2.x:
// the buffer is fresh).
TensorLayout StageBuilder::rotary_backward(const TensorLayout& grad, int64_t heads) {
  const int64_t head_dim = shape_.head_dim;
  const Dims full_dims{shape_.batch, heads, shape_.seq, head_dim};
  const TensorLayout table = contiguous(compute_, {shape_.seq, head_dim});
  const TensorLayout full = contiguous(compute_, full_dims);
  TensorLayout buffer = emit_.mul(grad, table);
  const TensorLayout rotated = emit_.mul(grad, table);
  const TensorLayout lower_half = emit_.narrow(rotated, 3, 0, head_dim / 2);
  const TensorLayout upper_half = emit_.narrow(rotated, 3, head_dim / 2, head_dim / 2);
  const auto add_into = [&](const TensorLayout& held, const TensorLayout& slice_grad) {
    if (!torch2_) return emit_.add(held, slice_grad);
    emit_.call("aten::add_.Tensor", {tensor_arg(held), tensor_arg(slice_grad), int_arg(1)}, held.dtype);
    return held;
  };
  emit_.call("aten::slice_backward",
             {tensor_arg(lower_half), int_list_arg(full_dims), int_arg(-1), int_arg(0), int_arg(head_dim / 2), int_arg(1)},
             compute_);
  buffer = add_into(buffer, full);
  emit_.call("aten::neg", {tensor_arg(upper_half)}, compute_);
  emit_.call("aten::slice_backward",
             {tensor_arg(unary_result(upper_half, compute_)), int_list_arg(full_dims), int_arg(-1), int_arg(head_dim / 2),
              int_arg(head_dim), int_arg(1)},
             compute_);
  return add_into(buffer, full);
}

// The gradient of a residual branch's output, cast to the branch's (compute) dtype.
void StageBuilder::residual_add_backward() {
  if (compute_ != activation_) emit_.to_dtype(residual(), compute_);
}

// The TP region's entry (copy to the region) all-reduces its input's gradient; with SP (the sequence's
// all-gather) reduce-scatters it.
void StageBuilder::copy_to_tp_backward() {
  if (!tensor_parallel_) return;
  if (sp_) {
    sp_reduce_scatter(region());
  } else {
    all_reduce_copy(region(), activation_);
  }
}

// The TP region's exit: nothing to do (the all-reduce's backward is the identity), or with SP the
// reduce-scatter's backward, an all-gather of the sequence.
void StageBuilder::leave_region_backward() {
  if (sp_) sp_all_gather(contiguous(compute_, residual_dims()));
}

void StageBuilder::loss_and_head_backward() {
  const int64_t tokens = shape_.batch * shape_.seq, vocab = shape_.local_vocab;
  const TensorLayout logits = contiguous(kF32, {tokens, vocab});
  const TensorLayout loss = scalar_tensor(kF32);
  emit_.call("aten::ones_like", {tensor_arg(loss), none_arg(), none_arg(), none_arg(), none_arg(), int_arg(0)}, kF32);
  if (torch2_) {  // the loss * 0.25 backward: 2.x multiplies by the wrapped number in the gradient's dtype
    emit_.call("aten::mul.Tensor", {tensor_arg(loss), tensor_arg(scalar_tensor(kF64))}, kF32);
  } else {
    emit_.call("aten::lift_fresh", {tensor_arg(scalar_tensor(kF64))}, kF64);
    emit_.call("aten::mul.Tensor", {tensor_arg(loss), tensor_arg(scalar_tensor(kF64))}, kF64);
    emit_.call("aten::to.dtype", {tensor_arg(scalar_tensor(kF64)), dtype_arg(kF32), bool_arg(false), bool_arg(false), none_arg()},
               kF32);
  }
  if (vp_) {
    vocab_parallel_loss_backward();
  } else {
    emit_.call("aten::nll_loss_backward",
               {tensor_arg(loss), tensor_arg(logits), tensor_arg(contiguous(kI64, {tokens})), none_arg(), int_arg(1),
                int_arg(-100), tensor_arg(loss)},
               kF32);
    emit_.call("aten::_log_softmax_backward_data", {tensor_arg(logits), tensor_arg(logits), int_arg(1), dtype_arg(kF32)}, kF32);
  }
  emit_.reshape(logits, {shape_.batch, shape_.seq, vocab});
  if (compute_ != kF32) emit_.to_layout(contiguous(kF32, {shape_.batch, shape_.seq, vocab}), compute_);
  GradBuffer norm_out;
  linear_backward(contiguous(compute_, {shape_.batch, shape_.seq, vocab}), shape_.hidden, vocab, linear_input(norm_out),
                  head_parameter(1));
  if (vp_) {
    copy_to_tp_backward();  // the column-parallel head's region entry
  } else if (sp_) {
    sp_own_shard(region());  // gather_from_sp_replicated's backward
  }
  GradBuffer top;  // gradients reaching the stage's last residual tensor
  rmsnorm_backward(top, head_parameter(0));
}

// tp_comm.cpp's VocabParallelCrossEntropy backward: softmax minus the one-hot of the rank's targets,
// times the loss gradient over the rows.
void StageBuilder::vocab_parallel_loss_backward() {
  const int64_t rows = shape_.batch * shape_.seq, local_vocab = shape_.local_vocab;
  const TensorLayout softmax = contiguous(kF32, {rows, local_vocab});
  const TensorLayout column = contiguous(kF32, {rows, 1});
  emit_.clone(softmax);
  logical_not(contiguous(DType::kBool, {rows}));
  emit_.to_dtype(contiguous(DType::kBool, {rows}), kF32);
  emit_.call("aten::unsqueeze", {tensor_arg(contiguous(kF32, {rows})), int_arg(1)}, kF32);
  emit_.unary("aten::neg", column);
  emit_.call("aten::unsqueeze", {tensor_arg(contiguous(kI64, {rows})), int_arg(1)}, kI64);
  emit_.call("aten::scatter_add_", {tensor_arg(softmax), int_arg(1), tensor_arg(contiguous(kI64, {rows, 1})), tensor_arg(column)},
             kF32);
  emit_.call("aten::div.Tensor", {tensor_arg(scalar_tensor(kF32)), tensor_arg(scalar_tensor(kF64))}, kF32);
  emit_.call("aten::mul_.Tensor", {tensor_arg(softmax), tensor_arg(scalar_tensor(kF32))}, kF32);
}

// The layers from the top. `top_fresh` of a layer: whether the gradient reaching its output is one the
// engine alone holds (2.x then accumulates into it in place). On a stage without the loss the top
// layer's is the caller's gradient (randn_like, or the received one in training), still referenced.
void StageBuilder::layers_backward() {
  const int layers = layers_.num_layers;
  if (layers == 0) return;
  if (overlap_) {
    // Layer by layer from the top (each completes its own buckets), each as it would be repeated below.
    emit_.set_repeat(1);
    for (backward_layer_ = layers - 1; backward_layer_ >= 0; --backward_layer_) {
      const bool top = backward_layer_ == layers - 1;
      layer_backward(!(torch2_ && (recompute_ == Recompute::kFull || (!layers_.has_head && top))));
    }
    backward_layer_ = 0;
    return;
  }
  backward_layer_ = 0;  // one layer stands for all: its parameters are layer 0's
  if (torch2_ && recompute_ == Recompute::kFull) {
    // Each layer's backward is a reentrant one from the checkpoint's output gradient, which the caller holds.
    emit_.set_repeat(layers);
    layer_backward(false);
  } else if (torch2_ && !layers_.has_head) {
    emit_.set_repeat(1);
    layer_backward(false);
    if (layers > 1) {
      emit_.set_repeat(layers - 1);
      layer_backward(true);
    }
  } else {
    emit_.set_repeat(layers);
    layer_backward(true);
  }
}

// One decoder layer from its output gradient.
void StageBuilder::layer_backward(bool top_fresh) {
  if (recompute_ == Recompute::kFull) {
    // llama_model.cpp's RecomputedLayer: the saved input detached, the layer rerun (its TP communication
    // included), its backward run to the input as a leaf, whose gradient (laid out as the input) is kept.
    emit_.call("aten::detach", {tensor_arg(residual())}, activation_);
    layer_forward();
    mlp_block_backward(top_fresh);
    attention_block_backward();
    emit_.call("aten::detach", {tensor_arg(residual())}, activation_);
    return;
  }
  mlp_block_backward(top_fresh);
  attention_block_backward();
}

// out = h + mlp(norm2(h)).
void StageBuilder::mlp_block_backward(bool top_fresh) {
  residual_add_backward();
  GradBuffer h_buffer{1, top_fresh};
  leave_region_backward();
  linear_backward(
      contiguous(compute_, region_dims()), shape_.ffn, shape_.hidden, [](const TensorLayout&) {}, layer_parameter(8));
  const TensorLayout wide = contiguous(compute_, {shape_.batch, shape_.seq, shape_.ffn});
  emit_.mul(wide, wide);
  emit_.mul(wide, wide);
  emit_.call("aten::silu_backward", {tensor_arg(wide), tensor_arg(wide)}, compute_);
  GradBuffer mlp_input;
  linear_backward(wide, shape_.hidden, shape_.ffn, linear_input(mlp_input), layer_parameter(6));  // gate
  linear_backward(wide, shape_.hidden, shape_.ffn, linear_input(mlp_input), layer_parameter(7));  // up
  copy_to_tp_backward();
  rmsnorm_backward(h_buffer, layer_parameter(5));
}

// h = x + o_proj(attention(norm1(x))).
void StageBuilder::attention_block_backward() {
  const int64_t batch = shape_.batch, seq = shape_.seq, head_dim = shape_.head_dim;
  residual_add_backward();
  GradBuffer x_buffer{1, true};  // holds the MLP block's accumulated input gradient, which the engine owns
  const int64_t query_width = shape_.heads * head_dim;
  leave_region_backward();
  linear_backward(
      contiguous(compute_, region_dims()), query_width, shape_.hidden, [](const TensorLayout&) {}, layer_parameter(4));
  const TensorLayout context =
      emit_.reshape(contiguous(compute_, {batch, seq, query_width}), {batch, seq, shape_.heads, head_dim});
  const TensorLayout context_grad = emit_.transpose(context, 1, 2);
  AttentionGrads grads = attention_core_backward(context_grad);
  if (grouped_kv_) grads = repeat_kv_backward(grads);
  if (cp_) {  // the all-gathers' backward, V's first (the most recently created node)
    grads.value = cp_reduce_scatter(grads.value);
    grads.key = cp_reduce_scatter(grads.key);
  }
  const TensorLayout key_grad = rotary_backward(grads.key, shape_.kv_heads);
  const TensorLayout query_grad = rotary_backward(grads.query, shape_.heads);
  GradBuffer attention_input;
  // v, k, q (layer parameters 3, 2, 1): the most recently created node first.
  const struct {
    const TensorLayout& grad;
    int64_t heads;
    int slot;
  } projections[] = {{grads.value, shape_.kv_heads, 3}, {key_grad, shape_.kv_heads, 2}, {query_grad, shape_.heads, 1}};
  for (const auto& projection : projections) {
    const TensorLayout per_token = emit_.transpose(projection.grad, 1, 2);
    const TensorLayout flat = emit_.reshape(per_token, {batch, seq, projection.heads * head_dim});
    linear_backward(flat, shape_.hidden, projection.heads * head_dim, linear_input(attention_input),
                    layer_parameter(projection.slot));
  }
  copy_to_tp_backward();
  rmsnorm_backward(x_buffer, layer_parameter(0));
}

// The attention core's backward. Under selective recompute (llama_model.cpp's RecomputedCore): q, k and v
// detached, the core rerun, its backward run to them as leaves (AccumulateGrad), and their gradients,
// laid out as they are, handed on.
AttentionGrads StageBuilder::attention_core_backward(const TensorLayout& context_grad) {
  if (recompute_ != Recompute::kSelective) return sdpa_ ? sdpa_backward(context_grad) : eager_attention_backward(context_grad);
  const std::vector<TensorLayout> inputs = core_inputs_;
  for (const TensorLayout& input : inputs) emit_.call("aten::detach", {tensor_arg(input)}, input.dtype);
  attention_core_forward(inputs[0], inputs[1], inputs[2]);
  core_leaves_ = true;
  if (sdpa_) {
    const AttentionGrads grads = sdpa_backward(context_grad);
    leaf_gradient(inputs[0], grads.query);
    leaf_gradient(inputs[1], grads.key);
    leaf_gradient(inputs[2], grads.value);
  } else {
    eager_attention_backward(context_grad);
  }
  core_leaves_ = false;
  return AttentionGrads{inputs[0], inputs[1], inputs[2]};
}

// AccumulateGrad of a leaf without a gradient yet: it keeps a gradient laid out as the leaf (detach), else
// copies it into the leaf's layout (new_empty_strided + copy_; the gradient layout contract).
void StageBuilder::leaf_gradient(const TensorLayout& leaf, const TensorLayout& grad) {
  bool same_layout = true;
  for (std::size_t dim = 0; dim < leaf.sizes.size(); ++dim) {
    if (leaf.sizes[dim] != 1 && leaf.strides[dim] != grad.strides[dim]) same_layout = false;
  }
  if (same_layout) {
    emit_.call("aten::detach", {tensor_arg(grad)}, grad.dtype);
    return;
  }
  emit_.call("aten::new_empty_strided",
             {tensor_arg(grad), int_list_arg(leaf.sizes), int_list_arg(leaf.strides), dtype_arg(grad.dtype), int_arg(0),
              cpu_device_arg(), none_arg()},
             grad.dtype);
  emit_.call("aten::copy_", {tensor_arg(leaf), tensor_arg(grad), bool_arg(false)}, grad.dtype);
}

// The model's softmax(q k^T / sqrt(hd) + mask) v backward: bmm's of the [b * heads] folded tensors.
// With context parallelism the queries' seq/cp rows against the gathered keys' seq columns.
AttentionGrads StageBuilder::eager_attention_backward(const TensorLayout& context_grad) {
  const int64_t batch = shape_.batch, heads = shape_.heads, seq = shape_.seq, kv_seq = shape_.kv_seq, head_dim = shape_.head_dim;
  const int64_t folded = batch * heads;
  const TensorLayout query = strided(compute_, {batch, heads, seq, head_dim}, heads_transposed_strides(heads));
  const TensorLayout grad3 = emit_.reshape(context_grad, {folded, seq, head_dim});
  const TensorLayout probs_t = emit_.transpose(contiguous(compute_, {folded, seq, kv_seq}), 1, 2);
  const TensorLayout value_grad3 = emit_.bmm(probs_t, grad3);
  // K and V as the core used them: repeated, or all-gathered (contiguous), else the projections' transposed views.
  const bool kv_contiguous = grouped_kv_ || cp_;
  const TensorLayout value = kv_contiguous
                                 ? contiguous(compute_, {batch, heads, kv_seq, head_dim})
                                 : strided(compute_, {batch, heads, seq, head_dim}, heads_transposed_strides(shape_.kv_heads));
  emit_.bmm(grad3, emit_.transpose(reshaped(value, {folded, kv_seq, head_dim}), 1, 2));
  AttentionGrads grads;
  grads.value = emit_.reshape(value_grad3, {batch, heads, kv_seq, head_dim});
  if (core_leaves_) leaf_gradient(core_inputs_[2], grads.value);
  emit_.reshape(contiguous(compute_, {folded, seq, kv_seq}), {batch, heads, seq, kv_seq});
  if (compute_ != kF32) emit_.to_layout(contiguous(compute_, {batch, heads, seq, kv_seq}), kF32);
  const TensorLayout probs32 = contiguous(kF32, {batch, heads, seq, kv_seq});
  emit_.call("aten::_softmax_backward_data", {tensor_arg(probs32), tensor_arg(probs32), int_arg(-1), dtype_arg(kF32)}, kF32);
  if (compute_ != kF32) emit_.to_layout(probs32, compute_);
  const TensorLayout scores_grad = contiguous(compute_, {batch, heads, seq, kv_seq});
  emit_.call("aten::masked_fill.Scalar",
             {tensor_arg(scores_grad), tensor_arg(contiguous(DType::kBool, {seq, kv_seq})), int_arg(0)}, compute_);
  if (!torch2_) emit_.call("aten::lift_fresh", {tensor_arg(scalar_tensor(kF64))}, kF64);
  emit_.call("aten::div.Tensor", {tensor_arg(scores_grad), tensor_arg(scalar_tensor(kF64))}, compute_);
  const TensorLayout scores_grad3 = emit_.reshape(scores_grad, {folded, seq, kv_seq});
  const TensorLayout query3_t = emit_.transpose(reshaped(query, {folded, seq, head_dim}), 1, 2);
  const TensorLayout key_t_grad3 = emit_.bmm(query3_t, scores_grad3);
  const TensorLayout key =
      kv_contiguous ? contiguous(compute_, {batch, heads, kv_seq, head_dim}) : query;  // as used: after rotary (or repeat)
  const TensorLayout key_t3_t = emit_.transpose(reshaped(transposed(key, 2, 3), {folded, head_dim, kv_seq}), 1, 2);
  const TensorLayout query_grad3 = emit_.bmm(scores_grad3, key_t3_t);
  const TensorLayout key_t_grad = emit_.reshape(key_t_grad3, {batch, heads, head_dim, kv_seq});
  grads.query = emit_.reshape(query_grad3, {batch, heads, seq, head_dim});
  if (core_leaves_) leaf_gradient(core_inputs_[0], grads.query);
  grads.key = emit_.transpose(key_t_grad, 2, 3);
  if (core_leaves_) leaf_gradient(core_inputs_[1], grads.key);
  return grads;
}

// The fused kernel's backward: one call; it writes its gradients laid out like its output.
// With context parallelism (not verified against a 2.x trace yet): the explicit mask, converted by sdpa to
// the queries' dtype ([seq/cp, seq]), passed again, is_causal false; K's and V's gradients [.., seq, ..].
AttentionGrads StageBuilder::sdpa_backward(const TensorLayout& context_grad) {
  const int64_t batch = shape_.batch, heads = shape_.heads, seq = shape_.seq, kv_seq = shape_.kv_seq;
  const TensorLayout out = strided(compute_, {batch, heads, seq, shape_.head_dim}, heads_transposed_strides(heads));
  const TensorLayout logsumexp = strided(kF32, {batch, heads, seq}, {seq * heads, 1, heads});
  const TensorLayout mask_layout = contiguous(compute_, {seq, kv_seq});  // outlives the call: arguments borrow tensors
  const OpArgument mask = cp_ ? tensor_arg(mask_layout) : none_arg();
  emit_.call("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
             {tensor_arg(context_grad), tensor_arg(sdpa_inputs_[0]), tensor_arg(sdpa_inputs_[1]), tensor_arg(sdpa_inputs_[2]),
              tensor_arg(out), tensor_arg(logsumexp), double_arg(0.0), bool_arg(!cp_), mask, none_arg()},
             compute_);
  if (!cp_) return AttentionGrads{out, out, out};
  const TensorLayout kv = strided(compute_, {batch, heads, kv_seq, shape_.head_dim},
                                  {kv_seq * heads * shape_.head_dim, shape_.head_dim, heads * shape_.head_dim, 1});
  return AttentionGrads{out, kv, kv};
}

// K's and V's gradients summed over each group of heads they were repeated to (V first): 2.x folds the
// group, sums it and drops it (repeat_interleave.self_int's backward); 1.13 runs index_select_backward.
AttentionGrads StageBuilder::repeat_kv_backward(const AttentionGrads& grads) {
  const int64_t batch = shape_.batch, kv_heads = shape_.kv_heads, seq = shape_.kv_seq, head_dim = shape_.head_dim;
  for (const TensorLayout* grad : {&grads.value, &grads.key}) {
    if (torch2_) {
      const TensorLayout folded = emit_.reshape(*grad, {batch, kv_heads, shape_.heads / kv_heads, seq, head_dim});
      emit_.call("aten::sum.dim_IntList", {tensor_arg(folded), int_list_arg({2}), bool_arg(true), none_arg()}, compute_);
      emit_.call("aten::squeeze.dim", {tensor_arg(contiguous(compute_, {batch, kv_heads, 1, seq, head_dim})), int_arg(2)},
                 compute_);
    } else {
      emit_.call("aten::index_select_backward",
                 {tensor_arg(*grad), int_list_arg({batch, kv_heads, seq, head_dim}), int_arg(1),
                  tensor_arg(contiguous(kI64, {shape_.heads}))},
                 compute_);
    }
  }
  const TensorLayout kv_grad = contiguous(compute_, {batch, kv_heads, seq, head_dim});
  return AttentionGrads{grads.query, kv_grad, kv_grad};
}

// tp_comm.cpp's CpAllGatherSequence backward: the gradient [b, kv heads, seq, hd] cut into the CP ranks'
// parts [cp, b, kv heads, seq/cp, hd] (reshape, permute, contiguous), reduce-scattered into a fresh
// [b, kv heads, seq/cp, hd] (one rank's part moved).
TensorLayout StageBuilder::cp_reduce_scatter(const TensorLayout& grad) {
  const int64_t cp = shape_.cp, batch = grad.sizes[0], heads = grad.sizes[1], local = grad.sizes[2] / cp, dim = grad.sizes[3];
  const TensorLayout parts = emit_.permute(emit_.reshape(grad, {batch, heads, cp, local, dim}), {2, 0, 1, 3, 4});
  contiguous_call(parts);
  emit_.call(
      "aten::empty.memory_format",
      {int_list_arg({batch, heads, local, dim}), dtype_arg(grad.dtype), int_arg(0), cpu_device_arg(), none_arg(), none_arg()},
      grad.dtype);
  emit_.comm(CommKind::kCpReduceScatter, grad.dtype, batch * heads * local * dim * static_cast<int64_t>(dtype_bytes(grad.dtype)));
  return contiguous(grad.dtype, {batch, heads, local, dim});
}

// The embedding's gradient (first stage), or the received activation's (detached for the send).
void StageBuilder::embedding_backward() {
  if (layers_.has_embedding) {
    if (sp_) sp_all_gather(residual());  // the backward of the shard (replicated) or of the reduce-scatter (vp)
    if (vp_) {
      emit_.call("aten::masked_fill.Scalar",
                 {tensor_arg(region()), tensor_arg(contiguous(DType::kBool, {shape_.batch, shape_.seq, 1})), int_arg(0)},
                 activation_);
    }
    emit_.call("aten::embedding_backward",
               {tensor_arg(region()), tensor_arg(contiguous(kI64, {shape_.batch, shape_.seq})), int_arg(shape_.local_vocab),
                int_arg(-1), bool_arg(false), bool_arg(false)},
               param_);
    parameter_gradient(0, contiguous(param_, {shape_.local_vocab, shape_.hidden}));
  } else {
    emit_.call("aten::detach", {tensor_arg(residual())}, activation_);
  }
}

}  // namespace itertime::predict::builder
