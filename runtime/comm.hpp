// comm.hpp: the communicator interface over raw buffers, with an MPI backend (CPU buffers) and an NCCL
// backend (CUDA buffers, compiled when CUDA is found; see nccl_communicator.hpp).
// Invariants:
//  - Counts are in elements of `dtype`. Buffer sizes follow nccl-tests: all_reduce send = recv = count;
//    all_gather send = count, recv = count * size; reduce_scatter send = count * size, recv = count;
//    all_to_all send = recv = count * size (count per peer); broadcast count.
//  - Reductions are sums. 16-bit floats are summed in float and rounded back (ties to even).
//  - Calls are blocking from the caller's point of view once synchronize() returns; the MPI backend
//    completes every call before returning, NCCL enqueues on the communicator's stream. The start_*
//    calls (overlapped reductions and all-gathers, below) complete at their wait or finish_started().
//  - Buffers come from allocate(): host memory for MPI, device memory for NCCL; copy_in/copy_out move
//    host data into and out of them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/dtype.hpp"

namespace itertime {

class JobAbort;  // runtime/job_abort.hpp

// An owned buffer in the communicator's memory space (RAII).
class CommBuffer {
 public:
  virtual ~CommBuffer() = default;
  virtual void* data() = 0;
  virtual std::size_t bytes() const = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  virtual std::string name() const = 0;  // "mpi" or "nccl"

  virtual std::unique_ptr<CommBuffer> allocate(std::size_t bytes) = 0;
  virtual void copy_in(CommBuffer& buffer, const void* host, std::size_t bytes) = 0;
  virtual void copy_out(void* host, const CommBuffer& buffer, std::size_t bytes) = 0;

  virtual void all_reduce_sum(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  virtual void all_gather(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  virtual void reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  virtual void broadcast(void* buffer, std::size_t count, DType dtype, int root) = 0;
  virtual void all_to_all(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  virtual void send(const void* buffer, std::size_t count, DType dtype, int peer) = 0;
  virtual void recv(void* buffer, std::size_t count, DType dtype, int peer) = 0;
  // Sends to `send_peer` and receives from `recv_peer` at once (bidirectional exchange).
  virtual void send_recv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count, DType dtype) = 0;

  // Waits until every call issued so far has completed on this rank.
  virtual void synchronize() = 0;
  // Host-side barrier over the communicator's ranks.
  virtual void barrier() = 0;

  // Overlapped reduction (the trainer's gradient buckets): starts an in-place all-reduce (sum) of
  // `buffer` that may run while the caller computes; finish_started() waits for every started one;
  // progress() lets the library advance them (MPI progresses only inside its calls). By default the
  // start is a blocking all-reduce. MPI: MPI_Iallreduce (libnbc's algorithms, not the blocking ones
  // `calibrate comm` measures); NCCL: enqueued on the communicator's stream after the work already
  // queued on the device's legacy default stream.
  virtual void start_all_reduce_sum(void* buffer, std::size_t count, DType dtype) {
    all_reduce_sum(buffer, buffer, count, dtype);
  }
  // The same for a reduce-scatter (sum; buffer sizes as reduce_scatter_sum's), for the distributed
  // optimizer's buckets: `send` and `recv` must stay untouched until finish_started(). MPI:
  // MPI_Ireduce_scatter_block; by default (NCCL) the blocking call, enqueued on the communicator's stream
  // (the caller makes the device's work on `send` complete first).
  virtual void start_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType dtype) {
    reduce_scatter_sum(send, recv, count, dtype);
  }
  // Overlapped parameter gather (the distributed optimizer's buckets, Megatron-LM's overlap_param_gather):
  // starts an all-gather (buffer sizes as all_gather's) that may run while the caller computes, and
  // returns its id (ids grow from 0, one per start, per communicator); wait_started(id) waits for that
  // one only, in any order; an id already waited for (or finished by finish_started()) returns at once.
  // `send` and `recv` must stay untouched until it was waited for. finish_started() waits for the
  // started all-gathers too, progress() advances them. MPI: MPI_Iallgather (libnbc's algorithm);
  // NCCL: enqueued on the communicator's stream after the work queued on the device's legacy default
  // stream, waited for by its own event. By default the blocking call (synchronize() on the wait).
  virtual std::size_t start_all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
    all_gather(send, recv, count, dtype);
    return next_started_gather_++;
  }
  virtual void wait_started(std::size_t /*id*/) { synchronize(); }
  virtual void finish_started() { synchronize(); }
  virtual void progress() {}

  // Lets this communicator's waits give way to a job abort (job_abort.hpp): once any rank of the job
  // raised, they throw JobAborted instead of waiting on. Which waits can: MPI, the point-to-point calls
  // (its collectives stay blocking, so that they run the algorithms `calibrate comm` measured); NCCL,
  // synchronize(). Null (the default) turns it off. `abort` outlives the communicator.
  virtual void set_abort(JobAbort* /*abort*/) {}
  // After a job abort: gives up what is in flight (NCCL: ncclCommAbort); the communicator is unusable.
  virtual void abandon() {}

 private:
  std::size_t next_started_gather_ = 0;  // the default start_all_gather's ids
};

}  // namespace itertime
