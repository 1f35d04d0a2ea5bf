// plan.hpp: the fastest legal, memory-feasible configurations of a model on N GPUs.
// Invariants: every (dp, tp, pp) with dp*tp*pp == gpus, every micro-batch size given (dividing the
// global batch per DP rank) and every precision given is considered; illegal layouts for the model are
// not listed; each candidate is predicted (predictor.hpp) and checked against the device memory with the
// memory model; entries come back fastest first, infeasible ones (too much memory, no trace and no way to
// build one) after the feasible ones with their reason.
#pragma once

#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "predict/fitted_model.hpp"

namespace itertime::predict {

struct PlanOptions {
  LlamaSpec model;
  int gpus = 1;
  int global_batch = 1;
  int seq_len = 1;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  std::vector<PrecisionName> precisions = {PrecisionName::kAmpBf16};
  double device_memory_bytes = 0;  // 0: no memory check
};

struct PlanEntry {
  ParallelConfig config;
  PrecisionName precision = PrecisionName::kFp32;
  double iteration_us = 0;
  double peak_memory_bytes = 0;
  double extrapolated_fraction = 0;
  bool feasible = false;
  std::string reason;  // why infeasible
};

std::vector<PlanEntry> plan(const FittedModel& model, const PlanOptions& options);

}  // namespace itertime::predict
