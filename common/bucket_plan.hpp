// bucket_plan.hpp: the partition of a flat gradient buffer into buckets (Megatron-LM's
// param_and_grad_buffer, PyTorch DDP's buckets), from the parameters' element counts alone: the one
// definition the trainer's buckets (calibrate/gradient_buckets.hpp) and the stage builder
// (predict/op_builder_update.cpp) both use, so that what is traced and what is built agree.
// Invariants:
//  - Buckets are filled last parameter first (the backward completes the later layers' gradients first):
//    a bucket closes once its parameters hold at least bucket_bytes (elements * element_bytes); the last
//    one (the first parameters) may hold fewer. Bucket 0 holds the last parameters. Which bucket a
//    parameter falls in does not depend on the padding.
//  - The buffer is the buckets' ranges back to back, the last bucket first, so the parameters stay in
//    their order; each range is its parameters, then zeros up to a multiple of pad_multiple (the
//    distributed optimizer's dp; 1: no padding, every parameter at its flat offset).
//  - shard_offset: where the bucket's 1/pad_multiple slice lies in a shard made of one slice per bucket,
//    bucket 0's first (the distributed optimizer's shard over the buckets).
//  - Pure: no torch, MPI or state. No parameters: no buckets and an empty buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace itertime {

struct BucketRange {
  std::size_t first = 0, last = 0;  // parameter indices, inclusive
  int64_t offset = 0;               // in the buffer, in elements
  int64_t elements = 0;             // the range's, padding included (a multiple of pad_multiple)
  int64_t shard_offset = 0;         // its slice's offset in the shard (see above)
};

struct BucketPlan {
  std::vector<BucketRange> buckets;        // bucket 0 holds the last parameters
  std::vector<std::size_t> bucket_of;      // per parameter: its bucket
  std::vector<int64_t> parameter_offsets;  // per parameter: where its elements start in the buffer
  int64_t buffer_elements = 0;             // padding included
};

// parameter_elements: each parameter's element count, in registration order; element_bytes,
// bucket_bytes and pad_multiple >= 1 (InternalError otherwise).
BucketPlan make_bucket_plan(const std::vector<int64_t>& parameter_elements, int64_t element_bytes, int64_t bucket_bytes,
                            int64_t pad_multiple = 1);

}  // namespace itertime
