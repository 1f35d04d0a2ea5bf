// bucket_plan.cpp: gradient buckets from the parameters' element counts (bucket_plan.hpp).
#include "common/bucket_plan.hpp"

#include "common/errors.hpp"

namespace itertime {

BucketPlan make_bucket_plan(const std::vector<int64_t>& parameter_elements, int64_t element_bytes, int64_t bucket_bytes,
                            int64_t pad_multiple) {
  ITERTIME_CHECK(element_bytes >= 1, "gradient buckets of elements of fewer than 1 byte");
  ITERTIME_CHECK(bucket_bytes >= 1, "gradient buckets of fewer than 1 byte");
  ITERTIME_CHECK(pad_multiple >= 1, "gradient buckets padded to a multiple of fewer than 1 element");
  BucketPlan plan;
  // Which bucket each parameter falls in: by the parameters' elements alone, whatever the padding.
  plan.bucket_of.assign(parameter_elements.size(), 0);
  int64_t filled = 0;  // elements of the bucket being filled
  for (std::size_t i = parameter_elements.size(); i-- > 0;) {
    if (plan.buckets.empty() || filled * element_bytes >= bucket_bytes) {
      plan.buckets.push_back(BucketRange{i, i, 0, 0, 0});
      filled = 0;
    }
    plan.buckets.back().first = i;
    filled += parameter_elements[i];
    plan.bucket_of[i] = plan.buckets.size() - 1;
  }
  // The layout: the last bucket (the first parameters) first, each padded to a multiple of pad_multiple.
  plan.parameter_offsets.assign(parameter_elements.size(), 0);
  int64_t offset = 0;
  for (std::size_t b = plan.buckets.size(); b-- > 0;) {
    BucketRange& bucket = plan.buckets[b];
    bucket.offset = offset;
    for (std::size_t i = bucket.first; i <= bucket.last; ++i) {
      plan.parameter_offsets[i] = offset;
      offset += parameter_elements[i];
    }
    offset += (pad_multiple - (offset - bucket.offset) % pad_multiple) % pad_multiple;
    bucket.elements = offset - bucket.offset;
  }
  plan.buffer_elements = offset;
  // The shard: one 1/pad_multiple slice per bucket, bucket 0's first.
  int64_t in_shard = 0;
  for (BucketRange& bucket : plan.buckets) {
    bucket.shard_offset = in_shard;
    in_shard += bucket.elements / pad_multiple;
  }
  return plan;
}

}  // namespace itertime
