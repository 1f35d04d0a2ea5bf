// framework_plan.cpp: predict and plan with the Megatron-Core + TE framework model (framework_plan.hpp).
#include "predict/framework_plan.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "common/training_techniques.hpp"
#include "predict/framework/megatron_layout_rules.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/throughput.hpp"

namespace itertime::predict {

framework::FrameworkTarget framework_target(const std::string& hardware_name, const std::string& dir) {
  if (hardware_name.empty())
    throw UserError("--framework megatron-te needs --hardware NAME (a GPU description with kernel figures)");
  framework::FrameworkTarget target;
  target.hardware = load_hardware_spec(dir + "/" + hardware_name + ".json");
  if (target.hardware.kind != DeviceKind::kGpu) {
    throw UserError("--framework megatron-te: --hardware " + hardware_name + " is not a GPU description");
  }
  target.kernels = framework::load_gpu_kernel_figures(target.hardware);
  target.conditions = framework::load_training_conditions(target.hardware);
  return target;
}

framework::Framework default_framework(const std::string& hardware_name, bool calibration_given, const std::string& dir) {
  if (hardware_name.empty() || calibration_given) return framework::Framework::kItertime;
  try {
    return load_hardware_spec(dir + "/" + hardware_name + ".json").kind == DeviceKind::kGpu ? framework::Framework::kMegatronTe
                                                                                            : framework::Framework::kItertime;
  } catch (const UserError&) {
    return framework::Framework::kItertime;  // the caller names the missing description
  }
}

framework::RuntimeReserve runtime_reserve(const framework::FrameworkTarget& target, const ParallelConfig& config) {
  return framework::megatron_runtime_reserve(config, infer_nccl_generation(target.hardware) != NcclGeneration::kAmpere);
}

Prediction to_prediction(const framework::FrameworkPrediction& f) {
  Prediction p;
  p.total_us = f.total_us;
  p.raw_total_us = f.total_us;
  p.compute_us = f.compute_us;
  p.tp_comm_us = f.tp_comm_us;
  p.cp_comm_us = f.cp_comm_us;
  p.pp_comm_us = f.pp_comm_us;
  p.bubble_us = f.bubble_us;
  p.dp_comm_us = f.dp_comm_us;
  p.optimizer_us = f.optimizer_us;
  p.training_costs_us = {{"clock", f.clock_us},
                         {"contention", f.contention_us},
                         {"sync", f.sync_us},
                         {"host", f.host_us},
                         {"straggler", f.straggler_us}};
  p.op_calls = f.kernel_launches;
  p.stage_forward_us = {f.stage_forward_us};
  p.stage_backward_us = {f.stage_backward_us};
  p.notes = f.notes;
  return p;
}

std::string framework_switches(const framework::FrameworkRecipe& recipe) {
  std::string out;
  if (recipe.precision == PrecisionName::kFp8) out = "fp8-" + to_string(recipe.fp8_recipe);
  if (recipe.precision == PrecisionName::kFp8 && recipe.fp8_param_gather) out += "+fp8-params";
  if (recipe.tp_comm_overlap) out += std::string(out.empty() ? "" : "+") + "tp-overlap";
  return out;
}

std::vector<TrainingTechniques> megatron_recipes() {
  std::vector<TrainingTechniques> recipes;  // in the recipe text of --recipes (common/training_techniques.hpp)
  for (const char* text : {"sp+vp+dopt+ovl+opg", "sp+vp+dopt+rc-sel+ovl+opg", "sp+vp+dopt+rc-full+ovl+opg"}) {
    recipes.push_back(parse_recipe_text(text));
  }
  return recipes;
}

std::vector<int> megatron_default_context_parallel(int seq_len) {
  std::vector<int> out = {1};
  for (int cp = 2; cp <= kMaxDefaultContextParallel && seq_len / cp >= kMinTokensPerContextRank; cp *= 2) out.push_back(cp);
  return out;
}

std::vector<int> megatron_default_virtual_stages() {
  std::vector<int> out;
  for (int vp = 1; vp <= kMaxDefaultVirtualStages; ++vp) out.push_back(vp);
  return out;
}

namespace {

PlanEntry framework_entry(const PlanOptions& options, const framework::FrameworkTarget& target,
                          const framework::TransformerShape& shape, const ParallelConfig& config,
                          const framework::FrameworkRecipe& recipe, framework::FrameworkPassCache& cache, double margin_bytes) {
  PlanEntry entry;
  entry.config = config;
  entry.precision = recipe.precision;
  entry.techniques = recipe.techniques;
  entry.framework_switches = framework_switches(recipe);
  entry.framework_recipe = recipe;
  const std::vector<std::string> broken = framework::framework_violations(shape, config, recipe);
  if (!broken.empty()) {
    entry.reason = "Megatron-LM refuses it: " + broken.front();
    return entry;
  }
  const double peak = static_cast<double>(framework::megatron_te_peak_memory_bytes(shape, config, recipe));
  entry.peak_memory_bytes = peak;
  const double needed = peak + static_cast<double>(runtime_reserve(target, config).total_bytes()) + margin_bytes;
  if (options.device_memory_bytes > 0 && needed > options.device_memory_bytes) {
    entry.reason = peak > options.device_memory_bytes
                       ? "exceeds the device memory (not predicted)"
                       : "exceeds the device memory with the runtime reserve (CUDA context, NCCL buffers) and the plan's "
                         "margin (not predicted)";
    entry.over_memory = true;
    return entry;
  }
  entry.fits_memory = true;
  if (options.device_memory_bytes > 0) entry.headroom_bytes = options.device_memory_bytes - needed;
  const framework::FrameworkOutcome outcome = framework::predict_framework(target, {shape, config, recipe}, &cache);
  if (!outcome.ok()) {
    entry.reason = outcome.reason;
    return entry;
  }
  entry.iteration_us = outcome.prediction->total_us;
  entry.feasible = true;
  set_rates(entry, options.model, &target.hardware);
  return entry;
}

// The framework-only switches a plan tries for one (precision, techniques) at a layout: each fp8 scaling
// recipe and fp8 parameters on and off with fp8, TP comm overlap on and off where sequence parallelism is
// on, in that nesting order.
std::vector<framework::FrameworkRecipe> framework_variants(PrecisionName precision, const TrainingTechniques& techniques,
                                                           const ParallelConfig& config, const FrameworkPlanSpace& space,
                                                           const framework::PipelineSplit& split) {
  const bool fp8 = precision == PrecisionName::kFp8;
  const std::vector<framework::Fp8Recipe> scalings =
      fp8 ? space.fp8_recipes : std::vector<framework::Fp8Recipe>{framework::Fp8Recipe::kDelayed};
  const std::vector<bool> fp8_parameters = fp8 ? space.fp8_param_gather : std::vector<bool>{false};
  std::vector<framework::FrameworkRecipe> out;
  for (framework::Fp8Recipe scaling : scalings) {
    for (bool fp8_params : fp8_parameters) {
      for (bool overlap : space.tp_comm_overlap) {
        if (overlap && !(techniques.sequence_parallel && config.tp > 1)) continue;
        framework::FrameworkRecipe recipe;
        recipe.precision = precision;
        recipe.fp8_recipe = scaling;
        recipe.fp8_param_gather = fp8_params;
        recipe.techniques = techniques;
        recipe.tp_comm_overlap = overlap;
        recipe.pipeline_split = split;
        out.push_back(recipe);
      }
    }
  }
  return out;
}

// Why the framework cannot plan `precision` on the target ("" when it can).
std::string framework_precision_refusal(const framework::FrameworkTarget& target, PrecisionName precision) {
  if (precision == PrecisionName::kFp8) return target.hardware.peak(ComputeDType::kFp8) ? "" : fp8_absent_reason(target.hardware);
  if (precision != PrecisionName::kAmpBf16 && precision != PrecisionName::kAmpFp16)
    return "megatron-te trains amp-bf16, amp-fp16 or fp8 only";
  return "";
}

// Every candidate recipe of one legal layout: each runnable precision x each recipe distinct at the
// layout x framework_variants, in that order (appended to `out`).
void add_layout_recipes(const PlanOptions& options, const FrameworkPlanSpace& space, const framework::TransformerShape& shape,
                        const ParallelConfig& config, const std::vector<PrecisionName>& runnable,
                        std::vector<framework::FrameworkRecipe>& out) {
  // The split Megatron-LM runs at this layout (the plain one, else NeMo's embedding + loss accounting),
  // fixed so that the launch line states it (formats/megatron_emit.hpp) and reads back to it.
  framework::PipelineSplit split = framework::resolve_pipeline_split(shape.layers, config.pp, config.vp, {});
  split.given = true;
  for (PrecisionName precision : runnable) {
    std::vector<std::string> seen;  // recipes that collapse to one at this layout are listed once
    for (TrainingTechniques techniques : options.recipes) {
      if (config.tp == 1 && (techniques.sequence_parallel || techniques.vocab_parallel)) {
        if (techniques.sequence_parallel != techniques.vocab_parallel) continue;  // listed once, as plain TP
        techniques.sequence_parallel = techniques.vocab_parallel = false;
      }
      // Megatron-LM's embedding and output layer are vocabulary-parallel wherever tp > 1 (no switch): a
      // recipe without the token is the same run (kFoldedVocabParallel), listed once, with it.
      if (config.tp > 1) techniques.vocab_parallel = true;
      techniques = at_dp(techniques, config.reduction_ranks());
      const std::string text = recipe_text(techniques);
      if (std::find(seen.begin(), seen.end(), text) != seen.end()) continue;
      seen.push_back(text);
      for (const framework::FrameworkRecipe& recipe : framework_variants(precision, techniques, config, space, split)) {
        out.push_back(recipe);
      }
    }
  }
}

// A legal layout and where its candidates' recipes start in the plan's list of recipes.
struct LayoutRecipes {
  const ParallelConfig* config = nullptr;
  std::size_t first = 0, end = 0;
};

}  // namespace

std::vector<PlanEntry> plan_framework(const PlanOptions& options, const framework::FrameworkTarget& target,
                                      const FrameworkPlanSpace& space) {
  return plan_framework_search(options, target, space).entries;
}

PlanResult plan_framework_search(const PlanOptions& options, const framework::FrameworkTarget& target,
                                 const FrameworkPlanSpace& space) {
  PlanResult result;
  const std::vector<ParallelConfig> layouts = plan_layouts(options);
  result.counts.layouts = static_cast<int64_t>(layouts.size());
  const framework::TransformerShape shape = framework::shape_of(options.model);
  framework::FrameworkPassCache cache;  // candidates that differ in dp, pp or vp share their passes' times
  std::vector<PlanEntry>& entries = result.entries;
  std::vector<PrecisionName> runnable;
  std::vector<std::pair<PrecisionName, std::string>>& refusals = result.skipped_precisions;
  for (PrecisionName precision : options.precisions) {
    std::string why = framework_precision_refusal(target, precision);
    if (why.empty()) {
      runnable.push_back(precision);
    } else {
      refusals.emplace_back(precision, std::move(why));
    }
  }
  // Listed first (cheap), so that the entries are made in place, once: a plan holds 100,000 of them.
  std::vector<framework::FrameworkRecipe> recipes;
  std::vector<LayoutRecipes> listed;  // one per layout, legal or not (illegal layouts are not listed: none)
  listed.reserve(layouts.size());
  for (const ParallelConfig& config : layouts) {
    LayoutRecipes layout{&config, recipes.size(), recipes.size()};
    if (framework::layout_violations(shape, config).empty()) {
      ++result.counts.legal_layouts;
      add_layout_recipes(options, space, shape, config, runnable, recipes);
      layout.end = recipes.size();
    }
    listed.push_back(layout);
  }
  entries.reserve(recipes.size());
  PlanProgressReporter progress(options, result.counts.layouts);
  for (const LayoutRecipes& layout : listed) {
    for (std::size_t k = layout.first; k < layout.end; ++k) {
      entries.push_back(framework_entry(options, target, shape, *layout.config, recipes[k], cache, space.memory_margin_bytes));
    }
    progress.layout_done(entries);
  }
  const bool fp8_params =
      std::find(space.fp8_param_gather.begin(), space.fp8_param_gather.end(), true) != space.fp8_param_gather.end();
  const MemoryOf memory_of = [&](const MemoryCandidate& v) -> std::optional<double> {
    if (!framework::layout_violations(shape, v.config).empty()) return std::nullopt;
    if (!framework_precision_refusal(target, v.precision).empty()) return std::nullopt;
    framework::FrameworkRecipe recipe = v.framework_recipe.value_or(framework::FrameworkRecipe{});
    if (v.precision == PrecisionName::kFp8 && recipe.precision != PrecisionName::kFp8) recipe.fp8_param_gather = fp8_params;
    recipe.precision = v.precision;
    recipe.techniques = at_dp(v.techniques, v.config.reduction_ranks());
    if (recipe.tp_comm_overlap && !(recipe.techniques.sequence_parallel && v.config.tp > 1)) recipe.tp_comm_overlap = false;
    recipe.pipeline_split = framework::resolve_pipeline_split(shape.layers, v.config.pp, v.config.vp, {});
    recipe.pipeline_split.given = true;
    if (!framework::framework_violations(shape, v.config, recipe).empty()) return std::nullopt;
    // What must fit: the allocated peak, the runtime reserve and the plan's margin.
    return static_cast<double>(framework::megatron_te_peak_memory_bytes(shape, v.config, recipe)) +
           static_cast<double>(runtime_reserve(target, v.config).total_bytes()) + space.memory_margin_bytes;
  };
  finish_plan(result, options, memory_of, framework_precision_refusal(target, PrecisionName::kFp8).empty());
  // Said only where it folded something: a recipe without the token, and a listed layout with tp > 1.
  const bool vp_varies =
      std::any_of(options.recipes.begin(), options.recipes.end(), [](const TrainingTechniques& t) { return !t.vocab_parallel; });
  const bool tp_listed =
      std::any_of(listed.begin(), listed.end(), [](const LayoutRecipes& l) { return l.end > l.first && l.config->tp > 1; });
  if (vp_varies && tp_listed) result.folded.push_back(kFoldedVocabParallel);
  if (entries.empty()) {
    result.empty_reason = empty_plan_reason(
        options, layouts, [&](const ParallelConfig& c) { return framework::layout_violations(shape, c); }, refusals);
  }
  return result;
}

}  // namespace itertime::predict
