// test_op_cost.cpp: the FLOPs and bytes of one operator call (common/op_cost.hpp), by hand.
#include <gtest/gtest.h>

#include <vector>

#include "common/op_cost.hpp"

namespace itertime {
namespace {

using Sizes = std::vector<int64_t>;

TEST(OpCost, MatrixProductsAreTwoMNK) {
  const Sizes a{8, 64}, b{64, 32};
  // mm [8,64] x [64,32]: 2 * 8 * 32 * 64 = 32768.
  EXPECT_DOUBLE_EQ(op_flops("aten::mm", {{DType::kFloat32, &a}, {DType::kFloat32, &b}}), 32768.0);
  // matmul [2,8,64] x [64,32]: batch 2 folds into M: 65536.
  const Sizes a3{2, 8, 64};
  EXPECT_DOUBLE_EQ(op_flops("aten::matmul", {{DType::kBFloat16, &a3}, {DType::kBFloat16, &b}}), 65536.0);
  // bmm [4,8,64] x [4,64,32]: 4 * 2 * 8 * 32 * 64 = 131072; a broadcast second batch multiplies:
  // matmul [1,8,64] x [4,64,32] = 4 * 32768.
  const Sizes a4{4, 8, 64}, b4{4, 64, 32}, a1{1, 8, 64};
  EXPECT_DOUBLE_EQ(op_flops("aten::bmm", {{DType::kFloat32, &a4}, {DType::kFloat32, &b4}}), 131072.0);
  EXPECT_DOUBLE_EQ(op_flops("aten::matmul", {{DType::kFloat32, &a1}, {DType::kFloat32, &b4}}), 131072.0);
  // addmm(bias, a, b): the last two.
  const Sizes bias{32};
  EXPECT_DOUBLE_EQ(op_flops("aten::addmm", {{DType::kFloat32, &bias}, {DType::kFloat32, &a}, {DType::kFloat32, &b}}), 32768.0);
  // linear(input [8,64], weight [32,64]): 2 * 512 * 32.
  const Sizes w{32, 64};
  EXPECT_DOUBLE_EQ(op_flops("aten::linear", {{DType::kFloat32, &a}, {DType::kFloat32, &w}}), 32768.0);
}

TEST(OpCost, OtherOperatorsCountTheLargestTensor) {
  const Sizes big{4, 128}, small{128};
  EXPECT_DOUBLE_EQ(op_flops("aten::add", {{DType::kFloat32, &small}, {DType::kFloat32, &big}}), 512.0);
  EXPECT_DOUBLE_EQ(op_flops("aten::mm", {{DType::kFloat32, &big}}), 512.0);  // one operand: not a product
  EXPECT_DOUBLE_EQ(op_flops("aten::zeros", {}), 0.0);
}

TEST(OpCost, BytesAreInputsAtTheirDtypePlusTheLargestForTheOutput) {
  const Sizes big{4, 128}, small{128};
  // bf16 [4,128] = 1024 B, fp32 [128] = 512 B; output taken as 1024: 2560.
  EXPECT_DOUBLE_EQ(op_bytes({{DType::kBFloat16, &big}, {DType::kFloat32, &small}}, {}), 2560.0);
  // A tensor list (cat) adds its elements but not to the output estimate: 2 x 512 + 0.
  EXPECT_DOUBLE_EQ(op_bytes({}, {{DType::kFloat32, &small}, {DType::kFloat32, &small}}), 1024.0);
}

}  // namespace
}  // namespace itertime
