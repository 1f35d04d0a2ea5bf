// world.hpp: this rank and the number of ranks of MPI_COMM_WORLD, for the MPI tests.
#pragma once

#include <mpi.h>

namespace itertime::mpi_test {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace itertime::mpi_test
