// job_abort.hpp: a cooperative abort among the ranks of one job communicator, so that one rank's
// recoverable failure (running out of memory) ends the configuration on every rank, and the job goes on
// to the next, instead of leaving the others waiting for a rank that will never come.
// Invariants:
//  - JobAbort is collective to make (it duplicates the job communicator); raise() is local: it tells
//    every other rank with non-blocking sends on that private communicator. A rank that raised, or
//    received a raise, is aborted and stays so; the first reason received is kept.
//  - wait() and wait_until() never block in MPI: they poll the operation and the abort messages, and
//    throw JobAborted as soon as the job is aborted. A receive still pending then is cancelled (and
//    completed), so that no message lands in memory its owner frees afterwards; a pending send or
//    collective is left pending.
//  - barrier() and all_reduce() are the job's small host collectives, abortable: they run on the
//    private communicator, on buffers owned by this object.
//  - After an abort nothing that may still hold an unmatched operation is freed: not the private
//    communicator, not its buffers (~JobAbort leaks them), and the caller keeps its own communicators
//    (never freed, so that their context ids are never reused and a stale message cannot reach a later
//    communicator). The leak is a few hundred bytes per aborted configuration.
//  - settle() is called by every rank of the job once it has stopped training; it returns true when all
//    of them have (a non-blocking barrier, polled), false when some rank did not within the timeout: it
//    is blocked in an operation that cannot be abandoned (a blocking MPI collective on CPU ranks).
#pragma once

#include <mpi.h>

#include <chrono>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace itertime {

// Thrown by JobAbort's waits once any rank of the job raised.
class JobAborted : public std::runtime_error {
 public:
  explicit JobAborted(const std::string& reason) : std::runtime_error(reason) {}
};

class JobAbort {
 public:
  explicit JobAbort(MPI_Comm job_comm);  // collective over job_comm
  ~JobAbort();
  JobAbort(const JobAbort&) = delete;
  JobAbort& operator=(const JobAbort&) = delete;

  // This rank failed: tells the others (once) and marks the job aborted.
  void raise(const std::string& reason);
  // Polls for a raise from another rank; true once the job is aborted.
  bool aborted();
  // The reason of the first raise seen (this rank's own, or a peer's); "" while not aborted.
  const std::string& reason() const { return reason_; }

  // Waits for a send and a receive (either may be MPI_REQUEST_NULL), both set to MPI_REQUEST_NULL when
  // done; on an abort the receive is cancelled and completed, the send left pending, and JobAborted thrown.
  void wait(MPI_Request& send, MPI_Request& recv);
  // Waits for a non-blocking collective (left pending on an abort).
  void wait_collective(MPI_Request& request);
  // Polls `done()` until it is true, throwing JobAborted on an abort; sleeps `pause` between polls.
  template <typename Done>
  void wait_until(Done&& done) {
    while (!done()) {
      if (aborted()) throw JobAborted(reason_);
      std::this_thread::yield();
    }
  }

  // Abortable host collectives over the job's ranks.
  void barrier();
  double all_reduce(double value, MPI_Op op);

  // Waits (polling) until every rank of the job has called settle(); false after `timeout`.
  bool settle(std::chrono::seconds timeout);

 private:
  // What pending operations may still read or write: kept (leaked) after an abort.
  struct Pending {
    std::string sent_reason;  // the payload of this rank's raise
    std::vector<MPI_Request> raise_sends;
    std::deque<double> collective_buffers;  // stable addresses for the host collectives in flight
  };
  MPI_Comm comm_ = MPI_COMM_NULL;         // private duplicate: raises and the host collectives
  MPI_Comm settle_comm_ = MPI_COMM_NULL;  // private duplicate: settle()'s barrier only
  int rank_ = 0;
  int size_ = 1;
  bool aborted_ = false;
  std::string reason_;
  std::unique_ptr<Pending> pending_;
};

}  // namespace itertime
