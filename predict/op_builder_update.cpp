// op_builder_update.cpp: what follows a stage's micro-batches (see op_builder_stage.hpp): the DP
// gradient buffer (flatten every gradient, divide, copy back: the dp_buffer phase), one AdamW step
// (common/training_recipe.hpp), the communication trace_stage appends, and the aggregated BuiltStage.
// Invariants: parameters in the model's registration order; calls that depend only on a parameter's
// shape are emitted for layer 0 and counted for every layer; comms aggregated per
// (phase, kind, dtype, bytes) in order of first appearance, as /ops/comms.
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "common/training_recipe.hpp"
#include "predict/op_builder_stage.hpp"

namespace itertime::predict::builder {
namespace {

int64_t element_count(const Dims& shape) {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  return n;
}

}  // namespace

std::vector<StageParameter> StageBuilder::parameters() const {
  const int64_t hidden = shape_.hidden, vocab = shape_.local_vocab, ffn = shape_.ffn;
  const int64_t query_width = shape_.heads * shape_.head_dim, kv_width = shape_.kv_heads * shape_.head_dim;
  std::vector<StageParameter> out;
  if (layers_.has_embedding) out.push_back({{vocab, hidden}, -1});
  for (int layer = 0; layer < layers_.num_layers; ++layer) {
    // input norm, q, k, v, o; post-attention norm, gate, up, down
    for (const Dims& shape : {Dims{hidden}, Dims{query_width, hidden}, Dims{kv_width, hidden}, Dims{kv_width, hidden},
                              Dims{hidden, query_width}, Dims{hidden}, Dims{ffn, hidden}, Dims{ffn, hidden}, Dims{hidden, ffn}}) {
      out.push_back({shape, layer});
    }
  }
  if (layers_.has_head) {
    out.push_back({{hidden}, -1});         // final norm
    out.push_back({{vocab, hidden}, -1});  // LM head
  }
  return out;
}

int64_t local_parameter_count(const std::vector<StageParameter>& parameters) {
  int64_t total = 0;
  for (const StageParameter& parameter : parameters) total += element_count(parameter.shape);
  return total;
}

// How many identical calls one emitted call of `parameter` stands for: layer 0's count for every layer,
// layers above it emit nothing.
int64_t StageBuilder::repeat_for(const StageParameter& parameter) const {
  return parameter.layer == 0 ? int64_t{layers_.num_layers} : int64_t{1};
}

// With SP (trainer.cpp's all_reduce_norm_gradients): the norms' gradients in a fresh flat buffer,
// all-reduced over TP, copied back; once per iteration, whatever dp.
void StageBuilder::sp_gradients(const std::vector<StageParameter>& parameters) {
  if (!sp_) return;
  std::vector<StageParameter> norms;
  for (const StageParameter& parameter : parameters) {
    if (parameter.shape.size() == 1) norms.push_back(parameter);
  }
  if (norms.empty()) return;
  emit_.set_phase(Phase::kSpGradients);
  const int64_t count = local_parameter_count(norms);
  emit_.call("aten::zeros", {int_list_arg({count}), dtype_arg(grad_), int_arg(0), cpu_device_arg(), none_arg()}, grad_);
  const TensorLayout flat = contiguous(grad_, {count});
  std::vector<TensorLayout> flat_parts;
  for (const StageParameter& parameter : norms) {
    flat_parts.push_back(contiguous(grad_, parameter.shape));
    if (parameter.layer > 0) continue;
    emit_.set_repeat(repeat_for(parameter));
    emit_.call("aten::reshape", {tensor_arg(contiguous(grad_, parameter.shape)), int_list_arg({-1})}, grad_);
  }
  emit_.set_repeat(1);
  emit_.call("aten::cat.out", {tensor_list_arg(flat_parts), int_arg(0), tensor_arg(flat)}, grad_);
  emit_.comm(CommKind::kTpAllReduce, grad_, count * static_cast<int64_t>(dtype_bytes(grad_)));
  int64_t offset = 0;
  for (const StageParameter& parameter : norms) {
    const int64_t n = local_parameter_count({parameter});
    emit_.set_repeat(1);
    emit_.call("aten::narrow", {tensor_arg(flat), int_arg(0), int_arg(offset), int_arg(n)}, grad_);
    offset += n;
    if (parameter.layer > 0) continue;
    emit_.set_repeat(repeat_for(parameter));
    const TensorLayout grad = contiguous(grad_, parameter.shape);
    emit_.call("aten::view_as", {tensor_arg(contiguous(grad_, {n})), tensor_arg(grad)}, grad_);
    emit_.call("aten::copy_", {tensor_arg(grad), tensor_arg(grad), bool_arg(false)}, grad_);
  }
  emit_.set_repeat(1);
}

void StageBuilder::dp_buffer(const std::vector<StageParameter>& parameters, int64_t local_params) {
  emit_.set_phase(Phase::kDpBuffer);
  const TensorLayout flat = contiguous(grad_, {local_params});
  std::vector<TensorLayout> flat_parts;
  for (const StageParameter& parameter : parameters) {
    flat_parts.push_back(contiguous(grad_, {element_count(parameter.shape)}));
    if (parameter.layer > 0) continue;
    emit_.set_repeat(repeat_for(parameter));
    emit_.call("aten::reshape", {tensor_arg(contiguous(grad_, parameter.shape)), int_list_arg({-1})}, grad_);
  }
  emit_.set_repeat(1);
  // Into the trainer's persistent gradient buffer (calibrate/tp_comm.hpp): cat.out, the buffer last.
  emit_.call("aten::cat.out", {tensor_list_arg(flat_parts), int_arg(0), tensor_arg(flat)}, grad_);
  emit_.call("aten::div_.Tensor", {tensor_arg(flat), tensor_arg(scalar_tensor(DType::kFloat64))}, grad_);
  int64_t offset = 0;
  for (const StageParameter& parameter : parameters) {
    const int64_t count = element_count(parameter.shape);
    emit_.set_repeat(1);
    emit_.call("aten::narrow", {tensor_arg(flat), int_arg(0), int_arg(offset), int_arg(count)}, grad_);  // a distinct offset each
    offset += count;
    if (parameter.layer > 0) continue;
    emit_.set_repeat(repeat_for(parameter));
    const TensorLayout grad = contiguous(grad_, parameter.shape);
    emit_.call("aten::view_as", {tensor_arg(contiguous(grad_, {count})), tensor_arg(grad)}, grad_);
    emit_.call("aten::copy_", {tensor_arg(grad), tensor_arg(grad), bool_arg(false)}, grad_);
  }
}

// torch::optim::AdamW's step on each parameter, at the second step (trace_stage runs one warm-up step).
void StageBuilder::optimizer(const std::vector<StageParameter>& parameters) {
  emit_.set_phase(Phase::kOptimizer);
  const double lr = kAdamW.learning_rate, beta1 = kAdamW.beta1, beta2 = kAdamW.beta2;
  const double step = 2.0;
  const double bias_correction1 = 1.0 - std::pow(beta1, step);
  const TensorLayout number = scalar_tensor(DType::kFloat64);
  for (const StageParameter& parameter : parameters) {
    if (parameter.layer > 0) continue;
    emit_.set_repeat(repeat_for(parameter));
    const TensorLayout w = contiguous(param_, parameter.shape);  // the weight, its gradient and moments alike
    emit_.call("aten::mul_.Scalar", {tensor_arg(w), double_arg(1.0 - lr * kAdamW.weight_decay)}, param_);
    emit_.call("aten::mul_.Scalar", {tensor_arg(w), double_arg(beta1)}, param_);
    emit_.call("aten::add_.Tensor", {tensor_arg(w), tensor_arg(w), double_arg(1.0 - beta1)}, param_);
    emit_.call("aten::mul_.Scalar", {tensor_arg(w), double_arg(beta2)}, param_);
    emit_.call("aten::addcmul_", {tensor_arg(w), tensor_arg(w), tensor_arg(w), double_arg(1.0 - beta2)}, param_);
    emit_.call("aten::sqrt", {tensor_arg(w)}, param_);
    emit_.call("aten::div.Tensor", {tensor_arg(w), tensor_arg(number)}, param_);
    emit_.call("aten::add_.Tensor", {tensor_arg(w), tensor_arg(number), int_arg(1)}, param_);
    emit_.call("aten::addcdiv_", {tensor_arg(w), tensor_arg(w), tensor_arg(w), double_arg(-(lr / bias_correction1))}, param_);
  }
  emit_.set_repeat(1);
}

// The pipeline sends (activation forward, gradient backward) and the DP gradient all-reduce.
void StageBuilder::stage_comms(int stage, int pp, int64_t local_params) {
  if (stage < pp - 1) emit_.comm_once(Phase::kForward, CommKind::kPpSendForward, activation_, residual_bytes(activation_));
  if (stage > 0) emit_.comm_once(Phase::kBackward, CommKind::kPpSendBackward, activation_, residual_bytes(activation_));
  emit_.comm_once(Phase::kDpBuffer, CommKind::kDpAllReduce, grad_, local_params * static_cast<int64_t>(dtype_bytes(grad_)));
}

BuiltStage StageBuilder::finish(int64_t local_params) {
  BuiltStage built;
  built.ops = std::move(emit_.ops());
  std::map<std::tuple<Phase, CommKind, DType, int64_t>, std::size_t> comm_position;
  for (const CommOp& comm : emit_.comms()) {
    const auto key = std::make_tuple(comm.phase, comm.kind, comm.dtype, comm.bytes);
    const auto [position, inserted] = comm_position.try_emplace(key, built.comms.size());
    if (inserted) {
      built.comms.push_back(comm);
    } else {
      built.comms[position->second].count += comm.count;
    }
  }
  built.local_params = local_params;
  built.num_layers = layers_.num_layers;
  return built;
}

}  // namespace itertime::predict::builder
