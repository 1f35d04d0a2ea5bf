// Tests of common/bucket_plan: the gradient buckets' partition and layout, on hand-derived cases.
#include "common/bucket_plan.hpp"

#include <gtest/gtest.h>

#include "common/errors.hpp"

namespace itertime {
namespace {

void expect_bucket(const BucketPlan& plan, std::size_t index, std::size_t first, std::size_t last, int64_t offset,
                   int64_t elements, int64_t shard_offset) {
  ASSERT_LT(index, plan.buckets.size());
  const BucketRange& b = plan.buckets[index];
  EXPECT_EQ(b.first, first) << "bucket " << index;
  EXPECT_EQ(b.last, last) << "bucket " << index;
  EXPECT_EQ(b.offset, offset) << "bucket " << index;
  EXPECT_EQ(b.elements, elements) << "bucket " << index;
  EXPECT_EQ(b.shard_offset, shard_offset) << "bucket " << index;
}

struct ExpectedBucket {
  std::size_t first, last;
  int64_t offset, elements, shard_offset;
};

// The whole plan: its buckets in order, each parameter's bucket and offset, the buffer's size.
void expect_plan(const BucketPlan& plan, const std::vector<ExpectedBucket>& buckets, const std::vector<std::size_t>& bucket_of,
                 const std::vector<int64_t>& parameter_offsets, int64_t buffer_elements) {
  ASSERT_EQ(plan.buckets.size(), buckets.size());
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const ExpectedBucket& b = buckets[i];
    expect_bucket(plan, i, b.first, b.last, b.offset, b.elements, b.shard_offset);
  }
  EXPECT_EQ(plan.bucket_of, bucket_of);
  EXPECT_EQ(plan.parameter_offsets, parameter_offsets);
  EXPECT_EQ(plan.buffer_elements, buffer_elements);
}

// Parameters of 3, 5 and 2 fp32 elements, buckets of 12 bytes: from the last, 2 elements (8 bytes) stay
// open, 2 + 5 = 7 (28 bytes) close bucket 0 = {1, 2}; parameter 0 alone is the last, smaller bucket.
// Layout, the last bucket first: parameter 0 at 0, parameter 1 at 3, parameter 2 at 8; 10 elements.
TEST(BucketPlan, LastParametersFirstAndTheLastBucketSmaller) {
  expect_plan(make_bucket_plan({3, 5, 2}, 4, 12), {{1, 2, 3, 7, 0}, {0, 0, 0, 3, 7}}, {1, 0, 0}, {0, 3, 8}, 10);
}

// The same buckets padded to multiples of 4 (the distributed optimizer at dp 4): bucket 1's 3 elements
// take 4 (one zero), bucket 0's 7 take 8; bucket 0 starts at 4, so parameter 1 at 4 and parameter 2 at
// 9; 12 elements. Slices: bucket 0's 8/4 = 2 first in the shard, then bucket 1's 1 at 2.
TEST(BucketPlan, PaddingToTheMultiple) {
  expect_plan(make_bucket_plan({3, 5, 2}, 4, 12, 4), {{1, 2, 4, 8, 0}, {0, 0, 0, 4, 2}}, {1, 0, 0}, {0, 4, 9}, 12);
}

// Four parameters of 4 two-byte elements: two of them hold 16 bytes, so at bucket_bytes 16 a bucket
// closes after exactly two; at 17 the first bucket takes a third (24 bytes) and the last is smaller.
TEST(BucketPlan, ABucketClosesAtBucketBytes) {
  const BucketPlan exact = make_bucket_plan({4, 4, 4, 4}, 2, 16);
  ASSERT_EQ(exact.buckets.size(), 2u);
  expect_bucket(exact, 0, 2, 3, 8, 8, 0);
  expect_bucket(exact, 1, 0, 1, 0, 8, 8);
  EXPECT_EQ(exact.buffer_elements, 16);

  const BucketPlan over = make_bucket_plan({4, 4, 4, 4}, 2, 17);
  ASSERT_EQ(over.buckets.size(), 2u);
  expect_bucket(over, 0, 1, 3, 4, 12, 0);
  expect_bucket(over, 1, 0, 0, 0, 4, 12);
  EXPECT_EQ(over.bucket_of, (std::vector<std::size_t>{1, 0, 0, 0}));
  EXPECT_EQ(over.parameter_offsets, (std::vector<int64_t>{0, 4, 8, 12}));
}

// A parameter larger than a bucket is a bucket of its own; with everything under one bucket there is one.
TEST(BucketPlan, OneParameterPerBucketAndOneBucketForAll) {
  const BucketPlan tiny = make_bucket_plan({100, 1, 7}, 4, 1);
  ASSERT_EQ(tiny.buckets.size(), 3u);
  expect_bucket(tiny, 0, 2, 2, 101, 7, 0);
  expect_bucket(tiny, 1, 1, 1, 100, 1, 7);
  expect_bucket(tiny, 2, 0, 0, 0, 100, 8);

  const BucketPlan one = make_bucket_plan({100, 1, 7}, 4, int64_t{1} << 30, 3);
  ASSERT_EQ(one.buckets.size(), 1u);
  expect_bucket(one, 0, 0, 2, 0, 108, 0);  // 108 elements: a multiple of 3 already, no padding
  EXPECT_EQ(one.parameter_offsets, (std::vector<int64_t>{0, 100, 101}));
}

TEST(BucketPlan, NoParametersNoBuckets) {
  const BucketPlan plan = make_bucket_plan({}, 4, 16, 2);
  EXPECT_TRUE(plan.buckets.empty());
  EXPECT_TRUE(plan.bucket_of.empty());
  EXPECT_EQ(plan.buffer_elements, 0);
}

TEST(BucketPlan, RefusesSizesBelowOne) {
  EXPECT_THROW(make_bucket_plan({1}, 0, 16), InternalError);
  EXPECT_THROW(make_bucket_plan({1}, 4, 0), InternalError);
  EXPECT_THROW(make_bucket_plan({1}, 4, 16, 0), InternalError);
}

}  // namespace
}  // namespace itertime
