// MPI tests of JobAbort (runtime/job_abort.hpp): without a raise its host collectives are plain
// collectives; a raise on the last rank ends, on every other rank, a point-to-point receive that will
// never be matched (through MpiCommunicator's abortable path) and a host collective the raising rank never
// joins, with the raiser's reason; settle() then returns on every rank, and the ranks go on with fresh
// communicators; a settle that a rank does not join in time returns false.
// Every rank runs the same sequence of tests; a rank's failure shows in the combined exit status.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <thread>

#include "tests/mpi/world.hpp"
#include "runtime/job_abort.hpp"
#include "runtime/mpi_communicator.hpp"

namespace itertime {
namespace {

// A duplicate of MPI_COMM_WORLD that is never freed: after an abort its receives may never complete
// (runtime/job_abort.hpp), and freeing a communicator with pending operations is erroneous. The one
// deliberate leak of these tests, suppressed by this function's name in tests/sanitizers/lsan.supp.
[[gnu::noinline]] MPI_Comm leaked_communicator_of_aborted_receives() {
  MPI_Comm job = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &job);
  return job;
}

// An all-reduce the last rank never joins, so that the abort ends it: Open MPI's schedule of the
// non-blocking all-reduce it waits on can never complete and is never freed (named in lsan.supp).
[[gnu::noinline]] void all_reduce_that_the_abort_ends(JobAbort& abort) { abort.all_reduce(1.0, MPI_SUM); }

using mpi_test::world_rank;
using mpi_test::world_size;

TEST(JobAbort, HostCollectivesWithoutAnAbort) {
  JobAbort abort(MPI_COMM_WORLD);
  abort.barrier();
  const int n = world_size();
  EXPECT_DOUBLE_EQ(abort.all_reduce(world_rank(), MPI_SUM), n * (n - 1) / 2.0);
  EXPECT_DOUBLE_EQ(abort.all_reduce(world_rank(), MPI_MAX), n - 1);
  EXPECT_FALSE(abort.aborted());
  EXPECT_EQ(abort.reason(), "");
}

TEST(JobAbort, ARaiseEndsTheWaitsOfEveryOtherRank) {
  const int rank = world_rank();
  const int last = world_size() - 1;
  const std::string reason = "out of memory on rank " + std::to_string(last) + " (test)";
  {
    MPI_Comm job = leaked_communicator_of_aborted_receives();
    JobAbort abort(job);
    MpiCommunicator comm(job);
    comm.set_abort(&abort);
    std::string caught;
    if (rank == last) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others are waiting by now
      abort.raise(reason);
      caught = reason;
    } else {
      try {
        if (rank == 0) {
          float value = 0;
          comm.recv(&value, 1, DType::kFloat32, last);  // never sent
        } else {
          all_reduce_that_the_abort_ends(abort);
        }
      } catch (const JobAborted& error) {
        caught = error.what();
      }
    }
    EXPECT_EQ(caught, reason);
    EXPECT_TRUE(abort.aborted());
    EXPECT_TRUE(abort.settle(std::chrono::seconds(30)));
    EXPECT_EQ(abort.reason(), reason);
  }
  // The ranks go on together on a fresh communicator.
  JobAbort next(MPI_COMM_WORLD);
  EXPECT_DOUBLE_EQ(next.all_reduce(1.0, MPI_SUM), world_size());
}

TEST(JobAbort, SettleReturnsFalseWhenARankDoesNotCome) {
  JobAbort abort(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    abort.raise("test");
    EXPECT_FALSE(abort.settle(std::chrono::seconds(1)));  // the others come 2 s later
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    EXPECT_TRUE(abort.settle(std::chrono::seconds(30)));  // rank 0's barrier is still pending: it completes
  }
}

}  // namespace
}  // namespace itertime
