// test_kernel_roofline.cpp: roofline_from_kernel_figures (predict/framework/kernel_roofline.hpp), the
// operator roofline of itertime's trainer on a described GPU, worked out by hand from a small kernel
// file written here (issue 45): matrix products per dtype (fp16 by bf16's table) as a large square
// product's throughput over the description's dense peak; attention (bf16, fp16) as the forward of head
// dim 128, 4,096 tokens, causal, over the bf16 peak; every memory-bound class and dtype as the achieved
// bandwidth over the description's; floors the launch overhead (views: none); efficiencies capped at 1.
// Invariants: the kernel file is written in a temporary folder (removed afterwards); the h100-sxm
// description is the shipped one (its peaks are read from it, not restated).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/hardware_spec.hpp"
#include "predict/framework/gpu_kernels.hpp"
#include "predict/framework/kernel_roofline.hpp"
#include "tests/unit/temp_dir.hpp"

namespace itertime::predict::framework {
namespace {

// One measured GEMM per dtype at 8192^3 (bf16 600, fp8 1200 TFLOP/s), no fp32 / tf32 table; attention:
// head dim 128, causal, forward and backward at 4,096 tokens, 400 / 300 TFLOP/s; launch 4 us; memory
// 3,000 GB/s.
const char* kFile = R"({
  "name": "h100-sxm", "description": "test figures", "summary": "test",
  "launch_overhead": {"value": 4, "unit": "us", "source": "test"},
  "memory_bandwidth": {"value": 3000, "unit": "GB/s", "source": "test"},
  "gemm": {
    "bf16": {"unit": "TFLOP/s", "source": "test", "shapes": [[8192, 8192, 8192, 600]]},
    "fp8": {"unit": "TFLOP/s", "source": "test", "shapes": [[8192, 8192, 8192, 1200]]}
  },
  "attention": {
    "bf16": {"kernel": "test", "unit": "TFLOP/s", "tables": [
      {"head_dim": 128, "causal": true, "pass": "forward", "seq": [4096], "values": [400], "source": "test"},
      {"head_dim": 128, "causal": true, "pass": "backward", "seq": [4096], "values": [300], "source": "test"}]}
  }
})";

struct Loaded {
  HardwareSpec hw;
  GpuKernelFigures figures;
};

Loaded load() {
  const testing::TempDir dir;
  std::ofstream(dir.file("h100-sxm.json")) << kFile;
  Loaded out;
  out.hw = find_hardware_spec("h100-sxm");
  out.figures = load_gpu_kernel_figures(out.hw, dir.path().string());
  return out;
}

TEST(KernelRoofline, MatrixEfficiencyIsTheLargeSquareProductsThroughputOverThePeak) {
  const Loaded l = load();
  const OperatorRoofline r = roofline_from_kernel_figures(l.figures, l.hw);
  const double bf16_peak = *l.hw.peak(ComputeDType::kBf16), fp16_peak = *l.hw.peak(ComputeDType::kFp16);
  const double fp8_peak = *l.hw.peak(ComputeDType::kFp8);
  ASSERT_TRUE(r.matrix.count(ComputeDType::kBf16));
  // 8192^3 is the measured point: 600 TFLOP/s exactly (the 4x node keeps its throughput).
  EXPECT_NEAR(r.matrix.at(ComputeDType::kBf16).efficiency, 600e12 / bf16_peak, 1e-12);
  EXPECT_NEAR(r.matrix.at(ComputeDType::kFp16).efficiency, 600e12 / fp16_peak, 1e-12) << "fp16 by bf16's table";
  EXPECT_NEAR(r.matrix.at(ComputeDType::kFp8).efficiency, 1200e12 / fp8_peak, 1e-12);
  EXPECT_EQ(r.matrix.count(ComputeDType::kFp32), 0u) << "no fp32 table: no efficiency";
  EXPECT_EQ(r.matrix.count(ComputeDType::kTf32), 0u);
  for (const auto& [dtype, e] : r.matrix) {
    EXPECT_DOUBLE_EQ(e.floor_us, 4.0) << to_string(dtype);
    EXPECT_EQ(e.points, 0) << "nothing fitted";
  }
}

TEST(KernelRoofline, AttentionIsTheForwardOfHeadDim128At4096TokensOverTheBf16Peak) {
  const Loaded l = load();
  const OperatorRoofline r = roofline_from_kernel_figures(l.figures, l.hw);
  const double bf16_peak = *l.hw.peak(ComputeDType::kBf16);
  ASSERT_TRUE(r.attention.count(ComputeDType::kBf16));
  EXPECT_NEAR(r.attention.at(ComputeDType::kBf16).efficiency, 400e12 / bf16_peak, 1e-12) << "the forward, not the backward";
  EXPECT_NEAR(r.attention.at(ComputeDType::kFp16).efficiency, 400e12 / bf16_peak, 1e-12);
  EXPECT_DOUBLE_EQ(r.attention.at(ComputeDType::kBf16).floor_us, 4.0);
  EXPECT_EQ(r.attention.count(ComputeDType::kFp8), 0u);
}

TEST(KernelRoofline, MemoryClassesTakeTheAchievedBandwidthOverTheDescriptions) {
  const Loaded l = load();
  const OperatorRoofline r = roofline_from_kernel_figures(l.figures, l.hw);
  const double expected = 3000e9 / l.hw.memory_bandwidth_bytes_per_s;
  int classes = 0;
  for (OperatorClass c : all_operator_classes()) {
    if (is_compute_bound(c)) {
      EXPECT_EQ(r.memory.count({c, ComputeDType::kFp32}), 0u) << to_string(c);
      continue;
    }
    if (c == OperatorClass::kView) {
      ASSERT_TRUE(r.memory.count({c, ComputeDType::kFp32}));
      EXPECT_DOUBLE_EQ(r.memory.at({c, ComputeDType::kFp32}).efficiency, 1.0);
      EXPECT_DOUBLE_EQ(r.memory.at({c, ComputeDType::kFp32}).floor_us, 0.0) << "views launch nothing";
      continue;
    }
    ++classes;
    for (ComputeDType d : all_compute_dtypes()) {
      ASSERT_TRUE(r.memory.count({c, d})) << to_string(c) << " " << to_string(d);
      EXPECT_NEAR(r.memory.at({c, d}).efficiency, expected, 1e-12) << to_string(c) << " " << to_string(d);
      EXPECT_DOUBLE_EQ(r.memory.at({c, d}).floor_us, 4.0);
    }
  }
  EXPECT_EQ(classes, 5);  // element-wise, normalization, copy, embedding, optimizer
  EXPECT_EQ(r.fitted_on, "h100-sxm");
  EXPECT_NE(r.fitted_from.find("published kernel figures "), std::string::npos) << r.fitted_from;
  EXPECT_NE(r.fitted_from.find("h100-sxm.json"), std::string::npos) << r.fitted_from;
}

TEST(KernelRoofline, EfficienciesAreCappedAtOne) {
  Loaded l = load();
  l.figures.memory_bandwidth_bytes_per_s = 2 * l.hw.memory_bandwidth_bytes_per_s;  // beyond what a file may say
  HardwareSpec slow = l.hw;
  slow.peak_flops_per_s[ComputeDType::kBf16] = 300e12;  // below the measured 600
  const OperatorRoofline r = roofline_from_kernel_figures(l.figures, slow);
  EXPECT_DOUBLE_EQ(r.memory.at({OperatorClass::kElementwise, ComputeDType::kBf16}).efficiency, 1.0);
  EXPECT_DOUBLE_EQ(r.matrix.at(ComputeDType::kBf16).efficiency, 1.0);
  EXPECT_DOUBLE_EQ(r.attention.at(ComputeDType::kBf16).efficiency, 1.0);
  // A description without an fp8 peak (an A100) gets no fp8 efficiency, whatever the figures hold.
  HardwareSpec no_fp8 = l.hw;
  no_fp8.peak_flops_per_s.erase(ComputeDType::kFp8);
  EXPECT_EQ(roofline_from_kernel_figures(l.figures, no_fp8).matrix.count(ComputeDType::kFp8), 0u);
}

TEST(KernelRoofline, TheShippedFiguresGiveEfficienciesBelowOne) {
  for (const char* gpu : {"a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200", "gb200-nvl72"}) {
    const HardwareSpec hw = find_hardware_spec(gpu);
    const OperatorRoofline r = roofline_from_kernel_figures(load_gpu_kernel_figures(hw), hw);
    ASSERT_TRUE(r.matrix.count(ComputeDType::kBf16)) << gpu;
    for (const auto& [dtype, e] : r.matrix) {
      EXPECT_GT(e.efficiency, 0.1) << gpu << " " << to_string(dtype);
      EXPECT_LE(e.efficiency, 1.0) << gpu << " " << to_string(dtype);
    }
    EXPECT_GT(r.attention.at(ComputeDType::kBf16).efficiency, 0.1) << gpu;
    EXPECT_LT(r.attention.at(ComputeDType::kBf16).efficiency, 1.0) << gpu;
  }
}

}  // namespace
}  // namespace itertime::predict::framework
