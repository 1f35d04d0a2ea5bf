// test_speed_drift.cpp: the drift of the speed reference, the pass choice and the re-measurement rule
// (common/speed_drift.hpp), with figures derived by hand; the /reference/probes and /ops/retimings round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/calibration_records.hpp"
#include "common/ops_store.hpp"
#include "common/reference_store.hpp"
#include "common/speed_drift.hpp"
#include "temp_dir.hpp"
#include "reference_samples.hpp"

namespace itertime {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using itertime::testing::reference_sample;

ReferenceSample ops(int pass, int occupancy, double matmul_us, double elementwise_us, double allreduce_us = kNaN) {
  return reference_sample(ReferenceStage::kOps, pass, occupancy, matmul_us, elementwise_us, allreduce_us);
}

ReferenceSample truth(int round, int occupancy, double matmul_us, double elementwise_us, double allreduce_us = kNaN) {
  return reference_sample(ReferenceStage::kGroundTruth, round, occupancy, matmul_us, elementwise_us, allreduce_us);
}

TEST(SpeedDrift, MeansComparedPerPartAndOccupancy) {
  // Occupancy 1: ops means 100 and 50 (of 90, 100, 110 and 40, 50, 60); ground truth 110 and 45.
  // Occupancy 2: ops 200/100/20 (means), ground truth 300/100/30.
  const std::vector<ReferenceSample> samples{
      ops(0, 1, 90, 40), ops(0, 1, 100, 50), ops(0, 1, 110, 60), truth(0, 1, 100, 45), truth(1, 1, 120, 45),
      // a bimodal ops side at occupancy 2: mean 200, median 100
      ops(0, 2, 100, 100, 20), ops(0, 2, 100, 100, 20), ops(0, 2, 400, 100, 20), truth(0, 2, 300, 100, 30),
      reference_sample(ReferenceStage::kComm, 0, 2, 1000, 1000, 1000),  // the comm stage's samples are not compared
  };
  const std::vector<OccupancyDrift> drifts = drift_by_occupancy(samples);
  ASSERT_EQ(drifts.size(), 2u);
  EXPECT_EQ(drifts[0].occupancy, 1);
  EXPECT_EQ(drifts[0].ops_samples, 3u);
  EXPECT_EQ(drifts[0].groundtruth_samples, 2u);
  EXPECT_NEAR(drifts[0].matmul_pct, 10.0, 1e-9);
  EXPECT_NEAR(drifts[0].elementwise_pct, -10.0, 1e-9);
  EXPECT_TRUE(std::isnan(drifts[0].allreduce_pct));  // no all-reduce at one rank
  EXPECT_NEAR(drifts[0].compute_pct(), 0.0, 1e-9);   // the mean of +10 and -10
  EXPECT_EQ(drifts[1].occupancy, 2);
  EXPECT_NEAR(drifts[1].matmul_pct, 50.0, 1e-9);
  EXPECT_NEAR(drifts[1].elementwise_pct, 0.0, 1e-9);
  EXPECT_NEAR(drifts[1].allreduce_pct, 50.0, 1e-9);
  EXPECT_NEAR(drifts[1].compute_pct(), 25.0, 1e-9);
  EXPECT_NEAR(largest_compute_drift_pct(drifts), 25.0, 1e-9);
}

TEST(SpeedDrift, ComputeDriftIsTheMeanOfTheTwoParts) {
  OccupancyDrift drift;
  drift.matmul_pct = 4.0;
  drift.elementwise_pct = -7.5;
  EXPECT_DOUBLE_EQ(drift.compute_pct(), -1.75);
  drift.elementwise_pct = kNaN;
  EXPECT_DOUBLE_EQ(drift.compute_pct(), 4.0);
  EXPECT_DOUBLE_EQ(largest_compute_drift_pct({drift}), 4.0);
  EXPECT_DOUBLE_EQ(largest_compute_drift_pct({}), 0.0);
}

TEST(SpeedDrift, AnOccupancyWithoutGroundTruthSamplesHasNoDrift) {
  const std::vector<ReferenceSample> samples{ops(0, 1, 100, 50), ops(0, 4, 100, 50), truth(0, 1, 100, 50)};
  const std::vector<OccupancyDrift> drifts = drift_by_occupancy(samples);
  ASSERT_EQ(drifts.size(), 1u);
  EXPECT_EQ(drifts[0].occupancy, 1);
  EXPECT_EQ(drift_by_occupancy({}).size(), 0u);
}

TEST(SpeedDrift, ThePassNearestTheGroundTruthIsChosen) {
  // Occupancy 4: pass 0 at 100 us, pass 1 at 150, pass 2 at 125; ground truth at 140: pass 1 is 7.1 % off,
  // pass 2 12 %, pass 0 40 %. Occupancy 1: only pass 0. Occupancy 2: no ground truth, so pass 0 though
  // pass 1 exists.
  const std::vector<ReferenceSample> samples{
      ops(0, 4, 100, 50), ops(1, 4, 150, 50),   ops(2, 4, 125, 50), truth(0, 4, 140, 50), truth(1, 4, 140, 50),
      ops(0, 1, 100, 50), truth(0, 1, 120, 50), ops(0, 2, 100, 50), ops(1, 2, 200, 50),
  };
  const std::map<int, int> chosen = choose_ops_passes(samples);
  EXPECT_EQ(chosen, (std::map<int, int>{{1, 0}, {2, 0}, {4, 1}}));
  EXPECT_EQ(ops_passes(samples, 4), (std::vector<int>{0, 1, 2}));
  const std::vector<OccupancyDrift> drifts = drift_by_occupancy(samples, chosen);
  ASSERT_EQ(drifts.size(), 2u);
  EXPECT_EQ(drifts[1].ops_pass, 1);
  EXPECT_NEAR(drifts[1].matmul_pct, 100.0 * (140.0 / 150.0 - 1.0), 1e-9);
}

TEST(SpeedDrift, ATieKeepsTheLowerPass) {
  const std::vector<ReferenceSample> samples{ops(0, 2, 90, 50), ops(1, 2, 110, 50), truth(0, 2, 100, 50)};
  // pass 0: +11.1 %, pass 1: -9.1 %: pass 1 is nearer.
  EXPECT_EQ(choose_ops_passes(samples).at(2), 1);
  const std::vector<ReferenceSample> tie{ops(0, 2, 100, 50), ops(1, 2, 100, 50), truth(0, 2, 110, 50)};
  EXPECT_EQ(choose_ops_passes(tie).at(2), 0);
}

TEST(SpeedDrift, TheRuleRemeasuresWhatDriftedBeyondTheThresholdWhilePassesAreLeft) {
  // Compute drifts (the mean of the two parts): occupancy 1 +1 % (within 3 %), occupancy 2 -5 % (its
  // element-wise pass -10 %), occupancy 4 +15 % (its matrix product +30 %).
  std::vector<ReferenceSample> samples{
      ops(0, 1, 100, 50),   truth(0, 1, 102, 50), ops(0, 2, 100, 100),
      truth(0, 2, 100, 90), ops(0, 4, 100, 50),   truth(0, 4, 130, 50),
  };
  EXPECT_EQ(occupancies_to_remeasure(samples, 3.0, 3), (std::vector<int>{2, 4}));
  EXPECT_EQ(occupancies_to_remeasure(samples, 10.0, 3), (std::vector<int>{4}));
  EXPECT_EQ(occupancies_to_remeasure(samples, 3.0, 0), (std::vector<int>{}));  // no extra pass allowed
  // A second pass at 4 lands within the threshold: only 2 is left.
  samples.push_back(ops(1, 4, 128, 50));
  EXPECT_EQ(occupancies_to_remeasure(samples, 3.0, 3), (std::vector<int>{2}));
  // Passes at 2 that stay off use up the allowance (1 + 2 passes).
  samples.push_back(ops(1, 2, 100, 110));
  EXPECT_EQ(occupancies_to_remeasure(samples, 3.0, 2), (std::vector<int>{2}));
  samples.push_back(ops(2, 2, 100, 108));
  EXPECT_EQ(occupancies_to_remeasure(samples, 3.0, 2), (std::vector<int>{}));
  EXPECT_EQ(occupancies_to_remeasure(samples, 3.0, 3), (std::vector<int>{2}));
}

TEST(SpeedDrift, StageNamesRoundTrip) {
  for (ReferenceStage stage : {ReferenceStage::kComm, ReferenceStage::kOps, ReferenceStage::kGroundTruth}) {
    EXPECT_EQ(parse_reference_stage(to_string(stage)), stage);
  }
  EXPECT_THROW(parse_reference_stage("gt"), InternalError);
}

TEST(SpeedDrift, ProbesAndRetimingsRoundTripThroughTheStore) {
  testing::TempDir folder;
  const std::string path = folder.file("drift.h5");
  {
    h5::Store store = h5::Store::create(path, false, {{"argv", "test"}});
    store::append_reference_sample(store, ops(0, 1, 1000, 400));
    store::append_reference_sample(store, truth(2, 4, 2000, 800, 150));
    store::OpTimingRow timing{};
    timing.signature_id = 0, timing.active_ranks = 4, timing.time_us_median = 3.5, timing.ok = 1;
    store.table<store::OpTimingRow>(store::kOpTimings).append(timing);
    store::OpRetimingRow retiming{};
    retiming.pass = 1, retiming.signature_id = 0, retiming.active_ranks = 4, retiming.time_us_median = 4.0, retiming.ok = 1;
    store.table<store::OpRetimingRow>(store::kOpRetimings).append(retiming);
  }
  h5::Store store = h5::Store::open(path, /*writable=*/false);
  const std::vector<ReferenceSample> samples = store::read_reference_samples(store);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].stage, ReferenceStage::kOps);
  EXPECT_DOUBLE_EQ(samples[0].matmul_us, 1000);
  EXPECT_TRUE(std::isnan(samples[0].allreduce_us));
  EXPECT_EQ(samples[1].stage, ReferenceStage::kGroundTruth);
  EXPECT_EQ(samples[1].pass, 2);
  EXPECT_EQ(samples[1].occupancy, 4);
  EXPECT_DOUBLE_EQ(samples[1].allreduce_us, 150);
  const store::OpsRecords records = store::read_ops_records(store);
  ASSERT_EQ(records.timings.size(), 2u);
  EXPECT_EQ(records.timings[0].pass, 0);
  EXPECT_EQ(records.timings[1].pass, 1);
  EXPECT_DOUBLE_EQ(records.timings[1].time_us_median, 4.0);
  EXPECT_EQ(records.reference.size(), 2u);
}

TEST(SpeedDrift, AStoreWithoutProbesReadsNone) {
  testing::TempDir folder;
  const std::string path = folder.file("none.h5");
  { h5::Store::create(path, false, {{"argv", "test"}}); }
  h5::Store store = h5::Store::open(path, /*writable=*/false);
  EXPECT_TRUE(store::read_reference_samples(store).empty());
  EXPECT_TRUE(store::read_ops_records(store).timings.empty());
}

}  // namespace
}  // namespace itertime
