// prediction_query.hpp: the Python module's predict and plan: a query with every option of `itertime
// predict` / `plan` as a typed field, answered by the libraries those verbs call, as the same JSON their
// --json prints (validate/prediction_report.hpp's prediction_json, plan_report.hpp's plan_json).
// Invariants:
//  - The numbers are the libraries' (predict::predict, framework::predict_framework, plan_search,
//    plan_framework_search): a query and the same options on the command line give the same JSON.
//  - Options the command line leaves to defaults are explicit here (gbs, precision, tie_pct); no
//    "defaults" text is produced (the JSON's "defaults" is empty).
//  - A user error (a file, a name, a layout, a prediction the answer checks refuse) is a UserError with
//    its one line; nothing is printed.
//  - TEMPORARY composition: the record assembly of launcher/cmd_predict.cpp (run_predict,
//    run_framework_predict) and cmd_plan.cpp (the tie rule) lives in the launcher, not in a library; the
//    calls below follow it and shrink to one call each once it moves into validate/ (issue 34).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace itertime::python {

struct PredictQuery {
  std::string model_file;  // LLaMA config.json
  std::string source;      // a fitted model or calibration .h5 ("" with hardware / framework megatron-te)
  std::string hardware, efficiency;
  std::string framework = "itertime";  // itertime | megatron-te
  int dp = 1, tp = 1, pp = 1, cp = 1, vp = 1, micro_batch = 1, global_batch = 0, seq_len = 0;
  std::string precision = "amp-bf16";
  std::string recipe = "plain";
  bool blind = false, raw = false, allow_implausible = false;
  double device_memory_gib = 0;  // 0: the GPU description's memory
  std::string fp8_recipe = "delayed";
  bool tp_comm_overlap = false, fp8_param_gather = false;
  int64_t ranks_per_node = -1;  // --ranks-per-node on a calibration (-1: its own; 0: one node)
};

// `itertime predict --json`'s object.
nlohmann::json predict_json(const PredictQuery& query);

struct PlanQuery {
  std::string model_file, source, hardware, efficiency;
  std::string framework = "itertime";
  int gpus = 0, nodes = 0, global_batch = 0, seq_len = 0, top = 10;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  std::vector<int> virtual_stages = {1};
  std::vector<int> context_parallel = {1};
  std::vector<std::string> precisions = {"amp-bf16"};
  std::optional<std::vector<std::string>> recipes;  // unset: plain (megatron-te: NeMo's recipes)
  bool all_recipes = false;
  double device_memory_gib = 0;
  std::vector<std::string> fp8_recipes = {"delayed"};
  std::optional<double> tie_pct;  // unset: megatron-te's published MAPE, else the calibration's stored MAPE
};

// `itertime plan --json`'s object (question, summary, the first `top` candidates).
nlohmann::json plan_json(const PlanQuery& query);

}  // namespace itertime::python
