// validation_drift.hpp: the machine's drift beside a validation (issue 36): per occupancy, how far the
// speed reference the ground truth took lies from the one the operator profiles took, for the profiling
// pass the fit used and for pass 0, and whether the largest of them exceeds the measurement floor.
// Invariants:
//  - Every figure comes from common/speed_drift.hpp (choose_ops_passes, drift_by_occupancy, ops_passes,
//    largest_compute_drift_pct): the pass used per occupancy is the fit's (predict/fit_model.hpp), and
//    nothing here reads a ground-truth step time.
//  - known is false when the calibration has no speed-reference sample (older files): no occupancy, no
//    figure, never above the floor.
//  - above_floor: |largest_compute_pct| > the report's overall floor; false when either is unknown (NaN).
//  - first_pass_mape_pct is the overall precision-aware MAPE with the first profiles only (fit option
//    first_profiles_only), filled by validation_run only when some occupancy used a pass other than 0;
//    NaN otherwise.
#pragma once

#include <limits>
#include <vector>

#include "common/speed_drift.hpp"

namespace itertime::validate {

struct DriftOccupancy {
  int occupancy = 1;
  int ops_pass = 0;         // the profiling pass the fit used here
  std::vector<int> passes;  // the profiling passes taken here, ascending (0: calibrate ops; 1..: calibrate drift)
  // Ground truth against ops_pass, in % (+: slower during the ground truth); NaN where a side lacks the part.
  double matmul_pct = 0, elementwise_pct = 0, allreduce_pct = 0, compute_pct = 0;
  // Ground truth against pass 0 (the first profiles): its compute drift; NaN when pass 0 has no sample here.
  double first_pass_compute_pct = std::numeric_limits<double>::quiet_NaN();
};

struct DriftSummary {
  bool known = false;                       // the calibration holds speed-reference samples
  std::vector<DriftOccupancy> occupancies;  // ascending; those with samples of both the profiles and the ground truth
  double largest_compute_pct = std::numeric_limits<double>::quiet_NaN();  // signed; NaN when no occupancy
  bool above_floor = false;
  double first_pass_mape_pct = std::numeric_limits<double>::quiet_NaN();
  // Whether the fit used a pass other than 0 somewhere (then the first-profiles MAPE is worth computing).
  bool uses_remeasured_passes() const;
};

// The drift of a calibration's speed-reference samples (OpsRecords::reference); above_floor left false.
DriftSummary summarize_drift(const std::vector<ReferenceSample>& samples);

// Sets above_floor against a floor in % (MapeEntry::floor_pct).
void compare_with_floor(DriftSummary& drift, double floor_pct);

}  // namespace itertime::validate
