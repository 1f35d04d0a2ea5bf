// plan.cpp: itertime plan: every legal, memory-feasible configuration predicted and ranked (plan.hpp).
#include "predict/plan.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "common/job.hpp"
#include "predict/memory_model.hpp"
#include "predict/predictor.hpp"

namespace itertime::predict {

std::vector<PlanEntry> plan(const FittedModel& model, const PlanOptions& options) {
  if (options.gpus < 1) throw UserError("plan: the number of GPUs must be positive");
  if (options.global_batch < 1 || options.seq_len < 1) throw UserError("plan: global batch and sequence length must be positive");
  std::vector<PlanEntry> entries;
  StageResolver resolver(model, StagePolicy::kTracedThenBuilt);  // candidates share their built stages
  for (const RankLayout& layout : factorizations(options.gpus)) {
    for (int micro_batch : options.micro_batches) {
      ParallelConfig config{layout.dp(), layout.tp(), layout.pp(), micro_batch, options.global_batch, options.seq_len};
      if (!config.violations(options.model, options.gpus).empty()) continue;
      for (PrecisionName precision : options.precisions) {
        PlanEntry entry;
        entry.config = config;
        entry.precision = precision;
        const PrecisionPolicy& policy = precision_policy(precision);
        if (!model.backend.empty() && model.backend != "unknown" &&
            !policy.supports(parse_backend(model.backend), backend_capabilities(model))) {
          continue;  // the calibrated backend cannot run this policy
        }
        double peak = 0;
        for (const MemoryBreakdown& m : memory_all_stages(options.model, config, policy, parse_attention(model.attention))) {
          peak = std::max(peak, static_cast<double>(m.total_bytes));
        }
        entry.peak_memory_bytes = peak;
        PredictRequest request;
        request.model_name = options.model.name;
        request.model = &options.model;
        request.config = config;
        request.precision = precision;
        const PredictOutcome outcome = predict(resolver, request);
        if (outcome.ok()) {
          entry.iteration_us = outcome.prediction->total_us;
          entry.extrapolated_fraction = outcome.prediction->extrapolated_fraction;
          entry.feasible = options.device_memory_bytes <= 0 || peak <= options.device_memory_bytes;
          if (!entry.feasible) entry.reason = "exceeds the device memory";
        } else {
          entry.feasible = false;
          entry.reason = outcome.reason;
        }
        entries.push_back(entry);
      }
    }
  }
  std::stable_sort(entries.begin(), entries.end(), [](const PlanEntry& a, const PlanEntry& b) {
    if (a.feasible != b.feasible) return a.feasible;
    return a.iteration_us < b.iteration_us;
  });
  return entries;
}

}  // namespace itertime::predict
