// pipeline_p2p.hpp: the pipeline's point-to-point transfers of activations and their gradients between
// neighbouring pipeline ranks (Megatron-Core's p2p_communication), for the trainer's schedules
// (pipeline_schedules.hpp).
// Invariants:
//  - Blocking transfers (1F1B) go through the PP group's Communicator: send, recv and the bidirectional
//    send_recv with one peer; device work completes before a send reads its tensor.
//  - Tagged transfers (interleaved 1F1B, CPU only) go through the PP group's MPI communicator: sends are
//    non-blocking (MPI_Isend), each send's tensor kept alive until it completed (reap_sends drops the
//    completed ones, finish_sends waits for all), receives blocking. Tags are the caller's (the schedule
//    names direction and chunk with them); MpiCommunicator's own tags (7, 8) stay below kFirstTag.
//  - Every received tensor is a fresh make_receive_buffer() (the activation's shape, dtype and device).
//  - With a JobAbort, waits give way to it (JobAborted); a send it ended keeps its buffer here, as does
//    every unfinished tagged send after keep_unfinished_sends(): an MPI request may still read it, so it
//    lives as long as this object (runtime/job_abort.hpp).
//  - The time of every call adds to *time_us (pipeline communication, waiting for the neighbour included).
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <functional>
#include <utility>
#include <vector>

#include "runtime/comm.hpp"
#include "runtime/job_abort.hpp"

namespace itertime::calibrate {

struct PipelineP2pSetup {
  Communicator* comm = nullptr;    // the PP group's
  MPI_Comm group = MPI_COMM_NULL;  // the same group's MPI communicator (tagged transfers)
  JobAbort* abort = nullptr;
  bool cuda = false;
  std::function<torch::Tensor()> make_receive_buffer;
  double* time_us = nullptr;
};

class PipelineP2p {
 public:
  static constexpr int kFirstTag = 1000;
  explicit PipelineP2p(PipelineP2pSetup setup) : s_(std::move(setup)) {}
  PipelineP2p(const PipelineP2p&) = delete;
  PipelineP2p& operator=(const PipelineP2p&) = delete;

  void send(const torch::Tensor& tensor, int peer);
  torch::Tensor recv(int peer);
  torch::Tensor send_recv(const torch::Tensor& tensor, int peer);  // sends to and receives from `peer`

  void start_send(const torch::Tensor& tensor, int peer, int tag);
  torch::Tensor recv_tagged(int peer, int tag);
  void reap_sends();
  void finish_sends();
  void keep_unfinished_sends();

 private:
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    torch::Tensor data;  // kept alive until the send completed
  };
  template <typename Send>
  void keeping_buffer_on_abort(const torch::Tensor& data, Send&& send);
  void add_time(double start_us) const;

  PipelineP2pSetup s_;
  std::vector<PendingSend> pending_;
  std::vector<torch::Tensor> unmatched_;  // after an abort: buffers an MPI request may still read
};

}  // namespace itertime::calibrate
