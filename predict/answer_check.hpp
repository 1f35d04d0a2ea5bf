// answer_check.hpp: whether a prediction is one a person can trust, as findings: the checks `itertime
// predict` runs before it prints an answer (and `plan` can run on each candidate). Pure functions.
// Findings, causes first, the symptom last (code: what it means; each refuses the answer, unless the
// user asks to see it anyway, except where said):
//  - precision_not_calibrated: the times come from a calibration that never traced the precision (e.g.
//    fp16 on a CPU LibTorch without fp16 matrix products: skipped); its operators at that precision were
//    never timed.
//  - operators_without_time: operators of a built stage that had neither a profile nor a regression of
//    their (operator, dtypes) group: priced at zero, so the iteration misses their time altogether.
//    Refused when they are more than kMaxZeroPricedShare of the built operators (a precision never
//    profiled: most of them); a few (a recipe's or context parallelism's rare operators, e.g. 1 of 219 with
//    ovl, 15 of 295 with cp 2 on the local CPU calibration) are a finding that does not refuse: shown as
//    a FLAG line, the answer printed.
//  - far_extrapolation: most of the compute time (> kFarExtrapolatedFraction) comes from the operator
//    regression AND the largest matrix product is more than kFarShapeReach times the FLOPs of the largest
//    operator the calibration profiled. The regression's own check (op_regression.hpp) scores it on the
//    largest third of the profiled shapes after fitting on the rest: a reach of about 1.5-4x. Beyond
//    8x nothing measured it, and when it carries most of the time the answer is the regression's guess.
//    Either alone is not refused: a large shape whose time is mostly profiled, or a built configuration
//    of profiled-like sizes (a new sequence length, a new layout), is what the builder is for.
//  - faster_than_peak: the model FLOPs per second exceed the device's dense peak for the precision's math
//    (MFU > kMaxPlausibleMfu): no run can be that fast, so the figures it rests on are wrong for it.
//  - exceeds_device_memory (issue 44): the layout's peak memory plus what the process holds beside it
//    (memory_reserve_bytes: the CUDA context, workspaces, NCCL's buffers) is more than the device has:
//    the run would stop with an out-of-memory error, so its time is no answer. The hint names what lowers
//    the memory.
// Inputs that are unknown are left at their defaults and their checks pass (no MFU without a peak, no
// precision check without a calibration, no reach when either FLOP count is 0).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/training_techniques.hpp"
#include "predict/model/fitted_model.hpp"

namespace itertime::predict {

inline constexpr double kMaxPlausibleMfu = 1.0;          // 100 % of the dense peak
inline constexpr double kFarExtrapolatedFraction = 0.5;  // most of the compute time from the regression
inline constexpr double kFarShapeReach = 8.0;            // largest matrix product / largest profiled operator
inline constexpr double kMaxZeroPricedShare = 0.10;      // of the built operators, priced at zero

struct AnswerFacts {
  std::optional<double> mfu;           // model FLOPs utilisation (1 = 100 %), when the device has a peak
  int64_t operators = 0;               // operators of the built stages
  int64_t operators_without_time = 0;  // of them, priced at zero (no profile, no regression)
  std::string precision;               // the requested precision's name (e.g. "fp16")
  bool blind = false;                  // the precision-blind baseline (fp32 traces whatever the precision)
  // The precisions the calibration traced or ran; empty: the times do not come from a calibration
  // (a described device, the framework model), and the precision check passes.
  std::set<std::string> calibrated_precisions;
  double extrapolated_fraction = 0;   // share of compute time from the operator regression
  double largest_matmul_flops = 0;    // the configuration's largest matrix product, FLOPs per call
  double largest_profiled_flops = 0;  // the calibration's largest profiled operator, FLOPs per call
  int64_t peak_memory_bytes = 0;      // the layout's peak (allocated) memory per GPU; 0: unknown
  int64_t memory_reserve_bytes = 0;   // beside it: CUDA context, workspaces, NCCL buffers
  double device_memory_bytes = 0;     // the device's memory (GiB as the driver reports it); 0: no limit known
};

struct Finding {
  std::string code;     // precision_not_calibrated | operators_without_time | far_extrapolation | faster_than_peak |
                        // exceeds_device_memory
  bool refuse = true;   // false: shown (a FLAG line), the answer still printed
  std::string message;  // what is wrong, with its figures (one line, no trailing period)
  std::string hint;     // what to do about it (one line)
};

// Every finding, in the order above; empty when the answer passes.
std::vector<Finding> check_answer(const AnswerFacts& facts);

// The precisions a fitted model's calibration traced (its precision-aware stage keys) or ran as ground
// truth; empty for a model without calibration data.
std::set<std::string> calibrated_precisions(const FittedModel& model);

// The FLOPs of the largest operator the calibration profiled (0: none).
double largest_profiled_flops(const FittedModel& model);

// The FLOPs of the largest matrix product one rank runs per call for the layout (a projection, an MLP
// GEMM, the attention scores or the LM head, the head divided by tp with the vocabulary-parallel head).
double largest_matmul_flops(const LlamaSpec& model, const ParallelConfig& config, const TrainingTechniques& techniques);

}  // namespace itertime::predict
