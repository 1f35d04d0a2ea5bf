// framework_predictor.hpp: the iteration time of a Megatron-Core + Transformer Engine run of a
// transformer on described GPUs (issue 32): the stage that framework executes (megatron_te_stage.hpp),
// its kernels timed from published figures (gpu_kernels.hpp), its collectives from the hardware
// description (device/described_comm.hpp), its pipeline by the schedule simulation, its memory
// (megatron_memory.hpp).
// Invariants:
//  - No calibration is read: every time comes from the GPU's kernel figures and the description.
//  - An illegal layout or a recipe the framework refuses comes back as an outcome with its reason.
//  - Breakdown figures are on the critical pipeline rank (the one whose step ends last), microseconds per
//    iteration, and add up to total_us: compute + tp_comm + cp_comm + pp_comm + bubble + dp_comm +
//    optimizer (the tail: the optimizer step and weight casts, with their collectives).
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
#include "predict/framework/megatron_layout_rules.hpp"  // layout_violations: the one rule set

namespace itertime::predict::framework {

struct FrameworkTarget {
  HardwareSpec hardware;
  GpuKernelFigures kernels;
  NcclTuning tuning;
};

struct FrameworkRequest {
  TransformerShape shape;
  ParallelConfig config;
  FrameworkRecipe recipe;
};

struct FrameworkPrediction {
  double total_us = 0;
  int critical_rank = 0;    // the pipeline rank whose step ends last: the breakdown's
  double compute_us = 0;    // kernels of the critical rank's passes (GEMMs, attention, memory-bound)
  double tp_comm_us = 0;    // exposed TP (and SP) collectives
  double cp_comm_us = 0;    // exposed context-parallel exchange
  double pp_comm_us = 0;    // exposed pipeline transfers
  double bubble_us = 0;     // pipeline idle time of the critical rank before its timeline ends
  double dp_comm_us = 0;    // exposed gradient reduction and parameter gather
  double optimizer_us = 0;  // the tail: optimizer step and weight casts (their kernels and collectives)
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
// a plan that differ in dp, pp or vp (an optimisation: the same figures with or without it). Not
// thread-safe; one per plan.
class FrameworkPassCache {
 public:
  struct Entry;  // framework_predictor.cpp
  FrameworkPassCache();
  ~FrameworkPassCache();
  FrameworkPassCache(const FrameworkPassCache&) = delete;
  FrameworkPassCache& operator=(const FrameworkPassCache&) = delete;
  const Entry* find(const std::string& key) const;
  const Entry& put(const std::string& key, std::unique_ptr<Entry> entry);

 private:
  std::map<std::string, std::unique_ptr<Entry>> entries_;
};

FrameworkOutcome predict_framework(const FrameworkTarget& target, const FrameworkRequest& request,
                                   FrameworkPassCache* cache = nullptr);

}  // namespace itertime::predict::framework
