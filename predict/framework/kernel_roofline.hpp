// kernel_roofline.hpp: the operator roofline (device/operator_roofline.hpp) of a GPU from its published
// kernel figures (gpu_kernels.hpp), so that itertime's own trainer predicted on a described GPU uses the
// GPU's figures, never efficiencies fitted on a CPU (issue 32, item 2), unless the user names a file.
// Invariants:
//  - Matrix products per dtype the figures measure (fp16 as their rule derives it): the throughput of a
//    large square product (8192^3, the figures' plateau) over the description's dense peak; attention
//    (bf16, fp16): the forward of head dim 128, 4,096 tokens, causal, over the bf16 peak; every
//    memory-bound class and dtype: the achieved bandwidth over the description's. Floors: the figures'
//    launch overhead (views: none). Efficiencies are capped at 1.
//  - fitted_on is the GPU's description, fitted_from names the kernel-figure file: the output says which
//    efficiencies a prediction used.
//  - A pure function of its arguments.
#pragma once

#include "common/hardware_spec.hpp"
#include "predict/device/operator_roofline.hpp"
#include "predict/framework/gpu_kernels.hpp"

namespace itertime::predict::framework {

OperatorRoofline roofline_from_kernel_figures(const GpuKernelFigures& figures, const HardwareSpec& hardware);

}  // namespace itertime::predict::framework
