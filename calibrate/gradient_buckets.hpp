// gradient_buckets.hpp: overlapped gradient reduction's buckets (Megatron-LM's overlap_grad_reduce with
// its main_grad buffer, PyTorch DDP's buckets), for the bucketed strategies of gradient_sync.hpp (which the
// trainer and the tracer both run).
// Invariants:
//  - One flat buffer of every parameter's elements in registration order (make_flat_buffer), and every
//    parameter's .grad a view of its part of it, set once: each backward's gradient accumulator adds
//    into the view in place (aten::add_), so no gradient is copied into the buffer.
//  - Buckets and layout are common/bucket_plan.hpp's (the stage builder's too): contiguous ranges of the
//    buffer, filled last parameter first (the backward completes the later layers' gradients first): a
//    bucket closes once its parameters hold at least bucket_bytes; the last one (the first parameters)
//    may be smaller. Bucket 0 holds the last parameters.
//  - With pad_multiple > 1 (the distributed optimizer's, Megatron-LM's: dp) each bucket's range is its
//    parameters, then zeros up to a multiple of pad_multiple; the buffer is the buckets' ranges back to
//    back (the last bucket first, so the parameters stay in registration order) and the padding stays
//    zero. With pad_multiple 1 (the default) the buffer is make_flat_buffer's, every parameter at its
//    flat offset.
//  - While armed (the step's last backward), a post-hook on each parameter's gradient accumulator counts
//    the parameter's gradient as final, then calls on_final(); when that completes a bucket,
//    on_bucket(index, the bucket's range of the buffer, padding included) runs first. Each bucket completes once per armed
//    backward; begin_step() zeroes the buffer and the counts.
//  - The accumulators are kept alive here (a parameter holds its own weakly) and the hooks point at this
//    object: it is neither copied nor moved, and outlives every backward of its parameters.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "calibrate/tp_comm.hpp"

namespace itertime::calibrate {

class GradientBuckets {
 public:
  using BucketCallback = std::function<void(std::size_t index, torch::Tensor& bucket)>;
  GradientBuckets(std::vector<torch::Tensor> parameters, int64_t bucket_bytes, BucketCallback on_bucket,
                  std::function<void()> on_final = {}, int64_t pad_multiple = 1);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  void begin_step();  // zero the buffer (aten::zero_), reset the counts, disarm
  void arm(bool armed) { armed_ = armed; }
  std::size_t size() const { return buckets_.size(); }
  int completed() const { return completed_; }  // buckets completed since begin_step()
  const torch::Tensor& buffer() const { return buffer_; }
  // A bucket's range of the buffer (padding included: a multiple of pad_multiple elements), and where a
  // parameter's gradient view starts in it.
  int64_t bucket_elements(std::size_t index) const { return buckets_.at(index).count; }
  int64_t bucket_offset(std::size_t index) const { return buckets_.at(index).offset; }
  int64_t parameter_offset(std::size_t parameter) const { return offsets_.at(parameter); }
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

 private:
  struct Bucket {
    std::size_t first = 0, last = 0;  // parameter indices, inclusive
    int64_t offset = 0, count = 0;    // in the buffer, padding included
    std::size_t ready = 0;            // gradients final since begin_step()
  };
  void gradient_final(std::size_t parameter);

  std::vector<torch::Tensor> parameters_;
  torch::Tensor buffer_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // per parameter
  std::vector<int64_t> offsets_;        // per parameter, in the buffer
  std::vector<std::shared_ptr<void>> accumulators_;
  BucketCallback on_bucket_;
  std::function<void()> on_final_;
  bool armed_ = false;
  int completed_ = 0;
};

// The distributed optimizer over overlapped buckets (Megatron-LM's layout), as DP rank dp_index of dp holds
// it (gradient_sync.cpp's bucketed distributed optimizer). The buckets must be padded to multiples of
// dp; rank dp_index owns the dp_index-th 1/dp slice of every bucket.
struct BucketedShard {
  // parameter_buffer: the buckets' layout holding the parameters' values (the all-gathers' output);
  // shard: a copy of this rank's slices, bucket 0's first (the one tensor AdamW updates); shard_gradient:
  // zeros, segment k the reduce-scatter output of bucket k; gradient_buffer stays undefined (the
  // buckets' buffer holds the gradients).
  ShardedBuffers buffers;
  std::vector<int64_t> offsets;                          // per bucket: where its slice lies in the shard
  std::vector<std::pair<int64_t, int64_t>> norm_ranges;  // (offset in the shard, elements) of norm_weights
};
// norm_weights: the parameters whose gradients are summed over TP afterwards (SP), else empty.
BucketedShard shard_over_buckets(const GradientBuckets& buckets, const std::vector<torch::Tensor>& norm_weights, int dp,
                                 int dp_index);

}  // namespace itertime::calibrate
