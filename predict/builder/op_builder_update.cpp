// op_builder_update.cpp: what follows a stage's micro-batches (see op_builder_stage.hpp): the DP
// gradient buffer (flatten every gradient, divide, copy back: the dp_buffer phase), one AdamW step
// (common/training_recipe.hpp), the communication trace_stage appends, and the aggregated BuiltStage.
// With the distributed optimizer: the padded buffer's prefix filled, the buffer divided and
// reduce-scattered (dp_buffer), AdamW on the shard, its all-gather and the values copied back (optimizer).
// With overlapped gradient reduction (calibrate/gradient_buckets.hpp, as trace_stage traces it): the flat
// buffer zeroed at the step's start (dp_buffer), each parameter's gradient added into its view of it in
// the backward, each completed bucket narrowed (backward), divided (dp_buffer) and all-reduced (a comm
// in phase backward), and no dp_buffer flatten, division or all-reduce after the backward. With the
// distributed optimizer too (dopt+ovl): the buckets padded to multiples of dp, each reduce-scattered into
// rank 0's shard as it completes (narrow, a comm in phase backward), with SP the shard's norm ranges
// summed over TP (sp_grads), AdamW on the shard, and the buckets all-gathered and copied back (optimizer).
// Invariants: parameters in the model's registration order; calls that depend only on a parameter's
// shape are emitted for layer 0 and counted for every layer; comms aggregated per
// (phase, kind, dtype, bytes) in order of first appearance, as /ops/comms; the overlapped buffer and
// its buckets are at the parameters' dtype (make_flat_buffer), whatever the gradient dtype.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "common/bucket_plan.hpp"
#include "common/training_recipe.hpp"
#include "predict/builder/op_builder_stage.hpp"

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

int64_t shard_count(int64_t local_params, int dp) { return (local_params + dp - 1) / dp; }

int64_t local_parameter_count(const std::vector<StageParameter>& parameters) {
  int64_t total = 0;
  for (const StageParameter& parameter : parameters) total += element_count(parameter.shape);
  return total;
}

// The buckets of common/bucket_plan.hpp (the trainer's and the tracer's, calibrate/gradient_buckets.hpp):
// the parameters taken last first, each range padded to a multiple of pad_multiple; with the distributed
// optimizer, where each bucket's first 1/dp slice lies in the shard.
void StageBuilder::plan_buckets(int64_t bucket_bytes, int64_t pad_multiple) {
  std::vector<int64_t> elements;
  for (const StageParameter& parameter : parameters()) elements.push_back(element_count(parameter.shape));
  const BucketPlan plan = make_bucket_plan(elements, static_cast<int64_t>(dtype_bytes(param_)), bucket_bytes, pad_multiple);
  for (const BucketRange& bucket : plan.buckets) {
    buckets_.push_back(GradientBucket{bucket.first, bucket.last, bucket.offset, bucket.elements, 0});
    shard_offsets_.push_back(bucket.shard_offset);
  }
  bucket_of_ = plan.bucket_of;
  parameter_offsets_ = plan.parameter_offsets;
  buffer_elements_ = plan.buffer_elements;
}

std::size_t StageBuilder::layer_parameter(int slot) const {
  return (layers_.has_embedding ? 1 : 0) + static_cast<std::size_t>(backward_layer_) * 9 + static_cast<std::size_t>(slot);
}

std::size_t StageBuilder::head_parameter(int slot) const {
  return (layers_.has_embedding ? 1 : 0) + static_cast<std::size_t>(layers_.num_layers) * 9 + static_cast<std::size_t>(slot);
}

// GradientBuckets::begin_step: the whole buffer zeroed before the step's first forward.
void StageBuilder::begin_step() {
  if (!overlap_) return;
  emit_.set_phase(Phase::kDpBuffer);
  emit_.set_repeat(1);
  emit_.call("aten::zero_", {tensor_arg(contiguous(param_, {buffer_elements_}))}, param_);
  emit_.set_phase(Phase::kForward);
}

// A parameter's AccumulateGrad (in the backward's phase). Without overlap the parameter has no gradient
// at the traced micro-batch: it keeps this one (detach). With overlap its gradient is a view of the
// buffer: the new one is added in place (no grad mode: `grad += new_grad`), and when that makes its
// bucket's gradients all final the bucket is divided by dp (as 2, the tracer's) and its all-reduce started.
void StageBuilder::parameter_gradient(std::size_t index, const TensorLayout& grad) {
  if (!overlap_) {
    emit_.call("aten::detach", {tensor_arg(grad)}, param_);
    return;
  }
  emit_.call("aten::add_.Tensor", {tensor_arg(contiguous(param_, grad.sizes)), tensor_arg(grad), int_arg(1)}, param_);
  GradientBucket& bucket = buckets_.at(bucket_of_.at(index));
  if (++bucket.ready != bucket.last - bucket.first + 1) return;
  const TensorLayout buffer = contiguous(param_, {buffer_elements_});
  emit_.call("aten::narrow", {tensor_arg(buffer), int_arg(0), int_arg(bucket.offset), int_arg(bucket.count)}, param_);
  emit_.set_phase(Phase::kDpBuffer);
  emit_.call("aten::div_.Tensor", {tensor_arg(contiguous(param_, {bucket.count})), tensor_arg(scalar_tensor(DType::kFloat64))},
             param_);
  emit_.set_phase(Phase::kBackward);  // the all-reduce (reduce-scatter) starts inside the backward
  if (sharded_buckets_) {
    // make_bucketed_shard's callback: reduce-scattered into rank 0's slice of the shard's gradient.
    const int64_t slice = bucket.count / dp_;
    emit_.call("aten::narrow",
               {tensor_arg(contiguous(param_, {bucketed_shard_count()})), int_arg(0),
                int_arg(shard_offsets_.at(bucket_of_.at(index))), int_arg(slice)},
               param_);
    emit_.comm(CommKind::kDpReduceScatter, param_, slice * static_cast<int64_t>(dtype_bytes(param_)));
    return;
  }
  emit_.comm(CommKind::kDpAllReduce, param_, bucket.count * static_cast<int64_t>(dtype_bytes(param_)));
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
  flatten_gradients(norms, flat);  // the norms are 1-D: their flat parts are their own layouts
  emit_.comm(CommKind::kTpAllReduce, grad_, count * static_cast<int64_t>(dtype_bytes(grad_)));
  unflatten(norms, flat, grad_);
}

void StageBuilder::flatten_gradients(const std::vector<StageParameter>& parameters, const TensorLayout& into) {
  std::vector<TensorLayout> flat_parts;
  for (const StageParameter& parameter : parameters) {
    flat_parts.push_back(contiguous(grad_, {element_count(parameter.shape)}));
    if (parameter.layer > 0) continue;
    emit_.set_repeat(repeat_for(parameter));
    emit_.call("aten::reshape", {tensor_arg(contiguous(grad_, parameter.shape)), int_list_arg({-1})}, grad_);
  }
  emit_.set_repeat(1);
  // Into the trainer's persistent buffer (calibrate/tp_comm.hpp): cat.out, the buffer last.
  emit_.call("aten::cat.out", {tensor_list_arg(flat_parts), int_arg(0), tensor_arg(into)}, grad_);
}

void StageBuilder::unflatten(const std::vector<StageParameter>& parameters, const TensorLayout& flat, DType dtype,
                             const std::vector<int64_t>* offsets) {
  int64_t offset = 0;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const StageParameter& parameter = parameters[i];
    const int64_t count = element_count(parameter.shape);
    if (offsets != nullptr) offset = offsets->at(i);
    emit_.set_repeat(1);
    emit_.call("aten::narrow", {tensor_arg(flat), int_arg(0), int_arg(offset), int_arg(count)}, dtype);  // a distinct offset each
    offset += count;
    if (parameter.layer > 0) continue;
    emit_.set_repeat(repeat_for(parameter));
    const TensorLayout target = contiguous(dtype, parameter.shape);
    emit_.call("aten::view_as", {tensor_arg(contiguous(dtype, {count})), tensor_arg(target)}, dtype);
    emit_.call("aten::copy_", {tensor_arg(target), tensor_arg(target), bool_arg(false)}, dtype);
  }
  emit_.set_repeat(1);
}

void StageBuilder::dp_buffer(const std::vector<StageParameter>& parameters, int64_t local_params) {
  emit_.set_phase(Phase::kDpBuffer);
  const TensorLayout flat = contiguous(grad_, {local_params});
  flatten_gradients(parameters, flat);
  emit_.call("aten::div_.Tensor", {tensor_arg(flat), tensor_arg(scalar_tensor(DType::kFloat64))}, grad_);
  unflatten(parameters, flat, grad_);
}

// trainer.cpp's reduce_scatter_gradients: the gradients into the prefix (narrow) of the buffer padded to
// dp shards, the whole buffer divided by dp, then reduce-scattered into this rank's shard.
void StageBuilder::dp_reduce_scatter(const std::vector<StageParameter>& parameters, int64_t local_params, int dp) {
  emit_.set_phase(Phase::kDpBuffer);
  emit_.set_repeat(1);
  const int64_t shard = shard_count(local_params, dp);
  const TensorLayout padded = contiguous(grad_, {shard * dp});
  emit_.call("aten::narrow", {tensor_arg(padded), int_arg(0), int_arg(0), int_arg(local_params)}, grad_);
  flatten_gradients(parameters, contiguous(grad_, {local_params}));
  emit_.call("aten::div_.Tensor", {tensor_arg(padded), tensor_arg(scalar_tensor(DType::kFloat64))}, grad_);
  emit_.comm(CommKind::kDpReduceScatter, grad_, shard * static_cast<int64_t>(dtype_bytes(grad_)));
}

// trainer.cpp's all_gather_parameters, after the step on the shard: every rank's shard gathered into the
// padded flat parameters, whose prefix is copied into the parameters' values.
void StageBuilder::dp_all_gather(const std::vector<StageParameter>& parameters, int64_t shard, int dp) {
  emit_.set_phase(Phase::kOptimizer);
  emit_.set_repeat(1);
  emit_.comm(CommKind::kDpAllGather, param_, shard * static_cast<int64_t>(dtype_bytes(param_)));
  unflatten(parameters, contiguous(param_, {shard * dp}), param_);
}

// trainer.cpp's all_reduce_shard_norm_gradients (SP with dopt+ovl): the norm weights' elements among
// rank 0's slices (per norm in registration order, per bucket), narrowed from the shard's gradient,
// concatenated, all-reduced over TP at the parameters' dtype and copied back range by range.
void StageBuilder::shard_norm_gradients(const std::vector<StageParameter>& parameters) {
  if (!sp_) return;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // (offset in the shard, elements)
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].shape.size() != 1) continue;
    const int64_t begin = parameter_offsets_.at(i), end = begin + element_count(parameters[i].shape);
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      const int64_t slice = buckets_[k].count / dp_, mine = buckets_[k].offset;
      const int64_t lo = std::max(begin, mine), hi = std::min(end, mine + slice);
      if (lo < hi) ranges.emplace_back(shard_offsets_[k] + (lo - mine), hi - lo);
    }
  }
  if (ranges.empty()) return;
  emit_.set_phase(Phase::kSpGradients);
  emit_.set_repeat(1);
  const TensorLayout shard_gradient = contiguous(param_, {bucketed_shard_count()});
  std::vector<TensorLayout> parts;
  int64_t total = 0;
  for (const auto& [offset, count] : ranges) {
    emit_.call("aten::narrow", {tensor_arg(shard_gradient), int_arg(0), int_arg(offset), int_arg(count)}, param_);
    parts.push_back(contiguous(param_, {count}));
    total += count;
  }
  emit_.call("aten::cat", {tensor_list_arg(parts), int_arg(0)}, param_);
  emit_.comm(CommKind::kTpAllReduce, param_, total * static_cast<int64_t>(dtype_bytes(param_)));
  const TensorLayout flat = contiguous(param_, {total});
  int64_t at = 0;
  for (const TensorLayout& part : parts) {
    emit_.call("aten::narrow", {tensor_arg(flat), int_arg(0), int_arg(at), int_arg(part.sizes.at(0))}, param_);
    emit_.call("aten::copy_", {tensor_arg(part), tensor_arg(part), bool_arg(false)}, param_);
    at += part.sizes.at(0);
  }
}

// trainer.cpp's all_gather_bucketed_parameters: per bucket, the padded buffer's range and rank 0's slice
// of the shard narrowed (the buffer's first: GCC evaluates the all_gather call's arguments last first)
// and one rank's slice all-gathered; then each parameter's values copied from its offset in the buffer.
// With opg the buckets go last first (the order the next forward needs them) and nothing is copied: the
// parameters are views of the buffer.
void StageBuilder::bucketed_all_gather(const std::vector<StageParameter>& parameters, bool overlapped) {
  emit_.set_phase(Phase::kOptimizer);
  emit_.set_repeat(1);
  const TensorLayout buffer = contiguous(param_, {buffer_elements_});
  const TensorLayout shard = contiguous(param_, {bucketed_shard_count()});
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    const std::size_t k = overlapped ? buckets_.size() - 1 - i : i;
    const int64_t slice = buckets_[k].count / dp_;
    emit_.call("aten::narrow", {tensor_arg(buffer), int_arg(0), int_arg(buckets_[k].offset), int_arg(buckets_[k].count)}, param_);
    emit_.call("aten::narrow", {tensor_arg(shard), int_arg(0), int_arg(shard_offsets_[k]), int_arg(slice)}, param_);
    emit_.comm(CommKind::kDpAllGather, param_, slice * static_cast<int64_t>(dtype_bytes(param_)));
  }
  if (!overlapped) unflatten(parameters, buffer, param_, &parameter_offsets_);
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

// The pipeline sends (activation forward, gradient backward) and the DP gradient all-reduce (not with
// the distributed optimizer, whose DP comms dp_reduce_scatter and dp_all_gather emit in their phases, nor
// with overlap, whose buckets' all-reduces parameter_gradient emits in the backward).
void StageBuilder::stage_comms(int stage, int pp, int64_t local_params, bool dp_all_reduce) {
  if (stage < pp - 1) emit_.comm_once(Phase::kForward, CommKind::kPpSendForward, activation_, residual_bytes(activation_));
  if (stage > 0) emit_.comm_once(Phase::kBackward, CommKind::kPpSendBackward, activation_, residual_bytes(activation_));
  if (!dp_all_reduce) return;
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
