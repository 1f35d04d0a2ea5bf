// throughput.hpp: what a predicted iteration time means in tokens and FLOPs: tokens per second per rank
// and model FLOPs utilization (MFU) against a hardware description's dense peak.
// Invariants:
//  - Model FLOPs are the training FLOPs of the model, not of the run: LlamaSpec::training_flops_per_token
//    (6 x matmul parameters + 12 x layers x hidden x sequence per token, PaLM's MFU convention, the
//    causal mask not halved) times global batch x sequence. Recomputation, the optimizer and
//    communication add time but no model FLOPs, as MFU is defined.
//  - The peak is the description's dense peak for the math the precision's matrix products run in:
//    fp32 -> fp32, tf32 -> tf32, bf16 and amp-bf16 -> bf16, fp16 and amp-fp16 -> fp16, fp8 -> fp8 (its
//    matrix products' math: an fp8 MFU is against the fp8 peak, twice the bf16 one on Hopper). A description
//    without that figure gives no MFU (nullopt), never a guess.
//  - Devices: a GPU description counts one device per rank (dp x tp x pp x cp); a CPU node description
//    is the whole node, and a calibration of CPU ranks runs on one node (predict/model/fitted_model.hpp), so
//    its ranks share one device's peak.
//  - Pure functions of their arguments.
#pragma once

#include <optional>
#include <string>

#include "common/hardware_spec.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"

namespace itertime::predict {

struct Throughput {
  double tokens_per_s_per_rank = 0;      // global batch x sequence / iteration time / ranks
  double model_flops_per_iteration = 0;  // see the invariants
  std::optional<double> mfu;  // model FLOP/s over the ranks' devices' dense peak, 0..1 (can exceed 1 only if the prediction does)
  std::optional<double> peak_flops_per_s;  // of all the devices the configuration occupies
};

// The math a precision's matrix products run in, as a key of a description's peaks.
ComputeDType compute_dtype_of(PrecisionName precision);

// `iteration_us` > 0. `hardware` may be null (no MFU).
Throughput throughput(const LlamaSpec& model, const ParallelConfig& config, PrecisionName precision, double iteration_us,
                      const HardwareSpec* hardware);

}  // namespace itertime::predict
