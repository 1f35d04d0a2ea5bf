// pipeline_p2p.cpp: blocking and tagged pipeline transfers (pipeline_p2p.hpp).
#include "calibrate/pipeline_p2p.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <utility>

#include "calibrate/torch_compat.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {
namespace {

double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) throw InternalError(std::string(call) + " failed in the interleaved pipeline", __FILE__, __LINE__);
}

int bytes_of(const torch::Tensor& tensor) {
  const int64_t bytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
  ITERTIME_CHECK(bytes <= INT_MAX, "an activation over 2 GiB cannot go through one MPI message");
  return static_cast<int>(bytes);
}

}  // namespace

void PipelineP2p::add_time(double start_us) const {
  if (s_.time_us != nullptr) *s_.time_us += now_us() - start_us;
}

// Runs a send on `data`; if a job abort ends it, the buffer is kept while the send may still read it.
template <typename Send>
void PipelineP2p::keeping_buffer_on_abort(const torch::Tensor& data, Send&& send) {
  try {
    send();
  } catch (const JobAborted&) {
    unmatched_.push_back(data);
    throw;
  }
}

void PipelineP2p::send(const torch::Tensor& tensor, int peer) {
  const double start = now_us();
  if (s_.cuda) torch::cuda::synchronize();
  const torch::Tensor data = tensor.contiguous();
  keeping_buffer_on_abort(data, [&] {
    s_.comm->send(data.data_ptr(), static_cast<std::size_t>(data.numel()), from_torch(data.scalar_type()), peer);
    s_.comm->synchronize();
  });
  add_time(start);
}

torch::Tensor PipelineP2p::recv(int peer) {
  const double start = now_us();
  torch::Tensor tensor = s_.make_receive_buffer();
  s_.comm->recv(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), from_torch(tensor.scalar_type()), peer);
  s_.comm->synchronize();
  add_time(start);
  return tensor;
}

torch::Tensor PipelineP2p::send_recv(const torch::Tensor& tensor, int peer) {
  const double start = now_us();
  if (s_.cuda) torch::cuda::synchronize();
  const torch::Tensor data = tensor.contiguous();
  torch::Tensor received = s_.make_receive_buffer();
  keeping_buffer_on_abort(data, [&] {
    s_.comm->send_recv(data.data_ptr(), peer, received.data_ptr(), peer, static_cast<std::size_t>(data.numel()),
                       from_torch(received.scalar_type()));
    s_.comm->synchronize();
  });
  add_time(start);
  return received;
}

void PipelineP2p::start_send(const torch::Tensor& tensor, int peer, int tag) {
  const double start = now_us();
  if (s_.cuda) torch::cuda::synchronize();
  PendingSend send;
  send.data = tensor.contiguous();
  check_mpi(MPI_Isend(send.data.data_ptr(), bytes_of(send.data), MPI_BYTE, peer, tag, s_.group, &send.request), "MPI_Isend");
  pending_.push_back(std::move(send));
  add_time(start);
}

torch::Tensor PipelineP2p::recv_tagged(int peer, int tag) {
  const double start = now_us();
  torch::Tensor tensor = s_.make_receive_buffer();
  if (s_.abort != nullptr) {
    MPI_Request none = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(tensor.data_ptr(), bytes_of(tensor), MPI_BYTE, peer, tag, s_.group, &recv), "MPI_Irecv");
    s_.abort->wait(none, recv);
  } else {
    check_mpi(MPI_Recv(tensor.data_ptr(), bytes_of(tensor), MPI_BYTE, peer, tag, s_.group, MPI_STATUS_IGNORE), "MPI_Recv");
  }
  add_time(start);
  return tensor;
}

void PipelineP2p::reap_sends() {
  const double start = now_us();
  for (auto& send : pending_) {
    int done = 0;
    check_mpi(MPI_Test(&send.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  }
  pending_.erase(
      std::remove_if(pending_.begin(), pending_.end(), [](const PendingSend& send) { return send.request == MPI_REQUEST_NULL; }),
      pending_.end());
  add_time(start);
}

void PipelineP2p::finish_sends() {
  const double start = now_us();
  for (auto& send : pending_) {
    if (s_.abort != nullptr) {
      MPI_Request none = MPI_REQUEST_NULL;
      s_.abort->wait(send.request, none);
    } else {
      check_mpi(MPI_Wait(&send.request, MPI_STATUS_IGNORE), "MPI_Wait");
    }
  }
  pending_.clear();
  add_time(start);
}

void PipelineP2p::keep_unfinished_sends() {
  for (auto& send : pending_) {
    if (send.request != MPI_REQUEST_NULL) unmatched_.push_back(send.data);
  }
  pending_.clear();
}

}  // namespace itertime::calibrate
