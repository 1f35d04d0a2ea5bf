// operator_roofline.hpp: an operator time that transfers between devices: a roofline of the device's
// description (common/hardware_spec.hpp) with an efficiency and a per-call floor per operator class,
// fitted on a calibrated device's /ops and carried to a device nobody calibrated (issue 18, item 2).
// Invariants:
//  - Operator classes come from the operator's name alone (its overload suffix ignored), except that
//    every call of the optimizer phase that is not a view is kOptimizer. Views and allocations (kView)
//    move no data: their time is the floor alone.
//  - time_us = sqrt(floor_us^2 + bound_us^2) (a smooth maximum: small calls cost their
//    floor, large ones their bound), with bound_us:
//      matrix products: max(flops / (efficiency * peak[math dtype]), bytes / (memory efficiency * bandwidth));
//      attention: attention_flops / (efficiency * peak[math dtype]) (FLOPs from the call's shapes: 4 b h s_q s_k d
//        forward, halved when causal; its backward 2.5 times that);
//      every other class: bytes / (efficiency * bandwidth).
//    Peaks and bandwidths are one rank's share (rank_rates). A math dtype the device has no peak for
//    gives no time (nullopt), never a guess.
//  - Fitting (fit_class_efficiency): least squares of log(predicted / measured) over a grid of
//    efficiencies and floors, refined twice around the best point; deterministic. Memory-bound classes
//    are fitted before matrix products, whose memory term takes the fitted elementwise efficiency.
//  - Carrying to another device (carry_to) keeps the efficiencies, capped at 1 (above 1 a source ran
//    from its caches, or its peak was measured low), and replaces every floor by the target's: a per-call floor is the device's
//    and its software stack's (dispatch, kernel launch), not the operator's. GPUs: kGpuKernelFloorUs per kernel, 0 for views (no
//    kernel runs).
//  - Pure functions of their arguments; the efficiencies are saved with the fitted model
//    (predict/model/fitted_model_archive.hpp) and as JSON (data/efficiency/*.json, docs/hardware.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/hardware_spec.hpp"
#include "common/phase.hpp"

namespace itertime::predict {

enum class OperatorClass { kMatrixProduct, kAttention, kElementwise, kNormalization, kCopy, kEmbedding, kOptimizer, kView };
std::string to_string(OperatorClass op_class);  // "matrix_product", "attention", "elementwise", "normalization", "copy",
                                                // "embedding", "optimizer", "view"
OperatorClass parse_operator_class(std::string_view text);
const std::vector<OperatorClass>& all_operator_classes();
bool is_compute_bound(OperatorClass op_class);  // matrix products and attention

OperatorClass classify_operator(std::string_view name, Phase phase);

// The math a call runs in. Matrix products and attention: their first floating input's dtype (an
// attention backward's fp32 log-sum-exp does not make it fp32 math), tf32 for fp32 under TF32 math.
// Memory-bound classes: the widest floating input dtype, as ATen promotes ("fp32,bf16" -> fp32). fp32
// when no input is floating.
ComputeDType math_dtype_of(std::string_view input_dtypes, OperatorClass op_class, bool tf32_math);

// FLOPs of a fused attention call from its signature's first two tensors (q [b, h, s_q, d], k [b, h_k, s_k, d]):
// 4 b h s_q s_k d, halved when the call is causal (is_causal true), times 2.5 for a backward. 0 when
// the signature has no such tensors.
double attention_flops(std::string_view name, std::string_view signature);

// Transformer Engine's fp8 matrix product (PrecisionPolicy::fp8_matmul), from its bf16 signature: one
// scaling cast of its first operand (the activation, or the gradient in the backward: bf16 read, fp8
// written, amax in the same pass, 3 bytes per element, one kernel); the weight's fp8 copy is made once
// per iteration and reused across micro-batches (Megatron's is_first_microbatch), not modelled. The
// product itself reads its operands in fp8: `product_bytes` = the bf16 call's bytes less one byte per
// operand element. calls = 0 when the signature has fewer than two tensors (nothing changes then).
struct Fp8Casts {
  int64_t calls = 0;
  double bytes = 0;
  double operand_elements = 0;  // of both operands
};
Fp8Casts fp8_casts_of(std::string_view signature);

// One rank's share of a device. GPUs: a whole device per rank. A CPU node of C cores, its ranks using
// `threads_per_rank` threads each, `occupancy` ranks busy, running = min(occupancy, C) of them at once:
// compute per running rank = per-core peak times min(threads, C / running) (the node peak / C where the
// description has no per-core figure); memory bandwidth per running rank = node bandwidth / running.
// Ranks beyond the cores take turns; /ops times a call while at most C of them compute, and the
// predictor stretches for the rest by processor sharing.
struct RankRates {
  std::map<ComputeDType, double> peak_flops_per_s;
  double memory_bytes_per_s = 0;
};
RankRates rank_rates(const HardwareSpec& hardware, int64_t occupancy, int threads_per_rank);

struct ClassEfficiency {
  double efficiency = 1.0;   // fraction of the roofline bound the class reaches
  double floor_us = 0.0;     // per-call time added to the bound
  int64_t points = 0;        // calls fitted on (0: not fitted here)
  double fit_rms_log = 0.0;  // root mean square of log(predicted / measured) over them
};

struct OperatorRoofline {
  std::map<ComputeDType, ClassEfficiency> matrix;     // by math dtype
  std::map<ComputeDType, ClassEfficiency> attention;  // by math dtype
  // Every memory-bound class and kView, by math dtype (views: always fp32): a CPU's bf16 element-wise
  // kernels convert every element and run far below its memory bandwidth, its fp32 ones near it.
  std::map<std::pair<OperatorClass, ComputeDType>, ClassEfficiency> memory;
  std::string fitted_on;    // hardware description the efficiencies were fitted against ("" when empty)
  std::string fitted_from;  // calibration file and occupancy, in words
  bool empty() const { return matrix.empty() && memory.empty() && attention.empty(); }
};

// A GPU kernel's per-call floor (docs/hardware.md: an asynchronous empty kernel launch sustains about
// 334,000 calls per second, ~3 us each).
inline constexpr double kGpuKernelFloorUs = 3.0;

// One call's time, or nullopt when the rates have no peak for its math dtype or the roofline has no
// efficiency for its class.
std::optional<double> roofline_time_us(const OperatorRoofline& roofline, const RankRates& rates, OperatorClass op_class,
                                       ComputeDType math, double flops, double bytes);

// One profiled call for fitting: its class, math dtype, FLOPs (attention: attention_flops), bytes, time.
struct ProfiledCall {
  OperatorClass op_class = OperatorClass::kElementwise;
  ComputeDType math = ComputeDType::kFp32;
  double flops = 0, bytes = 0, time_us = 0;
};

// Fits every class with at least `min_points` calls (matrix products and attention per math dtype).
OperatorRoofline fit_operator_roofline(const std::vector<ProfiledCall>& calls, const RankRates& rates,
                                       std::size_t min_points = 3);

// The efficiencies carried to `target`: a matrix or attention dtype fitted on the source keeps its
// efficiency; one that was not (fp8, or tf32 from a CPU) takes the best efficiency fitted among the
// source's matrix dtypes (a dtype the source runs far below its peak reflects the source's kernels for
// it, not the class); attention without a fit takes the matrix efficiency of its dtype. Memory-bound
// classes take, for every dtype the target has a peak for, the best efficiency fitted for the class on
// the source (the same reasoning), capped at 1. Floors become the target's (see the invariants).
OperatorRoofline carry_to(const OperatorRoofline& fitted, const HardwareSpec& target);

// How well efficiencies fitted at one occupancy predict the calls profiled at another (the transfer
// error `fit` reports).
struct TransferCheck {
  int64_t fit_occupancy = 0, check_occupancy = 0;
  int64_t calls = 0;
  double mape_pct = 0;
  double time_weighted_mape_pct = 0;  // sum |predicted - measured| / sum measured
  std::map<OperatorClass, double> class_time_weighted_mape_pct;
};
TransferCheck check_transfer(const OperatorRoofline& fitted, const RankRates& check_rates,
                             const std::vector<ProfiledCall>& check_calls, int64_t fit_occupancy, int64_t check_occupancy);

// JSON text (data/efficiency/*.json) and back; parse errors are UserErrors naming `source`.
std::string roofline_to_json(const OperatorRoofline& roofline);
OperatorRoofline roofline_from_json(const std::string& text, const std::string& source);

}  // namespace itertime::predict
