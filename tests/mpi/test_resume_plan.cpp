// MPI tests of open_resume_plan (runtime/resume_plan.hpp): only rank 0 opens the store; every rank gets
// the same present-flags; a UserError on rank 0 stops every rank as a CollectiveUserError.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/mpi/world.hpp"
#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/resume_plan.hpp"

namespace itertime {
namespace {

using mpi_test::world_rank;

// A file name every rank agrees on (rank 0's pid), in the temp folder.
std::string shared_path(const std::string& name) {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / ("itertime-resume-plan-" + std::to_string(pid) + "-" + name)).string();
}

struct RemoveOnRoot {
  std::string path;
  ~RemoveOnRoot() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove(path);
  }
};

TEST(ResumePlan, FlagsThePlannedKeysAlreadyStoredOnEveryRank) {
  const RemoveOnRoot file{shared_path("flags.h5")};
  if (world_rank() == 0) h5::Store::create(file.path, false, {});  // an existing file to resume
  MPI_Barrier(MPI_COMM_WORLD);
  int reads = 0;
  int opens = 0;
  const StoreTarget target{file.path, false, true, {{"argv", "test"}}};
  const ResumePlan plan = open_resume_plan(
      target, {"a", "b", "c", "d"},
      [&](h5::Store&) {
        ++reads;
        return std::set<std::string>{"b", "d", "z"};
      },
      [&](h5::Store& store) {
        ++opens;
        store.set_meta("stage_meta", "stamped");
      });
  EXPECT_EQ(plan.present, (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(plan.present_count(), 2u);
  if (world_rank() == 0) {
    ASSERT_NE(plan.store, nullptr);
    EXPECT_TRUE(plan.store->writable());
    EXPECT_EQ(plan.store->meta().at("stage_meta"), "stamped");
    EXPECT_EQ(reads, 1);
    EXPECT_EQ(opens, 1);
  } else {
    EXPECT_EQ(plan.store, nullptr) << "only rank 0 opens the file";
    EXPECT_EQ(reads, 0);
    EXPECT_EQ(opens, 0);
  }
}

TEST(ResumePlan, AUserErrorOnRootStopsEveryRank) {
  const RemoveOnRoot file{shared_path("refused.h5")};
  if (world_rank() == 0) h5::Store::create(file.path, false, {});
  MPI_Barrier(MPI_COMM_WORLD);
  // Neither --force nor --resume: the existing file is refused on rank 0, and every rank hears of it.
  const StoreTarget refused{file.path, false, false, {}};
  try {
    open_resume_plan(refused, {"a"}, [](h5::Store&) { return std::set<std::string>{}; });
    ADD_FAILURE() << "expected a CollectiveUserError";
  } catch (const CollectiveUserError& error) {
    EXPECT_NE(std::string(error.what()).find("--force"), std::string::npos) << error.what();
  }
  // The stage's own step may refuse too.
  const StoreTarget resumed{file.path, false, true, {}};
  EXPECT_THROW(open_resume_plan(
                   resumed, {"a"}, [](h5::Store&) { return std::set<std::string>{}; },
                   [](h5::Store&) { throw UserError("the job does not match this file"); }),
               CollectiveUserError);
}

TEST(ResumePlan, BroadcastFlagsTakesRankZerosValues) {
  const std::vector<uint8_t> mine(5, static_cast<uint8_t>(world_rank() == 0 ? 1 : 7));
  EXPECT_EQ(broadcast_flags(mine), std::vector<uint8_t>(5, 1));
}

}  // namespace
}  // namespace itertime
