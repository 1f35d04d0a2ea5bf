// mpi_communicator.hpp: Communicator over an MPI communicator and host buffers.
// Invariants: owns the user-defined MPI datatypes and reduction ops it creates (freed on destruction);
// fp16/bf16 travel as 2-byte contiguous types and are summed by our own MPI_Op (float accumulation,
// round to nearest even); int8 sums wrap as MPI_INT8_T does. Does not own the MPI_Comm it is given.
// With a JobAbort set, send/recv/send_recv post MPI_Isend/MPI_Irecv and wait through it (the same
// point-to-point protocol as the blocking calls); the collectives stay blocking.
// Started operations (comm.hpp): reductions are kept until finish_started(); all-gathers by id until
// their wait_started(id) or finish_started(); a request left pending by a job abort stays held.
// Every wait is watched (watchdog.hpp): the blocking calls through the MPI profiling interface, the
// polled waits (abortable point-to-point, finish_started, wait_started) by their own guard.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/mpi_group_communicator.hpp"

namespace itertime {

class MpiCommunicator final : public MpiGroupCommunicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  Backend backend() const override { return Backend::kCpu; }
  std::string name() const override { return "mpi"; }
  MPI_Comm comm() const { return comm_; }

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
  void synchronize() override {}
  void barrier() override;
  void start_all_reduce_sum(void* buffer, std::size_t count, DType dtype) override;
  void start_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) override;
  std::size_t start_all_gather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void wait_started(std::size_t id) override;  // abortable with a JobAbort set
  void finish_started() override;              // abortable with a JobAbort set
  void progress() override;

 private:
  MPI_Datatype mpi_type(DType dtype) const;
  MPI_Op sum_op(DType dtype) const;

  MPI_Comm comm_;
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;  // 2-byte contiguous, shared by fp16 and bf16
  MPI_Datatype bf16_type_ = MPI_DATATYPE_NULL;  // a distinct duplicate so the op can tell them apart
  MPI_Op fp16_sum_ = MPI_OP_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  std::vector<MPI_Request> started_;  // the started reductions' requests, until finish_started()
  // The started all-gathers not yet waited for, by id (ids below next_gather_id_ and absent: done).
  struct StartedGather {
    std::size_t id = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    long long bytes = 0;  // received, for the watchdog's report
  };
  std::vector<StartedGather> gathers_;
  std::size_t next_gather_id_ = 0;
  // Waits for a started request; on a job abort it stays pending (and held) and JobAborted is thrown.
  void wait_started_request(MPI_Request& request);
};

}  // namespace itertime
