// main.cpp: GoogleTest main for tests that run under mpiexec. Every rank runs every test; rank 0 prints;
// the exit status is the same on every rank (failures combined over ranks).
#include <gtest/gtest.h>
#include <mpi.h>

#include "runtime/mpi_session.hpp"

int main(int argc, char** argv) {
  itertime::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (session.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
