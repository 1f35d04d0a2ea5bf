// test_op_signature.cpp: the canonical text of an operator call (common/op_signature.hpp) by hand, byte
// for byte as stored HDF5 files hold it, with its input dtypes and the op_cost figures.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/op_signature.hpp"

namespace itertime {
namespace {

TensorLayout tensor(DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return TensorLayout{dtype, std::move(sizes), std::move(strides)};
}

TEST(OpSignature, TensorTextShowsStridesOnlyWhenNotContiguous) {
  EXPECT_EQ(tensor(DType::kBFloat16, {8, 64, 128}, {8192, 128, 1}).text(), "bf16[8,64,128]");
  EXPECT_EQ(tensor(DType::kFloat32, {128, 64}, {1, 128}).text(), "fp32[128,64]{1,128}");
  // Dimensions of size 1 do not count against contiguity, whatever their stride.
  EXPECT_EQ(tensor(DType::kFloat32, {1, 4, 1}, {99, 1, 7}).text(), "fp32[1,4,1]");
  EXPECT_EQ(tensor(DType::kInt64, {4}, {0}).text(), "int64[4]{0}");
  EXPECT_EQ(tensor(DType::kFloat64, {}, {}).text(), "fp64[]");
  EXPECT_TRUE(tensor(DType::kFloat32, {2, 3}, {3, 1}).is_contiguous());
  EXPECT_FALSE(tensor(DType::kFloat32, {2, 3}, {1, 2}).is_contiguous());
  EXPECT_EQ(tensor(DType::kFloat32, {2, 3, 4}, {12, 4, 1}).numel(), 24);
}

TEST(OpSignature, CallTextJoinsArgumentsAndAppendsTheOutputDtype) {
  const TensorLayout a = tensor(DType::kFloat32, {64, 128}, {128, 1});
  const TensorLayout b = tensor(DType::kFloat32, {128, 32}, {1, 128});
  const std::vector<OpArgument> args{OpArgument::of(a), OpArgument::of(b)};
  const OpCall mm{"aten::mm", "", args.data(), args.size(), "fp32"};
  EXPECT_EQ(mm.signature(), "aten::mm(fp32[64,128], fp32[128,32]{1,128})->fp32");

  const std::vector<TensorLayout> parts{tensor(DType::kBFloat16, {2, 3}, {3, 1}), tensor(DType::kBFloat16, {2, 5}, {1, 2})};
  const std::vector<OpArgument> cat_args{OpArgument::of(parts), OpArgument::of("-1")};
  const OpCall cat{"aten::cat", "", cat_args.data(), cat_args.size(), "bf16"};
  EXPECT_EQ(cat.signature(), "aten::cat([bf16[2,3],bf16[2,5]{1,2}], -1)->bf16");

  // An overload, value arguments as given, and no output.
  const std::vector<OpArgument> fill_args{OpArgument::of(a), OpArgument::of("[1, 16]"), OpArgument::of("None"),
                                          OpArgument::of("False")};
  const OpCall fill{"aten::fill_", "Scalar", fill_args.data(), fill_args.size(), ""};
  EXPECT_EQ(fill.signature(), "aten::fill_.Scalar(fp32[64,128], [1, 16], None, False)");
  EXPECT_EQ(argument_text(cat_args[0]), "[bf16[2,3],bf16[2,5]{1,2}]");

  // append_signature appends to what the buffer holds.
  std::string buffer = "forward\n";
  mm.append_signature(buffer);
  EXPECT_EQ(buffer, "forward\naten::mm(fp32[64,128], fp32[128,32]{1,128})->fp32");

  const OpCall empty{"aten::zeros", "", nullptr, 0, "fp32"};
  EXPECT_EQ(empty.signature(), "aten::zeros()->fp32");
}

TEST(OpSignature, InputDtypesAndCostsCoverTensorsAndListElements) {
  const TensorLayout a = tensor(DType::kBFloat16, {8, 64}, {64, 1});
  const TensorLayout b = tensor(DType::kBFloat16, {64, 32}, {32, 1});
  const std::vector<TensorLayout> list{tensor(DType::kFloat32, {10}, {1}), tensor(DType::kInt64, {6}, {1})};
  const std::vector<OpArgument> args{OpArgument::of(a), OpArgument::of("1"), OpArgument::of(b), OpArgument::of(list)};
  const OpCall call{"aten::mm", "", args.data(), args.size(), "bf16"};
  EXPECT_EQ(call.input_dtypes(), (std::vector<DType>{DType::kBFloat16, DType::kBFloat16, DType::kFloat32, DType::kInt64}));
  // FLOPs from the single tensors only: 2 * 8 * 32 * 64.
  EXPECT_DOUBLE_EQ(call.flops(), 32768.0);
  // Bytes: a (1024) + b (4096) + list (40 + 48) + the largest single tensor again (4096).
  EXPECT_DOUBLE_EQ(call.bytes(), 1024.0 + 4096.0 + 40.0 + 48.0 + 4096.0);
  // Other operators: the element count of the largest tensor argument.
  const OpCall add{"aten::add", "Tensor", args.data(), 1, "bf16"};
  EXPECT_DOUBLE_EQ(add.flops(), 512.0);
}

}  // namespace
}  // namespace itertime
