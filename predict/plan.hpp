// plan.hpp: the fastest legal, memory-feasible configurations of a model on N GPUs.
// Invariants:
//  - Candidates: for every cp given that divides gpus, every (dp, tp, pp) with dp*cp*tp*pp == gpus that is
//    legal for the model (illegal ones are not
//    listed), every micro-batch size given (dividing the global batch per DP rank), every vp given (vp > 1
//    only where pp > 1 and the layout stays legal: m a multiple of pp, a layer per chunk), every precision given
//    the calibrated backend can run, and every training recipe given; a recipe with sequence parallelism or
//    the vocabulary-parallel head only where tp > 1 (at tp 1 it is plain training, listed once).
//  - Each candidate's peak memory comes from the memory model with its recipe. One over the device memory
//    is infeasible and not predicted (iteration_us 0): a plan over thousands of candidates costs the memory
//    model for most and a prediction (predictor.hpp, with the recipe) only for those that fit.
//  - A recipe the trainer would refuse for the layout (sp with tp not dividing the sequence, vp with tp not
//    dividing the vocabulary) and a candidate the predictor cannot predict (a technique it does not model,
//    no trace and no way to build one) are infeasible with the reason.
//  - Entries come back feasible ones fastest first, then the infeasible ones in candidate order.
//  - With options.target, the model's traces, profiles and backend are not used (resolver/target_device.hpp).
//  - A feasible entry carries its tokens per second per rank, and its MFU when the options name a
//    hardware description (predict/throughput.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "common/hardware_spec.hpp"
#include "predict/model/fitted_model.hpp"
#include "predict/resolver/target_device.hpp"

namespace itertime::predict {

struct PlanOptions {
  LlamaSpec model;
  int gpus = 1;
  int global_batch = 1;
  int seq_len = 1;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  std::vector<int> virtual_stages = {1};    // vp values; > 1 (interleaved 1F1B) only where pp > 1
  std::vector<int> context_parallel = {1};  // cp values; each that divides gpus, with (dp, tp, pp) factorizing gpus / cp
  std::vector<PrecisionName> precisions = {PrecisionName::kAmpBf16};
  std::vector<TrainingTechniques> recipes = {TrainingTechniques{}};  // plain training only by default
  double device_memory_bytes = 0;                                    // 0: no memory check
  std::optional<HardwareSpec> hardware;                              // for MFU (predict::choose_hardware); none: no MFU
  // A described device (resolver/target_device.hpp; not owned): every candidate built and timed on it, its
  // attention kernel in the memory model, the precisions its backend (CUDA for a GPU) can run.
  const TargetDevice* target = nullptr;
};

struct PlanEntry {
  ParallelConfig config;
  PrecisionName precision = PrecisionName::kFp32;
  TrainingTechniques techniques;
  double iteration_us = 0;
  double peak_memory_bytes = 0;
  double extrapolated_fraction = 0;
  double tokens_per_s_per_rank = 0;  // feasible entries
  std::optional<double> mfu;         // feasible entries, with a hardware description that has the peak
  bool feasible = false;
  std::string reason;  // why infeasible
  // Framework-only switches of the recipe (--framework megatron-te), e.g. "fp8-current+tp-overlap"; "" otherwise.
  std::string framework_switches;
};

std::vector<PlanEntry> plan(const FittedModel& model, const PlanOptions& options);

// The layouts a plan considers, in candidate order: for each cp given that divides gpus, each (dp, tp, pp)
// with dp*cp*tp*pp == gpus (common/job.hpp factorizations), each micro-batch given, each vp given (> 1 only
// where pp > 1); legal or not: plan() and plan_framework() (framework_plan.hpp) each apply their own rules.
// Throws UserError where gpus, the global batch or the sequence length is not positive.
std::vector<ParallelConfig> plan_layouts(const PlanOptions& options);

// Orders a plan's entries as plan() returns them (the invariant above): the feasible ones fastest first,
// then the infeasible ones in candidate order (a stable sort). plan_framework (framework_plan.hpp) ranks
// with it too.
void rank_plan_entries(std::vector<PlanEntry>& entries);

// Every recipe the predictor models (predictor.hpp): sequence parallelism, the vocabulary-parallel head and
// the distributed optimizer on or off, recompute none, selective or full, overlapped reduction (default
// buckets) on or off, and with both the distributed optimizer and overlapped reduction, overlapped
// parameter gather on or off (60, plain first). plan() skips a recipe that equals another at the layout
// (sp or vp at tp 1, ovl, and with it opg, at dp*cp 1).
std::vector<TrainingTechniques> modelled_recipes();

}  // namespace itertime::predict
