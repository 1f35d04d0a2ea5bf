// framework_predictor.hpp: the iteration time of a Megatron-Core + Transformer Engine run of a
// transformer on described GPUs (issue 32): the stage that framework executes (megatron_te_stage.hpp),
// its kernels timed from published figures (gpu_kernels.hpp) under the GPU's training conditions
// (training_conditions.hpp: sustained clock, compute slowed beside overlapped communication, host time,
// the slowest of the GPUs; issue 46), its collectives from the hardware description
// (device/described_comm.hpp), its pipeline by the schedule simulation, its memory (megatron_memory.hpp).
// FrameworkTerms scale what a fit on a cluster's own logs moved (framework_fit.hpp); neutral by default.
// Invariants:
//  - No calibration is read: every time comes from the GPU's kernel figures, its training conditions and
//    the description, scaled by `terms` (all 1 unless a fit set them).
//  - An illegal layout or a recipe the framework refuses comes back as an outcome with its reason.
//  - Breakdown figures are on the critical pipeline rank (the one whose step ends last), microseconds per
//    iteration, and add up to total_us: compute + clock + contention + tp_comm + cp_comm + pp_comm + bubble
//    + dp_comm + sync + host + optimizer (the tail: the optimizer step and weight casts, with their
//    collectives) + straggler. With neutral conditions and terms, clock, contention, host and straggler are 0.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/hardware_spec.hpp"
#include "common/parallel_config.hpp"
#include "predict/device/described_comm.hpp"
#include "predict/framework/framework_types.hpp"
#include "predict/framework/gpu_kernels.hpp"
#include "predict/framework/training_conditions.hpp"
#include "predict/framework/megatron_layout_rules.hpp"  // layout_violations: the one rule set
#include "predict/schedule/schedule.hpp"

namespace itertime::predict::framework {

// What a fit on a cluster's logs may move (framework_fit.hpp), as multipliers of the described times
// (1: as described) and a replacement of one training-condition term. Plain data.
struct FrameworkTerms {
  double gemm16_time_scale = 1.0;  // GEMMs in bf16/fp16: 1 / (efficiency relative to the kernel figures)
  double gemm8_time_scale = 1.0;   // GEMMs in fp8
  double attention_time_scale = 1.0;
  double memory_time_scale = 1.0;          // memory-bound kernels: 1 / (achieved bandwidth relative)
  double comm_time_scale = 1.0;            // every collective and transfer: 1 / (bus bandwidth relative)
  double overlap_compute_slowdown = -1.0;  // >= 0 replaces the conditions' term; < 0 keeps it
  double host_us_per_kernel = -1.0;        // >= 0 replaces the conditions' term; < 0 keeps it
  bool is_neutral() const {
    return gemm16_time_scale == 1.0 && gemm8_time_scale == 1.0 && attention_time_scale == 1.0 && memory_time_scale == 1.0 &&
           comm_time_scale == 1.0 && overlap_compute_slowdown < 0 && host_us_per_kernel < 0;
  }
};

struct FrameworkTarget {
  HardwareSpec hardware;
  GpuKernelFigures kernels;
  NcclTuning tuning;
  TrainingConditions conditions;  // neutral unless loaded (framework_target loads the GPU's)
  FrameworkTerms terms;           // neutral unless fitted
  std::string terms_source;       // the fitted file, for notes ("" when neutral)
};

struct FrameworkRequest {
  TransformerShape shape;
  ParallelConfig config;
  FrameworkRecipe recipe;
};

struct FrameworkPrediction {
  double total_us = 0;
  int critical_rank = 0;     // the pipeline rank whose step ends last: the breakdown's
  double compute_us = 0;     // kernels of the critical rank's passes (GEMMs, attention, memory-bound) at the figures' clock
  double clock_us = 0;       // what the sustained training clock adds to those kernels
  double contention_us = 0;  // compute slowed beside overlapped collectives (SMs and memory bandwidth shared)
  double tp_comm_us = 0;     // exposed TP (and SP) collectives
  double cp_comm_us = 0;     // exposed context-parallel exchange
  double pp_comm_us = 0;     // exposed pipeline transfers
  double bubble_us = 0;      // pipeline idle time of the critical rank before its timeline ends
  double dp_comm_us = 0;     // exposed gradient reduction and parameter gather
  double sync_us = 0;        // the global synchronization before the optimizer step: waiting for the latest rank + its all-reduce
  double host_us = 0;        // the GPU waiting for the host to issue kernels (host-bound iterations, restarts after syncs)
  double optimizer_us = 0;   // the tail: optimizer step and weight casts (their kernels and collectives)
  double straggler_us = 0;   // waiting for the slowest of the job's GPUs (their speed spread)
  double stage_forward_us = 0, stage_backward_us = 0;  // the busiest virtual stage, one micro-batch
  int64_t kernel_launches = 0;                         // per iteration on the busiest rank
  int64_t peak_memory_bytes = 0;                       // the largest over pipeline ranks
  double model_flops_per_iteration = 0;                // TransformerShape::training_flops_per_token x tokens
  std::vector<std::string> notes;                      // which figures were used, what is assumed
};

struct FrameworkOutcome {
  std::optional<FrameworkPrediction> prediction;
  std::string reason;  // when there is no prediction
  bool ok() const { return prediction.has_value(); }
};

// Per-pass times that depend only on (tp, cp, micro-batch, sequence, recipe), shared by the candidates of
// a plan that differ in dp, pp or vp, and the pipeline schedules of equal inputs, shared by candidates
// that differ only in what follows the schedule (the distributed optimizer, overlapped reduction and
// gather). An optimisation: the same figures with or without it. Not thread-safe; one per plan.
class FrameworkPassCache {
 public:
  struct Entry;  // framework_predictor.cpp
  FrameworkPassCache();
  ~FrameworkPassCache();
  FrameworkPassCache(const FrameworkPassCache&) = delete;
  FrameworkPassCache& operator=(const FrameworkPassCache&) = delete;
  const Entry* find(const std::string& key) const;
  const Entry& put(const std::string& key, std::unique_ptr<Entry> entry);
  ScheduleCache& schedules() { return schedules_; }

 private:
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  ScheduleCache schedules_;
};

// A collective of `comm_us` beside a kernel of `kernel_us` that it slows by `slowdown` while they overlap
// (NCCL on SMs of its own): the collective's exposed part and the kernel's contention; the pair ends at
// kernel_us + exposed + contention (framework_predictor.cpp's invariants). slowdown 0: max(0, c - k), 0.
struct OverlapCost {
  double exposed_us = 0, contention_us = 0;
};
OverlapCost overlap_beside_compute(double comm_us, double kernel_us, double slowdown);

FrameworkOutcome predict_framework(const FrameworkTarget& target, const FrameworkRequest& request,
                                   FrameworkPassCache* cache = nullptr);

}  // namespace itertime::predict::framework
