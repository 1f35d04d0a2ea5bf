// Unit tests of predict/throughput: tokens per second per rank and MFU derived by hand for a small
// model, GPU descriptions (one device per rank) against CPU node descriptions (one device for the
// node), a precision whose peak the description lacks (no MFU), and which description choose_hardware
// picks, or describes.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/errors.hpp"
#include "tests/predict/fixtures.hpp"
#include "predict/resolver/target_device.hpp"
#include "predict/throughput.hpp"

namespace itertime::predict {
namespace {

using fixtures::small_model;
using fixtures::user_error_of;

HardwareSpec device(DeviceKind kind) {
  HardwareSpec h;
  h.name = "test-device";
  h.kind = kind;
  h.peak_flops_per_s[ComputeDType::kFp32] = 0.5e12;
  h.peak_flops_per_s[ComputeDType::kBf16] = 1e12;
  return h;
}

// dp 2 (tp, pp, micro-batch, cp, vp 1), global batch 4, sequence 32.
ParallelConfig dp2_gbs4_seq32() { return ParallelConfig{2, 1, 1, 1, 4, 32, 1, 1}; }

TEST(Throughput, TokensAndModelFlopsByHand) {
  const LlamaSpec model = small_model();
  EXPECT_EQ(model.matmul_params(), 80'128);
  EXPECT_DOUBLE_EQ(model.training_flops_per_token(32), 529'920.0);
  // 4 samples of 32 tokens = 128 tokens in 1,000 us over 2 ranks => 64,000 tokens/s per rank.
  const Throughput t = throughput(model, dp2_gbs4_seq32(), PrecisionName::kAmpBf16, 1000.0, nullptr);
  EXPECT_DOUBLE_EQ(t.tokens_per_s_per_rank, 64'000.0);
  EXPECT_DOUBLE_EQ(t.model_flops_per_iteration, 128.0 * 529'920.0);  // 67,829,760
  EXPECT_FALSE(t.mfu.has_value()) << "no description, no MFU";
}

TEST(Throughput, MfuCountsOneGpuPerRankAndOneCpuNodeForAllRanks) {
  const LlamaSpec model = small_model();
  const HardwareSpec gpu = device(DeviceKind::kGpu);
  // 67,829,760 FLOP in 1 ms = 6.782976e10 FLOP/s over 2 GPUs of 1e12 bf16 => 3.391488%.
  const Throughput on_gpus = throughput(model, dp2_gbs4_seq32(), PrecisionName::kAmpBf16, 1000.0, &gpu);
  ASSERT_TRUE(on_gpus.mfu.has_value());
  EXPECT_DOUBLE_EQ(*on_gpus.peak_flops_per_s, 2e12);
  EXPECT_NEAR(*on_gpus.mfu, 0.03391488, 1e-12);
  // fp32 math against the fp32 peak, 0.5e12 per GPU => 6.782976%.
  EXPECT_NEAR(*throughput(model, dp2_gbs4_seq32(), PrecisionName::kFp32, 1000.0, &gpu).mfu, 0.06782976, 1e-12);
  // A CPU node is one device whatever the rank count => twice the GPU figure.
  const HardwareSpec node = device(DeviceKind::kCpu);
  const Throughput on_node = throughput(model, dp2_gbs4_seq32(), PrecisionName::kBf16, 1000.0, &node);
  EXPECT_DOUBLE_EQ(*on_node.peak_flops_per_s, 1e12);
  EXPECT_NEAR(*on_node.mfu, 0.06782976, 1e-12);
}

TEST(Throughput, APrecisionWithoutItsPeakHasNoMfu) {
  const HardwareSpec gpu = device(DeviceKind::kGpu);  // no fp16 or tf32 figure
  EXPECT_FALSE(throughput(small_model(), dp2_gbs4_seq32(), PrecisionName::kAmpFp16, 1000.0, &gpu).mfu.has_value());
  EXPECT_FALSE(throughput(small_model(), dp2_gbs4_seq32(), PrecisionName::kTf32, 1000.0, &gpu).mfu.has_value());
  EXPECT_EQ(compute_dtype_of(PrecisionName::kAmpFp16), ComputeDType::kFp16);
  EXPECT_EQ(compute_dtype_of(PrecisionName::kBf16), ComputeDType::kBf16);
  EXPECT_EQ(compute_dtype_of(PrecisionName::kTf32), ComputeDType::kTf32);
}

TEST(Throughput, ChooseHardwareUsesTheCalibrationsDescriptionOrDescribesAnother) {
  const std::string dir = std::string(ITERTIME_SOURCE_DIR) + "/data/hardware";
  FittedModel model;
  model.source_file = "cal.h5";
  const HardwareChoice none = choose_hardware(&model, "", "", dir);
  EXPECT_FALSE(none.hardware.has_value()) << "none recorded, none asked: no MFU";
  EXPECT_FALSE(none.target.has_value());
  // A described GPU takes its published kernel figures when the calibration has no GPU efficiencies
  // (issue 32); a described CPU node needs the calibration's (or a named file's).
  const HardwareChoice figures = choose_hardware(&model, "h100-sxm", "", dir);
  ASSERT_TRUE(figures.target.has_value());
  EXPECT_NE(figures.target->operators.fitted_from.find("published kernel figures"), std::string::npos);
  const std::string no_efficiencies = user_error_of([&] { (void)choose_hardware(&model, "cpu-node-local", "", dir); });
  EXPECT_NE(no_efficiencies.find("--hardware cpu-node-local: cal.h5 has no operator efficiencies"), std::string::npos)
      << no_efficiencies;
  model.hardware = "h100-sxm";
  const HardwareChoice implicit = choose_hardware(&model, "", "", dir);
  ASSERT_TRUE(implicit.hardware.has_value());
  EXPECT_EQ(implicit.hardware->name, "h100-sxm");
  EXPECT_FALSE(implicit.target.has_value()) << "the calibration's own device: its own times";
  const HardwareChoice same = choose_hardware(&model, "h100-sxm", "", dir);
  EXPECT_EQ(same.hardware->name, "h100-sxm");
  EXPECT_FALSE(same.target.has_value());
  // Another description: described, with the efficiencies of a calibration fitted on a GPU carried to it.
  model.roofline.matrix[ComputeDType::kBf16] = ClassEfficiency{0.6, 40.0, 10, 0.1};
  model.roofline.memory[{OperatorClass::kElementwise, ComputeDType::kBf16}] = ClassEfficiency{0.5, 20.0, 10, 0.1};
  model.roofline.fitted_on = "cpu-node-local";  // a CPU's efficiencies are not carried to a GPU unless named
  const HardwareChoice from_cpu = choose_hardware(&model, "a100-sxm-80gb", "", dir);
  ASSERT_TRUE(from_cpu.target.has_value());
  EXPECT_NE(from_cpu.target->operators.matrix.at(ComputeDType::kBf16).efficiency, 0.6);
  EXPECT_NE(from_cpu.target->operators.fitted_from.find("published kernel figures"), std::string::npos);
  model.roofline.fitted_on = "h100-sxm";
  const HardwareChoice other = choose_hardware(&model, "a100-sxm-80gb", "", dir);
  ASSERT_TRUE(other.target.has_value());
  EXPECT_EQ(other.hardware->name, "a100-sxm-80gb");
  EXPECT_EQ(other.target->hardware.name, "a100-sxm-80gb");
  EXPECT_DOUBLE_EQ(other.target->operators.matrix.at(ComputeDType::kBf16).efficiency, 0.6);
  EXPECT_DOUBLE_EQ(other.target->operators.matrix.at(ComputeDType::kBf16).floor_us, kGpuKernelFloorUs) << "the target's floor";
  EXPECT_NE(user_error_of([&] { (void)choose_hardware(&model, "no-such-device", "", dir); }), "");
  model.hardware = "a-device-this-build-lacks";
  EXPECT_FALSE(choose_hardware(&model, "", "", dir).hardware.has_value());
  EXPECT_NE(user_error_of([] { (void)choose_hardware(nullptr, "", "", "."); }).find("nothing to predict on"), std::string::npos);
  EXPECT_NE(user_error_of([&] { (void)choose_hardware(&model, "", "eff.json", dir); }).find("name it with --hardware"),
            std::string::npos);
}

}  // namespace
}  // namespace itertime::predict
