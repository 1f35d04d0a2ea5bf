// Unit tests of predict/framework/gpu_kernels: every shipped data/kernels file loads against its hardware
// description with a source for every figure and no achieved figure above a peak; GEMM times are monotone
// in m, n and k and never beat the dense peak or the measured maximum achievable; a causal attention is
// faster than a non-causal one and a backward slower than its forward; a bad file is a UserError naming
// it and its field; a few times derived by hand from the files' own figures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/hardware_spec.hpp"
#include "common/input_file.hpp"
#include "predict/framework/gpu_kernels.hpp"
#include "tests/predict/fixtures.hpp"

namespace itertime::predict::framework {
namespace {

using fixtures::user_error_of;

const std::vector<std::string> kGpus = {"h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200", "gb200-nvl72"};

std::string kernels_dir() { return std::string(ITERTIME_SOURCE_DIR) + "/data/kernels"; }
HardwareSpec hardware(const std::string& name) {
  return find_hardware_spec(name, std::string(ITERTIME_SOURCE_DIR) + "/data/hardware");
}
GpuKernelFigures figures(const std::string& name) { return load_gpu_kernel_figures(hardware(name), kernels_dir()); }

std::vector<ComputeDType> gemm_dtypes(const GpuKernelFigures& f) {
  std::vector<ComputeDType> out;
  for (const auto& entry : f.gemm_lattice) out.push_back(entry.first);
  return out;
}

// The throughput a GEMM time implies, without the launch overhead.
double achieved(const GpuKernelFigures& f, ComputeDType dtype, const GemmShape& shape) {
  return shape.flops() / ((f.gemm_time_us(dtype, shape) - f.launch_overhead_us) * 1e-6);
}

TEST(GpuKernels, EveryShippedFileLoadsWithSourcesAndBoundedFigures) {
  // Every file names a hardware description, and every GPU description here has a file.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kernels_dir())) files.push_back(entry.path().stem().string());
  std::sort(files.begin(), files.end());
  std::vector<std::string> expected = kGpus;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(files, expected);

  for (const std::string& gpu : kGpus) {
    SCOPED_TRACE(gpu);
    const HardwareSpec hw = hardware(gpu);
    const GpuKernelFigures f = figures(gpu);
    EXPECT_EQ(f.gpu, gpu);
    EXPECT_GT(f.launch_overhead_us, 0);
    EXPECT_GT(f.memory_bandwidth_bytes_per_s, 0);
    EXPECT_LE(f.memory_bandwidth_bytes_per_s, hw.memory_bandwidth_bytes_per_s);
    EXPECT_NE(f.summary().find("data/kernels/" + gpu + ".json"),
              std::string::npos);  // the shipped figures, named alike everywhere
    for (const char* path : {"launch_overhead", "memory_bandwidth", "gemm.bf16", "gemm.fp16", "gemm.tf32",
                             "attention.fp16.kernel", "attention.fp16.tables[0]", "attention.bf16"}) {
      ASSERT_TRUE(f.sources.count(path)) << path;
    }
    for (const auto& [path, source] : f.sources) {
      EXPECT_GT(source.size(), 20u) << path;  // a real citation, not a placeholder
    }
    // No measured point above the dense peak of its dtype.
    for (const auto& [dtype, points] : f.gemm) {
      ASSERT_TRUE(hw.peak(dtype).has_value());
      for (const auto& point : points) EXPECT_LE(point.achieved_flops_per_s, *hw.peak(dtype));
    }
    for (const auto& [dtype, points] : f.attention) {
      for (const auto& point : points) EXPECT_LE(point.achieved_flops_per_s, *hw.peak(dtype));
    }
    // fp8 GEMMs exactly where the GPU has fp8 Tensor Cores.
    EXPECT_EQ(f.gemm.count(ComputeDType::kFp8) != 0, hw.peak(ComputeDType::kFp8).has_value());
  }
}

TEST(GpuKernels, DerivedFiguresCarryTheirRule) {
  const GpuKernelFigures f = figures("h200-sxm");
  EXPECT_NE(f.sources.at("gemm.bf16").find("(derived: "), std::string::npos);
  EXPECT_NE(f.sources.at("memory_bandwidth").find("(derived: "), std::string::npos);
  const GpuKernelFigures a100 = figures("a100-sxm-80gb");
  EXPECT_EQ(a100.sources.at("memory_bandwidth").find("(derived: "), std::string::npos);  // measured there
  EXPECT_NE(a100.sources.at("gemm.fp16").find("(derived: "), std::string::npos);         // fp16 = bf16, stated
}

TEST(GpuKernels, GemmThroughputNeverExceedsThePeakOrTheMeasuredMaximum) {
  for (const std::string& gpu : kGpus) {
    const HardwareSpec hw = hardware(gpu);
    const GpuKernelFigures f = figures(gpu);
    for (ComputeDType dtype : gemm_dtypes(f)) {
      SCOPED_TRACE(gpu + " " + to_string(dtype));
      const double ceiling = f.gemm_lattice.at(dtype).ceiling_flops_per_s;
      EXPECT_LE(ceiling, *hw.peak(dtype));
      for (int64_t m = 64; m <= 65536; m *= 4) {
        for (int64_t n = 64; n <= 65536; n *= 4) {
          for (int64_t k = 64; k <= 65536; k *= 4) {
            EXPECT_LE(achieved(f, dtype, {m, n, k}), ceiling * (1 + 1e-9)) << m << "x" << n << "x" << k;
          }
        }
      }
    }
  }
}

TEST(GpuKernels, GemmTimeIsMonotoneInEachDimension) {
  std::mt19937_64 rng(32);
  std::uniform_real_distribution<double> log_size(std::log(16.0), std::log(60000.0));
  std::uniform_real_distribution<double> growth(1.0, 3.0);
  for (const std::string& gpu : kGpus) {
    const GpuKernelFigures f = figures(gpu);
    for (ComputeDType dtype : gemm_dtypes(f)) {
      SCOPED_TRACE(gpu + " " + to_string(dtype));
      for (int trial = 0; trial < 400; ++trial) {
        const GemmShape base{static_cast<int64_t>(std::exp(log_size(rng))), static_cast<int64_t>(std::exp(log_size(rng))),
                             static_cast<int64_t>(std::exp(log_size(rng)))};
        const double t = f.gemm_time_us(dtype, base);
        EXPECT_GT(t, f.launch_overhead_us);
        for (int axis = 0; axis < 3; ++axis) {
          GemmShape bigger = base;
          int64_t& d = axis == 0 ? bigger.m : axis == 1 ? bigger.n : bigger.k;
          d = std::max(d + 1, static_cast<int64_t>(static_cast<double>(d) * growth(rng)));
          EXPECT_GE(f.gemm_time_us(dtype, bigger), t * (1 - 1e-12))
              << base.m << "x" << base.n << "x" << base.k << " axis " << axis;
        }
      }
      // Along a fine sweep through and beyond the lattice, one dimension at a time.
      for (int axis = 0; axis < 3; ++axis) {
        double previous = 0;
        for (int64_t d = 100; d < 40000; d += 97) {
          GemmShape shape{3000, 1500, 700};
          (axis == 0 ? shape.m : axis == 1 ? shape.n : shape.k) = d;
          const double t = f.gemm_time_us(dtype, shape);
          EXPECT_GE(t, previous * (1 - 1e-12)) << "axis " << axis << " d " << d;
          previous = t;
        }
      }
    }
  }
}

TEST(GpuKernels, SmallGemmsReachLessOfThePeakThanLargeOnes) {
  for (const std::string& gpu : kGpus) {
    const GpuKernelFigures f = figures(gpu);
    EXPECT_LT(achieved(f, ComputeDType::kBf16, {512, 512, 512}), 0.5 * achieved(f, ComputeDType::kBf16, {8192, 8192, 8192}))
        << gpu;
  }
}

TEST(GpuKernels, CausalAttentionIsFasterAndBackwardSlower) {
  for (const std::string& gpu : kGpus) {
    const GpuKernelFigures f = figures(gpu);
    for (ComputeDType dtype : {ComputeDType::kBf16, ComputeDType::kFp16}) {
      for (int64_t head_dim : {64, 80, 96, 128, 192, 256}) {
        for (int64_t seq = 256; seq <= 65536; seq = seq * 3 / 2) {
          SCOPED_TRACE(gpu + " d" + std::to_string(head_dim) + " s" + std::to_string(seq));
          AttentionShape shape{2, 32, 8, seq, seq, head_dim, true};
          AttentionShape full = shape;
          full.causal = false;
          for (bool backward : {false, true}) {
            EXPECT_LT(f.attention_time_us(dtype, shape, backward), f.attention_time_us(dtype, full, backward));
          }
          EXPECT_GT(f.attention_time_us(dtype, shape, true), f.attention_time_us(dtype, shape, false));
          EXPECT_GT(f.attention_time_us(dtype, full, true), f.attention_time_us(dtype, full, false));
        }
      }
    }
  }
}

TEST(GpuKernels, HandDerivedTimes) {
  const GpuKernelFigures h100 = figures("h100-sxm");
  const double launch = h100.launch_overhead_us;
  EXPECT_DOUBLE_EQ(launch, 3.0);
  // bf16 4096^3 is a lattice point (780.2 TFLOP/s measured, below the 794.5 MAMF); the largest time of
  // its lower set is its own.
  const double t4096 = 2.0 * 4096.0 * 4096.0 * 4096.0 / 780.2e12 * 1e6;
  EXPECT_NEAR(h100.gemm_time_us(ComputeDType::kBf16, {4096, 4096, 4096}), t4096 + launch, 1e-6);
  // One node beyond (16384 = 4 x 4096) a product at least 4096 in every dimension runs at the MAMF,
  // 794.5 TFLOP/s; 8192 rows lie halfway in log(m): the geometric mean of the two times.
  EXPECT_NEAR(h100.gemm_time_us(ComputeDType::kBf16, {8192, 4096, 4096}), std::sqrt(t4096 * 4 * t4096 * 780.2 / 794.5) + launch,
              1e-6);
  // Past the last node a dimension scales the time: twice the rows, twice the time, at the MAMF.
  const double t_far = h100.gemm_time_us(ComputeDType::kBf16, {65536, 16384, 16384}) - launch;
  EXPECT_NEAR(t_far, 2.0 * 65536.0 * 16384.0 * 16384.0 / 794.5e12 * 1e6, 1e-6);
  EXPECT_NEAR(h100.gemm_time_us(ComputeDType::kBf16, {131072, 16384, 16384}) - launch, 2 * t_far, 1e-6);
  // A skinny product keeps the low throughput measured for its kind: 256 columns, however long.
  EXPECT_LT(achieved(h100, ComputeDType::kBf16, {65536, 256, 65536}),
            0.6 * achieved(h100, ComputeDType::kBf16, {16384, 16384, 16384}));
  // fp16 is bf16 by the file's rule.
  EXPECT_DOUBLE_EQ(h100.gemm_time_us(ComputeDType::kFp16, {3000, 5000, 700}),
                   h100.gemm_time_us(ComputeDType::kBf16, {3000, 5000, 700}));
  // Large fp8 products run at the measured maximum achievable, 1402.6 TFLOP/s.
  EXPECT_NEAR(h100.gemm_time_us(ComputeDType::kFp8, {16384, 16384, 16384}),
              2.0 * 16384.0 * 16384.0 * 16384.0 / 1402.6e12 * 1e6 + launch, 1e-6);
  // A zero dimension is no kernel.
  EXPECT_EQ(h100.gemm_time_us(ComputeDType::kBf16, {0, 4096, 4096}), 0);

  // Attention, causal, head dim 128, 2 x 32 heads x 4096 tokens: forward 4*2*32*4096^2*128/2 FLOPs at the
  // cuDNN figure 518 TFLOP/s; backward 2.5x those FLOPs at 499 * 518 / 609 TFLOP/s (the stated causal rule).
  AttentionShape attention{2, 32, 8, 4096, 4096, 128, true};
  const double forward_flops = 4.0 * 2 * 32 * 4096.0 * 4096.0 * 128 / 2;
  EXPECT_DOUBLE_EQ(attention.forward_flops(), forward_flops);
  EXPECT_NEAR(h100.attention_time_us(ComputeDType::kBf16, attention, false), forward_flops / 518e12 * 1e6 + launch, 1e-6);
  EXPECT_NEAR(h100.attention_time_us(ComputeDType::kBf16, attention, true), 2.5 * forward_flops / 424.4e12 * 1e6 + launch, 1e-6);
  // Between measured lengths, linear in log(length): 3000 tokens lies 0.5507 of the way from 2048 (484) to 4096.
  attention.seq_q = attention.seq_kv = 3000;
  const double w = std::log(3000.0 / 2048.0) / std::log(2.0);
  EXPECT_NEAR(h100.attention_time_us(ComputeDType::kBf16, attention, false),
              attention.forward_flops() / ((484 + w * (518 - 484)) * 1e12) * 1e6 + launch, 1e-6);
  // The nearest head dim: 96 is nearer 128 than 64 in log distance, 90 nearer 64.
  AttentionShape d96 = attention, d128 = attention, d90 = attention, d64 = attention;
  d96.head_dim = 96;
  d128.head_dim = 128;
  d90.head_dim = 90;
  d64.head_dim = 64;
  EXPECT_NEAR(h100.attention_time_us(ComputeDType::kBf16, d96, false) - launch,
              (h100.attention_time_us(ComputeDType::kBf16, d128, false) - launch) * 96 / 128, 1e-6);
  EXPECT_NEAR(h100.attention_time_us(ComputeDType::kBf16, d90, false) - launch,
              (h100.attention_time_us(ComputeDType::kBf16, d64, false) - launch) * 90 / 64, 1e-6);
  // No fp8 attention figures (Megatron's fp8 recipes keep attention in bf16).
  EXPECT_NE(user_error_of([&] { h100.attention_time_us(ComputeDType::kFp8, attention, false); }).find("fp8"), std::string::npos);

  const GpuKernelFigures a100 = figures("a100-sxm-80gb");
  // Memory-bound: 1 GB at the A100's measured BabelStream Triad 1724.8 GB/s.
  EXPECT_NEAR(a100.memory_bound_time_us(1e9), 1e9 / 1724.8e9 * 1e6 + launch, 1e-6);
  // The square sweep: 512^3 at 28 TFLOP/s; 8192^3 at 291 in the figure, capped at the 271.2 MAMF.
  EXPECT_NEAR(a100.gemm_time_us(ComputeDType::kBf16, {512, 512, 512}), 2.0 * 512 * 512 * 512 / 28e12 * 1e6 + launch, 1e-6);
  EXPECT_NEAR(a100.gemm_time_us(ComputeDType::kBf16, {8192, 8192, 8192}),
              2.0 * 8192.0 * 8192.0 * 8192.0 / 271.2e12 * 1e6 + launch, 1e-6);
  // No fp8 on an A100.
  EXPECT_NE(user_error_of([&] { a100.gemm_time_us(ComputeDType::kFp8, {1024, 1024, 1024}); }).find("fp8"), std::string::npos);
}

class BadFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("itertime-kernels-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // The shipped h100-sxm file with `from` replaced by `to` (once), as dir_/h100-sxm.json.
  std::string write_edited(const std::string& from, const std::string& to) {
    std::string text = read_input_file(kernels_dir() + "/h100-sxm.json", {"missing", "a directory", "unreadable"});
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    std::ofstream(dir_ / "h100-sxm.json") << text;
    return user_error_of([&] { load_gpu_kernel_figures(hardware("h100-sxm"), dir_.string()); });
  }
  std::filesystem::path dir_;
};

TEST_F(BadFile, ErrorsNameTheFileAndTheField) {
  // The unedited copy loads.
  EXPECT_EQ(write_edited("\"name\"", "\"name\""), "");
  std::string error = write_edited("\"launch_overhead\": {", "\"launch_overhead\": {\"x\": 1, ");
  EXPECT_NE(error.find("h100-sxm.json"), std::string::npos) << error;
  EXPECT_NE(error.find("launch_overhead.x"), std::string::npos) << error;
  // A figure without a source.
  error = write_edited("\"unit\": \"us\",\n  \"source\":", "\"unit\": \"us\",\n  \"origin\":");
  EXPECT_NE(error.find("launch_overhead"), std::string::npos) << error;
  // A derived figure without its rule.
  error = write_edited("\"rule\": \"the null-kernel", "\"rules\": \"the null-kernel");
  EXPECT_NE(error.find("launch_overhead"), std::string::npos) << error;
  // An achieved figure above the dense peak.
  error = write_edited("[256, 256, 256, 6.7]", "[256, 256, 256, 6700]");
  EXPECT_NE(error.find("gemm.bf16.shapes[0][3]"), std::string::npos) << error;
  EXPECT_NE(error.find("peak"), std::string::npos) << error;
  // Not JSON.
  error = write_edited("{", "[");
  EXPECT_NE(error.find("h100-sxm.json"), std::string::npos) << error;
}

TEST_F(BadFile, AMissingFileNamesTheGpusThatHaveFigures) {
  const std::string error = user_error_of([&] { load_gpu_kernel_figures(hardware("h100-sxm"), dir_.string()); });
  EXPECT_NE(error.find("h100-sxm"), std::string::npos) << error;
  const std::string shipped = user_error_of([&] {
    HardwareSpec cpu = hardware("cpu-node-local");
    load_gpu_kernel_figures(cpu, kernels_dir());
  });
  EXPECT_NE(shipped.find("cpu-node-local"), std::string::npos) << shipped;
  EXPECT_NE(shipped.find("a100-sxm-80gb, b200, gb200-nvl72, h100-sxm, h200-sxm"), std::string::npos) << shipped;
}

TEST(GpuKernels, FolderFromTheEnvironment) {
  ::setenv("ITERTIME_KERNELS_DIR", "/somewhere/else", 1);
  EXPECT_EQ(kernel_figures_dir(), "/somewhere/else");
  ::unsetenv("ITERTIME_KERNELS_DIR");
  const std::string dir = kernel_figures_dir();
  EXPECT_EQ(dir.substr(dir.size() - 12), "data/kernels");
}

}  // namespace
}  // namespace itertime::predict::framework
