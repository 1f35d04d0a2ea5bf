// mpi_group_communicator.cpp: the rank and size of the MPI group a communicator runs over (mpi_group_communicator.hpp).
#include "runtime/mpi_group_communicator.hpp"

#include "runtime/mpi_check.hpp"

namespace itertime {

MpiGroupCommunicator::MpiGroupCommunicator(MPI_Comm group) {
  ITERTIME_MPI_CHECK(MPI_Comm_rank(group, &rank_));
  ITERTIME_MPI_CHECK(MPI_Comm_size(group, &size_));
}

}  // namespace itertime
