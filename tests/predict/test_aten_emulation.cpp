// test_aten_emulation.cpp: the ATen / c10 rules the stage builder re-implements (predict/builder/aten_emulation.hpp),
// each on cases checked by hand against LibTorch's behaviour (the whole-stage check against real traces is
// tests/torch/test_op_builder.cpp).
#include <gtest/gtest.h>

#include <optional>

#include "predict/builder/aten_emulation.hpp"

namespace itertime::predict {
namespace {

constexpr DType kF32 = DType::kFloat32;

TEST(AtenEmulation, ContiguousStridesAreRowMajorWithEmptyDimensionsCountedAsOne) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Dims{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({2, 0, 4}), (Dims{4, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), Dims{});
  EXPECT_TRUE(contiguous(kF32, {5, 7}).is_contiguous());
}

TEST(AtenEmulation, ViewStridesFollowComputeStride) {
  // A contiguous tensor views as anything of the same size.
  EXPECT_EQ(view_strides({2, 3, 4}, {12, 4, 1}, {6, 4}), (Dims{4, 1}));
  // [b, s, heads, hd] transposed to [b, heads, s, hd]: folding b and heads is no view...
  const Dims transposed_strides{2 * 8 * 4, 4, 8 * 4, 1};  // b 2, heads 8, s 2, hd 4
  EXPECT_EQ(view_strides({2, 8, 2, 4}, transposed_strides, {16, 2, 4}), std::nullopt);
  // ...but splitting the last dimension is, and so is merging heads back after transposing again.
  EXPECT_EQ(view_strides({2, 8, 2, 4}, transposed_strides, {2, 8, 2, 2, 2}), (Dims{64, 4, 32, 2, 1}));
  EXPECT_EQ(view_strides({2, 2, 8, 4}, {64, 32, 4, 1}, {2, 2, 32}), (Dims{64, 32, 1}));
  // A transposed matrix: [in, out]{1, in} cannot be flattened; an inserted size-1 dimension takes the
  // stride of the chunk laid out so far (ATen: torch.empty(5, 3).t().view(3, 1, 5).stride() == (1, 15, 3)).
  EXPECT_EQ(view_strides({3, 5}, {1, 3}, {15}), std::nullopt);
  EXPECT_EQ(view_strides({3, 5}, {1, 3}, {3, 1, 5}), (Dims{1, 15, 3}));
  // An empty tensor views as a contiguous one.
  EXPECT_EQ(view_strides({0, 5}, {5, 1}, {5, 0}), (Dims{1, 1}));
}

TEST(AtenEmulation, ReshapeIsAViewWhenPossibleElseACopy) {
  const TensorLayout matrix_t = strided(kF32, {3, 5}, {1, 3});
  EXPECT_EQ(reshaped(matrix_t, {15}).strides, (Dims{1}));  // copied: contiguous
  EXPECT_EQ(reshaped(matrix_t, {3, 1, 5}).strides, (Dims{1, 15, 3}));
  const TensorLayout t = transposed(contiguous(kF32, {2, 3, 4}), 0, 2);
  EXPECT_EQ(t.sizes, (Dims{4, 3, 2}));
  EXPECT_EQ(t.strides, (Dims{1, 4, 12}));
}

TEST(AtenEmulation, ElementwiseResultsKeepTheInputsMemoryOrder) {
  // Contiguous in, contiguous out, in the requested dtype.
  const TensorLayout dense = elementwise_result(contiguous(kF32, {2, 3}), DType::kBFloat16);
  EXPECT_EQ(dense.dtype, DType::kBFloat16);
  EXPECT_EQ(dense.strides, (Dims{3, 1}));
  // [b, heads, s, hd] transposed from [b, s, heads, hd]: the result is laid out like the input.
  const TensorLayout like = strided(kF32, {2, 8, 16, 4}, {512, 4, 32, 1});
  EXPECT_EQ(elementwise_result(like, kF32).strides, (Dims{512, 4, 32, 1}));
  // A narrowed slice (gaps in memory) is packed densely in the same order.
  const TensorLayout half = strided(kF32, {2, 8, 16, 2}, {512, 4, 32, 1});
  EXPECT_EQ(elementwise_result(half, kF32).strides, (Dims{256, 2, 16, 1}));
  // A transposed matrix stays transposed.
  EXPECT_EQ(elementwise_result(strided(kF32, {3, 5}, {1, 3}), kF32).strides, (Dims{1, 3}));
}

TEST(AtenEmulation, BinaryResultDtypes) {
  EXPECT_EQ(promote_floating(DType::kBFloat16, DType::kBFloat16), DType::kBFloat16);
  EXPECT_EQ(promote_floating(DType::kBFloat16, kF32), kF32);
  EXPECT_EQ(promote_floating(kF32, DType::kFloat16), kF32);
  const TensorLayout activations = contiguous(DType::kBFloat16, {2, 3});
  const TensorLayout number = contiguous(DType::kFloat64, {});
  EXPECT_EQ(binary_result_dtype(activations, number), DType::kBFloat16);  // a wrapped Python number
  EXPECT_EQ(binary_result_dtype(contiguous(kF32, {}), number), kF32);     // 0-dim with 0-dim: promotes
  EXPECT_EQ(binary_result_dtype(activations, contiguous(kF32, {3})), kF32);
}

TEST(AtenEmulation, C10PrintsDoublesAndScalarTypes) {
  EXPECT_EQ(c10_double_text(2.0), "2.");
  EXPECT_EQ(c10_double_text(0.0), "0.");
  EXPECT_EQ(c10_double_text(-3.0), "-3.");
  EXPECT_EQ(c10_double_text(0.9), "0.90000000000000002");
  EXPECT_EQ(c10_double_text(1.0 - 0.999), "0.0010000000000000009");
  EXPECT_EQ(c10_double_text(1e-8), "1e-08");
  EXPECT_EQ(c10_double_text(0.5), "0.5");
  EXPECT_EQ(c10_scalar_type_number(kF32), 6);
  EXPECT_EQ(c10_scalar_type_number(DType::kBFloat16), 15);
  EXPECT_EQ(c10_scalar_type_number(DType::kInt64), 4);
  EXPECT_EQ(c10_scalar_type_number(DType::kBool), 11);
  EXPECT_EQ(c10_scalar_type_number(DType::kFloat16), 5);
}

}  // namespace
}  // namespace itertime::predict
