// plan_query.cpp: see the header.
#include "query/plan_query.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
#include "formats/megatron_emit.hpp"
#include "predict/framework/framework_fit.hpp"
#include "predict/framework_plan.hpp"
#include "predict/prediction_range.hpp"
#include "validate/validation_mape.hpp"

namespace itertime::query {
namespace {

// itertime's own trainer: the calibrated predictor's held-out overall MAPE on the local CPU job was 5.4% to
// 13.2% over its runs (docs/method.md, "Local job, measured"; out/local-cpu-after: 5.38%); 10% is their
// middle. No GPU run measures it, so a plan on a description is no more certain than that.
constexpr double kOwnTrainerTieFraction = 0.10;

// --from: the run's model, GPUs, batch, sequence, precision, recipe and framework; flags beside it
// override them (each listed). The file's own cp and vp are searched beside 1 unless --cp / --vp say
// otherwise. Returns whether the recipes are now fixed (given, or the file's).
bool apply_user_run(const formats::UserRun& run, PlanRequest& a, PlanAnswer& answer, predict::FrameworkPlanSpace& space) {
  const auto given = [&a](const char* flag) { return a.was_given(flag); };
  std::vector<std::string>& overridden = answer.overridden;
  if (!a.model_file.empty())
    throw UserError("--model " + a.model_file + " beside --from/--megatron-args: the model comes from " + run.source +
                    "; give one");
  const ParallelConfig& c = run.config;
  const auto take_int = [&](const char* flag, int& value, int file_value) {
    if (!given(flag)) {
      value = file_value;
    } else if (value != file_value) {
      overridden.push_back(std::string(flag) + " " + std::to_string(value) + " (" + run.source + ": " +
                           std::to_string(file_value) + ")");
    }
  };
  take_int("--seq", a.seq_len, c.seq_len);
  if (!given("--cp") && c.cp > 1) a.context_parallel = {1, c.cp};
  if (!given("--vp") && c.vp > 1) a.virtual_stages = {1, c.vp};
  if (run.global_batch_given || run.data_parallel_given) {
    take_int("--gbs", a.global_batch, c.global_batch);
  } else if (!given("--gbs")) {
    throw UserError(run.source + " fixes no global batch (nor the data-parallel size it follows): give --gbs N");
  }
  if (run.data_parallel_given && !given("--nodes")) {
    take_int("--gpus", a.gpus, c.world_size());
  } else if (!given("--gpus") && !given("--nodes")) {
    throw UserError(run.source + " fixes no world size: give --gpus N or --nodes N");
  }
  const std::string precision = to_string(run.recipe.precision);
  if (!given("--precisions")) {
    a.precisions = {precision};
  } else if (a.precisions != std::vector<std::string>{precision}) {
    overridden.push_back("--precisions " + predict::comma_list(a.precisions) + " (" + run.source + ": " + precision + ")");
  }
  TrainingTechniques techniques = run.recipe.techniques;
  if (!techniques.sequence_parallel) techniques.vocab_parallel = false;  // plain TP's candidates at every tp
  const bool recipes_given = given("--recipes") || a.all_recipes;
  if (!recipes_given) {
    a.recipes = {techniques.any() ? recipe_text(techniques) : "plain"};
  } else {
    overridden.push_back("--recipes (" + run.source + ": " + recipe_label(techniques) + ")");
  }
  const std::string framework = predict::framework::to_string(run.framework);
  if (!given("--framework")) {
    a.framework = framework;
  } else if (a.framework != framework) {
    overridden.push_back("--framework " + a.framework + " (" + run.source + ": " + framework + ")");
  }
  if (!given("--fp8-recipes")) a.fp8_recipes = {predict::framework::to_string(run.recipe.fp8_recipe)};
  space.tp_comm_overlap = {run.recipe.tp_comm_overlap};
  space.fp8_param_gather = {run.recipe.fp8_param_gather};
  answer.options.model = run.model;
  return true;
}

// The tie rule's uncertainty and where it comes from (the header's order).
void choose_tie(const PlanRequest& a, bool megatron, predict::PlanOptions& options) {
  if (a.was_given("--tie-pct")) {
    if (a.tie_pct < 0 || a.tie_pct > 100)
      throw UserError("--tie-pct " + std::to_string(a.tie_pct) + ": give a percentage within 0 and 100");
    options.tie_fraction = a.tie_pct / 100.0;
    options.tie_source = "--tie-pct";
  } else if (megatron && !a.fitted.empty()) {
    const predict::framework::FrameworkFit fit = predict::framework::read_fitted_terms(a.fitted);
    options.tie_fraction = (std::isfinite(fit.lomo_mape_pct) ? fit.lomo_mape_pct : predict::kFrameworkPublishedMapePct) / 100.0;
    options.tie_source = std::isfinite(fit.lomo_mape_pct)
                             ? "the fit's leave-one-model-out MAPE, " + a.fitted
                             : "every published run's MAPE (the fit in " + a.fitted + " saw one model only)";
  } else if (megatron) {
    options.tie_fraction = predict::framework_tie_fraction(a.hardware);
    options.tie_source =
        "the described framework model's MAPE on published runs of this GPU generation, itertime score-published";
  } else if (const auto stored = a.source.empty() ? std::nullopt : validate::read_validation_mape(a.source, "", false)) {
    options.tie_fraction = stored->mape_pct / 100.0;
    options.tie_source = "the calibration's MAPE over its " + std::to_string(stored->count) +
                         " validated configurations (/validation, itertime validate --store)";
  } else {
    options.tie_fraction = kOwnTrainerTieFraction;
    options.tie_source = "default 10%, the calibrated predictor's held-out MAPE on the local job (docs/cli.md)";
  }
}

// --emit megatron-args: each shown candidate's Megatron-LM launch line (megatron-te only).
void set_launch_line(const PlanRequest& a, PlanAnswer& answer) {
  if (a.emit.empty()) return;
  if (a.emit != "megatron-args") throw UserError("--emit " + a.emit + ": the one launch format plan writes is megatron-args");
  if (predict::framework::parse_framework(a.framework) != predict::framework::Framework::kMegatronTe)
    throw UserError("--emit megatron-args: launch lines are Megatron-LM's; give --framework megatron-te (or --from)");
  const predict::PlanOptions* options = &answer.options;  // the answer is never moved (the header)
  answer.question.launch_line = [options](const predict::PlanEntry& e) {
    predict::framework::FrameworkRecipe recipe;
    if (e.framework_recipe) {
      recipe = *e.framework_recipe;
    } else {
      recipe.precision = e.precision;
      recipe.techniques = e.techniques;
    }
    const int per_node =
        options->hardware && options->hardware->gpus_per_node ? static_cast<int>(*options->hardware->gpus_per_node) : 0;
    return formats::megatron_command_line(options->model, e.config, recipe, per_node);
  };
}

void plan_framework(const PlanRequest& a, bool recipes_fixed, predict::FrameworkPlanSpace& space, PlanAnswer& answer) {
  predict::PlanOptions& options = answer.options;
  if (!a.source.empty()) throw UserError("plan --framework megatron-te takes no calibration or model file (" + a.source + ")");
  predict::framework::FrameworkTarget target = predict::framework_target(a.hardware);
  if (!a.fitted.empty()) predict::framework::apply_fitted_terms(target, a.fitted);
  if (!recipes_fixed) options.recipes = predict::megatron_recipes();
  // The axes Megatron-LM users search, unless given (or read from --from, which searches its own beside 1).
  if (!a.was_given("--cp") && !answer.from_run)
    options.context_parallel = predict::megatron_default_context_parallel(options.seq_len);
  if (!a.was_given("--vp") && !answer.from_run) options.virtual_stages = predict::megatron_default_virtual_stages();
  space.fp8_recipes.clear();
  for (const auto& r : a.fp8_recipes) space.fp8_recipes.push_back(predict::framework::parse_fp8_recipe(r));
  for (const auto& r : space.fp8_recipes) answer.question.fp8_recipes.push_back(predict::framework::to_string(r));
  options.hardware = target.hardware;
  options.gpus = a.nodes > 0 ? a.nodes * target.hardware.gpus_per_node.value_or(8) : a.gpus;
  if (options.gpus < 1) throw UserError("plan: give --gpus N, or --nodes N");
  options.device_memory_bytes = device_memory_bytes(a.device_memory_gib, options.hardware);
  answer.result = predict::plan_framework_search(options, target, space);
}

void plan_own_trainer(const PlanRequest& a, PlanAnswer& answer) {
  predict::PlanOptions& options = answer.options;
  answer.model = a.source.empty() ? predict::FittedModel{} : predict::load_or_fit(a.source);
  answer.choice = predict::choose_hardware(a.source.empty() ? nullptr : &answer.model, a.hardware, a.efficiency);
  options.hardware = answer.choice.hardware;
  options.target = answer.choice.target ? &*answer.choice.target : nullptr;
  if (a.nodes > 0) {
    if (!answer.choice.hardware || !answer.choice.hardware->gpus_per_node)
      throw UserError("--nodes needs --hardware with a GPU description (GPUs per node)");
    options.gpus = a.nodes * *answer.choice.hardware->gpus_per_node;
  } else if (a.gpus < 1) {
    throw UserError("plan: the number of GPUs must be positive: give --gpus N, or --hardware NAME --nodes N");
  }
  options.device_memory_bytes = device_memory_bytes(a.device_memory_gib, options.hardware);
  options.ranks_per_node =
      ranks_per_node_option(a.ranks_per_node, answer.model.comm.calibration_ranks_per_node(), options.target != nullptr);
  answer.result = predict::plan_search(answer.model, options);
}

}  // namespace

std::unique_ptr<PlanAnswer> answer_plan(const PlanRequest& request) {
  auto answer = std::make_unique<PlanAnswer>();
  PlanRequest a = request;
  if (a.was_given("--gpus") && a.was_given("--nodes")) throw UserError("plan: give --gpus or --nodes, not both");
  if (a.nodes < 0) throw UserError("--nodes " + std::to_string(a.nodes) + ": give a positive node count");
  predict::PlanOptions& options = answer->options;
  predict::FrameworkPlanSpace space;
  answer->from_run = read_from(a.from);
  bool recipes_fixed = a.was_given("--recipes") || a.all_recipes;
  if (answer->from_run) {
    recipes_fixed = apply_user_run(*answer->from_run, a, *answer, space);
  } else {
    if (a.model_file.empty()) throw UserError("plan: give --model FILE (a LLaMA config.json), or --from / --megatron-args");
    if (!a.was_given("--seq")) throw UserError("plan: give --seq N (the sequence length)");
    if (!a.was_given("--gbs")) throw UserError("plan: give --gbs N (the global batch size)");
    options.model = load_llama_config(a.model_file);
  }
  if (!a.emit.empty() && a.emit != "megatron-args")
    throw UserError("--emit " + a.emit + ": the one launch format plan writes is megatron-args");
  options.gpus = a.gpus;
  options.global_batch = a.global_batch;
  options.seq_len = a.seq_len;
  options.micro_batches = a.micro_batches;
  options.virtual_stages = a.virtual_stages;
  options.context_parallel = a.context_parallel;
  options.precisions.clear();
  for (const auto& p : a.precisions) options.precisions.push_back(parse_precision(p).name);
  options.recipes.clear();
  for (const auto& r : a.recipes) options.recipes.push_back(parse_recipe_option(r, "--recipes"));
  if (a.all_recipes) options.recipes = predict::modelled_recipes();
  if (!a.was_given("--framework") && !answer->from_run)  // issue 44: a GPU question gets the GPU's framework
    a.framework =
        predict::framework::to_string(predict::default_framework(a.hardware, !a.source.empty() || !a.efficiency.empty()));
  if (a.memory_margin_gib >= 0) space.memory_margin_bytes = a.memory_margin_gib * 1024.0 * 1024.0 * 1024.0;
  answer->question.source = a.source;
  set_launch_line(a, *answer);
  answer->question.nodes = a.nodes;
  const bool megatron = predict::framework::parse_framework(a.framework) == predict::framework::Framework::kMegatronTe;
  answer->question.framework = predict::framework::to_string(predict::framework::parse_framework(a.framework));
  if (!megatron && !a.fitted.empty()) throw UserError("--fitted needs --framework megatron-te (terms fitted on logs)");
  choose_tie(a, megatron, options);
  answer->top = a.top;
  options.on_progress = a.on_progress;
  if (megatron) {
    plan_framework(a, recipes_fixed, space, *answer);
  } else {
    plan_own_trainer(a, *answer);
  }
  options.on_progress = nullptr;  // the answer keeps no hook of the front end's
  if (answer->result.entries.empty()) throw UserError("plan: no candidate to consider: " + answer->result.empty_reason);
  return answer;
}

std::string plan_json(const PlanAnswer& answer) {
  const std::string text = validate::plan_json(answer.options, answer.question, answer.result, answer.top);
  return answer.from_run ? with_input_json(text, *answer.from_run, answer.overridden) : text;
}

std::vector<std::string> plan_preamble_lines(const PlanAnswer& answer) {
  std::vector<std::string> lines;
  const int64_t per_node = answer.options.ranks_per_node;
  if (answer.options.target == nullptr && per_node > 0 && answer.question.framework == "itertime") {
    lines.push_back("placement: " + std::to_string(per_node) + " rank" + (per_node == 1 ? "" : "s") +
                    " per node, filled in rank order (TP inside a node first, then CP, DP, PP)");
  }
  if (answer.from_run)
    for (const std::string& line : user_run_lines(*answer.from_run, answer.overridden)) lines.push_back(line);
  return lines;
}

}  // namespace itertime::query
