// prediction_query.cpp: see the header.
#include "python/prediction_query.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"
#include "launcher/predict_options.hpp"
#include "predict/answer_check.hpp"
#include "predict/fit_model.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/framework_plan.hpp"
#include "predict/memory/memory_model.hpp"
#include "predict/memory_split.hpp"
#include "predict/plan.hpp"
#include "predict/prediction_range.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/target_device.hpp"
#include "predict/throughput.hpp"
#include "validate/plan_report.hpp"
#include "validate/prediction_report.hpp"
#include "validate/validation_mape.hpp"

namespace itertime::python {
namespace {

// The answer checks' findings: a refusing one is a UserError unless allow_implausible, which keeps them
// all as the record's flags (the JSON's "flags"), as predict --allow-implausible does.
void refuse_or_flag(std::vector<predict::Finding> findings, bool allow, validate::PredictionRecord& record) {
  const auto refusing = std::find_if(findings.begin(), findings.end(), [](const predict::Finding& f) { return f.refuse; });
  if (!allow && refusing != findings.end()) {
    throw UserError("prediction refused (" + refusing->code + "): " + refusing->message + "; " + refusing->hint +
                    " (allow_implausible=True returns it anyway, flagged)");
  }
  if (refusing != findings.end() && record.range.pct) record.range = {std::nullopt, "none: the flags void the measured range"};
  record.flags = std::move(findings);
}

nlohmann::json framework_prediction(const PredictQuery& q, const LlamaSpec& spec, const ParallelConfig& config) {
  if (!q.source.empty()) {
    throw UserError("framework megatron-te predicts from the GPU's published kernel figures: give no source (" + q.source + ")");
  }
  if (q.blind || !q.efficiency.empty()) throw UserError("framework megatron-te takes neither blind nor efficiency");
  const predict::framework::FrameworkTarget target = predict::framework_target(q.hardware);
  predict::framework::FrameworkRequest request;
  request.shape = predict::framework::shape_of(spec);
  request.config = config;
  request.recipe.precision = parse_precision(q.precision).name;
  request.recipe.fp8_recipe = predict::framework::parse_fp8_recipe(q.fp8_recipe);
  request.recipe.techniques = at_dp(launcher::parse_recipe_option(q.recipe, "recipe"), config.reduction_ranks());
  request.recipe.tp_comm_overlap = q.tp_comm_overlap;
  request.recipe.fp8_param_gather = q.fp8_param_gather;
  if (q.fp8_param_gather && request.recipe.precision != PrecisionName::kFp8) {
    throw UserError("fp8_param_gather needs precision fp8");
  }
  const predict::framework::FrameworkOutcome outcome = predict::framework::predict_framework(target, request);
  if (!outcome.ok()) throw UserError(outcome.reason);
  const int64_t peak_bytes = outcome.prediction->peak_memory_bytes;
  const double memory_limit = launcher::device_memory_bytes(q.device_memory_gib, target.hardware);
  validate::PredictionRecord record;
  record.source = "described " + target.hardware.name + ", framework megatron-te";
  record.described =
      "Megatron-Core + Transformer Engine stage (fused attention, norms, RoPE, SwiGLU, cross-entropy); kernels from " +
      target.kernels.shown_path() +
      " (published figures), communication from NCCL's cost model of the description; no calibration";
  record.model_name = spec.name;
  record.config = config;
  record.precision = q.precision;
  const std::string switches = predict::framework_switches(request.recipe);
  record.recipe = recipe_label(request.recipe.techniques) + (switches.empty() ? "" : " " + switches);
  record.attention = "";
  record.prediction = predict::to_prediction(*outcome.prediction);
  record.prediction.critical_rank = outcome.prediction->critical_rank;
  record.prediction.split_raw_us = outcome.prediction->total_us;
  record.prediction.communication_described = true;
  record.peak_memory_bytes = peak_bytes;
  record.exceeds_device_memory = memory_limit > 0 && static_cast<double>(peak_bytes) > memory_limit;
  record.memory = predict::memory_split(predict::framework::megatron_te_peak_memory(request.shape, config, request.recipe));
  record.device_memory_bytes = memory_limit;
  record.throughput = predict::throughput(spec, config, request.recipe.precision, record.prediction.total_us, &target.hardware);
  record.hardware = target.hardware.name;
  record.framework = true;
  record.range = predict::framework_range(target.hardware.name);
  predict::AnswerFacts facts;
  facts.mfu = record.throughput.mfu;
  facts.precision = q.precision;
  refuse_or_flag(predict::check_answer(facts), q.allow_implausible, record);
  return nlohmann::json::parse(validate::prediction_json(record));
}

nlohmann::json own_trainer_prediction(const PredictQuery& q, const LlamaSpec& spec, const ParallelConfig& config) {
  if (q.tp_comm_overlap || q.fp8_param_gather || q.fp8_recipe != "delayed") {
    throw UserError("tp_comm_overlap, fp8_recipe and fp8_param_gather need framework megatron-te");
  }
  const PrecisionPolicy& policy = parse_precision(q.precision);
  const predict::FittedModel model = q.source.empty() ? predict::FittedModel{} : predict::load_or_fit(q.source);
  const predict::HardwareChoice choice = predict::choose_hardware(q.source.empty() ? nullptr : &model, q.hardware, q.efficiency);
  const std::optional<HardwareSpec>& hardware = choice.hardware;
  const predict::TargetDevice* target = choice.target ? &*choice.target : nullptr;
  predict::PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;
  request.config = config;
  request.precision = policy.name;
  request.blind = q.blind;
  request.techniques = launcher::parse_recipe_option(q.recipe, "recipe");
  request.calibrated = !q.raw;
  const int64_t ranks_per_node =
      launcher::ranks_per_node_option(q.ranks_per_node, model.comm.calibration_ranks_per_node(), target != nullptr);
  request.ranks_per_node = ranks_per_node;
  predict::StageResolver resolver = target != nullptr ? predict::StageResolver(model, target)
                                                      : predict::StageResolver(model, predict::StagePolicy::kTracedThenBuilt);
  const predict::PredictOutcome outcome = predict::predict(resolver, request);
  if (!outcome.ok()) throw UserError(outcome.reason);
  const predict::Prediction& p = *outcome.prediction;
  const predict::MemoryBreakdown peak = predict::peak_memory_breakdown(
      spec, config, policy, target != nullptr ? target->attention : model.attention, request.techniques);
  const double memory_limit = launcher::device_memory_bytes(q.device_memory_gib, hardware);
  validate::PredictionRecord record;
  record.source = target != nullptr ? "described " + target->hardware.name : q.source;
  if (target != nullptr) {
    const std::string& from = target->operators.fitted_from;
    const bool figures = from.rfind("published kernel figures", 0) == 0;
    record.described = "operator efficiencies " + std::string(figures ? "from " : "fitted on ") + from +
                       ", communication from NCCL's cost model of the description; no ground-truth factor";
  }
  record.model_name = spec.name;
  record.config = config;
  record.precision = q.precision;
  record.blind = q.blind;
  record.recipe = recipe_label(request.techniques);
  record.attention = target != nullptr ? to_string(target->attention) : to_string(model.attention);
  record.libtorch_version = target != nullptr ? "" : model.libtorch_version;
  record.prediction = p;
  record.peak_memory_bytes = peak.total_bytes;
  record.exceeds_device_memory = memory_limit > 0 && static_cast<double>(peak.total_bytes) > memory_limit;
  if (target == nullptr) record.regression_check = predict::pooled_regression_check(model);
  record.throughput = predict::throughput(spec, config, policy.name, p.total_us, hardware ? &*hardware : nullptr);
  record.hardware = hardware ? hardware->name : "";
  record.memory = predict::memory_split(peak);
  record.device_memory_bytes = memory_limit;
  if (target != nullptr) {
    record.range = predict::described_range(target->hardware.name);
  } else if (q.raw || q.blind) {
    record.range = {std::nullopt,
                    "none: the validation measures the calibrated, precision-aware prediction (not --raw or --blind)"};
  } else {
    const std::optional<validate::StoredMape> stored = validate::read_validation_mape(q.source, q.precision, p.stages_built > 0);
    record.range = stored ? predict::calibrated_range(stored->mape_pct, stored->count, stored->group, stored->built)
                          : predict::calibrated_range(std::nullopt, 0, "", false);
  }
  predict::AnswerFacts facts;
  facts.mfu = record.throughput.mfu;
  facts.operators = p.built_operators;
  facts.operators_without_time = p.built_operators_without_time;
  facts.precision = q.precision;
  facts.blind = q.blind;
  if (target == nullptr) {
    facts.calibrated_precisions = predict::calibrated_precisions(model);
    facts.largest_profiled_flops = predict::largest_profiled_flops(model);
  }
  facts.extrapolated_fraction = p.extrapolated_fraction;
  facts.largest_matmul_flops = predict::largest_matmul_flops(spec, config, request.techniques);
  refuse_or_flag(predict::check_answer(facts), q.allow_implausible, record);
  const std::string text = validate::prediction_json(record);
  return nlohmann::json::parse(
      target != nullptr ? text : launcher::with_placement_json(text, config, ranks_per_node, p.inter_node_from_intra));
}

}  // namespace

nlohmann::json predict_json(const PredictQuery& q) {
  if (q.global_batch < 1) throw UserError("gbs must be positive (the global batch size)");
  const LlamaSpec spec = load_llama_config(q.model_file);
  ParallelConfig config{q.dp, q.tp, q.pp, q.micro_batch, q.global_batch, q.seq_len};
  config.cp = q.cp;
  config.vp = q.vp;
  config.require_valid(spec, 0);
  if (predict::framework::parse_framework(q.framework) == predict::framework::Framework::kMegatronTe) {
    return framework_prediction(q, spec, config);
  }
  return own_trainer_prediction(q, spec, config);
}

nlohmann::json plan_json(const PlanQuery& q) {
  predict::PlanOptions options;
  options.model = load_llama_config(q.model_file);
  options.gpus = q.gpus;
  options.global_batch = q.global_batch;
  options.seq_len = q.seq_len;
  options.micro_batches = q.micro_batches;
  options.virtual_stages = q.virtual_stages;
  options.context_parallel = q.context_parallel;
  options.precisions.clear();
  for (const auto& p : q.precisions) options.precisions.push_back(parse_precision(p).name);
  const bool megatron = predict::framework::parse_framework(q.framework) == predict::framework::Framework::kMegatronTe;
  if (q.all_recipes) {
    options.recipes = predict::modelled_recipes();
  } else if (q.recipes) {
    options.recipes.clear();
    for (const auto& r : *q.recipes) options.recipes.push_back(launcher::parse_recipe_option(r, "recipes"));
  } else if (megatron) {
    options.recipes = predict::megatron_recipes();
  }
  if (q.nodes < 0 || (q.nodes > 0 && q.gpus > 0)) throw UserError("plan: give gpus or nodes, not both");
  validate::PlanQuestion question;
  question.source = q.source;
  question.nodes = q.nodes;
  question.framework = predict::framework::to_string(predict::framework::parse_framework(q.framework));
  if (q.tie_pct) {
    if (*q.tie_pct < 0 || *q.tie_pct > 100) throw UserError("tie_pct must be within 0 and 100");
    options.tie_fraction = *q.tie_pct / 100.0;
    options.tie_source = "tie_pct";
  } else if (megatron) {
    options.tie_fraction = predict::framework_tie_fraction(q.hardware);
    options.tie_source = "the framework model's MAPE on published figures, itertime score-published";
  } else if (const auto stored = q.source.empty() ? std::nullopt : validate::read_validation_mape(q.source, "", false)) {
    options.tie_fraction = stored->mape_pct / 100.0;
    options.tie_source = "the calibration's MAPE over its " + std::to_string(stored->count) +
                         " validated configurations (/validation, itertime validate --store)";
  } else {
    throw UserError("plan: give tie_pct (the model's uncertainty in %): this calibration stores no validation MAPE");
  }
  // In each branch: options.target points into the branch's HardwareChoice.
  const auto report = [&](const predict::PlanResult& result) {
    if (result.entries.empty()) throw UserError("plan: no candidate to consider: " + result.empty_reason);
    return nlohmann::json::parse(validate::plan_json(options, question, result, q.top));
  };
  if (megatron) {
    if (!q.source.empty()) throw UserError("plan with framework megatron-te takes no source (" + q.source + ")");
    const predict::framework::FrameworkTarget target = predict::framework_target(q.hardware);
    predict::FrameworkPlanSpace space;
    space.fp8_recipes.clear();
    for (const auto& r : q.fp8_recipes) space.fp8_recipes.push_back(predict::framework::parse_fp8_recipe(r));
    for (const auto& r : space.fp8_recipes) question.fp8_recipes.push_back(predict::framework::to_string(r));
    options.hardware = target.hardware;
    options.gpus = q.nodes > 0 ? q.nodes * target.hardware.gpus_per_node.value_or(8) : q.gpus;
    if (options.gpus < 1) throw UserError("plan: give gpus=N or nodes=N");
    options.device_memory_bytes = launcher::device_memory_bytes(q.device_memory_gib, options.hardware);
    return report(predict::plan_framework_search(options, target, space));
  } else {
    const predict::FittedModel model = q.source.empty() ? predict::FittedModel{} : predict::load_or_fit(q.source);
    const predict::HardwareChoice choice =
        predict::choose_hardware(q.source.empty() ? nullptr : &model, q.hardware, q.efficiency);
    options.hardware = choice.hardware;
    options.target = choice.target ? &*choice.target : nullptr;
    if (q.nodes > 0) {
      if (!choice.hardware || !choice.hardware->gpus_per_node)
        throw UserError("nodes needs hardware with a GPU description (GPUs per node)");
      options.gpus = q.nodes * *choice.hardware->gpus_per_node;
    } else if (q.gpus < 1) {
      throw UserError("plan: the number of GPUs must be positive: give gpus=N, or hardware=NAME and nodes=N");
    }
    options.device_memory_bytes = launcher::device_memory_bytes(q.device_memory_gib, options.hardware);
    return report(predict::plan_search(model, options));
  }
}

}  // namespace itertime::python
