// mpi_group_communicator.hpp: what the MPI and the NCCL communicator share (mpi_communicator.hpp,
// nccl_communicator.hpp): both run over the ranks of an MPI communicator (NCCL's bootstraps over it), whose
// rank and size they report, and both let their waits give way to a job abort (comm.hpp, set_abort).
// Invariants: rank and size are read once, at construction (a collective-free, local MPI call), and never
// change; the abort is not owned (null until set_abort, and set_abort(nullptr) turns it off again).
// ITERTIME_COMMUNICATOR_CALLS declares, for a backend's class, the calls every backend defines (its buffers,
// the collectives and point-to-point): one list, so that a call added to Communicator reaches both backends.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>

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

// Inside a class derived from Communicator: the overrides of its buffer, collective and point-to-point calls.
#define ITERTIME_COMMUNICATOR_CALLS                                                               \
  std::unique_ptr<CommBuffer> allocate(std::size_t bytes) override;                               \
  void copy_in(CommBuffer& buffer, const void* host, std::size_t bytes) override;                 \
  void copy_out(void* host, const CommBuffer& buffer, std::size_t bytes) override;                \
  void all_reduce_sum(const void* send, void* recv, std::size_t count, DType dtype) override;     \
  void all_gather(const void* send, void* recv, std::size_t count, DType dtype) override;         \
  void reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) override; \
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override;                \
  void all_to_all(const void* send, void* recv, std::size_t count, DType dtype) override;         \
  void send(const void* buffer, std::size_t count, DType dtype, int peer) override;               \
  void recv(void* buffer, std::size_t count, DType dtype, int peer) override;                     \
  void send_recv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count, DType dtype) override
