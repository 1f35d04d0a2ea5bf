// trainer.cpp: the trainer over (dp, cp, tp, pp) process groups (trainer.hpp), a composition of its
// rooms, as Megatron-Core separates them: the model chunks (llama_model.hpp), the pipeline transfers
// (pipeline_p2p.hpp), the schedules (pipeline_schedules.hpp: 1F1B at vp 1, interleaved at vp > 1) and the
// gradient synchronization (gradient_sync.hpp: one strategy of four, chosen by the techniques).
// Invariants: the trainer runs a micro-batch's forward and backward on a chunk (timing them apart from
// the TP, CP and DP communication inside them), the step's host collectives, loss scaling and AdamW;
// its rooms do the rest.
#include "calibrate/trainer.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "calibrate/gradient_sync.hpp"
#include "calibrate/llama_model.hpp"
#include "calibrate/pipeline_p2p.hpp"
#include "calibrate/pipeline_schedules.hpp"
#include "calibrate/torch_compat.hpp"
#include "calibrate/torch_info.hpp"
#include "calibrate/tp_comm.hpp"
#include "common/errors.hpp"
#include "runtime/mpi_communicator.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/nccl_communicator.hpp"

namespace itertime::calibrate {
namespace {

using Clock = std::chrono::steady_clock;

double since_us(Clock::time_point start) { return std::chrono::duration<double, std::micro>(Clock::now() - start).count(); }

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Synthetic tokens of samples [first_sample, first_sample + count) of a step: [count, seq + 1].
// A learnable language: three tokens in four are drawn from the 16 most frequent ids, the rest uniformly
// from the vocabulary, so the loss falls from ln(vocab) within a few steps, as in real training.
torch::Tensor synthetic_tokens(uint64_t seed, int64_t step, int64_t first_sample, int64_t count, int64_t seq, int64_t vocab) {
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
    throw UserError(
        "backend cuda: this LibTorch has no CUDA support or no device is visible; use backend cpu or a CUDA build of LibTorch");
  }
  if (options.model.tie_word_embeddings) {
    throw UserError("model " + options.model.name + " ties its embeddings; the trainer supports untied LLaMA models only");
  }
  options.config.require_valid(options.model, world_size);  // vp's own rules (pp > 1, layers, m % pp) among them
  const int cp = options.config.cp;
  if (cp > 1 && options.backend == Backend::kCuda) {
    throw UserError("cp " + std::to_string(cp) +
                    " (context parallelism) runs on the cpu backend only (its all-gather of keys and "
                    "values is MPI's, not NCCL); use backend cpu or cp 1");
  }
  const int v = options.config.vp;
  if (v > 1) {
    const std::string what = "vp " + std::to_string(v) + " (interleaved 1F1B)";
    if (options.backend == Backend::kCuda) {
      throw UserError(what +
                      " runs on the cpu backend only (its P2P uses non-blocking MPI sends, not NCCL); use backend cpu or vp 1");
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
    throw UserError(
        "overlap_parameter_gather (opg) overlaps the distributed optimizer's bucket all-gathers: it needs "
        "distributed_optimizer and overlap_gradient_reduction (dopt+ovl); turn them on, or opg off");
  }
  if (options.techniques.overlap_gradient_reduction && options.techniques.gradient_bucket_bytes < 1) {
    throw UserError("gradient_bucket_bytes must be at least 1");
  }
  if (options.techniques.vocab_parallel && options.model.vocab_size % options.config.tp != 0) {
    throw UserError("a vocabulary-parallel head splits the vocabulary over TP: vocab_size " +
                    std::to_string(options.model.vocab_size) + " of model " + options.model.name + " is not a multiple of tp " +
                    std::to_string(options.config.tp) + "; choose another tp, or turn it off");
  }
}

struct Trainer::Impl {
  TrainerOptions options;
  const PrecisionPolicy* policy = nullptr;
  MPI_Comm job_comm = MPI_COMM_NULL;
  JobAbort* abort = nullptr;  // when set, the waits that can give way to a job abort do (trainer.hpp)
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
  std::vector<torch::Tensor> parameters;    // every chunk's, chunk k's after chunk k-1's
  std::vector<torch::Tensor> norm_weights;  // with SP: gradients from sequence shards, summed over TP
  // After the chunks: the buckets' hooks on the parameters' gradient accumulators point into it.
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<PipelineP2p> p2p;  // holds the buffers of sends a job abort left unmatched
  std::unique_ptr<torch::optim::AdamW> optimizer;
  // opg's timing: the previous step's timing point (right after its all-gathers were started, trainer.hpp).
  bool timed_before = false;
  Clock::time_point timing_point;
  bool abandoned = false;
  std::vector<int> backwards_this_step;  // per chunk: its backwards so far in this step
  double loss_scale = 1.0;
  int64_t good_steps = 0;
  PhaseTimes phases;

  void sync_device() {
    if (options.backend == Backend::kCuda) torch::cuda::synchronize();
  }

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

  torch::Tensor activation_buffer() const {
    const int64_t local_seq = options.config.seq_len / options.config.cp;  // this CP rank's tokens
    const int64_t seq = tp_context.sp() ? local_seq / options.config.tp : local_seq;
    return torch::empty({options.config.micro_batch, seq, options.model.hidden_size},
                        torch::TensorOptions().dtype(to_torch(policy->activation_dtype)).device(device));
  }

  bool last_stage() const { return groups->coords().pp_idx == options.config.pp - 1; }

  void make_communicators();
  void make_chunks();
  void make_sync();
  void make_p2p();
  torch::Tensor micro_batch_tokens(int64_t step, int micro_batch, torch::Tensor& targets, bool first_chunk, bool last_chunk);
  InFlight forward_micro_batch(int64_t step, int micro_batch, torch::Tensor input, double& loss_sum, int chunk);
  torch::Tensor backward_micro_batch(InFlight& flight, const torch::Tensor& output_grad, int chunk);
  double run_pipeline(int64_t step);
  bool gradients_finite();
  bool update();
};

// The TP, DP (dp*cp) and PP communicators, and CP's with cp > 1; on CUDA the rank's device, bound from its
// node-local rank before the NCCL communicators are created (LibTorch uses the same current device).
void Trainer::Impl::make_communicators() {
  const ParallelConfig& c = options.config;
  groups = std::make_unique<ProcessGroups>(RankLayout(c.dp, c.tp, c.pp, c.cp), job_comm);
  int device_index = 0;
  if (options.backend == Backend::kCuda) device_index = bind_cuda_device(node_local_rank(job_comm));
  tp_comm = make_comm(options.backend, groups->tp().get());
  dp_comm = make_comm(options.backend, groups->dp_cp().get());  // dp*cp ranks (the DP group with cp 1)
  pp_comm = make_comm(options.backend, groups->pp().get());
  for (Communicator* comm : {tp_comm.get(), dp_comm.get(), pp_comm.get()}) comm->set_abort(abort);
  if (c.cp > 1) {
    cp_comm = std::make_unique<MpiCommunicator>(groups->cp().get());  // cpu backend only (check_trainable)
    cp_comm->set_abort(abort);
  }
  if (options.backend == Backend::kCuda) {
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index));
    if (policy->tf32_math) {
      at::globalContext().setAllowTF32CuBLAS(true);
      at::globalContext().setAllowTF32CuDNN(true);
    }
  }
  tp_context = TpContext{{tp_comm.get(), c.tp, groups->coords().tp_idx, options.backend == Backend::kCuda, &tp_timer},
                         options.techniques.sequence_parallel,
                         options.techniques.vocab_parallel};
  cp_context = CpContext{{cp_comm.get(), c.cp, groups->coords().cp_idx, false, &cp_timer}};
}

// Chunk k of this rank is virtual stage k*pp + pp_idx of pp*v; its parameters follow chunk k-1's in
// `parameters` (the gradient sync and the optimizer run over that one list).
void Trainer::Impl::make_chunks() {
  const ParallelConfig& c = options.config;
  const int v = c.vp;
  const auto stages = stage_layers(static_cast<int>(options.model.num_layers), c.pp * v);
  for (int chunk = 0; chunk < v; ++chunk) {
    const StageLayers& mine = stages[static_cast<std::size_t>(chunk * c.pp + groups->coords().pp_idx)];
    LlamaStage stage(options.model, mine, options.seed, &tp_context, c.seq_len, resolve_attention(options.attention),
                     options.techniques.recompute, &cp_context);
    stage->to(device, to_torch(policy->param_dtype));
    for (auto& p : stage->parameters()) parameters.push_back(p);
    for (const auto& module : stage->modules(/*include_self=*/false)) {
      if (module->as<RMSNormImpl>() == nullptr) continue;
      for (auto& p : module->parameters()) norm_weights.push_back(p);
    }
    chunks.push_back(stage);
  }
}

// The gradient synchronization over the dp*cp ranks with the techniques at that size (overlap, and so
// opg, only at dp*cp > 1); with opg each chunk's forward waits for its parts' parameters.
void Trainer::Impl::make_sync() {
  const ParallelConfig& c = options.config;
  GradientSyncSetup setup;
  setup.parameters = parameters;
  for (const auto& stage : chunks) setup.chunk_parameters.push_back(stage->parameters().size());  // overlapped: buckets per chunk
  if (tp_context.sp()) setup.norm_weights = norm_weights;
  setup.techniques = at_dp(options.techniques, c.reduction_ranks());
  setup.dp_comm = dp_comm.get();
  setup.ranks = c.reduction_ranks();
  setup.rank = groups->coords().dp_idx * c.cp + groups->coords().cp_idx;
  setup.tp_comm = tp_comm.get();
  setup.cuda = options.backend == Backend::kCuda;
  setup.dp_comm_us = &phases.dp_comm_us;
  setup.tp_comm_us = &tp_timer.backward_us;
  sync = make_gradient_sync(std::move(setup));
  if (!sync->gathers_parameters()) return;
  GradientSync* gradient_sync = sync.get();
  std::size_t first = 0;  // chunk k's parameters follow chunk k-1's in `parameters`
  for (auto& stage : chunks) {
    stage->set_before_parameters([gradient_sync, first](std::size_t begin, std::size_t end) {
      gradient_sync->wait_for_parameters(first + begin, first + end);
    });
    first += stage->parameters().size();
  }
}

void Trainer::Impl::make_p2p() {
  PipelineP2pSetup setup;
  setup.comm = pp_comm.get();
  setup.group = groups->pp().get();
  setup.abort = abort;
  setup.cuda = options.backend == Backend::kCuda;
  setup.make_receive_buffer = [this] { return activation_buffer(); };
  setup.time_us = &phases.pp_comm_us;
  p2p = std::make_unique<PipelineP2p>(std::move(setup));
}

// The first chunk's input tokens and the last chunk's targets of a micro-batch (the other undefined):
// this DP replica's samples, with cp > 1 this CP rank's two chunks of the sequence at their global
// positions (tp_comm.hpp).
torch::Tensor Trainer::Impl::micro_batch_tokens(int64_t step, int micro_batch, torch::Tensor& targets, bool first_chunk,
                                                bool last_chunk) {
  const ParallelConfig& c = options.config;
  torch::Tensor stage_input;
  if (!first_chunk && !last_chunk) return stage_input;
  const int64_t samples_per_dp = c.global_batch / c.dp;
  const int64_t first = groups->coords().dp_idx * samples_per_dp + static_cast<int64_t>(micro_batch) * c.micro_batch;
  const torch::Tensor tokens =
      synthetic_tokens(options.seed, step, first, c.micro_batch, c.seq_len, options.model.vocab_size).to(device);
  if (c.cp > 1) {
    const torch::Tensor positions = context_parallel_positions(c.seq_len, c.cp, groups->coords().cp_idx).to(device);
    if (first_chunk) stage_input = tokens.index_select(1, positions);
    if (last_chunk) targets = tokens.index_select(1, positions + 1);
  } else {
    if (first_chunk) stage_input = tokens.narrow(1, 0, c.seq_len);
    if (last_chunk) targets = tokens.narrow(1, 1, c.seq_len);
  }
  return stage_input;
}

// Chunk `chunk` of this rank (v = 1: its stage) runs micro-batch `micro_batch`; only the chunk with the
// head (the last virtual stage) adds to loss_sum. forward_us leaves out the TP and CP communication and
// opg's waits for parameters (DP communication) inside it.
InFlight Trainer::Impl::forward_micro_batch(int64_t step, int micro_batch, torch::Tensor input, double& loss_sum, int chunk) {
  LlamaStage& stage = chunks[static_cast<std::size_t>(chunk)];
  const bool first_chunk = stage->is_first(), last_chunk = stage->is_last();
  const auto start = Clock::now();
  const double tp_before = tp_timer.forward_us + cp_timer.forward_us;
  const double dp_before = phases.dp_comm_us;
  InFlight flight;
  torch::Tensor targets;
  torch::Tensor stage_input = micro_batch_tokens(step, micro_batch, targets, first_chunk, last_chunk);
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
    flight.output = flight.output * (loss_scale / static_cast<double>(options.config.num_micro_batches()));
  } else {
    ITERTIME_CHECK(flight.output.scalar_type() == to_torch(policy->activation_dtype),
                   "stage output dtype differs from the policy's activation dtype");
  }
  sync_device();
  phases.forward_us +=
      since_us(start) - (tp_timer.forward_us + cp_timer.forward_us - tp_before) - (phases.dp_comm_us - dp_before);
  return flight;
}

// A chunk runs its backwards in micro-batch order, so its m-th of the step is its last: the one in which
// its overlapped buckets are completed and started (gradient_sync.hpp; with v = 1 the step's last).
torch::Tensor Trainer::Impl::backward_micro_batch(InFlight& flight, const torch::Tensor& output_grad, int chunk) {
  int& backwards = backwards_this_step.at(static_cast<std::size_t>(chunk));
  sync->before_backward(chunk, ++backwards == options.config.num_micro_batches());
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

// The step's micro-batches through the schedule; returns this rank's sum of their losses (the head's).
double Trainer::Impl::run_pipeline(int64_t step) {
  double loss_sum = 0.0;
  const MicroBatchSteps steps{[&](int micro_batch, torch::Tensor input, int chunk) {
                                return forward_micro_batch(step, micro_batch, std::move(input), loss_sum, chunk);
                              },
                              [&](InFlight& flight, const torch::Tensor& output_grad, int chunk) {
                                return backward_micro_batch(flight, output_grad, chunk);
                              }};
  const ParallelConfig& c = options.config;
  const PipelinePlace place{c.pp, groups->coords().pp_idx, c.num_micro_batches(), c.vp};
  if (c.vp > 1) {
    run_interleaved(place, steps, *p2p);
  } else {
    run_1f1b(place, steps, *p2p);
  }
  return loss_sum;
}

bool Trainer::Impl::gradients_finite() {
  int finite = 1;
  for (const auto& grad : sync->optimizer_gradients()) {
    if (!torch::isfinite(grad).all().item<bool>()) {
      finite = 0;
      break;
    }
  }
  return host_all_reduce(finite, MPI_MIN) != 0.0;
}

// After the reduction: loss scaling (fp16: unscale, or skip a step with inf/NaN gradients), AdamW, and the
// update into every rank's parameters (its collectives' time is DP communication, not optimizer time).
// Returns whether the step updated.
bool Trainer::Impl::update() {
  const auto optimizer_start = Clock::now();
  bool apply = true;
  if (policy->loss_scaling) {
    apply = gradients_finite();
    if (apply) {
      torch::NoGradGuard no_grad;
      for (auto& grad : sync->optimizer_gradients()) grad.mul_(1.0 / loss_scale);
      if (++good_steps % 2000 == 0) loss_scale *= 2.0;
    } else {
      loss_scale /= 2.0;
      good_steps = 0;
    }
  }
  if (apply) optimizer->step();
  sync_device();
  const double dp_before = phases.dp_comm_us;
  if (apply) sync->after_update();  // with opg: started, waited for in the next forward (or finish_parameter_gathers)
  phases.optimizer_us = since_us(optimizer_start) - (phases.dp_comm_us - dp_before);
  return apply;
}

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
  s.make_communicators();
  s.make_chunks();
  s.make_sync();
  s.make_p2p();
  s.optimizer = std::make_unique<torch::optim::AdamW>(s.sync->optimizer_parameters(),
                                                      torch::optim::AdamWOptions(options.learning_rate)
                                                          .betas(std::make_tuple(kAdamW.beta1, kAdamW.beta2))
                                                          .weight_decay(kAdamW.weight_decay)
                                                          .eps(adamw_eps(*s.policy)));
  if (s.policy->loss_scaling) s.loss_scale = options.initial_loss_scale;
}

// With opg the all-gathers the last step started write into the parameters: finished before they go,
// unless the trainer was abandoned (a job abort: they stay pending, job_abort.hpp) or an exception is
// unwinding through its owner (its rank is failing; waiting could wait on a rank that will not come).
Trainer::~Trainer() {
  if (!impl_ || !impl_->sync || impl_->abandoned || std::uncaught_exceptions() > 0) return;
  try {
    impl_->sync->finish_parameter_gathers();
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

int64_t Trainer::optimizer_parameter_count() const { return impl_->sync->optimizer_elements(); }
int Trainer::overlapped_buckets_started() const { return impl_->sync->buckets_completed(); }
int Trainer::gradient_bucket_count() const { return impl_->sync->bucket_count(); }
int Trainer::parameter_gathers_in_flight() const { return impl_->sync->parameter_gathers_in_flight(); }

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
  s.sync->finish_parameter_gathers();  // opg: the last step's all-gathers write the parameters
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
  if (!s.sync->gathers_parameters() || !s.timed_before) {
    s.host_barrier();
    start = Clock::now();
  }

  s.sync->begin_step();
  s.backwards_this_step.assign(s.chunks.size(), 0);
  const double local_loss_sum = s.run_pipeline(step_index);
  ITERTIME_CHECK(s.sync->parameter_gathers_in_flight() == 0,
                 "a bucket's parameter all-gather was not waited for in the step's forward");
  s.sync->reduce();
  const bool apply = s.update();
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
