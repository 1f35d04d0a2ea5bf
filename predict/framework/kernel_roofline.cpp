// kernel_roofline.cpp: a GPU's operator roofline from its published kernel figures (kernel_roofline.hpp).
#include "predict/framework/kernel_roofline.hpp"

#include <algorithm>

namespace itertime::predict::framework {

OperatorRoofline roofline_from_kernel_figures(const GpuKernelFigures& figures, const HardwareSpec& hardware) {
  OperatorRoofline roofline;
  roofline.fitted_on = hardware.name;
  roofline.fitted_from = "published kernel figures " + figures.shown_path();
  const double launch_us = figures.launch_overhead_us;
  auto efficiency = [](double achieved, double peak) { return peak > 0 ? std::min(1.0, achieved / peak) : 0.0; };
  const GemmShape large{8192, 8192, 8192};
  for (ComputeDType dtype :
       {ComputeDType::kFp32, ComputeDType::kTf32, ComputeDType::kBf16, ComputeDType::kFp16, ComputeDType::kFp8}) {
    const std::optional<double> peak = hardware.peak(dtype);
    if (!peak || *peak <= 0) continue;
    const ComputeDType measured = dtype == ComputeDType::kFp16 ? ComputeDType::kBf16 : dtype;  // the figures' rule
    if (figures.gemm.count(measured) == 0 && figures.gemm_lattice.count(measured) == 0) continue;
    const double time_us = figures.gemm_time_us(measured, large) - launch_us;
    if (time_us <= 0) continue;
    roofline.matrix[dtype] = ClassEfficiency{efficiency(large.flops() / (time_us * 1e-6), *peak), launch_us, 0, 0.0};
  }
  const std::optional<double> bf16_peak = hardware.peak(ComputeDType::kBf16);
  if (bf16_peak &&
      (figures.attention.count(ComputeDType::kBf16) != 0 || figures.attention_curves.count(ComputeDType::kBf16) != 0)) {
    AttentionShape shape;
    shape.batch = 1, shape.heads = 32, shape.kv_heads = 32, shape.seq_q = 4096, shape.seq_kv = 4096, shape.head_dim = 128;
    shape.causal = true;
    const double time_us = figures.attention_time_us(ComputeDType::kBf16, shape, false) - launch_us;
    if (time_us > 0) {
      const ClassEfficiency attention{efficiency(shape.forward_flops() / (time_us * 1e-6), *bf16_peak), launch_us, 0, 0.0};
      roofline.attention[ComputeDType::kBf16] = attention;
      roofline.attention[ComputeDType::kFp16] = attention;
    }
  }
  const double bandwidth = efficiency(figures.memory_bandwidth_bytes_per_s, hardware.memory_bandwidth_bytes_per_s);
  for (OperatorClass op_class : all_operator_classes()) {
    if (is_compute_bound(op_class)) continue;
    if (op_class == OperatorClass::kView) {
      roofline.memory[{op_class, ComputeDType::kFp32}] = ClassEfficiency{1.0, 0.0, 0, 0.0};
      continue;
    }
    for (ComputeDType dtype : all_compute_dtypes())
      roofline.memory[{op_class, dtype}] = ClassEfficiency{bandwidth, launch_us, 0, 0.0};
  }
  return roofline;
}

}  // namespace itertime::predict::framework
