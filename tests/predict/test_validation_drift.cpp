// test_validation_drift.cpp: the machine drift beside a validation (validate/validation_drift.hpp, issue
// 36): the drift lines and the "above the floor" sentence of the console report, the JSON's drift object
// and first_pass_mape_pct, the line of a calibration without a speed reference, and the fit option that
// takes the first profiles (pass 0) where the default takes the pass nearest the ground truth's state.
// Invariants: reference samples, operator timings and report rows are synthetic (no file is read); JSON
// files are written only in a temporary folder, removed afterwards.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/speed_drift.hpp"
#include "predict/fit_model.hpp"
#include "tests/unit/temp_dir.hpp"
#include "validate/validation.hpp"
#include "validate/validation_drift.hpp"
#include "validate/validation_report.hpp"
#include "tests/unit/reference_samples.hpp"

namespace itertime::validate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using itertime::testing::reference_sample;

// Occupancy 1 profiled once, its ground truth slower by `groundtruth_change_pct` (matrix product; the
// element-wise pass moves by a fifth of it, so the compute drift, their mean, is 0.6 of it).
std::vector<ReferenceSample> one_occupancy(double groundtruth_change_pct) {
  return {reference_sample(ReferenceStage::kOps, 0, 1, 100, 200), reference_sample(ReferenceStage::kOps, 0, 1, 100, 200),
          reference_sample(ReferenceStage::kGroundTruth, 0, 1, 100 * (1 + groundtruth_change_pct / 100),
                           200 * (1 + groundtruth_change_pct / 500)),
          reference_sample(ReferenceStage::kGroundTruth, 1, 1, 100 * (1 + groundtruth_change_pct / 100),
                           200 * (1 + groundtruth_change_pct / 500))};
}

// Occupancy 4 profiled twice: pass 0 at 100 us, pass 1 (calibrate drift) at 112 us; the ground truth at
// 115 us (element-wise unchanged): pass 0's compute drift +7.5 %, pass 1's +1.3 %, so pass 1 is chosen.
std::vector<ReferenceSample> remeasured_occupancy() {
  std::vector<ReferenceSample> samples = one_occupancy(0.5);
  samples.push_back(reference_sample(ReferenceStage::kOps, 0, 4, 100, 200, 50));
  samples.push_back(reference_sample(ReferenceStage::kOps, 1, 4, 112, 200, 50));
  samples.push_back(reference_sample(ReferenceStage::kGroundTruth, 0, 4, 115, 200, 51));
  return samples;
}

// A report of two scored rows, overall floor 1.25 % and MAPE 6 %, with the drift of `samples`.
ValidationReport report_with(const std::vector<ReferenceSample>& samples) {
  ValidationReport report;
  report.calibration_file = "synthetic.h5";
  for (const double ape : {4.0, 8.0}) {
    ValidationRow row;
    row.key = row.tuple = "(1,1," + std::to_string(static_cast<int>(ape) / 4) + ")";
    row.precision = "bf16";
    row.status = "ok";
    row.measured_us = 1000;
    row.predicted_us = 1000 * (1 + ape / 100);
    row.ape_pct = ape;
    row.round_spread_pct = 1.25;
    row.built_status = "ok";
    report.rows.push_back(row);
  }
  summarize_groups(report);
  report.drift = summarize_drift(samples);
  compare_with_floor(report.drift, report.overall.floor_pct);
  return report;
}

std::string printed(const ValidationReport& report) {
  ::testing::internal::CaptureStdout();
  print_report(report);
  return ::testing::internal::GetCapturedStdout();
}

TEST(ValidationDrift, ReportSaysWhenDriftExceedsTheFloor) {
  const ValidationReport report = report_with(one_occupancy(10));
  ASSERT_TRUE(report.drift.known);
  ASSERT_EQ(report.drift.occupancies.size(), 1u);
  EXPECT_NEAR(report.drift.largest_compute_pct, 6.0, 1e-9);
  EXPECT_TRUE(report.drift.above_floor);
  const std::string text = printed(report);
  EXPECT_NE(text.find("# machine drift (speed reference: ground truth against the operator profiles; + = slower"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("#   1 rank: matrix product +10.0%, element-wise +2.0%,  all-reduce -       (profiling pass 0)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# drift above the floor (6.0% > 1.25%)"), std::string::npos) << text;
  EXPECT_NE(text.find("groundtruth.max_extra_rounds"), std::string::npos) << text;
  // Beside the floor: after its line, before the builder-only MAPE.
  EXPECT_LT(text.find("# measurement floor:"), text.find("# machine drift"));
  EXPECT_LT(text.find("# machine drift"), text.find("# builder-only MAPE"));
  EXPECT_EQ(text.find("with the first profiles only"), std::string::npos) << text;  // pass 0 everywhere
}

TEST(ValidationDrift, ReportIsQuietBelowTheFloor) {
  const ValidationReport report = report_with(one_occupancy(-0.5));
  EXPECT_FALSE(report.drift.above_floor);
  EXPECT_NEAR(report.drift.largest_compute_pct, -0.3, 1e-9);
  const std::string text = printed(report);
  EXPECT_NE(text.find("matrix product -0.5%"), std::string::npos) << text;
  EXPECT_EQ(text.find("drift above the floor"), std::string::npos) << text;
  EXPECT_NE(text.find("# drift within the floor (0.3% <= 1.25%)"), std::string::npos) << text;
}

TEST(ValidationDrift, NoFloorIsNeverAboveIt) {
  DriftSummary drift = summarize_drift(one_occupancy(10));
  compare_with_floor(drift, kNaN);
  EXPECT_FALSE(drift.above_floor);
  compare_with_floor(drift, 5.5);
  EXPECT_TRUE(drift.above_floor);
  compare_with_floor(drift, 6.5);
  EXPECT_FALSE(drift.above_floor);
}

TEST(ValidationDrift, ReportNamesTheReMeasuredPassAndPassZero) {
  ValidationReport report = report_with(remeasured_occupancy());
  ASSERT_EQ(report.drift.occupancies.size(), 2u);
  const DriftOccupancy& four = report.drift.occupancies[1];
  EXPECT_EQ(four.occupancy, 4);
  EXPECT_EQ(four.ops_pass, 1);
  EXPECT_EQ(four.passes, (std::vector<int>{0, 1}));
  EXPECT_NEAR(four.compute_pct, 50 * (115.0 / 112 - 1), 1e-9);
  EXPECT_NEAR(four.first_pass_compute_pct, 7.5, 1e-9);
  EXPECT_NEAR(four.allreduce_pct, 2.0, 1e-9);
  EXPECT_TRUE(report.drift.uses_remeasured_passes());
  EXPECT_NEAR(report.drift.largest_compute_pct, 50 * (115.0 / 112 - 1), 1e-9);  // of the passes used, not pass 0's 7.5 %
  EXPECT_TRUE(report.drift.above_floor);
  report.drift.first_pass_mape_pct = 9.5;
  const std::string text = printed(report);
  EXPECT_NE(text.find("#   1 rank : matrix product +0.5%"), std::string::npos) << text;
  EXPECT_NE(text.find("#   4 ranks: matrix product +2.7%,  element-wise +0.0%,  all-reduce +2.0%   (pass 1, re-measured; "
                      "pass 0 was +7.5%)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# with the first profiles only (pass 0 at every occupancy) the overall MAPE (tuple) is 9.50% "
                      "precision-aware,\n#   against 6.00% above"),
            std::string::npos)
      << text;
}

TEST(ValidationDrift, JsonCarriesTheDriftAndTheFirstProfilesMape) {
  ValidationReport report = report_with(remeasured_occupancy());
  report.drift.first_pass_mape_pct = 9.5;
  const testing::TempDir dir;
  write_json(report, dir.file("v.json"));
  const nlohmann::json json = nlohmann::json::parse(testing::read_bytes(dir.file("v.json")));
  const nlohmann::json& drift = json.at("drift");
  EXPECT_TRUE(drift.at("known").get<bool>());
  EXPECT_TRUE(drift.at("above_floor").get<bool>());
  EXPECT_NEAR(drift.at("largest_compute_pct").get<double>(), 50 * (115.0 / 112 - 1), 1e-9);
  ASSERT_EQ(drift.at("occupancies").size(), 2u);
  const nlohmann::json& one = drift.at("occupancies").at(0);
  EXPECT_EQ(one.at("occupancy"), 1);
  EXPECT_EQ(one.at("ops_pass"), 0);
  EXPECT_EQ(one.at("passes"), nlohmann::json::array({0}));
  EXPECT_NEAR(one.at("matmul_pct").get<double>(), 0.5, 1e-9);
  EXPECT_NEAR(one.at("elementwise_pct").get<double>(), 0.1, 1e-9);
  EXPECT_TRUE(one.at("allreduce_pct").is_null());  // no all-reduce at occupancy 1
  EXPECT_NEAR(one.at("compute_pct").get<double>(), 0.3, 1e-9);
  EXPECT_NEAR(one.at("first_pass_compute_pct").get<double>(), 0.3, 1e-9);
  const nlohmann::json& four = drift.at("occupancies").at(1);
  EXPECT_EQ(four.at("ops_pass"), 1);
  EXPECT_EQ(four.at("passes"), nlohmann::json::array({0, 1}));
  EXPECT_NEAR(four.at("first_pass_compute_pct").get<double>(), 7.5, 1e-9);
  EXPECT_NEAR(four.at("allreduce_pct").get<double>(), 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(json.at("mape_overall").at("first_pass_mape_pct").get<double>(), 9.5);

  write_json(report_with(one_occupancy(1)), dir.file("pass0.json"));
  const nlohmann::json pass0 = nlohmann::json::parse(testing::read_bytes(dir.file("pass0.json")));
  EXPECT_TRUE(pass0.at("mape_overall").at("first_pass_mape_pct").is_null());  // not computed: pass 0 everywhere
  EXPECT_FALSE(pass0.at("drift").at("above_floor").get<bool>());
}

TEST(ValidationDrift, CalibrationWithoutReferenceSaysUnknown) {
  const ValidationReport report = report_with({});
  EXPECT_FALSE(report.drift.known);
  EXPECT_FALSE(report.drift.above_floor);
  EXPECT_FALSE(report.drift.uses_remeasured_passes());
  const std::string text = printed(report);
  EXPECT_NE(text.find("# machine drift: unknown (no speed reference in this calibration)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("drift above the floor"), std::string::npos) << text;
  const testing::TempDir dir;
  write_json(report, dir.file("v.json"));
  const nlohmann::json json = nlohmann::json::parse(testing::read_bytes(dir.file("v.json")));
  EXPECT_FALSE(json.at("drift").at("known").get<bool>());
  EXPECT_TRUE(json.at("drift").at("occupancies").empty());
  EXPECT_TRUE(json.at("drift").at("largest_compute_pct").is_null());
  EXPECT_FALSE(json.at("drift").at("above_floor").get<bool>());
  // Samples only of the profiles (no ground truth taken them): still unknown, said so.
  const ValidationReport ops_only = report_with({reference_sample(ReferenceStage::kOps, 0, 1, 100, 200)});
  EXPECT_TRUE(ops_only.drift.known);
  EXPECT_NE(printed(ops_only).find("# machine drift: unknown (no occupancy has speed-reference samples of both"),
            std::string::npos);
}

// Operator records by hand: signature 1 profiled at occupancy 1 in pass 0 (100 us) and again in pass 1
// (130 us); signature 2 in pass 0 only (40 us). The reference says pass 1 is nearest the ground truth.
store::OpsRecords two_pass_ops() {
  store::OpsRecords ops;
  for (const int64_t id : {1, 2}) {
    store::OpSignatureRecord signature;
    signature.id = id;
    signature.name = id == 1 ? "aten::mm" : "aten::add";
    signature.signature = signature.name + "#" + std::to_string(id);
    signature.input_dtypes = "float32,float32";
    signature.output_dtype = "float32";
    signature.flops = 1e6 * static_cast<double>(id);
    signature.bytes = 1e4 * static_cast<double>(id);
    ops.signatures.push_back(signature);
  }
  const auto timing = [](int64_t id, double time_us, int pass) {
    store::OpTimingRecord row;
    row.signature_id = id;
    row.active_ranks = 1;
    row.time_us_median = time_us;
    row.ok = true;
    row.pass = pass;
    return row;
  };
  ops.timings = {timing(1, 100, 0), timing(2, 40, 0), timing(1, 130, 1)};
  ops.reference = {reference_sample(ReferenceStage::kOps, 0, 1, 100, 100), reference_sample(ReferenceStage::kOps, 1, 1, 130, 130),
                   reference_sample(ReferenceStage::kGroundTruth, 0, 1, 128, 128)};
  return ops;
}

TEST(FitFirstProfilesOnly, TakesPassZeroWhereTheDefaultTakesTheChosenPass) {
  const store::OpsRecords ops = two_pass_ops();
  ASSERT_EQ(choose_ops_passes(ops.reference).at(1), 1);
  predict::FittedModel chosen;
  predict::add_operator_profiles(chosen, ops);
  EXPECT_DOUBLE_EQ(chosen.op_time_us.at({1, 1}), 130.0);
  EXPECT_DOUBLE_EQ(chosen.op_time_us.at({2, 1}), 40.0);  // the chosen pass lacks it: pass 0's
  predict::FittedModel first;
  predict::FitOptions options;
  options.first_profiles_only = true;
  predict::add_operator_profiles(first, ops, options);
  EXPECT_DOUBLE_EQ(first.op_time_us.at({1, 1}), 100.0);
  EXPECT_DOUBLE_EQ(first.op_time_us.at({2, 1}), 40.0);
  EXPECT_EQ(first.occupancies, chosen.occupancies);
}

}  // namespace
}  // namespace itertime::validate
