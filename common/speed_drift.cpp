// speed_drift.cpp: drift of the speed reference between operator profiles and ground truth (speed_drift.hpp).
#include "common/speed_drift.hpp"

#include <cmath>
#include <limits>
#include <set>

#include "common/enum_names.hpp"
#include "common/errors.hpp"
#include "common/stats.hpp"

namespace itertime {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// 100 * (mean(b) / mean(a) - 1) over the finite values; NaN when either side has none.
double mean_change_pct(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> fa, fb;
  for (double v : a)
    if (std::isfinite(v) && v > 0) fa.push_back(v);
  for (double v : b)
    if (std::isfinite(v) && v > 0) fb.push_back(v);
  if (fa.empty() || fb.empty()) return kNaN;
  return 100.0 * (stats::mean(fb) / stats::mean(fa) - 1.0);
}

OccupancyDrift drift_at(const std::vector<ReferenceSample>& samples, int occupancy, int pass) {
  OccupancyDrift drift;
  drift.occupancy = occupancy;
  drift.ops_pass = pass;
  std::vector<double> ops_mm, ops_ew, ops_ar, gt_mm, gt_ew, gt_ar;
  for (const ReferenceSample& s : samples) {
    if (s.occupancy != occupancy) continue;
    if (s.stage == ReferenceStage::kOps && s.pass == pass) {
      ++drift.ops_samples;
      ops_mm.push_back(s.matmul_us);
      ops_ew.push_back(s.elementwise_us);
      ops_ar.push_back(s.allreduce_us);
    } else if (s.stage == ReferenceStage::kGroundTruth) {
      ++drift.groundtruth_samples;
      gt_mm.push_back(s.matmul_us);
      gt_ew.push_back(s.elementwise_us);
      gt_ar.push_back(s.allreduce_us);
    }
  }
  drift.matmul_pct = mean_change_pct(ops_mm, gt_mm);
  drift.elementwise_pct = mean_change_pct(ops_ew, gt_ew);
  drift.allreduce_pct = mean_change_pct(ops_ar, gt_ar);
  return drift;
}

std::set<int> occupancies_with(const std::vector<ReferenceSample>& samples, ReferenceStage stage) {
  std::set<int> found;
  for (const ReferenceSample& s : samples)
    if (s.stage == stage) found.insert(s.occupancy);
  return found;
}

constexpr EnumName<ReferenceStage> kReferenceStageNames[] = {
    {ReferenceStage::kComm, "comm"}, {ReferenceStage::kOps, "ops"}, {ReferenceStage::kGroundTruth, "groundtruth"}};
static_assert(enum_names_one_to_one(kReferenceStageNames));

}  // namespace

std::string to_string(ReferenceStage stage) { return name_of(kReferenceStageNames, stage, "reference stage"); }

ReferenceStage parse_reference_stage(const std::string& text) {
  if (const auto stage = value_named(kReferenceStageNames, text)) return *stage;
  throw InternalError("unknown reference stage '" + text + "'", __FILE__, __LINE__);
}

double OccupancyDrift::compute_pct() const {
  if (!std::isfinite(matmul_pct)) return elementwise_pct;
  if (!std::isfinite(elementwise_pct)) return matmul_pct;
  return 0.5 * (matmul_pct + elementwise_pct);
}

std::vector<int> ops_passes(const std::vector<ReferenceSample>& samples, int occupancy) {
  std::set<int> passes;
  for (const ReferenceSample& s : samples)
    if (s.stage == ReferenceStage::kOps && s.occupancy == occupancy) passes.insert(s.pass);
  return {passes.begin(), passes.end()};
}

std::vector<OccupancyDrift> drift_by_occupancy(const std::vector<ReferenceSample>& samples,
                                               const std::map<int, int>& ops_pass_of_occupancy) {
  const std::set<int> ground_truth = occupancies_with(samples, ReferenceStage::kGroundTruth);
  std::vector<OccupancyDrift> drifts;
  for (int occupancy : occupancies_with(samples, ReferenceStage::kOps)) {
    if (!ground_truth.count(occupancy)) continue;
    const auto chosen = ops_pass_of_occupancy.find(occupancy);
    const int pass = chosen != ops_pass_of_occupancy.end() ? chosen->second : 0;
    OccupancyDrift drift = drift_at(samples, occupancy, pass);
    if (drift.ops_samples > 0) drifts.push_back(drift);
  }
  return drifts;
}

std::map<int, int> choose_ops_passes(const std::vector<ReferenceSample>& samples) {
  const std::set<int> ground_truth = occupancies_with(samples, ReferenceStage::kGroundTruth);
  std::map<int, int> chosen;
  for (int occupancy : occupancies_with(samples, ReferenceStage::kOps)) {
    const std::vector<int> passes = ops_passes(samples, occupancy);
    chosen[occupancy] = passes.front();
    if (!ground_truth.count(occupancy)) continue;
    double best = std::numeric_limits<double>::infinity();
    for (int pass : passes) {
      const double magnitude = std::fabs(drift_at(samples, occupancy, pass).compute_pct());
      if (std::isfinite(magnitude) && magnitude < best) {
        best = magnitude;
        chosen[occupancy] = pass;
      }
    }
  }
  return chosen;
}

std::vector<int> occupancies_to_remeasure(const std::vector<ReferenceSample>& samples, double threshold_pct,
                                          int max_extra_passes) {
  std::vector<int> todo;
  for (const OccupancyDrift& drift : drift_by_occupancy(samples, choose_ops_passes(samples))) {
    const double magnitude = std::fabs(drift.compute_pct());
    const auto passes = ops_passes(samples, drift.occupancy).size();
    if (std::isfinite(magnitude) && magnitude > threshold_pct && passes < static_cast<std::size_t>(1 + max_extra_passes)) {
      todo.push_back(drift.occupancy);
    }
  }
  return todo;
}

double largest_compute_drift_pct(const std::vector<OccupancyDrift>& drifts) {
  double largest = 0;
  for (const OccupancyDrift& drift : drifts) {
    const double value = drift.compute_pct();
    if (std::isfinite(value) && std::fabs(value) > std::fabs(largest)) largest = value;
  }
  return largest;
}

}  // namespace itertime
