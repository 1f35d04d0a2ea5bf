// mpi_group_communicator.hpp: what the MPI and the NCCL communicator share (mpi_communicator.hpp,
// nccl_communicator.hpp): both run over the ranks of an MPI communicator (NCCL's bootstraps over it), whose
// rank and size they report, and both let their waits give way to a job abort (comm.hpp, set_abort).
// Invariants: rank and size are read once, at construction (a collective-free, local MPI call), and never
// change; the abort is not owned (null until set_abort, and set_abort(nullptr) turns it off again).
#pragma once

#include <mpi.h>

#include "runtime/comm.hpp"

namespace itertime {

class MpiGroupCommunicator : public Communicator {
 public:
  int rank() const final { return rank_; }
  int size() const final { return size_; }
  void set_abort(JobAbort* abort) final { abort_ = abort; }

 protected:
  explicit MpiGroupCommunicator(MPI_Comm group);  // this process's rank in `group` and its size

  JobAbort* abort_ = nullptr;  // when set, the backend's waits give way to a job abort (comm.hpp)
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace itertime
