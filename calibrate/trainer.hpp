// trainer.hpp: real LLaMA training of one (DP,TP,PP,CP,VP) configuration under one precision policy, for
// ground truth. Torch-free interface (pimpl) so that includers stay light.
// Invariants:
//  - Collective over `job_comm`, whose size equals dp*cp*tp*pp; ranks are laid out as in
//    common/parallel_config.hpp (TP fastest, then CP, then DP, then PP).
//  - One step = m = gbs/(dp*mbs) micro-batches through the 1F1B schedule (warm-up forwards,
//    steady one-forward-one-backward, cool-down backwards) with blocking P2P of activations and their
//    gradients; then the DP all-reduce (divided by dp, then summed) of all gradients in one flat buffer in
//    the gradient dtype; then the AdamW step. Loss per micro-batch is divided by m, so the gradient is
//    the mean over the global batch, whatever the layout.
//  - With config.vp = v > 1 (Megatron-LM's interleaved 1F1B): each pipeline rank r holds v model
//    chunks, chunk c being virtual stage c*pp + r of stage_layers(num_layers, pp*v), and runs
//    common/pipeline_order's interleaved order, with non-blocking MPI sends and blocking receives
//    (pipeline_schedules.cpp argues why it cannot deadlock). CPU backend only; needs m % pp == 0 and at
//    least one layer per virtual stage (UserError otherwise). The DP reduction and the distributed
//    optimizer run over all chunks' parameters in one buffer (one shard); with overlapped reduction
//    (and opg) each chunk has its own buckets (Megatron-Core's DDP per model chunk, gradient_sync.hpp),
//    armed for that chunk's last backward (its micro-batch m-1) and started as it completes them, all
//    waited for after the schedule; AdamW runs over every chunk's parameters (or shards).
//  - Context parallelism (config.cp > 1, Megatron-LM's; CPU backend only): each sample's seq_len tokens
//    are cut into 2*cp chunks and CP rank i holds chunks i and 2cp-1-i (causal load balancing): its
//    token ids, labels and rotary positions are those chunks' global ones. Attention all-gathers keys
//    and values over the CP group (blocking; backward: reduce-scatter), with the causal mask of the
//    global positions (llama_model.hpp). Each rank's loss is the mean over its own seq/cp tokens of a
//    micro-batch; every DP collective below (the all-reduce, the distributed optimizer's reduce-scatter,
//    all-gather and shard, the overlapped buckets) runs over the dp*cp ranks with the same tp and pp
//    index (ProcessGroups::dp_cp), "divided by dp" reading "divided by dp*cp": equal token counts per
//    CP rank make that mean of per-rank mean gradients the global batch's. P2P carries
//    [mbs, seq/cp, hidden] (/tp with SP, which needs (seq/cp) % tp == 0). The CP all-gathers' time is
//    PhaseTimes::cp_comm_us, outside forward_us and backward_us.
//  - With the distributed optimizer (Megatron-LM's, ZeRO stage 1): the flat gradient buffer, padded to a
//    multiple of dp, is reduce-scattered over DP instead (divided by dp first); each DP rank keeps the
//    AdamW state of its contiguous shard only, updates that shard of the flat parameters, and the
//    shards are all-gathered back into every rank's parameters. AdamW is element-wise, so the update
//    equals the replicated one. TP and DP communication stays blocking; both collectives count as DP
//    communication.
//  - The data are synthetic tokens that depend only on (seed, step, sample index in the global batch,
//    position), so every layout trains on the same global batch.
//  - step() starts with a barrier over job_comm; its wall time is the max over ranks; its loss is the
//    global-batch mean, known on every rank. With the overlapped parameter gather (opg, active at
//    dp*cp > 1) only the trainer's first step starts with that barrier: a step's time on a rank runs from
//    the previous step's timing point to its own, the timing point being right after the step started
//    its all-gathers (or, a skipped fp16 step, after its optimizer phase), so the next forward's waits
//    for them are inside the next step; the time between steps (the two host all-reduces of time and
//    loss, the caller's work) counts in the next step. time_us stays the max over ranks.
//  - opg (Megatron-LM's overlap_param_gather; needs the distributed optimizer and overlapped reduction,
//    UserError otherwise): every parameter is a view of its
//    range of the padded parameter buffer (set at construction), so the all-gathers write the
//    parameters and nothing is copied back. After AdamW the buckets' all-gathers
//    (Communicator::start_all_gather) are started, bucket K-1 (the first parameters) down to bucket 0,
//    with the operators of the blocking path minus its copy loop (vp > 1: chunk 0's buckets first, then
//    chunk 1's, ...); the next step's forward waits, before
//    each part of a chunk (embedding, decoder layer, final norm and head; LlamaStage's
//    set_before_parameters) for the buckets holding that part's parameters, adding no operator. Every
//    all-gather is waited for in the first micro-batch's forward (of each chunk; checked); after the last step,
//    parameter_sum_of_squares() and the destructor finish them (not after abandon(), nor while an
//    exception unwinds). The starts and the waits count in dp_comm_us (the waits not in forward_us).
//  - A policy the backend cannot run (fp16 on a CPU LibTorch without fp16 products), an attention kernel
//    this LibTorch lacks, a CUDA backend without CUDA LibTorch, or tied embeddings are
//    refused with a UserError before any collective.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "common/attention.hpp"
#include "common/dtype.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_recipe.hpp"
#include "common/training_techniques.hpp"
#include "runtime/job_abort.hpp"

namespace itertime::calibrate {

struct TrainerOptions {
  LlamaSpec model;
  ParallelConfig config;
  PrecisionName precision = PrecisionName::kFp32;
  AttentionKernel attention = AttentionKernel::kAuto;  // resolved by the trainer (calibrate/torch_compat.hpp)
  Backend backend = Backend::kCpu;
  uint64_t seed = 1234;
  double learning_rate = kAdamW.learning_rate;  // common/training_recipe.hpp
  int compute_threads = 1;                      // LibTorch intra-op threads per rank (CPU)
  // Dynamic loss scaling (fp16 policies): the scale the first step starts from (PyTorch's GradScaler
  // default). The scale per micro-batch is this / m, so where one layout overflows another may not.
  double initial_loss_scale = 65536.0;
  // Megatron-LM's techniques (common/training_techniques.hpp), all off by default:
  //  - distributed_optimizer (ZeRO-1): optimizer state sharded over DP (see above);
  //  - sequence_parallel (calibrate/tp_comm.hpp, llama_model.hpp): with tp > 1 the TP all-reduces become
  //    all-gathers and reduce-scatters along the sequence, the norms and residual adds run on sequence
  //    shards, P2P carries [micro_batch, seq/tp, hidden], and the norms' weight gradients are summed
  //    over TP after the backward; needs seq_len % tp == 0;
  //  - vocab_parallel: vocabulary-parallel embedding and LM head with Megatron's parallel cross-entropy
  //    (llama_model.hpp) instead of both replicated on every TP rank; needs vocab_size % tp == 0;
  //  - recompute: none, selective (attention cores) or full (decoder layers);
  //  - overlap_gradient_reduction (Megatron-LM's overlap_grad_reduce, PyTorch DDP's buckets): with dp > 1
  //    every parameter's .grad is a view of one flat gradient buffer, zeroed before each step, so each
  //    backward's gradient accumulator adds into it in place (aten::add_, Megatron's main_grad); the
  //    buffer is cut, last parameter first, into buckets of about gradient_bucket_bytes; during the
  //    step's last backward a post-hook on each accumulator counts the gradients that are final, and a
  //    complete bucket is divided by dp and its all-reduce started (Communicator::start_all_reduce_sum);
  //    the step waits for them after the backward (with vp > 1: one flat buffer per model chunk, cut
  //    and armed per chunk, during that chunk's last backward). With the distributed optimizer too (Megatron-LM's
  //    overlap_grad_reduce without overlap_param_gather): every bucket is padded with zeros to a multiple
  //    of dp and DP rank r owns the r-th 1/dp slice of each; its shard (the tensor AdamW updates) is the
  //    parameter values of its slices, bucket after bucket. A complete bucket is divided by dp and its
  //    reduce-scatter started (Communicator::start_reduce_scatter_sum) into its segment of the shard's
  //    gradient; after the backward the step waits for them, sums the norms' gradients over TP on the
  //    shard (SP), steps AdamW on the shard, then all-gathers every bucket's slices (blocking) into a
  //    padded parameter buffer of the same layout and copies it into the parameters;
  //  - overlap_parameter_gather (opg, with both of the above at dp*cp > 1): the parameters are views of
  //    that padded buffer and its all-gathers are started after AdamW and waited for, bucket by bucket,
  //    in the next step's forward (see the invariants above).
  // Job files, the tracer, the stage builder and the predictor know them all (common/training_techniques.hpp).
  TrainingTechniques techniques;
};

// Per-rank time of one step, in microseconds. forward_us / backward_us exclude the TP all-reduces
// inside them (tp_comm_us); pp_comm_us includes waiting for the neighbour stage.
struct PhaseTimes {
  double forward_us = 0, backward_us = 0, tp_comm_us = 0, pp_comm_us = 0, dp_comm_us = 0, optimizer_us = 0, total_us = 0;
  double cp_comm_us = 0;  // context parallelism's all-gathers of keys and values (and their backward reduce-scatters)
};

struct StepResult {
  double loss = 0.0;     // global-batch mean cross-entropy
  double time_us = 0.0;  // wall time of the step, max over ranks
  PhaseTimes phases;     // this rank's breakdown
  bool skipped = false;  // fp16 loss scaling found inf/NaN gradients and skipped the update
};

// Checks what can be checked without MPI or LibTorch state (policy vs backend, tied embeddings,
// layout legality against the model and `world_size`). Throws UserError.
void check_trainable(const TrainerOptions& options, int world_size);

class Trainer {
 public:
  // With `abort` (runtime/job_abort.hpp, outliving the trainer), every wait that can give way to a job
  // abort does: point-to-point transfers, NCCL synchronizations and the step's host collectives throw
  // JobAborted once any rank of the job raised; CPU TP, CP and DP collectives stay blocking MPI calls.
  Trainer(const TrainerOptions& options, MPI_Comm job_comm, JobAbort* abort = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  StepResult step(int64_t step_index);
  // After a job abort: gives up the communication in flight (NCCL: ncclCommAbort); its communicators are
  // then never freed, and the buffers of sends left unmatched live as long as the trainer
  // (job_abort.hpp). The trainer is unusable after it; destroy it once every rank has settled.
  void abandon();
  RankCoords coords() const;
  int64_t local_parameter_count() const;
  // The elements AdamW updates (and keeps two moments of) on this rank: every local parameter, or with
  // the distributed optimizer its shard, ceil(local parameters / (dp*cp)).
  int64_t optimizer_parameter_count() const;
  // With overlapped gradient reduction: how many buckets the last step started during its backward, and
  // how many there are (with vp > 1 over every chunk's buckets).
  int overlapped_buckets_started() const;
  int gradient_bucket_count() const;
  // With opg: how many of the buckets' parameter all-gathers are started and not yet waited for (after a
  // step that updated: every bucket's, until the next forward or parameter_sum_of_squares); else 0.
  int parameter_gathers_in_flight() const;
  // Sum of squares of the stage's whole model (its parameters as single-rank training holds them), in
  // double: TP-sharded parameters summed over the TP group, replicated ones counted once. Collective over
  // the TP group (with opg over the DP group too: it finishes the last step's all-gathers first). Two
  // layouts of the same (dp, tp, pp) that trained alike agree on it.
  double parameter_sum_of_squares() const;
  // The same over the gradients the last step applied (reduced over dp*cp, unscaled), without the
  // distributed optimizer (whose reduced gradient is a shard): AdamW does not see a wrong gradient scale,
  // this does. Collective over the TP group.
  double gradient_sum_of_squares() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace itertime::calibrate
