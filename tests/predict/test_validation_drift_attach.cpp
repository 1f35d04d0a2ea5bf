// test_validation_drift_attach.cpp: attach_drift and fit_first_profiles (validate/validation.hpp,
// validation_drift.hpp), the two steps `itertime validate` and the Python module share (issue 45):
// the drift is put beside the report and compared with the report's own floor (strictly above it), the
// first-profiles MAPE is the report's holdout's overall MAPE with that model; the first-profiles fit is
// made only where the drift used a re-measured pass (a calibration file is not even opened otherwise).
// Invariants: the drift samples are synthetic; the calibration is the checked-in tests/data/accuracy-cpu.h5
// (read only; it holds one profiling pass, so its first-profiles fit equals its default fit and the
// first-profiles MAPE must equal the report's own).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "common/speed_drift.hpp"
#include "predict/fit_model.hpp"
#include "validate/validation.hpp"
#include "validate/validation_drift.hpp"
#include "tests/unit/reference_samples.hpp"

namespace itertime::validate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::string kCalibration = std::string(ITERTIME_SOURCE_DIR) + "/tests/data/accuracy-cpu.h5";

using itertime::testing::reference_sample;

// Occupancy 1: profiles at 100 / 200 us, the ground truth's matrix product 10 % slower, element-wise
// unchanged: compute drift = the mean of +10 % and 0 % = +5 %. Pass 0 only.
std::vector<ReferenceSample> drifted_by_five() {
  return {reference_sample(ReferenceStage::kOps, 0, 1, 100, 200), reference_sample(ReferenceStage::kGroundTruth, 0, 1, 110, 200)};
}

// Occupancy 2 re-measured: pass 0 at 100, pass 1 at 120, the ground truth at 121 (element-wise equal):
// pass 1 is nearer, so the fit uses it.
std::vector<ReferenceSample> remeasured() {
  return {reference_sample(ReferenceStage::kOps, 0, 2, 100, 200), reference_sample(ReferenceStage::kOps, 1, 2, 120, 200),
          reference_sample(ReferenceStage::kGroundTruth, 0, 2, 121, 200)};
}

// A report whose overall floor is `floor_pct` (two rows of that round spread).
ValidationReport report_with_floor(double floor_pct) {
  ValidationReport report;
  for (int i = 0; i < 2; ++i) {
    ValidationRow row;
    row.key = row.tuple = "(1,1," + std::to_string(i + 1) + ")";
    row.precision = "bf16";
    row.status = "ok";
    row.measured_us = 1000;
    row.predicted_us = 1050;
    row.ape_pct = 5;
    row.round_spread_pct = floor_pct;
    row.built_status = "ok";
    report.rows.push_back(row);
  }
  summarize_groups(report);
  return report;
}

TEST(AttachDrift, TheDriftIsComparedWithTheReportsOwnFloorStrictly) {
  const DriftSummary drift = summarize_drift(drifted_by_five());
  ASSERT_EQ(drift.occupancies.size(), 1u);
  ASSERT_NEAR(drift.largest_compute_pct, 5.0, 1e-9);
  for (const auto& [floor, above] : std::vector<std::pair<double, bool>>{{4.0, true}, {6.0, false}}) {
    ValidationReport report = report_with_floor(floor);
    ASSERT_NEAR(report.overall.floor_pct, floor, 1e-12);
    attach_drift(report, drift, nullptr, {});
    EXPECT_EQ(report.drift.above_floor, above) << "floor " << floor;
    EXPECT_TRUE(report.drift.known);
    ASSERT_EQ(report.drift.occupancies.size(), 1u);
    EXPECT_EQ(report.drift.occupancies[0].occupancy, 1);
    EXPECT_NEAR(report.drift.occupancies[0].matmul_pct, 10.0, 1e-9);
    EXPECT_TRUE(std::isnan(report.drift.first_pass_mape_pct)) << "no first-profiles model given";
  }
  // The floor the drift is compared with is the report's: a drift of exactly the floor is not above it.
  ValidationReport equal = report_with_floor(drift.largest_compute_pct);
  attach_drift(equal, drift, nullptr, {});
  EXPECT_FALSE(equal.drift.above_floor);
  // No floor (one round): never above it.
  ValidationReport no_floor = report_with_floor(kNaN);
  attach_drift(no_floor, drift, nullptr, {});
  EXPECT_FALSE(no_floor.drift.above_floor);
}

TEST(FitFirstProfiles, OnlyWhereTheDriftUsedARemeasuredPass) {
  const DriftSummary first_only = summarize_drift(drifted_by_five());
  EXPECT_FALSE(first_only.uses_remeasured_passes());
  // Not even opened: a path that does not exist gives nothing, without an error.
  EXPECT_FALSE(fit_first_profiles("/nonexistent/calibration.h5", first_only).has_value());
  EXPECT_FALSE(fit_first_profiles("/nonexistent/calibration.h5", DriftSummary{}).has_value());
  const DriftSummary again = summarize_drift(remeasured());
  ASSERT_TRUE(again.uses_remeasured_passes());
  EXPECT_EQ(again.occupancies.at(0).ops_pass, 1);
  EXPECT_THROW(fit_first_profiles("/nonexistent/calibration.h5", again), UserError) << "it reads the file to fit";
}

TEST(AttachDrift, TheFirstProfilesMapeIsTheReportsHoldoutsOverallMape) {
  const predict::FittedModel model = predict::fit_model(kCalibration);
  std::vector<store::GroundTruthRecord> rows;
  {
    h5::Store store = h5::Store::open(kCalibration, false);
    rows = store::read_groundtruth_records(store);
  }
  ASSERT_FALSE(rows.empty());
  const DriftSummary drift = summarize_drift(remeasured());
  const std::optional<predict::FittedModel> first = fit_first_profiles(kCalibration, drift);
  ASSERT_TRUE(first.has_value());
  double tuple_mape = kNaN;
  for (const Holdout holdout : {Holdout::kTuple, Holdout::kPrecision}) {
    ValidationReport report = validate(model, rows, nullptr, holdout);
    ASSERT_TRUE(std::isfinite(report.overall.mape_pct));
    attach_drift(report, drift, &*first, rows);
    // One profiling pass in the file: the first-profiles fit is the fit; under the same holdout the same MAPE.
    EXPECT_NEAR(report.drift.first_pass_mape_pct, report.overall.mape_pct, 1e-9) << to_string(holdout);
    EXPECT_EQ(report.drift.occupancies.size(), 1u);
    if (holdout == Holdout::kTuple) {
      tuple_mape = report.overall.mape_pct;
    } else {
      EXPECT_NE(report.overall.mape_pct, tuple_mape) << "the two holdouts differ, so the holdout is the report's";
    }
  }
}

}  // namespace
}  // namespace itertime::validate
