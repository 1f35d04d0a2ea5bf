// gradient_sync.hpp: the data-parallel gradient synchronization of one rank's model chunks, one interface
// over its four strategies (Megatron-Core's DistributedDataParallel with its param_and_grad_buffer, and
// its distributed optimizer), run by the trainer and, as DP rank 0 over tracing communicators, by the
// tracer (ops_calibration.cpp), so that what is traced is what is trained.
// Invariants:
//  - A step: begin_step() before the first forward; before_backward(chunk, last) before each backward of
//    model chunk `chunk` (last: that chunk's last of the step, micro-batch m-1; with one chunk the step's
//    last); reduce() after the last backward, after which optimizer_gradients() hold the mean
//    over the reduction group's `ranks` (each rank's gradients divided by `ranks` before the sum, as
//    Megatron-LM scales them, so that loss-scaled fp16 sums do not overflow where one rank's does not),
//    and with SP (norm_weights given) the norms' gradients summed over TP; AdamW then updates
//    optimizer_parameters(); after_update() brings the update into every rank's parameters (or, opg,
//    starts that). The strategy is chosen by the techniques (make_gradient_sync):
//     * all-reduce (none of the below): the gradients flattened into one buffer (made at the first
//       reduction), divided, all-reduced, copied back; nothing at 1 rank;
//     * distributed optimizer (dopt, ZeRO-1; tp_comm.hpp's ShardedBuffers): the gradients into the padded
//       flat buffer, divided, reduce-scattered into this rank's shard; AdamW on the shard; after the update
//       the shards all-gathered into every rank's parameters;
//     * overlapped bucketed all-reduce (ovl; gradient_buckets.hpp): every .grad a view of the buckets'
//       buffer, a bucket divided and its all-reduce started as the last backward completes it;
//       reduce() waits for them;
//     * overlapped bucketed distributed optimizer (dopt+ovl; gradient_buckets.hpp's BucketedShard): the
//       buckets padded to multiples of `ranks`, each reduce-scattered into its slice of the shard as it
//       completes; after the update the slices all-gathered bucket by bucket (blocking) and copied into
//       the parameters; with opg (overlap_parameter_gather) the parameters are views of the gathered
//       buffer and the all-gathers are started instead, bucket K-1 (the first parameters) first, and
//       waited for, bucket by bucket, before the next forward's parts use them (wait_for_parameters),
//       or all at once by finish_parameter_gathers().
//    The techniques must be those at the group's size (at_dp): overlap only at ranks > 1.
//  - Model chunks (interleaved 1F1B, chunk_parameters given with more than one chunk): the overlapped
//    strategies keep one set of buckets per chunk, each chunk's own bucket plan over its own parameters
//    (common/bucket_plan.hpp), as Megatron-Core wraps each model chunk in its own DistributedDataParallel
//    with its own buffers and bucket groups. A chunk's buckets are armed for its last backward and
//    started as that backward completes them; reduce() waits for every chunk's; with the distributed
//    optimizer each chunk has its own padded buffer and shard (optimizer_parameters(): one shard per
//    chunk, chunk 0's first), and with opg after_update() starts chunk 0's all-gathers first (the
//    first forward's), then chunk 1's, ..., and each chunk's forward waits for its own. The other
//    strategies keep one buffer (one shard) over all chunks' parameters, as before.
//    Each chunk is then exactly what the tracer traces for its virtual stage (ops_calibration.cpp: a
//    stage of a pp*vp pipeline with one chunk), so the stage builder's bucket plan per stage is the
//    trainer's per chunk.
//  - Time: the DP collectives' (their starts and waits) adds to *dp_comm_us, the norms' TP sum to
//    *tp_comm_us (either may be null).
//  - mark_phase, when set (the tracer), is told where the work changes phase: dp_buffer for the buffers'
//    zeroing, division and copies, back to backward where a bucket's collective starts inside the
//    backward, sp_grads for the norms' TP sum.
//  - The communicators and parameters outlive the sync; it is neither copied nor moved (the buckets'
//    hooks point at it).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/phase.hpp"
#include "common/training_techniques.hpp"
#include "runtime/comm.hpp"

namespace itertime::calibrate {

struct GradientSyncSetup {
  std::vector<torch::Tensor> parameters;  // every chunk's, in order (the buffers' order)
  // Parameters per model chunk, in order (summing to parameters.size()); empty: one chunk. With more than
  // one, the overlapped strategies keep buckets per chunk (above).
  std::vector<std::size_t> chunk_parameters;
  std::vector<torch::Tensor> norm_weights;  // with SP: those summed over TP after the backward; else empty
  TrainingTechniques techniques;            // at the group's size (at_dp)
  Communicator* dp_comm = nullptr;          // the reduction group's (dp*cp ranks)
  int ranks = 1;                            // its size: the divisor, and the shards of the distributed optimizer
  int rank = 0;                             // this rank's index in it (the shard it owns)
  Communicator* tp_comm = nullptr;          // the norms' TP sum (with norm_weights)
  bool cuda = false;                        // device work completes before a collective reads it
  double* dp_comm_us = nullptr;
  double* tp_comm_us = nullptr;
  std::function<void(Phase)> mark_phase;
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void begin_step() = 0;
  virtual void before_backward(int /*chunk*/, bool /*last_of_chunk*/) {}
  virtual void reduce() = 0;
  virtual void after_update() {}
  virtual std::vector<torch::Tensor> optimizer_parameters() const = 0;
  virtual std::vector<torch::Tensor> optimizer_gradients() const = 0;
  virtual int64_t optimizer_elements() const = 0;  // what AdamW keeps two moments of
  // Overlapped reduction: the buckets, and how many the last step completed (and started) in its backward.
  virtual int bucket_count() const { return 0; }
  virtual int buckets_completed() const { return 0; }
  // opg: whether the forward must wait for the parameters, how many all-gathers are started and not
  // waited for; waits for those of parameters [first, end) (a part of the forward, in order); all.
  virtual bool gathers_parameters() const { return false; }
  virtual int parameter_gathers_in_flight() const { return 0; }
  virtual void wait_for_parameters(std::size_t /*first*/, std::size_t /*end*/) {}
  virtual void finish_parameter_gathers() {}
};

std::unique_ptr<GradientSync> make_gradient_sync(GradientSyncSetup setup);

}  // namespace itertime::calibrate
