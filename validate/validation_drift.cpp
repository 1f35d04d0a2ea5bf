// validation_drift.cpp: the drift beside a validation, from common/speed_drift.hpp (validation_drift.hpp).
#include "validate/validation_drift.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "predict/fit_model.hpp"
#include "validate/validation.hpp"

namespace itertime::validate {

bool DriftSummary::uses_remeasured_passes() const {
  return std::any_of(occupancies.begin(), occupancies.end(), [](const DriftOccupancy& o) { return o.ops_pass != 0; });
}

DriftSummary summarize_drift(const std::vector<ReferenceSample>& samples) {
  DriftSummary summary;
  summary.known = !samples.empty();
  if (!summary.known) return summary;
  const std::vector<OccupancyDrift> used = drift_by_occupancy(samples, choose_ops_passes(samples));
  std::map<int, double> first_pass_compute;  // occupancy -> pass 0's compute drift
  for (const OccupancyDrift& first : drift_by_occupancy(samples)) first_pass_compute[first.occupancy] = first.compute_pct();
  for (const OccupancyDrift& drift : used) {
    DriftOccupancy row;
    row.occupancy = drift.occupancy;
    row.ops_pass = drift.ops_pass;
    row.passes = ops_passes(samples, drift.occupancy);
    row.matmul_pct = drift.matmul_pct;
    row.elementwise_pct = drift.elementwise_pct;
    row.allreduce_pct = drift.allreduce_pct;
    row.compute_pct = drift.compute_pct();
    const auto first = first_pass_compute.find(drift.occupancy);
    if (first != first_pass_compute.end()) row.first_pass_compute_pct = first->second;
    summary.occupancies.push_back(row);
  }
  if (!used.empty()) summary.largest_compute_pct = largest_compute_drift_pct(used);
  return summary;
}

void compare_with_floor(DriftSummary& drift, double floor_pct) {
  drift.above_floor =
      std::isfinite(drift.largest_compute_pct) && std::isfinite(floor_pct) && std::fabs(drift.largest_compute_pct) > floor_pct;
}

void attach_drift(ValidationReport& report, const DriftSummary& drift, const predict::FittedModel* first_profiles,
                  const std::vector<store::GroundTruthRecord>& groundtruth) {
  report.drift = drift;
  compare_with_floor(report.drift, report.overall.floor_pct);
  if (first_profiles) {
    report.drift.first_pass_mape_pct = validate(*first_profiles, groundtruth, nullptr, report.holdout).overall.mape_pct;
  }
}

std::optional<predict::FittedModel> fit_first_profiles(const std::string& calibration_path, const DriftSummary& drift) {
  if (!drift.uses_remeasured_passes()) return std::nullopt;
  predict::FitOptions first_only;
  first_only.first_profiles_only = true;
  return predict::fit_model(calibration_path, first_only);
}

}  // namespace itertime::validate
