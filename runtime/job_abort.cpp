// job_abort.cpp: the cooperative abort among the ranks of one job (job_abort.hpp).
#include "runtime/job_abort.hpp"

#include "runtime/mpi_check.hpp"
#include "runtime/watchdog.hpp"

namespace itertime {
namespace {
constexpr int kRaiseTag = 31;  // the only point-to-point tag on the private communicator

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}
}  // namespace

JobAbort::JobAbort(MPI_Comm job_comm) : pending_(std::make_unique<Pending>()) {
  ITERTIME_MPI_CHECK(MPI_Comm_dup(job_comm, &comm_));
  ITERTIME_MPI_CHECK(MPI_Comm_dup(job_comm, &settle_comm_));
  ITERTIME_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  ITERTIME_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

JobAbort::~JobAbort() {
  if (mpi_finalized()) return;
  if (settle_comm_ != MPI_COMM_NULL) MPI_Comm_free(&settle_comm_);  // nulled by a settle() that timed out
  if (aborted_) {
    // Operations on comm_ may never complete; their buffers and the communicator stay (job_abort.hpp).
    pending_.release();  // NOLINT(bugprone-unused-return-value): a deliberate leak
    return;
  }
  MPI_Comm_free(&comm_);
}

void JobAbort::raise(const std::string& reason) {
  if (reason_.empty()) reason_ = reason;
  aborted_ = true;
  if (!pending_->raise_sends.empty()) return;  // told the others already
  pending_->sent_reason = reason;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request& request = pending_->raise_sends.emplace_back();
    ITERTIME_MPI_CHECK(MPI_Isend(pending_->sent_reason.data(), static_cast<int>(pending_->sent_reason.size()), MPI_CHAR, peer,
                                 kRaiseTag, comm_, &request));
  }
}

bool JobAbort::aborted() {
  if (aborted_) return true;
  int arrived = 0;
  MPI_Status status;
  ITERTIME_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kRaiseTag, comm_, &arrived, &status));
  if (!arrived) return false;
  int length = 0;
  ITERTIME_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &length));
  std::string reason(static_cast<std::size_t>(length), '\0');
  ITERTIME_MPI_CHECK(MPI_Recv(reason.data(), length, MPI_CHAR, status.MPI_SOURCE, kRaiseTag, comm_, MPI_STATUS_IGNORE));
  reason_ = reason.empty() ? "rank " + std::to_string(status.MPI_SOURCE) + " of the job failed" : reason;
  aborted_ = true;
  return true;
}

void JobAbort::wait(MPI_Request& send, MPI_Request& recv) {
  MPI_Request requests[2] = {send, recv};
  int done = 0;
  while (true) {
    ITERTIME_MPI_CHECK(MPI_Testall(2, requests, &done, MPI_STATUSES_IGNORE));
    if (done) break;
    if (aborted()) {
      // A receive is cancelled, or completes if a send already matched it; a send stays pending.
      if (requests[1] != MPI_REQUEST_NULL) {
        ITERTIME_MPI_CHECK(MPI_Cancel(&requests[1]));
        ITERTIME_MPI_CHECK(MPI_Wait(&requests[1], MPI_STATUS_IGNORE));
      }
      send = requests[0];
      recv = MPI_REQUEST_NULL;
      throw JobAborted(reason_);
    }
    std::this_thread::yield();
  }
  send = MPI_REQUEST_NULL;
  recv = MPI_REQUEST_NULL;
}

void JobAbort::wait_collective(MPI_Request& request) {
  MPI_Request none = MPI_REQUEST_NULL;
  wait(request, none);
}

void JobAbort::barrier() {
  const WatchedOperation watched("MPI_Ibarrier (job abort channel)", -1, MPI_DATATYPE_NULL, comm_);  // a polled wait
  MPI_Request request = MPI_REQUEST_NULL;
  ITERTIME_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  wait_collective(request);
}

double JobAbort::all_reduce(double value, MPI_Op op) {
  std::deque<double>& buffers = pending_->collective_buffers;
  buffers.push_back(value);
  double& in = buffers.back();
  buffers.push_back(0.0);
  double& out = buffers.back();
  const WatchedOperation watched("MPI_Iallreduce (job abort channel)", 1, MPI_DOUBLE, comm_);  // a polled wait
  MPI_Request request = MPI_REQUEST_NULL;
  ITERTIME_MPI_CHECK(MPI_Iallreduce(&in, &out, 1, MPI_DOUBLE, op, comm_, &request));
  wait_collective(request);  // on an abort the two buffers stay with the pending operation
  const double result = out;
  buffers.pop_back();
  buffers.pop_back();
  return result;
}

bool JobAbort::settle(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MPI_Request request = MPI_REQUEST_NULL;
  ITERTIME_MPI_CHECK(MPI_Ibarrier(settle_comm_, &request));
  while (true) {
    int done = 0;
    ITERTIME_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) {
      aborted();  // takes a peer's reason if this rank has none yet
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      settle_comm_ = MPI_COMM_NULL;  // its barrier stays pending: the communicator is not freed
      return false;
    }
    aborted();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace itertime
