// plan.cpp: itertime plan: every legal, memory-feasible configuration predicted and ranked (plan.hpp).
#include "predict/plan.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "common/job.hpp"
#include "predict/memory/memory_model.hpp"
#include "predict/predictor.hpp"
#include "predict/throughput.hpp"

namespace itertime::predict {

namespace {

// Why the trainer would refuse this recipe for this layout ("" when it trains it).
std::string untrainable_reason(const LlamaSpec& spec, const ParallelConfig& config, const TrainingTechniques& techniques) {
  if (techniques.sequence_parallel && config.seq_len % config.tp != 0)
    return "sequence parallelism needs tp to divide the sequence";
  if (techniques.vocab_parallel && spec.vocab_size % config.tp != 0)
    return "the vocabulary-parallel head needs tp to divide the vocabulary";
  return "";
}

PlanEntry plan_entry(const FittedModel& model, const PlanOptions& options, StageResolver& resolver, const ParallelConfig& config,
                     PrecisionName precision, const TrainingTechniques& techniques) {
  PlanEntry entry;
  entry.config = config;
  entry.precision = precision;
  entry.techniques = techniques;
  entry.reason = untrainable_reason(options.model, config, techniques);
  if (!entry.reason.empty()) return entry;
  const double peak =
      static_cast<double>(peak_memory_bytes(options.model, config, precision_policy(precision),
                                            options.target != nullptr ? options.target->attention : model.attention, techniques));
  entry.peak_memory_bytes = peak;
  if (options.device_memory_bytes > 0 && peak > options.device_memory_bytes) {
    entry.reason = "exceeds the device memory (not predicted)";
    return entry;
  }
  PredictRequest request;
  request.model_name = options.model.name;
  request.model = &options.model;
  request.config = config;
  request.precision = precision;
  request.techniques = techniques;
  const PredictOutcome outcome = predict(resolver, request);
  if (outcome.ok()) {
    entry.iteration_us = outcome.prediction->total_us;
    entry.extrapolated_fraction = outcome.prediction->extrapolated_fraction;
    entry.feasible = true;
    const Throughput rate =
        throughput(options.model, config, precision, entry.iteration_us, options.hardware ? &*options.hardware : nullptr);
    entry.tokens_per_s_per_rank = rate.tokens_per_s_per_rank;
    entry.mfu = rate.mfu;
  } else {
    entry.reason = outcome.reason;
  }
  return entry;
}

}  // namespace

std::vector<TrainingTechniques> modelled_recipes() {
  std::vector<TrainingTechniques> recipes;
  for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    for (int on = 0; on < 8; ++on) {
      TrainingTechniques t;
      t.sequence_parallel = (on & 1) != 0;
      t.vocab_parallel = (on & 2) != 0;
      t.distributed_optimizer = (on & 4) != 0;
      t.recompute = recompute;
      recipes.push_back(t);
      t.overlap_gradient_reduction = true;
      recipes.push_back(t);
      if (t.distributed_optimizer) {  // opg overlaps the distributed optimizer's bucketed all-gathers
        t.overlap_parameter_gather = true;
        recipes.push_back(t);
      }
    }
  }
  return recipes;
}

std::vector<ParallelConfig> plan_layouts(const PlanOptions& options) {
  if (options.gpus < 1) throw UserError("plan: the number of GPUs must be positive");
  if (options.global_batch < 1 || options.seq_len < 1) throw UserError("plan: global batch and sequence length must be positive");
  std::vector<ParallelConfig> layouts;
  for (const auto& [cp, layout] : factorizations(options.gpus, options.context_parallel)) {
    for (int micro_batch : options.micro_batches) {
      for (int vp : options.virtual_stages) {
        if (vp > 1 && layout.pp() == 1) continue;  // interleaving needs a pipeline
        ParallelConfig config{layout.dp(), layout.tp(), layout.pp(), micro_batch, options.global_batch, options.seq_len};
        config.cp = cp;
        config.vp = vp;
        layouts.push_back(config);
      }
    }
  }
  return layouts;
}

void rank_plan_entries(std::vector<PlanEntry>& entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const PlanEntry& a, const PlanEntry& b) {
    if (a.feasible != b.feasible) return a.feasible;
    return a.iteration_us < b.iteration_us;
  });
}

std::vector<PlanEntry> plan(const FittedModel& model, const PlanOptions& options) {
  const std::vector<ParallelConfig> layouts = plan_layouts(options);
  std::vector<PlanEntry> entries;
  // Candidates share their built stages.
  StageResolver resolver =
      options.target != nullptr ? StageResolver(model, options.target) : StageResolver(model, StagePolicy::kTracedThenBuilt);
  for (const ParallelConfig& config : layouts) {
    if (!config.violations(options.model, options.gpus).empty()) continue;
    for (PrecisionName precision : options.precisions) {
      const PrecisionPolicy& policy = precision_policy(precision);
      if (options.target != nullptr) {
        const Backend backend = options.target->hardware.kind == DeviceKind::kGpu ? Backend::kCuda : Backend::kCpu;
        if (policy.fp8_matmul) {
          if (!options.target->hardware.peak(ComputeDType::kFp8)) continue;  // a device without fp8 math
        } else if (!policy.supports(backend, BackendCapabilities{options.target->dialect == TorchDialect::kTorch2})) {
          continue;
        }
      } else if (model.backend && !policy.supports(*model.backend, backend_capabilities(model))) {
        continue;  // the calibrated backend cannot run this policy
      }
      for (const TrainingTechniques& techniques : options.recipes) {
        if (config.tp == 1 && (techniques.sequence_parallel || techniques.vocab_parallel)) continue;  // = without them
        if (config.reduction_ranks() == 1 && techniques.overlap_gradient_reduction) continue;         // = without it (opg too)
        entries.push_back(plan_entry(model, options, resolver, config, precision, techniques));
      }
    }
  }
  rank_plan_entries(entries);
  return entries;
}

}  // namespace itertime::predict
