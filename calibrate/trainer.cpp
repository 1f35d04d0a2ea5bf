// trainer.cpp: the 1F1B trainer over (dp, cp, tp, pp) process groups (trainer.hpp).
// Invariants: with vp 1 the pipeline runs run_schedule (blocking P2P through the PP
// Communicator); with v > 1 run_interleaved_schedule runs common/pipeline_order's interleaved order with
// non-blocking MPI sends and blocking receives on the PP group's MPI communicator (CPU backend only),
// every send's tensor kept alive until the send completes.
#include "calibrate/trainer.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <exception>
#include <utility>

#include "calibrate/gradient_buckets.hpp"
#include "calibrate/llama_model.hpp"
#include "calibrate/torch_compat.hpp"
#include "calibrate/torch_info.hpp"
#include "calibrate/tp_comm.hpp"
#include "common/errors.hpp"
#include "common/pipeline_order.hpp"
#include "runtime/mpi_communicator.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/nccl_communicator.hpp"

namespace itertime::calibrate {
namespace {

using Clock = std::chrono::steady_clock;

double since_us(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Synthetic tokens of samples [first_sample, first_sample + count) of a step: [count, seq + 1].
// A learnable language: three tokens in four are drawn from the 16 most frequent ids, the rest uniformly
// from the vocabulary, so the loss falls from ln(vocab) within a few steps, as in real training.
torch::Tensor synthetic_tokens(uint64_t seed, int64_t step, int64_t first_sample, int64_t count, int64_t seq,
                               int64_t vocab) {
  torch::Tensor tokens = torch::empty({count, seq + 1}, torch::kInt64);
  auto access = tokens.accessor<int64_t, 2>();
  const auto v = static_cast<uint64_t>(vocab);
  for (int64_t b = 0; b < count; ++b) {
    const uint64_t sample_key =
        splitmix64(seed ^ splitmix64(static_cast<uint64_t>(step) * 1000003ull + static_cast<uint64_t>(first_sample + b)));
    access[b][0] = static_cast<int64_t>(sample_key % v);
    for (int64_t t = 1; t <= seq; ++t) {
      const uint64_t key = splitmix64(sample_key + static_cast<uint64_t>(t));
      access[b][t] = static_cast<int64_t>((key % 4 != 0) ? (key >> 8) % std::min<uint64_t>(16, v) : (key >> 8) % v);
    }
  }
  return tokens;
}

void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) throw InternalError(std::string(call) + " failed in the interleaved pipeline", __FILE__, __LINE__);
}

std::unique_ptr<Communicator> make_comm(Backend backend, MPI_Comm comm) {
  if (backend == Backend::kCuda) return std::make_unique<NcclCommunicator>(comm);
  return std::make_unique<MpiCommunicator>(comm);
}

}  // namespace

void check_trainable(const TrainerOptions& options, int world_size) {
  const PrecisionPolicy& policy = precision_policy(options.precision);
  require_supported(policy, options.backend, backend_capabilities());
  resolve_attention(options.attention);
  if (options.backend == Backend::kCuda && !torch::cuda::is_available()) {
    throw UserError("backend cuda: this LibTorch has no CUDA support or no device is visible; use backend cpu or a CUDA build of LibTorch");
  }
  if (options.model.tie_word_embeddings) {
    throw UserError("model " + options.model.name + " ties its embeddings; the trainer supports untied LLaMA models only");
  }
  options.config.require_valid(options.model, world_size);  // vp's own rules (pp > 1, layers, m % pp) among them
  const int cp = options.config.cp;
  if (cp > 1 && options.backend == Backend::kCuda) {
    throw UserError("cp " + std::to_string(cp) + " (context parallelism) runs on the cpu backend only (its all-gather of keys and "
                    "values is MPI's, not NCCL); use backend cpu or cp 1");
  }
  const int v = options.config.vp;
  if (v > 1) {
    const ParallelConfig& c = options.config;
    const std::string what = "vp " + std::to_string(v) + " (interleaved 1F1B)";
    if (options.backend == Backend::kCuda) {
      throw UserError(what + " runs on the cpu backend only (its P2P uses non-blocking MPI sends, not NCCL); use backend cpu or vp 1");
    }
    if (options.techniques.overlap_gradient_reduction && c.reduction_ranks() > 1) {
      throw UserError(what + " with overlapped gradient reduction (at dp*cp > 1) is not supported (a chunk's gradients are final at "
                      "its own last backward, not the step's); turn overlap_gradient_reduction off or use vp 1");
    }
  }
  if (options.techniques.sequence_parallel && cp == 1 && options.config.seq_len % options.config.tp != 0) {
    throw UserError("sequence parallelism splits the sequence over TP: seq_len " + std::to_string(options.config.seq_len) +
                    " is not a multiple of tp " + std::to_string(options.config.tp) + "; choose a multiple, or turn it off");
  }
  if (options.techniques.sequence_parallel && cp > 1 && (options.config.seq_len / cp) % options.config.tp != 0) {
    throw UserError("sequence parallelism splits each context-parallel rank's seq_len/cp = " +
                    std::to_string(options.config.seq_len / cp) + " tokens over TP, which is not a multiple of tp " +
                    std::to_string(options.config.tp) + "; choose seq_len a multiple of cp*tp (and of 2*cp), or turn it off");
  }
  if (options.techniques.overlap_parameter_gather &&
      !(options.techniques.distributed_optimizer && options.techniques.overlap_gradient_reduction)) {
    throw UserError("overlap_parameter_gather (opg) overlaps the distributed optimizer's bucket all-gathers: it needs "
                    "distributed_optimizer and overlap_gradient_reduction (dopt+ovl); turn them on, or opg off");
  }
  if (options.techniques.overlap_gradient_reduction && options.techniques.gradient_bucket_bytes < 1) {
    throw UserError("gradient_bucket_bytes must be at least 1");
  }
  if (options.techniques.vocab_parallel && options.model.vocab_size % options.config.tp != 0) {
    throw UserError("a vocabulary-parallel head splits the vocabulary over TP: vocab_size " +
                    std::to_string(options.model.vocab_size) + " of model " + options.model.name +
                    " is not a multiple of tp " + std::to_string(options.config.tp) + "; choose another tp, or turn it off");
  }
}

struct Trainer::Impl {
  TrainerOptions options;
  const PrecisionPolicy* policy = nullptr;
  MPI_Comm job_comm;
  JobAbort* abort = nullptr;  // when set, the waits that can give way to a job abort do (trainer.hpp)
  std::vector<torch::Tensor> unmatched_send_buffers;  // after an abort: sends an MPI request still holds
  std::unique_ptr<ProcessGroups> groups;
  // dp_comm is the dp*cp group's (ProcessGroups::dp_cp): with context parallelism the gradients are
  // reduced, and the distributed optimizer sharded, over dp*cp ranks (Megatron-LM's data-parallel group
  // with context parallelism). cp_comm (cp > 1 only) runs the keys' and values' all-gathers.
  std::unique_ptr<Communicator> tp_comm, dp_comm, pp_comm, cp_comm;
  CommTimer tp_timer, cp_timer;
  TpContext tp_context;
  CpContext cp_context;
  torch::Device device{torch::kCPU};
  // This rank's model chunks: chunk c is virtual stage c*pp + pp_idx of pp*v (v = 1: the rank's stage).
  std::vector<LlamaStage> chunks;
  std::vector<torch::Tensor> parameters;
  std::vector<torch::Tensor> norm_weights;  // with SP: gradients from sequence shards, summed over TP
  torch::Tensor gradient_buffer;  // the DP all-reduce's flat buffer, made at the first step (tp_comm.hpp)
  std::unique_ptr<torch::optim::AdamW> optimizer;
  // Distributed optimizer only (tp_comm.hpp): the padded flat parameters (the all-gather's output) and
  // gradients (the reduce-scatter's input), this rank's shard (the one tensor AdamW updates) and its gradient.
  // With overlapped reduction too (dp > 1), the gradients are the buckets' padded buffer instead
  // (sharded.gradient_buffer stays undefined) and parameter_buffer has its layout (make_bucketed_shard).
  ShardedBuffers sharded;
  std::unique_ptr<GradientBuckets> buckets;  // overlapped gradient reduction at dp > 1 only
  // Distributed optimizer with overlapped reduction: where bucket k's 1/dp slice owned by this rank lies in
  // the shard (shard_offsets[k], bucket_elements(k) / dp elements), and the shard's ranges that hold
  // norm weights (SP: their gradients summed over TP after the reduce-scatters).
  std::vector<int64_t> shard_offsets;
  std::vector<std::pair<int64_t, int64_t>> shard_norm_ranges;  // (offset in the shard, elements)
  // Overlapped parameter gather (opg, with the distributed optimizer's buckets at dp*cp > 1): every
  // parameter is a view of its range of sharded.parameter_buffer; after AdamW the buckets' all-gathers
  // are started, bucket K-1 first, and the next forward waits for a bucket before the first part of a
  // chunk that holds its parameters (wait_for_parameters). Per bucket: whether its all-gather is in
  // flight, and its id (Communicator::start_all_gather); per parameter (all chunks'), its bucket.
  bool overlap_gather = false;
  std::vector<std::size_t> bucket_of_parameter;
  std::vector<char> gather_in_flight;
  std::vector<std::size_t> gather_ids;
  int gathers_in_flight = 0;
  // opg's timing: the previous step's timing point (right after its all-gathers were started, trainer.hpp).
  bool timed_before = false;
  Clock::time_point timing_point;
  bool abandoned = false;
  int backwards_this_step = 0;
  double loss_scale = 1.0;
  int64_t good_steps = 0;
  PhaseTimes phases;

  void sync_device() {
    if (options.backend == Backend::kCuda) torch::cuda::synchronize();
  }

  // The gradient reduction's group: dp*cp ranks; this rank's index in it (dp_idx * cp + cp_idx).
  int reduction_size() const { return options.config.reduction_ranks(); }
  int reduction_rank() const { return groups->coords().dp_idx * options.config.cp + groups->coords().cp_idx; }

  // The step's host collectives over the job's ranks: abortable when the trainer has a JobAbort.
  void host_barrier() {
    if (abort != nullptr) {
      abort->barrier();
    } else {
      MPI_Barrier(job_comm);
    }
  }
  double host_all_reduce(double value, MPI_Op op) {
    if (abort != nullptr) return abort->all_reduce(value, op);
    double result = 0.0;
    MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, op, job_comm);
    return result;
  }

  // Runs a send on `data`; if a job abort ends it, the buffer is kept while the send may still read it.
  template <typename Send>
  void keeping_buffer_on_abort(const torch::Tensor& data, Send&& send) {
    try {
      send();
    } catch (const JobAborted&) {
      unmatched_send_buffers.push_back(data);
      throw;
    }
  }

  torch::Tensor activation_buffer() const {
    const int64_t local_seq = options.config.seq_len / options.config.cp;  // this CP rank's tokens
    const int64_t seq = tp_context.sp() ? local_seq / options.config.tp : local_seq;
    return torch::empty({options.config.micro_batch, seq, options.model.hidden_size},
                        torch::TensorOptions().dtype(to_torch(policy->activation_dtype)).device(device));
  }

  // ---- pipeline P2P (blocking; peers are neighbours in the PP group) ----
  int pp_rank() const { return groups->coords().pp_idx; }
  bool first_stage() const { return pp_rank() == 0; }
  bool last_stage() const { return pp_rank() == options.config.pp - 1; }

  void p2p_send(const torch::Tensor& tensor, int peer) {
    const auto start = Clock::now();
    sync_device();
    const torch::Tensor data = tensor.contiguous();
    keeping_buffer_on_abort(data, [&] {
      pp_comm->send(data.data_ptr(), static_cast<std::size_t>(data.numel()), from_torch(data.scalar_type()), peer);
      pp_comm->synchronize();
    });
    phases.pp_comm_us += since_us(start);
  }
  torch::Tensor p2p_recv(int peer) {
    const auto start = Clock::now();
    torch::Tensor tensor = activation_buffer();
    pp_comm->recv(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), policy->activation_dtype, peer);
    pp_comm->synchronize();
    phases.pp_comm_us += since_us(start);
    return tensor;
  }
  torch::Tensor p2p_exchange(const torch::Tensor& send, int peer) {
    const auto start = Clock::now();
    sync_device();
    const torch::Tensor data = send.contiguous();
    torch::Tensor received = activation_buffer();
    keeping_buffer_on_abort(data, [&] {
      pp_comm->send_recv(data.data_ptr(), peer, received.data_ptr(), peer, static_cast<std::size_t>(data.numel()),
                         policy->activation_dtype);
      pp_comm->synchronize();
    });
    phases.pp_comm_us += since_us(start);
    return received;
  }

  struct InFlight {
    torch::Tensor input;   // received activation (requires grad) or undefined on the first stage
    torch::Tensor output;  // stage output, or the scaled loss on the last stage
  };

  // Chunk `chunk` of this rank (v = 1: its stage) runs micro-batch `micro_batch`; only the chunk with the
  // head (the last virtual stage) adds to loss_sum.
  InFlight forward_micro_batch(int64_t step, int micro_batch, torch::Tensor input, double& loss_sum, int chunk = 0) {
    const ParallelConfig& c = options.config;
    LlamaStage& stage = chunks[static_cast<std::size_t>(chunk)];
    const bool first_chunk = stage->is_first(), last_chunk = stage->is_last();
    const auto start = Clock::now();
    const double tp_before = tp_timer.forward_us + cp_timer.forward_us;
    const double dp_before = phases.dp_comm_us;  // opg's waits for parameters (DP communication)
    InFlight flight;
    torch::Tensor targets;
    torch::Tensor stage_input;
    if (first_chunk || last_chunk) {
      const int64_t samples_per_dp = c.global_batch / c.dp;
      const int64_t first = groups->coords().dp_idx * samples_per_dp + static_cast<int64_t>(micro_batch) * c.micro_batch;
      const torch::Tensor tokens =
          synthetic_tokens(options.seed, step, first, c.micro_batch, c.seq_len, options.model.vocab_size).to(device);
      if (c.cp > 1) {
        // This CP rank's two chunks of the sequence, at their global positions (tp_comm.hpp).
        const torch::Tensor positions = context_parallel_positions(c.seq_len, c.cp, groups->coords().cp_idx).to(device);
        if (first_chunk) stage_input = tokens.index_select(1, positions);
        if (last_chunk) targets = tokens.index_select(1, positions + 1);
      } else {
        if (first_chunk) stage_input = tokens.narrow(1, 0, c.seq_len);
        if (last_chunk) targets = tokens.narrow(1, 1, c.seq_len);
      }
    }
    if (!first_chunk) {
      input.requires_grad_(true);
      flight.input = input;
      stage_input = input;
    }
    {
      const torch::DeviceType device_type = options.backend == Backend::kCuda ? torch::kCUDA : torch::kCPU;
      AutocastGuard autocast(device_type, to_torch(policy->compute_dtype), policy->autocast);
      flight.output = stage->forward(stage_input, targets);
    }
    if (last_chunk) {
      loss_sum += flight.output.item<double>();
      flight.output = flight.output * (loss_scale / static_cast<double>(c.num_micro_batches()));
    } else {
      ITERTIME_CHECK(flight.output.scalar_type() == to_torch(policy->activation_dtype),
                     "stage output dtype differs from the policy's activation dtype");
    }
    sync_device();
    phases.forward_us +=
        since_us(start) - (tp_timer.forward_us + cp_timer.forward_us - tp_before) - (phases.dp_comm_us - dp_before);
    return flight;
  }

  // Buckets exist with v = 1 only (check_trainable), so the step's m-th backward is its last.
  torch::Tensor backward_micro_batch(InFlight& flight, const torch::Tensor& output_grad, int chunk = 0) {
    if (buckets) buckets->arm(++backwards_this_step == options.config.num_micro_batches());
    const auto start = Clock::now();
    const double tp_before = tp_timer.backward_us + cp_timer.backward_us;
    const LlamaStage& stage = chunks[static_cast<std::size_t>(chunk)];
    if (stage->is_last()) {
      flight.output.backward();
    } else {
      torch::autograd::backward({flight.output}, {output_grad});
    }
    torch::Tensor input_grad;
    if (!stage->is_first()) input_grad = flight.input.grad();
    flight = InFlight{};
    sync_device();
    phases.backward_us += since_us(start) - (tp_timer.backward_us + cp_timer.backward_us - tp_before);
    return input_grad;
  }

  double run_schedule(int64_t step) {
    const int m = options.config.num_micro_batches();
    const int stages = options.config.pp;
    const int prev = pp_rank() - 1;
    const int next = pp_rank() + 1;
    const int warmup = std::min(stages - pp_rank() - 1, m);
    const int remaining = m - warmup;
    double loss_sum = 0.0;
    std::deque<InFlight> in_flight;
    int forward_index = 0;

    auto recv_forward = [&]() { return first_stage() ? torch::Tensor() : p2p_recv(prev); };
    for (int i = 0; i < warmup; ++i) {
      torch::Tensor input = recv_forward();
      in_flight.push_back(forward_micro_batch(step, forward_index++, input, loss_sum));
      if (!last_stage()) p2p_send(in_flight.back().output.detach(), next);
    }
    torch::Tensor input;
    if (remaining > 0) input = recv_forward();
    for (int i = 0; i < remaining; ++i) {
      in_flight.push_back(forward_micro_batch(step, forward_index++, input, loss_sum));
      torch::Tensor output_grad;
      if (!last_stage()) output_grad = p2p_exchange(in_flight.back().output.detach(), next);
      torch::Tensor input_grad = backward_micro_batch(in_flight.front(), output_grad);
      in_flight.pop_front();
      const bool last_iteration = (i == remaining - 1);
      if (last_iteration) {
        if (!first_stage()) p2p_send(input_grad, prev);
      } else {
        input = first_stage() ? torch::Tensor() : p2p_exchange(input_grad, prev);
      }
    }
    for (int i = 0; i < warmup; ++i) {
      const torch::Tensor output_grad = last_stage() ? torch::Tensor() : p2p_recv(next);
      torch::Tensor input_grad = backward_micro_batch(in_flight.front(), output_grad);
      in_flight.pop_front();
      if (!first_stage()) p2p_send(input_grad, prev);
    }
    return loss_sum;
  }

  // ---- interleaved 1F1B (config.vp = v > 1; Megatron-LM's virtual pipeline stages) ----
  // Rank r runs common/pipeline_order's interleaved order. Virtual stage c*pp + r (its chunk c) takes its
  // input from virtual stage c*pp + r - 1: rank r-1's chunk c, or for r = 0 rank pp-1's chunk c-1; its
  // output goes to rank r+1's chunk c, or for r = pp-1 rank 0's chunk c+1; gradients go the other way.
  //
  // Sends are non-blocking (MPI_Isend), receives blocking, so a rank waits only in a receive, for the
  // pass on a neighbour that produces it. That is exactly the dependency graph of predict/schedule's
  // simulation of the same orders (forward (vs, i) after forward (vs-1, i), backward (vs, i) after backward
  // (vs+1, i)), which completes for every valid (pp, m, v) (its no-progress sweep is an ITERTIME_CHECK;
  // tests/torch/test_layout_equivalence.cpp replays the orders too), so no cycle of waits can form; a send
  // never waits for its receiver. MPI progresses the sends inside the sender's later MPI calls (each pass
  // is followed by MPI_Test on the pending sends, and the step ends waiting for all of them).
  //
  // Matching: a message's tag names its direction and the receiver's chunk (kInterleavedTagBase + 2*chunk
  // + direction; MpiCommunicator's own tags 7 and 8 are below it). Between one source and one receiver
  // chunk, in one direction, every payload belongs to the same virtual-stage boundary, and both ends
  // enumerate that boundary's micro-batches in increasing order (the order runs each chunk's forwards,
  // and its backwards, in increasing micro-batch); MPI does not reorder messages of one (source, tag,
  // communicator), so the n-th receive gets the n-th send: the right micro-batch. (With pp = 2 the
  // previous and next rank coincide; the tags keep the directions and chunks apart.)
  static constexpr int kInterleavedTagBase = 1000;
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    torch::Tensor data;  // kept alive until the send completed
  };
  std::vector<PendingSend> pending_sends;

  static int interleaved_tag(PipelinePassKind direction, int receiver_chunk) {
    return kInterleavedTagBase + 2 * receiver_chunk + (direction == PipelinePassKind::kForward ? 0 : 1);
  }
  static int bytes_of(const torch::Tensor& tensor) {
    const int64_t bytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
    ITERTIME_CHECK(bytes <= INT_MAX, "an activation over 2 GiB cannot go through one MPI message");
    return static_cast<int>(bytes);
  }

  void isend_pipeline(const torch::Tensor& tensor, int peer, int tag) {
    const auto start = Clock::now();
    sync_device();
    PendingSend send;
    send.data = tensor.contiguous();
    check_mpi(MPI_Isend(send.data.data_ptr(), bytes_of(send.data), MPI_BYTE, peer, tag, groups->pp().get(), &send.request),
              "MPI_Isend");
    pending_sends.push_back(std::move(send));
    phases.pp_comm_us += since_us(start);
  }
  torch::Tensor recv_pipeline(int peer, int tag) {
    const auto start = Clock::now();
    torch::Tensor tensor = activation_buffer();
    if (abort != nullptr) {
      MPI_Request none = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
      check_mpi(MPI_Irecv(tensor.data_ptr(), bytes_of(tensor), MPI_BYTE, peer, tag, groups->pp().get(), &recv), "MPI_Irecv");
      abort->wait(none, recv);
    } else {
      check_mpi(MPI_Recv(tensor.data_ptr(), bytes_of(tensor), MPI_BYTE, peer, tag, groups->pp().get(), MPI_STATUS_IGNORE),
                "MPI_Recv");
    }
    phases.pp_comm_us += since_us(start);
    return tensor;
  }
  // Drops the sends that completed (and their tensors).
  void reap_sends() {
    const auto start = Clock::now();
    for (auto& send : pending_sends) {
      int done = 0;
      check_mpi(MPI_Test(&send.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    }
    pending_sends.erase(std::remove_if(pending_sends.begin(), pending_sends.end(),
                                       [](const PendingSend& send) { return send.request == MPI_REQUEST_NULL; }),
                        pending_sends.end());
    phases.pp_comm_us += since_us(start);
  }
  void finish_sends() {
    const auto start = Clock::now();
    for (auto& send : pending_sends) {
      if (abort != nullptr) {
        MPI_Request none = MPI_REQUEST_NULL;
        abort->wait(send.request, none);
      } else {
        check_mpi(MPI_Wait(&send.request, MPI_STATUS_IGNORE), "MPI_Wait");
      }
    }
    pending_sends.clear();
    phases.pp_comm_us += since_us(start);
  }

  double run_interleaved_schedule(int64_t step) {
    const int pp = options.config.pp;
    const int v = options.config.vp;
    const int r = pp_rank();
    const int prev = (r + pp - 1) % pp;
    const int next = (r + 1) % pp;
    double loss_sum = 0.0;
    // Per chunk, its forwards awaiting their backward, oldest first (micro-batch, activations).
    std::vector<std::deque<std::pair<int, InFlight>>> in_flight(static_cast<std::size_t>(v));
    try {
      for (const PipelinePass& pass : interleaved_passes(pp, r, options.config.num_micro_batches(), v)) {
        const int c = pass.chunk;
        const LlamaStage& chunk = chunks[static_cast<std::size_t>(c)];
        auto& flights = in_flight[static_cast<std::size_t>(c)];
        if (pass.kind == PipelinePassKind::kForward) {
          const torch::Tensor input =
              chunk->is_first() ? torch::Tensor() : recv_pipeline(prev, interleaved_tag(PipelinePassKind::kForward, c));
          InFlight flight = forward_micro_batch(step, pass.micro_batch, input, loss_sum, c);
          if (!chunk->is_last()) {
            isend_pipeline(flight.output.detach(), next, interleaved_tag(PipelinePassKind::kForward, r == pp - 1 ? c + 1 : c));
          }
          flights.emplace_back(pass.micro_batch, std::move(flight));
        } else {
          ITERTIME_CHECK(!flights.empty() && flights.front().first == pass.micro_batch,
                         "the interleaved order runs a backward before its forward");
          const torch::Tensor output_grad =
              chunk->is_last() ? torch::Tensor() : recv_pipeline(next, interleaved_tag(PipelinePassKind::kBackward, c));
          const torch::Tensor input_grad = backward_micro_batch(flights.front().second, output_grad, c);
          flights.pop_front();
          if (!chunk->is_first()) {
            isend_pipeline(input_grad, prev, interleaved_tag(PipelinePassKind::kBackward, r == 0 ? c - 1 : c));
          }
        }
        reap_sends();
      }
      finish_sends();
    } catch (const JobAborted&) {
      // Sends an MPI request may still read: their buffers live as long as the trainer (trainer.hpp).
      for (auto& send : pending_sends) {
        if (send.request != MPI_REQUEST_NULL) unmatched_send_buffers.push_back(send.data);
      }
      pending_sends.clear();
      throw;
    }
    return loss_sum;
  }

  void all_reduce_gradients() {
    const auto start = Clock::now();
    if (reduction_size() > 1) {
      // Divided before the sum, as Megatron-LM scales gradients by 1/dp before its collective: the sum of
      // dp loss-scaled fp16 gradients would overflow where one rank's does not. With context parallelism
      // each rank's loss is the mean over its own seq/cp tokens of a sample, the same count on every CP
      // rank, so the mean over dp*cp of their gradients is the global batch's (trainer.hpp).
      if (!gradient_buffer.defined()) gradient_buffer = make_flat_buffer(parameters);
      flatten_into(gradient_buffer, parameters, FlatPart::kGradient);
      gradient_buffer.div_(static_cast<double>(reduction_size()));
      all_reduce_tensor(*dp_comm, gradient_buffer, options.backend == Backend::kCuda);
      unflatten_from(gradient_buffer, parameters, FlatPart::kGradient);
    }
    phases.dp_comm_us += since_us(start);
  }

  // With SP each TP rank's norm weights saw only its sequence shard: their gradients are summed over TP
  // (Megatron's all-reduce of the sequence-parallel parameters' gradients), as TP communication.
  void all_reduce_norm_gradients() {
    if (!tp_context.sp() || norm_weights.empty()) return;
    const auto start = Clock::now();
    torch::Tensor flat = make_flat_buffer(norm_weights);
    flatten_into(flat, norm_weights, FlatPart::kGradient);
    all_reduce_tensor(*tp_comm, flat, options.backend == Backend::kCuda);
    unflatten_from(flat, norm_weights, FlatPart::kGradient);
    tp_timer.backward_us += since_us(start);
  }

  // ---- overlapped gradient reduction (trainer.hpp, gradient_buckets.hpp) ----
  // A bucket whose gradients are final is divided by dp (before the sum, as all_reduce_gradients) and its
  // all-reduce started; MPI advances started reductions only inside its calls, so every final gradient
  // gives it a chance.
  void make_buckets() {
    if (options.techniques.distributed_optimizer) {
      make_bucketed_shard();
      return;
    }
    buckets = std::make_unique<GradientBuckets>(
        parameters, options.techniques.gradient_bucket_bytes,
        [this](std::size_t, torch::Tensor& bucket) {
          bucket.div_(static_cast<double>(reduction_size()));
          dp_comm->start_all_reduce_sum(bucket.data_ptr(), static_cast<std::size_t>(bucket.numel()),
                                        from_torch(bucket.scalar_type()));
        },
        [this] { dp_comm->progress(); });
  }

  // ---- distributed optimizer with overlapped reduction (Megatron-LM's, without overlap_param_gather) ----
  // The buckets are padded to multiples of dp; DP rank r owns the r-th 1/dp slice of every bucket. Its
  // shard is the parameter values of its slices, bucket 0's first; the shard's gradient receives each
  // bucket's reduce-scatter, started (divided by dp first) as the last backward completes the bucket.
  void make_bucketed_shard() {
    const int dp = reduction_size();  // dp*cp: the reduction group's ranks
    const int r = reduction_rank();
    buckets = std::make_unique<GradientBuckets>(
        parameters, options.techniques.gradient_bucket_bytes,
        [this, dp](std::size_t index, torch::Tensor& bucket) {
          bucket.div_(static_cast<double>(dp));
          sync_device();  // NCCL's reduce-scatter runs on its own stream (comm.hpp)
          const int64_t slice = bucket.numel() / dp;
          dp_comm->start_reduce_scatter_sum(bucket.data_ptr(), sharded.shard_gradient.narrow(0, shard_offsets[index], slice).data_ptr(),
                                            static_cast<std::size_t>(slice), from_torch(bucket.scalar_type()));
        },
        [this] { dp_comm->progress(); }, dp);
    BucketedShard shard = shard_over_buckets(*buckets, tp_context.sp() ? norm_weights : std::vector<torch::Tensor>{}, dp, r);
    sharded = std::move(shard.buffers);
    shard_offsets = std::move(shard.offsets);
    shard_norm_ranges = std::move(shard.norm_ranges);
  }

  // After the backward: the buckets' reduce-scatters are complete (finish_overlapped_reduction); with SP
  // the norms' gradients in the shard, DP-reduced already, are summed over TP (the sums commute, as in
  // Megatron-LM's finalize_model_grads, which sums them over TP after the DP reduction).
  void all_reduce_shard_norm_gradients() {
    if (shard_norm_ranges.empty()) return;
    const auto start = Clock::now();
    std::vector<torch::Tensor> parts;
    for (const auto& [offset, count] : shard_norm_ranges) parts.push_back(sharded.shard_gradient.narrow(0, offset, count));
    torch::Tensor flat = torch::cat(parts);
    all_reduce_tensor(*tp_comm, flat, options.backend == Backend::kCuda);
    int64_t at = 0;
    for (auto& part : parts) {
      part.copy_(flat.narrow(0, at, part.numel()));
      at += part.numel();
    }
    tp_timer.backward_us += since_us(start);
  }

  // The updated slices of every DP rank into every rank's parameters, bucket by bucket (blocking).
  void all_gather_bucketed_parameters() {
    for (std::size_t k = 0; k < buckets->size(); ++k) {
      const int64_t slice = buckets->bucket_elements(k) / reduction_size();
      dp_comm->all_gather(sharded.shard.narrow(0, shard_offsets[k], slice).data_ptr(),
                          sharded.parameter_buffer.narrow(0, buckets->bucket_offset(k), buckets->bucket_elements(k)).data_ptr(),
                          static_cast<std::size_t>(slice), from_torch(sharded.shard.scalar_type()));
    }
    dp_comm->synchronize();
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      parameters[i].copy_(sharded.parameter_buffer.narrow(0, buckets->parameter_offset(i), parameters[i].numel()).view_as(parameters[i]));
    }
  }

  // ---- overlapped parameter gather (opg; Megatron-LM's overlap_param_gather) ----
  // At construction: every parameter becomes a view of its range of the padded parameter buffer (which
  // holds their values already, shard_over_buckets), as Megatron's parameters are views of its param
  // buffer, so the all-gathers write the parameters themselves and nothing is copied back. The old
  // storage is released (the parameters are held once). Same dtype and device: set_data keeps each
  // parameter's gradient accumulator (the buckets' hooks) and its .grad view.
  void make_parameters_views_of_buffer() {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      torch::Tensor& p = parameters[i];
      p.set_data(sharded.parameter_buffer.narrow(0, buckets->parameter_offset(i), p.numel()).view_as(p));
    }
    bucket_of_parameter.assign(parameters.size(), 0);
    for (std::size_t k = 0; k < buckets->size(); ++k) {
      const int64_t begin = buckets->bucket_offset(k), end = begin + buckets->bucket_elements(k);
      for (std::size_t i = 0; i < parameters.size(); ++i) {
        if (buckets->parameter_offset(i) >= begin && buckets->parameter_offset(i) < end) bucket_of_parameter[i] = k;
      }
    }
    gather_in_flight.assign(buckets->size(), 0);
    gather_ids.assign(buckets->size(), 0);
  }

  // After AdamW: starts every bucket's all-gather of the updated slices into the parameter buffer (the
  // parameters), in the order the next forward needs them: bucket K-1 (the first parameters) first.
  // The operators of all_gather_bucketed_parameters, reversed in bucket order, without its copy loop.
  // Returns the time the starts took (DP communication).
  double start_parameter_gathers() {
    const auto start = Clock::now();
    sync_device();  // the shard's update is complete before the all-gathers read it
    for (std::size_t k = buckets->size(); k-- > 0;) {
      const int64_t slice = buckets->bucket_elements(k) / reduction_size();
      const torch::Tensor bucket = sharded.parameter_buffer.narrow(0, buckets->bucket_offset(k), buckets->bucket_elements(k));
      const torch::Tensor mine = sharded.shard.narrow(0, shard_offsets[k], slice);
      ITERTIME_CHECK(!gather_in_flight[k], "a bucket's all-gather started while the previous one is in flight");
      gather_ids[k] = dp_comm->start_all_gather(mine.data_ptr(), bucket.data_ptr(), static_cast<std::size_t>(slice),
                                                from_torch(sharded.shard.scalar_type()));
      gather_in_flight[k] = 1;
      ++gathers_in_flight;
    }
    return since_us(start);
  }

  // Before the forward uses parameters [first, end) of `parameters` (a part of a chunk, in forward
  // order): waits for the all-gathers of the buckets holding them (bucket_of_parameter decreases along
  // the parameters), lets the library advance the others; the time counts as DP communication.
  void wait_for_parameters(std::size_t first, std::size_t end) {
    if (gathers_in_flight == 0 || first >= end) return;
    const auto start = Clock::now();
    for (std::size_t k = bucket_of_parameter[first] + 1; k-- > bucket_of_parameter[end - 1];) {
      if (!gather_in_flight[k]) continue;
      dp_comm->wait_started(gather_ids[k]);
      gather_in_flight[k] = 0;
      --gathers_in_flight;
    }
    if (gathers_in_flight > 0) dp_comm->progress();
    phases.dp_comm_us += since_us(start);
  }

  // Every started all-gather finished (after the last step: before a parameter check, or at the end).
  void finish_parameter_gathers() {
    if (gathers_in_flight == 0) return;
    for (std::size_t k = gather_in_flight.size(); k-- > 0;) {
      if (!gather_in_flight[k]) continue;
      dp_comm->wait_started(gather_ids[k]);
      gather_in_flight[k] = 0;
      --gathers_in_flight;
    }
    sync_device();
  }

  // After the backward: waits for the buckets' reductions (in place, in the gradients' views).
  void finish_overlapped_reduction() {
    const auto start = Clock::now();
    ITERTIME_CHECK(buckets->completed() == static_cast<int>(buckets->size()), "a gradient bucket was not complete after the backward");
    dp_comm->finish_started();
    phases.dp_comm_us += since_us(start);
  }

  // ---- distributed optimizer (trainer.hpp) ----
  void make_shard() { sharded = make_sharded_buffers(parameters, reduction_size(), reduction_rank()); }

  void reduce_scatter_gradients() {
    const auto start = Clock::now();
    fill_gradient_buffer(sharded, parameters, reduction_size());
    if (options.backend == Backend::kCuda) torch::cuda::synchronize();
    dp_comm->reduce_scatter_sum(sharded.gradient_buffer.data_ptr(), sharded.shard_gradient.data_ptr(),
                                static_cast<std::size_t>(sharded.shard_count), from_torch(sharded.shard_gradient.scalar_type()));
    dp_comm->synchronize();
    sharded.shard.mutable_grad() = sharded.shard_gradient;
    phases.dp_comm_us += since_us(start);
  }

  // The updated shards of every DP rank into every rank's parameters; returns its time.
  double all_gather_parameters() {
    const auto start = Clock::now();
    if (options.backend == Backend::kCuda) torch::cuda::synchronize();
    if (buckets) {
      all_gather_bucketed_parameters();
    } else {
      dp_comm->all_gather(sharded.shard.data_ptr(), sharded.parameter_buffer.data_ptr(),
                          static_cast<std::size_t>(sharded.shard_count), from_torch(sharded.shard.scalar_type()));
      dp_comm->synchronize();
      torch::NoGradGuard no_grad;
      unflatten_from(sharded.parameter_buffer, parameters, FlatPart::kValue);
    }
    sync_device();
    return since_us(start);
  }

  // The gradients the optimizer applies: every parameter's, or this rank's reduced shard.
  std::vector<torch::Tensor> optimizer_gradients() {
    if (options.techniques.distributed_optimizer) return {sharded.shard_gradient};
    std::vector<torch::Tensor> grads;
    for (const auto& p : parameters) grads.push_back(p.grad());
    return grads;
  }

  bool gradients_finite() {
    int finite = 1;
    for (const auto& grad : optimizer_gradients()) {
      if (!torch::isfinite(grad).all().item<bool>()) {
        finite = 0;
        break;
      }
    }
    return host_all_reduce(finite, MPI_MIN) != 0.0;
  }
};

Trainer::Trainer(const TrainerOptions& options, MPI_Comm job_comm, JobAbort* abort) : impl_(std::make_unique<Impl>()) {
  int job_size = 0;
  MPI_Comm_size(job_comm, &job_size);
  check_trainable(options, job_size);
  Impl& s = *impl_;
  s.options = options;
  s.policy = &precision_policy(options.precision);
  s.job_comm = job_comm;
  s.abort = abort;
  set_compute_threads(options.compute_threads);  // LibTorch's pool and OpenBLAS's
  const ParallelConfig& c = options.config;
  s.groups = std::make_unique<ProcessGroups>(RankLayout(c.dp, c.tp, c.pp, c.cp), job_comm);
  int device_index = 0;
  if (options.backend == Backend::kCuda) device_index = bind_cuda_device(node_local_rank(job_comm));
  s.tp_comm = make_comm(options.backend, s.groups->tp().get());
  s.dp_comm = make_comm(options.backend, s.groups->dp_cp().get());  // dp*cp ranks (the DP group with cp 1)
  s.pp_comm = make_comm(options.backend, s.groups->pp().get());
  for (Communicator* comm : {s.tp_comm.get(), s.dp_comm.get(), s.pp_comm.get()}) comm->set_abort(abort);
  if (c.cp > 1) {
    s.cp_comm = std::make_unique<MpiCommunicator>(s.groups->cp().get());  // cpu backend only (check_trainable)
    s.cp_comm->set_abort(abort);
  }
  if (options.backend == Backend::kCuda) {
    // One rank per GPU: the device was bound from the node-local rank (bind_cuda_device) before the
    // NCCL communicators were created; LibTorch uses the same current device.
    s.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index));
    if (s.policy->tf32_math) {
      at::globalContext().setAllowTF32CuBLAS(true);
      at::globalContext().setAllowTF32CuDNN(true);
    }
  }
  s.tp_context = TpContext{s.tp_comm.get(), c.tp, s.groups->coords().tp_idx, options.backend == Backend::kCuda, &s.tp_timer,
                           options.techniques.sequence_parallel, options.techniques.vocab_parallel};
  s.cp_context = CpContext{s.cp_comm.get(), c.cp, s.groups->coords().cp_idx, false, &s.cp_timer};

  // Chunk k of this rank is virtual stage k*pp + pp_idx of pp*v; its parameters follow chunk k-1's in
  // `parameters` (the DP buffers, the shard and the optimizer all run over that one list).
  const int v = options.config.vp;
  const auto stages = stage_layers(static_cast<int>(options.model.num_layers), c.pp * v);
  for (int chunk = 0; chunk < v; ++chunk) {
    const StageLayers& mine = stages[static_cast<std::size_t>(chunk * c.pp + s.groups->coords().pp_idx)];
    LlamaStage stage(options.model, mine, options.seed, &s.tp_context, c.seq_len, resolve_attention(options.attention),
                     options.techniques.recompute, &s.cp_context);
    stage->to(s.device, to_torch(s.policy->param_dtype));
    for (auto& p : stage->parameters()) s.parameters.push_back(p);
    for (const auto& module : stage->modules(/*include_self=*/false)) {
      if (module->as<RMSNormImpl>() == nullptr) continue;
      for (auto& p : module->parameters()) s.norm_weights.push_back(p);
    }
    s.chunks.push_back(stage);
  }
  std::vector<torch::Tensor> updated = s.parameters;
  const bool overlap = options.techniques.overlap_gradient_reduction && c.reduction_ranks() > 1;
  if (options.techniques.distributed_optimizer && !overlap) s.make_shard();
  if (overlap) s.make_buckets();  // with the distributed optimizer, its shard too (make_bucketed_shard)
  // opg at dp*cp > 1 (at dp*cp 1 there are no buckets, and training is plain, as for ovl)
  s.overlap_gather = overlap && options.techniques.distributed_optimizer && options.techniques.overlap_parameter_gather;
  if (s.overlap_gather) {
    s.make_parameters_views_of_buffer();
    std::size_t first = 0;  // chunk k's parameters follow chunk k-1's in `parameters`
    for (auto& stage : s.chunks) {
      Impl* impl = &s;
      stage->set_before_parameters(
          [impl, first](std::size_t begin, std::size_t end) { impl->wait_for_parameters(first + begin, first + end); });
      first += stage->parameters().size();
    }
  }
  if (options.techniques.distributed_optimizer) updated = {s.sharded.shard};
  s.optimizer = std::make_unique<torch::optim::AdamW>(
      updated, torch::optim::AdamWOptions(options.learning_rate).betas(std::make_tuple(kAdamW.beta1, kAdamW.beta2)).weight_decay(kAdamW.weight_decay).eps(adamw_eps(*s.policy)));
  if (s.policy->loss_scaling) s.loss_scale = options.initial_loss_scale;
}

// With opg the all-gathers the last step started write into the parameters: finished before they go,
// unless the trainer was abandoned (a job abort: they stay pending, job_abort.hpp) or an exception is
// unwinding through its owner (its rank is failing; waiting could wait on a rank that will not come).
Trainer::~Trainer() {
  if (!impl_ || impl_->abandoned || std::uncaught_exceptions() > 0) return;
  try {
    impl_->finish_parameter_gathers();
  } catch (const JobAborted&) {
    // another rank raised meanwhile: left pending, as abandon() would
  }
}

void Trainer::abandon() {
  Impl& s = *impl_;
  s.abandoned = true;
  for (Communicator* comm : {s.tp_comm.get(), s.dp_comm.get(), s.pp_comm.get(), s.cp_comm.get()}) {
    if (comm != nullptr) comm->abandon();
  }
  s.groups->abandon();
}

RankCoords Trainer::coords() const { return impl_->groups->coords(); }

int64_t Trainer::local_parameter_count() const {
  int64_t count = 0;
  for (const auto& p : impl_->parameters) count += p.numel();
  return count;
}

int64_t Trainer::optimizer_parameter_count() const {
  const Impl& s = *impl_;
  return s.options.techniques.distributed_optimizer ? s.sharded.shard_count : local_parameter_count();
}

int Trainer::overlapped_buckets_started() const { return impl_->buckets ? impl_->buckets->completed() : 0; }
int Trainer::gradient_bucket_count() const { return impl_->buckets ? static_cast<int>(impl_->buckets->size()) : 0; }
int Trainer::parameter_gathers_in_flight() const { return impl_->gathers_in_flight; }

namespace {

// Sum of squares of the stage's parameters (or of their gradients) as single-rank training holds them:
// TP-sharded ones summed over the TP group, replicated ones counted once (collective over TP).
double whole_stage_sum_of_squares(const std::vector<LlamaStage>& chunks, const TpContext& tp, MPI_Comm tp_comm, bool gradients) {
  torch::NoGradGuard no_grad;
  double sharded = 0.0, replicated = 0.0;
  for (const auto& stage : chunks) {
    for (const auto& item : stage->named_parameters()) {
      const std::string& name = item.key();
      const bool vocabulary = name.find("embed_tokens") != std::string::npos || name.find("lm_head") != std::string::npos;
      const bool tp_sharded = name.find("_proj") != std::string::npos || (vocabulary && tp.vp());
      const torch::Tensor& value = gradients ? item.value().grad() : item.value();
      ITERTIME_CHECK(value.defined(), "gradient_sum_of_squares before a step");
      (tp_sharded ? sharded : replicated) += value.to(torch::kFloat64).pow(2).sum().item<double>();
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &sharded, 1, MPI_DOUBLE, MPI_SUM, tp_comm);
  return sharded + replicated;
}

}  // namespace

double Trainer::parameter_sum_of_squares() const {
  Impl& s = *impl_;
  s.finish_parameter_gathers();  // opg: the last step's all-gathers write the parameters
  return whole_stage_sum_of_squares(s.chunks, s.tp_context, s.groups->tp().get(), false);
}

double Trainer::gradient_sum_of_squares() const {
  const Impl& s = *impl_;
  ITERTIME_CHECK(!s.options.techniques.distributed_optimizer, "gradient_sum_of_squares without the distributed optimizer only");
  return whole_stage_sum_of_squares(s.chunks, s.tp_context, s.groups->tp().get(), true);
}

StepResult Trainer::step(int64_t step_index) {
  Impl& s = *impl_;
  s.phases = PhaseTimes{};
  s.tp_timer.reset();
  s.cp_timer.reset();
  StepResult result;
  // With opg only the trainer's first step begins with a barrier: a later one runs from the previous
  // step's timing point, so that its forward's waits for the parameters are inside it (trainer.hpp).
  Clock::time_point start = s.timing_point;
  if (!s.overlap_gather || !s.timed_before) {
    s.host_barrier();
    start = Clock::now();
  }

  if (s.buckets) {
    s.buckets->begin_step();
  } else {
    for (auto& p : s.parameters) p.mutable_grad() = torch::Tensor();
  }
  s.backwards_this_step = 0;
  const double local_loss_sum = s.options.config.vp > 1 ? s.run_interleaved_schedule(step_index) : s.run_schedule(step_index);
  if (s.buckets) s.buckets->arm(false);
  ITERTIME_CHECK(s.gathers_in_flight == 0, "a bucket's parameter all-gather was not waited for in the step's forward");
  // The TP sum of the norms' gradients (SP) and the DP reduction commute, but each path needs it where
  // the gradients it reads are: before the reduce-scatter (which keeps only a shard), after the
  // overlapped buckets (whose reduction writes every gradient view); with both, on the shard's norm
  // elements after the buckets' reduce-scatters.
  if (s.options.techniques.distributed_optimizer && s.buckets) {
    s.finish_overlapped_reduction();
    s.all_reduce_shard_norm_gradients();
    s.sharded.shard.mutable_grad() = s.sharded.shard_gradient;
  } else if (s.options.techniques.distributed_optimizer) {
    s.all_reduce_norm_gradients();
    s.reduce_scatter_gradients();
  } else if (s.buckets) {
    s.finish_overlapped_reduction();
    s.all_reduce_norm_gradients();
  } else {
    s.all_reduce_norm_gradients();
    s.all_reduce_gradients();
  }

  const auto optimizer_start = Clock::now();
  bool apply = true;
  if (s.policy->loss_scaling) {
    apply = s.gradients_finite();
    if (apply) {
      torch::NoGradGuard no_grad;
      for (auto& grad : s.optimizer_gradients()) grad.mul_(1.0 / s.loss_scale);
      if (++s.good_steps % 2000 == 0) s.loss_scale *= 2.0;
    } else {
      s.loss_scale /= 2.0;
      s.good_steps = 0;
    }
  }
  if (apply) s.optimizer->step();
  s.sync_device();
  double gather_us = 0.0;
  if (s.overlap_gather && apply) {
    gather_us = s.start_parameter_gathers();  // waited for in the next forward (or finish_parameter_gathers)
  } else if (s.options.techniques.distributed_optimizer && apply) {
    gather_us = s.all_gather_parameters();
  }
  s.phases.optimizer_us = since_us(optimizer_start) - gather_us;
  s.phases.dp_comm_us += gather_us;
  s.phases.tp_comm_us = s.tp_timer.forward_us + s.tp_timer.backward_us;
  s.phases.cp_comm_us = s.cp_timer.forward_us + s.cp_timer.backward_us;

  // The step's timing point (with opg the next step's start).
  s.timing_point = Clock::now();
  s.timed_before = true;
  const double local_us = std::chrono::duration<double, std::micro>(s.timing_point - start).count();
  s.phases.total_us = local_us;
  result.time_us = s.host_all_reduce(local_us, MPI_MAX);

  // The loss lives on the last stage's TP-rank-0 ranks, one per DP replica and CP rank: mean over m, DP
  // and CP (each CP rank's loss is the mean over as many tokens). With v > 1 the last virtual stage
  // (pp*v - 1) is rank pp-1's last chunk, the only one with the head.
  const RankCoords c = s.groups->coords();
  const int m = s.options.config.num_micro_batches();
  double contribution = (s.last_stage() && c.tp_idx == 0) ? local_loss_sum / m : 0.0;
  const double total = s.host_all_reduce(contribution, MPI_SUM);
  result.loss = total / s.options.config.reduction_ranks();
  result.phases = s.phases;
  result.skipped = !apply;
  return result;
}

}  // namespace itertime::calibrate
