// MPI tests of the speed reference (runtime/speed_reference.hpp): what rank 0 gets from a probe over a
// communicator, the all-reduce left out at one rank, and the per-occupancy probes of OccupancyReference.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>

#include "runtime/mpi_session.hpp"
#include "runtime/speed_reference.hpp"
#include "world.hpp"

namespace itertime {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(SpeedReference, RankZeroGetsEveryPartOverTheCommunicator) {
  SpeedReference probe;
  const double before_s = now_s();
  const ReferenceSample sample = probe.measure(MPI_COMM_WORLD, ReferenceStage::kGroundTruth, 3);
  EXPECT_EQ(sample.stage, ReferenceStage::kGroundTruth);
  EXPECT_EQ(sample.pass, 3);
  EXPECT_EQ(sample.occupancy, mpi_test::world_size());
  EXPECT_GE(sample.unix_time_s, before_s);
  EXPECT_LE(sample.unix_time_s, now_s());
  // 2 * 128^3 flops take more than 20 us and less than a second on any CPU this runs on.
  EXPECT_GT(sample.matmul_us, 20.0);
  EXPECT_LT(sample.matmul_us, 1e6);
  EXPECT_GT(sample.elementwise_us, 20.0);
  EXPECT_LT(sample.elementwise_us, 1e6);
  EXPECT_TRUE(std::isfinite(sample.allreduce_us));  // these tests run at 2 and 4 ranks
  EXPECT_GT(sample.allreduce_us, 0.0);
}

TEST(SpeedReference, OneRankRunsNoAllReduce) {
  SpeedReference probe;
  const ReferenceSample sample = probe.measure(MPI_COMM_SELF, ReferenceStage::kOps, 0);
  EXPECT_EQ(sample.occupancy, 1);
  EXPECT_GT(sample.matmul_us, 0.0);
  EXPECT_TRUE(std::isnan(sample.allreduce_us));
}

TEST(SpeedReference, OccupancyReferenceProbesEachOccupancyOnceOnRankZero) {
  const int size = mpi_test::world_size();
  // Duplicates collapse, occupancies above the world are left out, and the order is ascending.
  OccupancyReference reference({size, 1, size, size + 3});
  const std::vector<ReferenceSample> samples = reference.measure_all(ReferenceStage::kGroundTruth, 1);
  if (mpi_test::world_rank() != 0) {
    EXPECT_TRUE(samples.empty());
    return;
  }
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].occupancy, 1);
  EXPECT_TRUE(std::isnan(samples[0].allreduce_us));
  EXPECT_EQ(samples[1].occupancy, size);
  EXPECT_TRUE(std::isfinite(samples[1].allreduce_us));
  for (const ReferenceSample& s : samples) EXPECT_EQ(s.pass, 1);
}

}  // namespace
}  // namespace itertime
