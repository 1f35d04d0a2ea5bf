// nccl_communicator.hpp: Communicator over NCCL on CUDA buffers and one CUDA stream (CUDA builds only).
// Invariants: the NCCL communicator, its stream and every buffer it allocates are owned (RAII); the
// bootstrap (ncclGetUniqueId on group rank 0, broadcast over the given MPI communicator) is collective
// over that MPI communicator; every call is enqueued on the stream and completes at synchronize().
// With a JobAbort set, synchronize() polls the stream (and NCCL's asynchronous error) instead of
// blocking, and abandon() aborts the NCCL communicator (ncclCommAbort), which ends its kernels in flight.
// fp16 and bf16 are native NCCL types; reductions run on the device.
// A started all-gather (start_all_gather) records its own CUDA event on the stream after it; its
// wait_started(id) waits (on the host, polled with a JobAbort set) for that event only; the events are
// owned by the communicator until waited for, finished (finish_started(): synchronize()) or destroyed.
// Watchdog (watchdog.hpp): synchronize() and wait_started() are watched waits, and the communicator is registered with
// the watchdog, which polls ncclCommGetAsyncError and calls ncclCommAbort before ending the process.
// Builds without CUDA have no NCCL communicator and nothing to register.
// Declared without CUDA or NCCL headers so that includers stay plain C++.
#pragma once

#include <mpi.h>

#include <memory>

#include "runtime/mpi_group_communicator.hpp"

namespace itertime {

// True when this build has CUDA and the machine has at least one device.
bool cuda_device_available();
// Selects the device for this process: `local_rank` modulo the visible devices. Returns its index.
int bind_cuda_device(int local_rank);

class NcclCommunicator final : public MpiGroupCommunicator {
 public:
  // Collective over `bootstrap`. The device must have been selected (bind_cuda_device) before.
  explicit NcclCommunicator(MPI_Comm bootstrap);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  Backend backend() const override { return Backend::kCuda; }
  std::string name() const override { return "nccl"; }

  std::unique_ptr<CommBuffer> allocate(std::size_t bytes) override;
  void copy_in(CommBuffer& buffer, const void* host, std::size_t bytes) override;
  void copy_out(void* host, const CommBuffer& buffer, std::size_t bytes) override;

  void all_reduce_sum(const void* send, void* recv, std::size_t count, DType dtype) override;
  void all_gather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override;
  void all_to_all(const void* send, void* recv, std::size_t count, DType dtype) override;
  void send(const void* buffer, std::size_t count, DType dtype, int peer) override;
  void recv(void* buffer, std::size_t count, DType dtype, int peer) override;
  void send_recv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count, DType dtype) override;
  void synchronize() override;
  void barrier() override;
  void abandon() override;
  void start_all_reduce_sum(void* buffer, std::size_t count, DType dtype) override;
  std::size_t start_all_gather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void wait_started(std::size_t id) override;
  void finish_started() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
  MPI_Comm bootstrap_;
};

}  // namespace itertime
