// plan.cpp: itertime plan: every legal, memory-feasible configuration predicted and ranked (plan.hpp).
#include "predict/plan.hpp"

#include <algorithm>
#include <set>

#include "common/errors.hpp"
#include "common/job.hpp"
#include "predict/memory/memory_model.hpp"
#include "predict/plan_ranking.hpp"
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

// `calibration_facts`: the calibration's part of answer_check's facts (its precisions, its largest
// profiled operator), the same for every candidate.
PlanEntry plan_entry(const FittedModel& model, const PlanOptions& options, StageResolver& resolver, const ParallelConfig& config,
                     PrecisionName precision, const TrainingTechniques& techniques, const AnswerFacts& calibration_facts) {
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
    entry.over_memory = true;
    return entry;
  }
  entry.fits_memory = true;
  if (options.device_memory_bytes > 0) entry.headroom_bytes = options.device_memory_bytes - peak;
  PredictRequest request;
  request.model_name = options.model.name;
  request.model = &options.model;
  request.config = config;
  request.precision = precision;
  request.techniques = techniques;
  request.ranks_per_node = options.ranks_per_node;
  const PredictOutcome outcome = predict(resolver, request);
  if (outcome.ok()) {
    entry.iteration_us = outcome.prediction->total_us;
    entry.extrapolated_fraction = outcome.prediction->extrapolated_fraction;
    entry.feasible = true;
    set_rates(entry, options.model, options.hardware ? &*options.hardware : nullptr);
    AnswerFacts facts = calibration_facts;
    facts.mfu = entry.mfu;
    facts.operators = outcome.prediction->built_operators;
    facts.operators_without_time = outcome.prediction->built_operators_without_time;
    facts.precision = to_string(precision);
    facts.extrapolated_fraction = outcome.prediction->extrapolated_fraction;
    facts.largest_matmul_flops = largest_matmul_flops(options.model, config, techniques);
    flag_entry(entry, check_answer(facts));
  } else {
    entry.reason = outcome.reason;
  }
  return entry;
}

// Why the plan cannot run `precision` ("" when it can): the described device's math and backend, or the
// calibrated backend.
std::string precision_refusal(const FittedModel& model, const PlanOptions& options, PrecisionName precision) {
  const PrecisionPolicy& policy = precision_policy(precision);
  if (options.target != nullptr) {
    const HardwareSpec& hardware = options.target->hardware;
    const Backend backend = hardware.kind == DeviceKind::kGpu ? Backend::kCuda : Backend::kCpu;
    if (policy.fp8_matmul) return hardware.peak(ComputeDType::kFp8) ? "" : fp8_absent_reason(hardware);
    if (!policy.supports(backend, BackendCapabilities{options.target->dialect == TorchDialect::kTorch2}))
      return hardware.name + " (" + to_string(backend) + ") cannot run " + to_string(precision);
    return "";
  }
  if (model.backend && !policy.supports(*model.backend, backend_capabilities(model)))
    return "the calibration's backend (" + to_string(*model.backend) + ") cannot run " + to_string(precision);
  // As `predict` refuses it (answer_check.hpp precision_not_calibrated): its operators were never timed.
  const std::set<std::string> ran = calibrated_precisions(model);
  if (!ran.empty() && ran.count(to_string(precision)) == 0) {
    std::string list;
    for (const std::string& name : ran) list += (list.empty() ? "" : ", ") + name;
    return "the calibration never ran " + to_string(precision) + " (it traced " + list + ")";
  }
  return "";
}

}  // namespace

void set_rates(PlanEntry& entry, const LlamaSpec& model, const HardwareSpec* hardware) {
  const Throughput rate = throughput(model, entry.config, entry.precision, entry.iteration_us, hardware);
  entry.tokens_per_s_per_rank = rate.tokens_per_s_per_rank;
  entry.mfu = rate.mfu;
  // MFU depends on the precision only through the peak: at amp-bf16 it is against the dense bf16 peak.
  entry.mfu_bf16_peak = throughput(model, entry.config, PrecisionName::kAmpBf16, entry.iteration_us, hardware).mfu;
  AnswerFacts facts;
  facts.mfu = entry.mfu;
  flag_entry(entry, check_answer(facts));
}

void flag_entry(PlanEntry& entry, const std::vector<Finding>& findings) {
  for (const Finding& finding : findings) {
    if (std::find_if(entry.findings.begin(), entry.findings.end(), [&](const Finding& f) { return f.code == finding.code; }) ==
        entry.findings.end())
      entry.findings.push_back(finding);
  }
  entry.implausible = !entry.findings.empty();
}

std::string fp8_absent_reason(const HardwareSpec& hardware) {
  std::string why;
  const auto source = hardware.sources.find("peak_flops_dense.fp8");
  if (source != hardware.sources.end()) {
    const std::string& text = source->second;
    const std::size_t at = text.rfind("(absent: ");
    if (at != std::string::npos && text.back() == ')') why = " (" + text.substr(at + 9, text.size() - at - 10) + ")";
  }
  return hardware.name + " has no fp8 peak" + why + ": fp8 needs an fp8 tensor core (Hopper or later)";
}

std::string empty_plan_reason(const PlanOptions& options, const std::vector<ParallelConfig>& layouts,
                              const std::function<std::vector<std::string>(const ParallelConfig&)>& violations,
                              const std::vector<std::pair<PrecisionName, std::string>>& precision_refusals) {
  const std::string gpus = std::to_string(options.gpus) + (options.gpus == 1 ? " GPU" : " GPUs");
  if (layouts.empty()) {
    bool divides = false;
    for (int cp : options.context_parallel) divides = divides || (cp > 0 && options.gpus % cp == 0);
    if (!divides) return "no --cp value given (" + comma_list(options.context_parallel) + ") divides the " + gpus;
    if (options.micro_batches.empty()) return "no micro-batch size given";
    return "no layout of " + gpus + " with the --vp values given (" + comma_list(options.virtual_stages) +
           "): vp > 1 needs pp > 1, and pp 1 is the only pipeline of " + gpus;
  }
  std::string out;
  int64_t legal = 0;
  const ParallelConfig* nearest = nullptr;
  std::vector<std::string> nearest_broken;
  for (const ParallelConfig& config : layouts) {
    std::vector<std::string> broken = violations(config);
    if (broken.empty()) {
      ++legal;
    } else if (nearest == nullptr || broken.size() < nearest_broken.size()) {
      nearest = &config;
      nearest_broken = std::move(broken);
    }
  }
  if (legal == 0 && nearest != nullptr) {
    out = "none of the " + std::to_string(layouts.size()) + " layouts of " + gpus + " (mbs " + comma_list(options.micro_batches) +
          ", cp " + comma_list(options.context_parallel) + ", vp " + comma_list(options.virtual_stages) + ") is legal for " +
          options.model.name + "; the nearest, " + nearest->layout_text() + " mbs" + std::to_string(nearest->micro_batch) + ": ";
    for (std::size_t i = 0; i < nearest_broken.size(); ++i) out += (i ? "; " : "") + nearest_broken[i];
  }
  if (options.precisions.empty()) {
    out += std::string(out.empty() ? "" : "; and ") + "no precision given";
  } else if (precision_refusals.size() >= options.precisions.size()) {
    std::string text = "no precision given can run: ";
    for (std::size_t i = 0; i < precision_refusals.size(); ++i)
      text += (i ? "; " : "") + to_string(precision_refusals[i].first) + ": " + precision_refusals[i].second;
    out += (out.empty() ? "" : "; and ") + text;
  }
  if (out.empty()) {
    out = "no recipe given (" + std::to_string(options.recipes.size()) + ") applies at the " + std::to_string(legal) +
          " legal layouts (sp and vp need tp > 1; ovl and opg need dp*cp > 1)";
  }
  return out;
}

void finish_plan(PlanResult& result, const PlanOptions& options, const MemoryOf& memory_of, bool fp8_available) {
  std::vector<PlanEntry>& entries = result.entries;
  rank_plan_entries(entries, options.tie_fraction, options.device_memory_bytes);
  PlanCounts& counts = result.counts;
  counts.candidates = static_cast<int64_t>(entries.size());
  counts.fitting = counts.predicted = 0;
  for (const PlanEntry& e : entries) {
    if (e.fits_memory) ++counts.fitting;
    if (e.feasible) ++counts.predicted;
  }
  if (counts.fitting > 0) return;  // guidance only when nothing fits
  std::vector<MemoryCandidate> over_limit;
  for (const PlanEntry& e : entries) {
    if (e.over_memory) {
      over_limit.push_back(
          MemoryCandidate{e.config, e.precision, e.techniques, e.framework_switches, e.framework_recipe, e.peak_memory_bytes});
    }
  }
  if (!over_limit.empty()) result.guidance = memory_guidance(over_limit, options.device_memory_bytes, memory_of, fp8_available);
}

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

PlanProgressReporter::PlanProgressReporter(const PlanOptions& options, int64_t layouts_total) : options_(options) {
  progress_.layouts_total = layouts_total;
}

void PlanProgressReporter::layout_done(const std::vector<PlanEntry>& entries) {
  ++progress_.layouts_done;
  if (!options_.on_progress) return;
  for (; scanned_ < entries.size(); ++scanned_) {
    const PlanEntry& e = entries[scanned_];
    if (e.feasible && (!has_best_ || e.iteration_us < entries[best_index_].iteration_us)) {
      best_index_ = scanned_;
      has_best_ = true;
    }
  }
  progress_.candidates = static_cast<int64_t>(entries.size());
  progress_.best = has_best_ ? &entries[best_index_] : nullptr;
  options_.on_progress(progress_);
}

std::vector<PlanEntry> plan(const FittedModel& model, const PlanOptions& options) { return plan_search(model, options).entries; }

PlanResult plan_search(const FittedModel& model, const PlanOptions& options) {
  PlanResult result;
  const std::vector<ParallelConfig> layouts = plan_layouts(options);
  result.counts.layouts = static_cast<int64_t>(layouts.size());
  std::vector<PrecisionName> runnable;
  std::vector<std::pair<PrecisionName, std::string>>& refusals = result.skipped_precisions;
  for (PrecisionName precision : options.precisions) {
    std::string why = precision_refusal(model, options, precision);
    if (why.empty()) {
      runnable.push_back(precision);
    } else {
      refusals.emplace_back(precision, std::move(why));
    }
  }
  AnswerFacts calibration_facts;  // a described device: no calibration to check against
  if (options.target == nullptr) {
    calibration_facts.calibrated_precisions = calibrated_precisions(model);
    calibration_facts.largest_profiled_flops = largest_profiled_flops(model);
  }
  // Candidates share their built stages.
  StageResolver resolver =
      options.target != nullptr ? StageResolver(model, options.target) : StageResolver(model, StagePolicy::kTracedThenBuilt);
  PlanProgressReporter progress(options, result.counts.layouts);
  for (const ParallelConfig& config : layouts) {
    if (config.violations(options.model, options.gpus).empty()) {
      ++result.counts.legal_layouts;
      for (PrecisionName precision : runnable) {
        for (const TrainingTechniques& techniques : options.recipes) {
          if (config.tp == 1 && (techniques.sequence_parallel || techniques.vocab_parallel)) continue;  // = without them
          if (config.reduction_ranks() == 1 && techniques.overlap_gradient_reduction) continue;         // = without it (opg too)
          result.entries.push_back(plan_entry(model, options, resolver, config, precision, techniques, calibration_facts));
        }
      }
    }
    progress.layout_done(result.entries);
  }
  const AttentionKernel attention = options.target != nullptr ? options.target->attention : model.attention;
  const MemoryOf memory_of = [&](const MemoryCandidate& v) -> std::optional<double> {
    if (!v.config.violations(options.model, options.gpus).empty()) return std::nullopt;
    if (!untrainable_reason(options.model, v.config, v.techniques).empty()) return std::nullopt;
    if (!precision_refusal(model, options, v.precision).empty()) return std::nullopt;
    return static_cast<double>(
        peak_memory_bytes(options.model, v.config, precision_policy(v.precision), attention, v.techniques));
  };
  finish_plan(result, options, memory_of, precision_refusal(model, options, PrecisionName::kFp8).empty());
  if (result.entries.empty()) {
    result.empty_reason = empty_plan_reason(
        options, layouts, [&](const ParallelConfig& c) { return c.violations(options.model, options.gpus); }, refusals);
  }
  return result;
}

}  // namespace itertime::predict
