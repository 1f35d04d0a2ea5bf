// Unit tests of predict/operator_roofline and predict/target_device: operator classes and math dtypes,
// attention FLOPs from a signature, one rank's share of a CPU node and a GPU, call times derived by
// hand, the fit recovering known efficiencies and floors from synthetic calls, carrying to another
// device (efficiencies kept and capped, floors replaced), the transfer check, the JSON round trip and
// its refusals, and a configuration predicted on a described device with hand-checkable parts.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "common/errors.hpp"
#include "tests/predict/fixtures.hpp"
#include "predict/device/operator_roofline.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/target_device.hpp"

namespace itertime::predict {
namespace {

using fixtures::small_model;
using fixtures::user_error_of;

HardwareSpec gpu() {
  HardwareSpec h;
  h.name = "test-gpu";
  h.kind = DeviceKind::kGpu;
  h.peak_flops_per_s[ComputeDType::kFp32] = 50e12;
  h.peak_flops_per_s[ComputeDType::kBf16] = 1000e12;
  h.peak_flops_per_s[ComputeDType::kFp8] = 2000e12;
  h.memory_bandwidth_bytes_per_s = 3e12;
  h.memory_bytes = int64_t{80} << 30;
  h.gpus_per_node = 8;
  h.nvlink_bandwidth_bytes_per_s = 450e9;
  h.nics_per_node = 8;
  h.nic_bandwidth_bytes_per_s = 50e9;
  return h;
}

HardwareSpec cpu_node() {
  HardwareSpec h;
  h.name = "test-cpu";
  h.kind = DeviceKind::kCpu;
  h.cores_per_node = 4;
  h.peak_flops_per_s[ComputeDType::kFp32] = 400e9;
  h.peak_flops_per_s_per_core[ComputeDType::kFp32] = 120e9;
  h.peak_flops_per_s[ComputeDType::kBf16] = 800e9;  // no per-core figure: node / cores = 200e9
  h.memory_bandwidth_bytes_per_s = 40e9;
  return h;
}

TEST(OperatorRoofline, ClassesComeFromTheNameAndTheOptimizerPhase) {
  EXPECT_EQ(classify_operator("aten::mm", Phase::kForward), OperatorClass::kMatrixProduct);
  EXPECT_EQ(classify_operator("aten::matmul", Phase::kOptimizer), OperatorClass::kMatrixProduct);
  EXPECT_EQ(classify_operator("aten::scaled_dot_product_attention", Phase::kForward), OperatorClass::kAttention);
  EXPECT_EQ(classify_operator("aten::_scaled_dot_product_flash_attention_for_cpu_backward", Phase::kBackward),
            OperatorClass::kAttention);
  EXPECT_EQ(classify_operator("aten::mul_.Tensor", Phase::kForward), OperatorClass::kElementwise);
  EXPECT_EQ(classify_operator("aten::mul_.", Phase::kOptimizer), OperatorClass::kOptimizer);
  EXPECT_EQ(classify_operator("aten::reshape", Phase::kOptimizer), OperatorClass::kView) << "a view moves nothing in any phase";
  EXPECT_EQ(classify_operator("aten::to.dtype", Phase::kForward), OperatorClass::kCopy);
  EXPECT_EQ(classify_operator("aten::softmax.int", Phase::kForward), OperatorClass::kNormalization);
  EXPECT_EQ(classify_operator("aten::embedding", Phase::kForward), OperatorClass::kEmbedding);
  for (OperatorClass c : all_operator_classes()) EXPECT_EQ(parse_operator_class(to_string(c)), c);
  EXPECT_NE(user_error_of([] { (void)parse_operator_class("gemm"); }).find("unknown operator class 'gemm'"), std::string::npos);
}

TEST(OperatorRoofline, MathDtypeIsTheFirstInputForProductsAndThePromotedOneOtherwise) {
  EXPECT_EQ(math_dtype_of("bf16,bf16", OperatorClass::kMatrixProduct, false), ComputeDType::kBf16);
  EXPECT_EQ(math_dtype_of("fp32,fp32", OperatorClass::kMatrixProduct, true), ComputeDType::kTf32);
  EXPECT_EQ(math_dtype_of("bf16,bf16,bf16,bf16,bf16,fp32", OperatorClass::kAttention, false), ComputeDType::kBf16)
      << "an attention backward's fp32 log-sum-exp is not its math";
  EXPECT_EQ(math_dtype_of("bf16,fp32", OperatorClass::kElementwise, false), ComputeDType::kFp32);
  EXPECT_EQ(math_dtype_of("fp32", OperatorClass::kElementwise, true), ComputeDType::kFp32) << "tf32 is a product mode only";
  EXPECT_EQ(math_dtype_of("int64", OperatorClass::kEmbedding, false), ComputeDType::kFp32);
  EXPECT_EQ(math_dtype_of("fp16,int64", OperatorClass::kCopy, false), ComputeDType::kFp16);
}

TEST(OperatorRoofline, AttentionFlopsFromTheSignature) {
  // q [2, 8, 128, 64], k [2, 8, 256, 64]: 4 * 2 * 8 * 128 * 256 * 64 = 134,217,728; causal halves it.
  const std::string causal =
      "aten::scaled_dot_product_attention(bf16[2,8,128,64], bf16[2,8,256,64], bf16[2,8,256,64], None, 0., True, None, "
      "False)->bf16";
  EXPECT_DOUBLE_EQ(attention_flops("aten::scaled_dot_product_attention", causal), 67108864.0);
  const std::string masked =
      "aten::scaled_dot_product_attention(bf16[2,8,128,64], bf16[2,8,256,64], bf16[2,8,256,64], bool[128,256], 0., False, None, "
      "False)->bf16";
  EXPECT_DOUBLE_EQ(attention_flops("aten::scaled_dot_product_attention", masked), 134217728.0);
  // A backward: the output gradient first (shaped like q), then q and k; 2.5 times the forward.
  const std::string backward =
      "aten::_scaled_dot_product_flash_attention_for_cpu_backward(bf16[2,8,128,64]{65536,64,512,1}, bf16[2,8,128,64], "
      "bf16[2,8,128,64], bf16[2,8,128,64], bf16[2,8,128,64], fp32[2,8,128], 0., True, None, None)->bf16";
  EXPECT_DOUBLE_EQ(attention_flops("aten::_scaled_dot_product_flash_attention_for_cpu_backward", backward),
                   2.5 * 0.5 * 4.0 * 2 * 8 * 128 * 128 * 64);
  EXPECT_DOUBLE_EQ(attention_flops("aten::scaled_dot_product_attention", "aten::scaled_dot_product_attention()->bf16"), 0.0);
}

TEST(OperatorRoofline, RankRatesShareACpuNodeAndGiveAGpuWhole) {
  const RankRates alone = rank_rates(cpu_node(), 1, 2);  // 2 threads of 4 cores
  EXPECT_DOUBLE_EQ(alone.peak_flops_per_s.at(ComputeDType::kFp32), 240e9);
  EXPECT_DOUBLE_EQ(alone.peak_flops_per_s.at(ComputeDType::kBf16), 400e9);
  EXPECT_DOUBLE_EQ(alone.memory_bytes_per_s, 40e9);
  const RankRates four = rank_rates(cpu_node(), 4, 2);  // 4 ranks of 2 threads on 4 cores: 1 core each
  EXPECT_DOUBLE_EQ(four.peak_flops_per_s.at(ComputeDType::kFp32), 120e9);
  EXPECT_DOUBLE_EQ(four.memory_bytes_per_s, 10e9);
  const RankRates eight = rank_rates(cpu_node(), 8, 1);  // beyond the cores: at most 4 run at once
  EXPECT_DOUBLE_EQ(eight.peak_flops_per_s.at(ComputeDType::kFp32), 120e9);
  EXPECT_DOUBLE_EQ(eight.memory_bytes_per_s, 10e9);
  const RankRates device = rank_rates(gpu(), 64, 1);
  EXPECT_DOUBLE_EQ(device.peak_flops_per_s.at(ComputeDType::kBf16), 1000e12);
  EXPECT_DOUBLE_EQ(device.memory_bytes_per_s, 3e12);
}

TEST(OperatorRoofline, CallTimesByHand) {
  OperatorRoofline roofline;
  roofline.matrix[ComputeDType::kBf16] = ClassEfficiency{0.5, 3.0, 0, 0};
  roofline.memory[{OperatorClass::kElementwise, ComputeDType::kBf16}] = ClassEfficiency{0.8, 4.0, 0, 0};
  roofline.memory[{OperatorClass::kView, ComputeDType::kFp32}] = ClassEfficiency{1.0, 0.5, 0, 0};
  const RankRates rates = rank_rates(gpu(), 1, 1);
  // 2e12 FLOP at 0.5 * 1000e12: bound 4,000 us; sqrt(3^2 + 4000^2).
  EXPECT_NEAR(*roofline_time_us(roofline, rates, OperatorClass::kMatrixProduct, ComputeDType::kBf16, 2e12, 1e6),
              std::sqrt(9.0 + 4000.0 * 4000.0), 1e-6);
  // A thin product whose bytes bound it: 1e6 FLOP (0.002 us) but 2.4e9 bytes at 0.8 * 3e12: 1,000 us.
  EXPECT_NEAR(*roofline_time_us(roofline, rates, OperatorClass::kMatrixProduct, ComputeDType::kBf16, 1e6, 2.4e9),
              std::sqrt(9.0 + 1000.0 * 1000.0), 1e-6);
  // Element-wise: 2.4e6 bytes at 2.4e12 B/s = 1 us; sqrt(16 + 1).
  EXPECT_NEAR(*roofline_time_us(roofline, rates, OperatorClass::kElementwise, ComputeDType::kBf16, 0, 2.4e6), std::sqrt(17.0),
              1e-9);
  EXPECT_DOUBLE_EQ(*roofline_time_us(roofline, rates, OperatorClass::kView, ComputeDType::kBf16, 0, 1e12), 0.5)
      << "views: the floor";
  EXPECT_FALSE(roofline_time_us(roofline, rates, OperatorClass::kMatrixProduct, ComputeDType::kFp32, 1e9, 1e6).has_value())
      << "no fp32 efficiency: no time, never a guess";
  HardwareSpec no_fp8 = gpu();
  no_fp8.peak_flops_per_s.erase(ComputeDType::kBf16);
  EXPECT_FALSE(roofline_time_us(roofline, rank_rates(no_fp8, 1, 1), OperatorClass::kMatrixProduct, ComputeDType::kBf16, 1e9, 1e6)
                   .has_value());
}

// Synthetic calls made by the model itself: the fit finds the efficiency and floor back.
TEST(OperatorRoofline, TheFitRecoversKnownEfficienciesAndFloors) {
  const RankRates rates = rank_rates(cpu_node(), 2, 1);  // fp32: 120e9 per rank, memory 20e9
  OperatorRoofline truth;
  truth.matrix[ComputeDType::kFp32] = ClassEfficiency{0.7, 12.0, 0, 0};
  truth.memory[{OperatorClass::kElementwise, ComputeDType::kFp32}] = ClassEfficiency{0.4, 2.0, 0, 0};
  truth.memory[{OperatorClass::kView, ComputeDType::kFp32}] = ClassEfficiency{1.0, 0.7, 0, 0};
  std::vector<ProfiledCall> calls;
  for (int i = 0; i < 30; ++i) {
    const double scale = std::pow(2.0, i / 2.0);
    ProfiledCall mm{OperatorClass::kMatrixProduct, ComputeDType::kFp32, 1e5 * scale, 1e3 * scale, 0};
    mm.time_us = *roofline_time_us(truth, rates, mm.op_class, mm.math, mm.flops, mm.bytes);
    ProfiledCall add{OperatorClass::kElementwise, ComputeDType::kFp32, 0, 1e3 * scale, 0};
    add.time_us = *roofline_time_us(truth, rates, add.op_class, add.math, add.flops, add.bytes);
    ProfiledCall view{OperatorClass::kView, ComputeDType::kBf16, 0, 1e3 * scale, 0.7};
    calls.insert(calls.end(), {mm, add, view});
  }
  const OperatorRoofline fitted = fit_operator_roofline(calls, rates);
  ASSERT_EQ(fitted.matrix.count(ComputeDType::kFp32), 1u);
  EXPECT_NEAR(fitted.matrix.at(ComputeDType::kFp32).efficiency, 0.7, 0.7 * 0.02);
  EXPECT_NEAR(fitted.matrix.at(ComputeDType::kFp32).floor_us, 12.0, 12.0 * 0.05);
  EXPECT_EQ(fitted.matrix.at(ComputeDType::kFp32).points, 30);
  const ClassEfficiency& add = fitted.memory.at({OperatorClass::kElementwise, ComputeDType::kFp32});
  EXPECT_NEAR(add.efficiency, 0.4, 0.4 * 0.02);
  EXPECT_NEAR(add.floor_us, 2.0, 2.0 * 0.05);
  EXPECT_NEAR(fitted.memory.at({OperatorClass::kView, ComputeDType::kFp32}).floor_us, 0.7, 0.7 * 0.05);
  // The transfer check of the truth against its own calls at another occupancy's rates is exact.
  const TransferCheck exact = check_transfer(truth, rates, calls, 2, 2);
  EXPECT_EQ(exact.calls, 90);
  EXPECT_NEAR(exact.mape_pct, 0.0, 1e-9);
  // At 4 ranks on 4 cores memory halves per rank: element-wise calls predicted slower than measured.
  const TransferCheck moved = check_transfer(truth, rank_rates(cpu_node(), 4, 1), calls, 2, 4);
  EXPECT_GT(moved.class_time_weighted_mape_pct.at(OperatorClass::kElementwise), 10.0);
  EXPECT_NEAR(moved.class_time_weighted_mape_pct.at(OperatorClass::kMatrixProduct), 0.0, 1.0) << "compute per rank unchanged";
  EXPECT_TRUE(fit_operator_roofline({calls[0], calls[3]}, rates).matrix.empty()) << "fewer than 3 calls: not fitted";
}

TEST(OperatorRoofline, CarryingKeepsEfficienciesCapsThemAndTakesTheTargetsFloors) {
  OperatorRoofline fitted;
  fitted.fitted_on = "test-cpu";
  fitted.fitted_from = "cal.h5 at occupancy 2";
  fitted.matrix[ComputeDType::kFp32] = ClassEfficiency{1.3, 6.0, 50, 0.2};  // above 1: a low measured peak
  fitted.matrix[ComputeDType::kBf16] = ClassEfficiency{0.8, 16.0, 50, 0.1};
  fitted.memory[{OperatorClass::kElementwise, ComputeDType::kFp32}] = ClassEfficiency{3.5, 2.0, 50, 0.7};
  fitted.memory[{OperatorClass::kElementwise, ComputeDType::kBf16}] = ClassEfficiency{0.45, 1.0, 50, 0.7};
  fitted.memory[{OperatorClass::kView, ComputeDType::kFp32}] = ClassEfficiency{1.0, 0.6, 50, 0.3};
  const OperatorRoofline carried = carry_to(fitted, gpu());
  EXPECT_DOUBLE_EQ(carried.matrix.at(ComputeDType::kBf16).efficiency, 0.8);
  EXPECT_DOUBLE_EQ(carried.matrix.at(ComputeDType::kBf16).floor_us, kGpuKernelFloorUs);
  EXPECT_DOUBLE_EQ(carried.matrix.at(ComputeDType::kFp32).efficiency, 1.0) << "capped";
  EXPECT_DOUBLE_EQ(carried.matrix.at(ComputeDType::kFp8).efficiency, 1.0) << "unfitted dtype: the best fitted, capped";
  EXPECT_DOUBLE_EQ(carried.attention.at(ComputeDType::kBf16).efficiency, 0.8) << "attention unfitted: its dtype's products";
  // Memory-bound: the class's best efficiency on the source for every dtype of the target, capped.
  EXPECT_DOUBLE_EQ(carried.memory.at({OperatorClass::kElementwise, ComputeDType::kBf16}).efficiency, 1.0);
  EXPECT_DOUBLE_EQ(carried.memory.at({OperatorClass::kElementwise, ComputeDType::kFp8}).floor_us, kGpuKernelFloorUs);
  EXPECT_DOUBLE_EQ(carried.memory.at({OperatorClass::kView, ComputeDType::kFp32}).floor_us, 0.0) << "no kernel for a view";
  EXPECT_NE(carried.fitted_from.find("carried to test-gpu"), std::string::npos);
  // A CPU target keeps the source's own efficiency per dtype and its floors.
  const OperatorRoofline to_cpu = carry_to(fitted, cpu_node());
  EXPECT_DOUBLE_EQ(to_cpu.memory.at({OperatorClass::kElementwise, ComputeDType::kBf16}).efficiency, 0.45);
  EXPECT_DOUBLE_EQ(to_cpu.matrix.at(ComputeDType::kBf16).floor_us, 16.0);
}

TEST(OperatorRoofline, JsonRoundTripAndRefusals) {
  OperatorRoofline fitted;
  fitted.fitted_on = "test-cpu";
  fitted.fitted_from = "cal.h5 at occupancy 2";
  fitted.matrix[ComputeDType::kBf16] = ClassEfficiency{0.8, 16.0, 50, 0.1};
  fitted.attention[ComputeDType::kBf16] = ClassEfficiency{0.6, 10.0, 7, 0.3};
  fitted.memory[{OperatorClass::kCopy, ComputeDType::kFp32}] = ClassEfficiency{2.5, 1.5, 40, 0.5};
  const OperatorRoofline back = roofline_from_json(roofline_to_json(fitted), "eff.json");
  EXPECT_EQ(back.fitted_on, "test-cpu");
  EXPECT_EQ(back.fitted_from, "cal.h5 at occupancy 2");
  EXPECT_DOUBLE_EQ(back.matrix.at(ComputeDType::kBf16).efficiency, 0.8);
  EXPECT_DOUBLE_EQ(back.attention.at(ComputeDType::kBf16).floor_us, 10.0);
  EXPECT_EQ(back.memory.at({OperatorClass::kCopy, ComputeDType::kFp32}).points, 40);
  EXPECT_NE(user_error_of([] { (void)roofline_from_json("{", "eff.json"); }).find("eff.json: not an efficiency file"),
            std::string::npos);
  EXPECT_NE(user_error_of([] { (void)roofline_from_json("{}", "eff.json"); }).find("eff.json: no efficiencies"),
            std::string::npos);
  EXPECT_NE(user_error_of([] {
              (void)roofline_from_json(R"({"matrix_product": {"bf16": {"efficiency": -1, "floor_us": 1}}})", "eff.json");
            }).find("matrix_product.bf16: efficiency must be > 0"),
            std::string::npos);
  EXPECT_NE(user_error_of([] {
              (void)roofline_from_json(R"({"matrix_product": {"fp64": {"efficiency": 1, "floor_us": 1}}})", "eff.json");
            }),
            "");
  EXPECT_NE(user_error_of([] { (void)load_efficiency_file("/nonexistent/eff.json"); }).find("no such efficiency file"),
            std::string::npos);
}

OperatorRoofline every_class(double efficiency, double floor_us) {
  OperatorRoofline roofline;
  for (ComputeDType dtype : {ComputeDType::kFp32, ComputeDType::kBf16, ComputeDType::kFp8}) {
    roofline.matrix[dtype] = ClassEfficiency{efficiency, floor_us, 1, 0};
    roofline.attention[dtype] = ClassEfficiency{efficiency, floor_us, 1, 0};
    for (OperatorClass c : all_operator_classes()) {
      if (!is_compute_bound(c)) roofline.memory[{c, dtype}] = ClassEfficiency{efficiency, floor_us, 1, 0};
    }
  }
  roofline.fitted_from = "test";
  return roofline;
}

// On a described device: no calibration factor, described communication, times that follow the device.
TEST(OperatorRoofline, APredictionOnADescribedDeviceFollowsTheDescription) {
  const LlamaSpec spec = small_model();
  FittedModel empty;  // no calibration at all
  const TargetDevice target = make_target_device(gpu(), every_class(0.5, 1.0));
  PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;
  request.config = ParallelConfig{1, 2, 1, 1, 4, 32};
  request.precision = PrecisionName::kAmpBf16;
  StageResolver resolver(empty, &target);
  const PredictOutcome outcome = predict(resolver, request);
  ASSERT_TRUE(outcome.ok()) << outcome.reason;
  const Prediction& p = *outcome.prediction;
  EXPECT_DOUBLE_EQ(p.calibration_factor, 1.0);
  EXPECT_GT(p.tp_comm_us, 0.0) << "TP all-reduces from the description's NVLink";
  EXPECT_EQ(p.extrapolated_fraction, 0.0);
  // Every kernel costs at least the GPU floor: compute >= floor x kernels of the busiest stage.
  EXPECT_GT(p.compute_us, 0.0);
  // Twice the memory bandwidth and peaks: never slower, and faster for these floor-dominated calls only
  // where a bound exceeds the floor; a device of half the speed is never faster.
  HardwareSpec slow = gpu();
  for (auto& [dtype, peak] : slow.peak_flops_per_s) peak /= 100;
  slow.memory_bandwidth_bytes_per_s /= 100;
  const TargetDevice slow_target = make_target_device(slow, every_class(0.5, 1.0));
  StageResolver slow_resolver(empty, &slow_target);
  const PredictOutcome slower = predict(slow_resolver, request);
  ASSERT_TRUE(slower.ok()) << slower.reason;
  EXPECT_GT(slower.prediction->compute_us, p.compute_us);
  // A CPU node description has no links: a TP layout cannot be described, with the reason.
  const TargetDevice cpu_target = make_target_device(cpu_node(), every_class(0.5, 1.0));
  StageResolver cpu_resolver(empty, &cpu_target);
  const PredictOutcome refused = predict(cpu_resolver, request);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.reason.find("test-cpu describes no link"), std::string::npos) << refused.reason;
  EXPECT_NE(user_error_of([] { (void)make_target_device(gpu(), OperatorRoofline{}); }).find("no operator efficiencies"),
            std::string::npos);
}

TEST(OperatorRoofline, Fp8CastsByHand) {
  // A [64, 128] (the activation) cast: 3 bytes x 8,192 elements, one kernel; operands 8,192 + 32,768.
  const Fp8Casts casts = fp8_casts_of("aten::mm(bf16[64,128], bf16[128,256]{1,128})->bf16");
  EXPECT_EQ(casts.calls, 1);
  EXPECT_DOUBLE_EQ(casts.bytes, 3.0 * 64 * 128);
  EXPECT_DOUBLE_EQ(casts.operand_elements, 64 * 128 + 128 * 256);
  EXPECT_EQ(fp8_casts_of("aten::mm()->bf16").calls, 0);
}

// fp8: amp-bf16's stage with the bf16 products at the fp8 peak plus their casts; refused without an
// fp8 peak, and refused on a calibration (nothing measures fp8).
TEST(OperatorRoofline, Fp8IsAmpBf16WithFp8ProductsAndTheirCasts) {
  // small_model()'s 2 layers, large enough for its products to be compute-bound.
  const LlamaSpec spec = fixtures::llama_of("small", 2048, 8192, 2, 16, 8, 128, 1024);
  FittedModel empty;
  PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;
  request.config = ParallelConfig{1, 1, 1, 1, 4, 1024};
  // Floors of 0 (not the GPU's 3 us): compute time is the sum of the bounds alone.
  TargetDevice target = make_target_device(gpu(), every_class(0.5, 0.0));
  target.operators = every_class(0.5, 0.0);
  const auto compute_us = [&](const TargetDevice& device, PrecisionName precision) {
    StageResolver resolver(empty, &device);
    request.precision = precision;
    const PredictOutcome outcome = predict(resolver, request);
    EXPECT_TRUE(outcome.ok()) << outcome.reason;
    return outcome.ok() ? outcome.prediction->compute_us : -1.0;
  };
  const double amp = compute_us(target, PrecisionName::kAmpBf16);
  // With the fp8 peak equal to bf16's, fp8 differs from amp-bf16 by its casts alone: slower.
  TargetDevice same_peak = target;
  same_peak.hardware.peak_flops_per_s[ComputeDType::kFp8] = same_peak.hardware.peak_flops_per_s[ComputeDType::kBf16];
  const double fp8_same_peak = compute_us(same_peak, PrecisionName::kFp8);
  EXPECT_GT(fp8_same_peak, amp);
  // Twice the bf16 peak (Hopper's ratio): the compute-bound products halve, which outweighs the casts.
  TargetDevice fast_fp8 = target;
  fast_fp8.hardware.peak_flops_per_s[ComputeDType::kFp8] = 2 * fast_fp8.hardware.peak_flops_per_s[ComputeDType::kBf16];
  EXPECT_LT(compute_us(fast_fp8, PrecisionName::kFp8), amp);
  TargetDevice no_fp8 = target;
  no_fp8.hardware.peak_flops_per_s.erase(ComputeDType::kFp8);
  StageResolver no_fp8_resolver(empty, &no_fp8);
  request.precision = PrecisionName::kFp8;
  const PredictOutcome refused = predict(no_fp8_resolver, request);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.reason.find("no matrix_product time for fp8 math"), std::string::npos) << refused.reason;
  StageResolver calibrated(empty, StagePolicy::kTracedThenBuilt);
  const PredictOutcome not_measured = predict(calibrated, request);
  ASSERT_FALSE(not_measured.ok());
  EXPECT_NE(not_measured.reason.find("fp8 is predicted from a hardware description only"), std::string::npos);
}

}  // namespace
}  // namespace itertime::predict
