// plan_query.hpp: the plan (the fastest legal, memory-feasible configurations of a model on N GPUs) as a
// typed request and a typed answer, for both front ends (`itertime plan`, launcher/cmd_plan.cpp; the
// Python module's plan).
// Invariants:
//  - Every rule of the verb lives here once: what --from supplies and a flag beside it overrides, the
//    recipes by framework, the tie rule's uncertainty (--tie-pct; else megatron-te's MAPE on published
//    figures; else the calibration's stored validation MAPE; else kOwnTrainerTieFraction), --emit.
//  - A search space with no candidate at all is a UserError with the planner's one-line reason.
//  - The answer owns everything its options point into (the fitted model, the hardware choice): it is
//    handed out behind a pointer and never copied.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "formats/user_run.hpp"
#include "predict/fit_model.hpp"
#include "predict/plan.hpp"
#include "predict/resolver/target_device.hpp"
#include "query/query_options.hpp"
#include "validate/plan_report.hpp"

namespace itertime::query {

struct PlanRequest {
  std::string source, model_file;
  FromOptions from;  // --from FILE / --from-format / --megatron-args
  std::string emit;  // --emit megatron-args
  int gpus = 0, global_batch = 0, seq_len = 0, top = 10;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  std::vector<int> virtual_stages = {1};
  std::vector<int> context_parallel = {1};
  std::vector<std::string> precisions = {"amp-bf16"};
  std::vector<std::string> recipes = {"plain"};  // not given: plain (megatron-te: NeMo's recipes)
  bool all_recipes = false;
  double device_memory_gib = 0;
  double memory_margin_gib = -1;  // -1: FrameworkPlanSpace's default (issue 44)
  std::string hardware, efficiency;
  std::string fitted;  // the framework model's terms fitted on logs (megatron-te)
  int nodes = 0;
  int64_t ranks_per_node = -1;         // on a calibration (-1: not given, its own)
  std::string framework = "itertime";  // not given (nor by --from): default_framework's, by the device
  std::vector<std::string> fp8_recipes = {"delayed"};
  double tie_pct = 10;  // used when given (--tie-pct); else the default of the framework (above)
  // The front end's progress hook (predict::PlanOptions::on_progress), used during the search only; none:
  // no report.
  std::function<void(const predict::PlanProgress&)> on_progress;
  // The options the user gave, by their command-line names ("--gbs", "--recipes", ...).
  std::set<std::string> given;
  bool was_given(const std::string& flag) const { return given.count(flag) != 0; }
};

struct PlanAnswer {
  predict::PlanOptions options;
  validate::PlanQuestion question;
  predict::PlanResult result;
  int top = 10;
  std::optional<formats::UserRun> from_run;
  std::vector<std::string> overridden;
  // Owned here: options.target points into choice.
  predict::FittedModel model;
  predict::HardwareChoice choice;
};

std::unique_ptr<PlanAnswer> answer_plan(const PlanRequest& request);

// `itertime plan --json`'s object (question, summary, the first `top` candidates, the --from input).
std::string plan_json(const PlanAnswer& answer);

// The lines printed before the plan's table: what --from read, and on a calibration placed on several
// ranks per node, how ranks fill the nodes.
std::vector<std::string> plan_preamble_lines(const PlanAnswer& answer);

}  // namespace itertime::query
