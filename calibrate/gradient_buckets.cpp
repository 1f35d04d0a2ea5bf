// gradient_buckets.cpp: gradient views of one flat buffer, cut into buckets reduced as they complete (gradient_buckets.hpp).
#include "calibrate/gradient_buckets.hpp"

#include <algorithm>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "calibrate/tp_comm.hpp"
#include "common/bucket_plan.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {
namespace {

// Runs a callback after a gradient accumulator has added one backward's gradient to its parameter's.
struct AfterAccumulation : torch::autograd::FunctionPostHook {
  std::function<void()> callback;
  explicit AfterAccumulation(std::function<void()> f) : callback(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    callback();
    return outputs;
  }
};

}  // namespace

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> parameters, int64_t bucket_bytes, BucketCallback on_bucket,
                                 std::function<void()> on_final, int64_t pad_multiple)
    : parameters_(std::move(parameters)), on_bucket_(std::move(on_bucket)), on_final_(std::move(on_final)) {
  ITERTIME_CHECK(bucket_bytes >= 1, "gradient buckets of fewer than 1 byte");
  ITERTIME_CHECK(pad_multiple >= 1, "gradient buckets padded to a multiple of fewer than 1 element");
  ITERTIME_CHECK(!parameters_.empty(), "gradient buckets of no parameters");
  // The partition and layout (common/bucket_plan.hpp, the stage builder's too).
  std::vector<int64_t> elements;
  for (const torch::Tensor& p : parameters_) elements.push_back(p.numel());
  const BucketPlan plan =
      make_bucket_plan(elements, static_cast<int64_t>(parameters_.front().element_size()), bucket_bytes, pad_multiple);
  for (const BucketRange& range : plan.buckets)
    buckets_.push_back(Bucket{range.first, range.last, range.offset, range.elements, 0});
  bucket_of_ = plan.bucket_of;
  offsets_ = plan.parameter_offsets;
  const int64_t offset = plan.buffer_elements;
  buffer_ = pad_multiple == 1 ? make_flat_buffer(parameters_)
                              : torch::zeros({offset}, parameters_.front().options().requires_grad(false));
  ITERTIME_CHECK(buffer_.numel() == offset, "gradient buffer of another size than its buckets");
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    parameters_[i].mutable_grad() = buffer_.narrow(0, offsets_[i], parameters_[i].numel()).view_as(parameters_[i]);
  }
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(parameters_[i]);
    ITERTIME_CHECK(accumulator != nullptr, "a trained parameter has no gradient accumulator");
    accumulator->add_post_hook(std::make_unique<AfterAccumulation>([this, i] { gradient_final(i); }));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradientBuckets::~GradientBuckets() = default;

void GradientBuckets::begin_step() {
  torch::NoGradGuard no_grad;
  buffer_.zero_();
  for (Bucket& bucket : buckets_) bucket.ready = 0;
  completed_ = 0;
  armed_ = false;
}

void GradientBuckets::gradient_final(std::size_t parameter) {
  if (!armed_) return;
  const std::size_t index = bucket_of_[parameter];
  Bucket& bucket = buckets_[index];
  ITERTIME_CHECK(bucket.ready <= bucket.last - bucket.first, "a gradient bucket completed twice in one backward");
  if (++bucket.ready == bucket.last - bucket.first + 1) {
    torch::NoGradGuard no_grad;
    torch::Tensor part = buffer_.narrow(0, bucket.offset, bucket.count);
    on_bucket_(index, part);
    ++completed_;
  }
  if (on_final_) on_final_();
}

BucketedShard shard_over_buckets(const GradientBuckets& buckets, const std::vector<torch::Tensor>& norm_weights, int dp,
                                 int dp_index) {
  ITERTIME_CHECK(dp >= 1 && dp_index >= 0 && dp_index < dp, "a bucketed shard needs 0 <= dp_index < dp");
  const std::vector<torch::Tensor>& parameters = buckets.parameters();
  const torch::Tensor& layout = buckets.buffer();
  BucketedShard out;
  ShardedBuffers& b = out.buffers;
  b.flat_count = layout.numel();
  b.shard_count = layout.numel() / dp;
  b.parameter_buffer = torch::zeros_like(layout);
  std::vector<torch::Tensor> slices;
  int64_t offset = 0;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    ITERTIME_CHECK(buckets.bucket_elements(k) % dp == 0, "a bucket is not padded to a multiple of dp");
    const int64_t slice = buckets.bucket_elements(k) / dp;
    out.offsets.push_back(offset);
    slices.push_back(b.parameter_buffer.narrow(0, buckets.bucket_offset(k) + dp_index * slice, slice));
    offset += slice;
  }
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      b.parameter_buffer.narrow(0, buckets.parameter_offset(i), parameters[i].numel()).copy_(parameters[i].reshape({-1}));
    }
  }
  b.shard = torch::cat(slices).requires_grad_(true);
  b.shard_gradient = torch::zeros_like(b.shard).requires_grad_(false);
  for (const auto& norm : norm_weights) {
    std::size_t i = 0;
    while (i < parameters.size() && !parameters[i].is_same(norm)) ++i;
    ITERTIME_CHECK(i < parameters.size(), "a norm weight is not a trained parameter");
    const int64_t begin = buckets.parameter_offset(i), end = begin + norm.numel();
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      const int64_t slice = buckets.bucket_elements(k) / dp;
      const int64_t mine = buckets.bucket_offset(k) + dp_index * slice;
      const int64_t lo = std::max(begin, mine), hi = std::min(end, mine + slice);
      if (lo < hi) out.norm_ranges.emplace_back(out.offsets[k] + (lo - mine), hi - lo);
    }
  }
  return out;
}

}  // namespace itertime::calibrate
