// predictor.hpp: the precision-aware prediction of one configuration's iteration time, with its
// breakdown, from a FittedModel.
// Invariants:
//  - Per pipeline stage, forward and backward time per micro-batch = the stage's traced operators
//    (counts x profiled time at the configuration's occupancy, dp*tp*pp busy ranks) + its TP
//    all-reduces (comm model, the TP group's consecutive layout, at the dtype the trace recorded).
//  - The pipeline is simulated (predict/schedule.hpp, 1F1B, blocking sends) with P2P at the policy's
//    activation dtype; then the slowest stage's DP gradient-buffer work, DP all-reduce (gradient dtype,
//    the DP group's layout) and optimizer step are added.
//  - Shared cores: when the model has rank slots (a single-node CPU calibration) and the configuration
//    has more ranks than slots but no more than the calibrated node ran, operators take their time at
//    occupancy = slots, the schedule runs with processor sharing (TP all-reduces and transfers
//    unstretched), and the tail's operators are stretched by ranks / slots. Otherwise nothing changes.
//  - blind = true uses the precision-blind traces (everything fp32, no casts, fp32 messages): the
//    ablation baseline.
//  - The calibration factor (per occupancy) multiplies the raw prediction when `calibrated`; it is 1
//    when none was fitted.
//  - A stage without a trace is built from the model (predict/op_builder.hpp) when the request carries
//    the model's LlamaSpec: each built operator takes its profiled time when its signature was profiled,
//    else the regression of its (name, input dtypes) at the occupancy (else at the nearest occupancy
//    with one), counted as extrapolated; the blind variant builds the fp32 stage. Without the
//    spec, a missing trace is refused with a UserError that says which `calibrate ops` job would add it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/groundtruth_store.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "predict/fitted_model.hpp"

namespace itertime::predict {

struct PredictRequest {
  std::string model_name;
  ParallelConfig config;
  PrecisionName precision = PrecisionName::kFp32;
  bool blind = false;
  bool calibrated = true;            // apply the model's fitted Calibration for this occupancy
  const Calibration* override_calibration = nullptr;  // use this one instead (leave-one-out validation)
  const LlamaSpec* model = nullptr;  // when set, stages never traced are built from it (not owned)
};

struct Prediction {
  double total_us = 0;           // calibrated when a factor exists
  double raw_total_us = 0;       // before the calibration factor
  double calibration_factor = 1;
  double op_overhead_us = 0;         // per operator call, included in total_us (not in raw_total_us)
  int64_t op_calls = 0;              // operator calls of the busiest stage per iteration
  // Breakdown of the raw prediction, on the busiest stage (microseconds per iteration):
  double compute_us = 0, tp_comm_us = 0, pp_comm_us = 0, bubble_us = 0, dp_comm_us = 0, optimizer_us = 0;
  double extrapolated_fraction = 0;  // share of compute time from the regression (no usable profile)
  std::vector<double> stage_forward_us, stage_backward_us;  // per micro-batch, TP comm included
  std::vector<std::string> notes;
};

Prediction predict(const FittedModel& model, const PredictRequest& request);

// Fits one per-operator-call overhead for all occupancies (grid search, 0..100 us, minimizing MAPE) and,
// with it, the factor median(measured / prediction) per occupancy and globally, from ground-truth rows
// with status ok, leaving out every row whose (dp,tp,pp) tuple string is in `exclude_tuples`.
CalibrationSet fit_calibration(const FittedModel& model, const std::vector<store::GroundTruthRow>& rows, bool blind,
                               const std::set<std::string>& exclude_tuples);

std::string tuple_of(const store::GroundTruthRow& row);  // "(2,1,2)"

}  // namespace itertime::predict
