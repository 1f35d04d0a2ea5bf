// cmd_predict.cpp: `itertime fit`, `predict`, `validate` and `plan`: options, then the libraries; the
// reporters are validate/prediction_report and validate/validation_report. No MPI, no LibTorch.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
#include "launcher/commands.hpp"
#include "predict/fit_model.hpp"
#include "predict/framework_plan.hpp"
#include "predict/memory/memory_model.hpp"
#include "predict/plan.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/target_device.hpp"
#include "predict/throughput.hpp"
#include "validate/prediction_report.hpp"
#include "validate/validation_run.hpp"

namespace itertime::launcher {
namespace {

struct PredictArgs {
  std::string source;
  std::string model_file;
  int dp = 1, tp = 1, pp = 1, cp = 1, vp = 1, micro_batch = 1, global_batch = 1, seq_len = 0;
  std::string precision = "fp32";
  std::string recipe = "plain";
  bool blind = false, raw = false, json = false;
  double device_memory_gib = 0;
  std::string hardware;                // --hardware: a data/hardware description (another than the calibration's: described)
  std::string efficiency;              // --efficiency: operator efficiencies to carry to a described device
  int nodes = 0;                       // --nodes: must agree with the layout on the described device
  std::string framework = "itertime";  // --framework: itertime's own trainer, or megatron-te
  std::string fp8_recipe = "delayed";  // --fp8-recipe (megatron-te, --precision fp8)
  bool tp_comm_overlap = false;        // --tp-comm-overlap (megatron-te)
  bool fp8_param_gather = false;       // --fp8-param-gather (megatron-te, --precision fp8)
};

// --nodes N on a GPU description: the layout's ranks must fill exactly N nodes of gpus_per_node.
void check_nodes(int nodes, int64_t ranks, const std::optional<HardwareSpec>& hardware) {
  if (nodes == 0) return;
  if (nodes < 0) throw UserError("--nodes " + std::to_string(nodes) + ": give a positive node count");
  if (!hardware || !hardware->gpus_per_node) throw UserError("--nodes needs --hardware with a GPU description (GPUs per node)");
  const int64_t per_node = *hardware->gpus_per_node;
  if (ranks != int64_t{nodes} * per_node) {
    throw UserError("--nodes " + std::to_string(nodes) + ": " + std::to_string(nodes) + " nodes of " + hardware->name + " hold " +
                    std::to_string(int64_t{nodes} * per_node) + " GPUs, the layout has " + std::to_string(ranks) + " ranks");
  }
}

// --device-memory-gib when given, else a GPU description's memory (a CPU node's is shared by its ranks: none).
double device_memory_bytes(double gib, const std::optional<HardwareSpec>& hardware) {
  if (gib > 0) return gib * static_cast<double>(1ull << 30);
  if (hardware && hardware->kind == DeviceKind::kGpu) return static_cast<double>(hardware->memory_bytes);
  return 0;
}

// A recipe as the CLI takes it: "plain" or recipe_text's form ("sp+vp+rc-full"); a UserError naming the option.
TrainingTechniques parse_recipe_option(const std::string& text, const std::string& option) {
  if (text == "plain") return {};
  try {
    return parse_recipe_text(text);
  } catch (const UserError& error) {
    throw UserError(option + " " + text + ": " + error.what());
  }
}

// `path` must not exist unless `force`; refused before anything is written.
void refuse_existing(const std::string& path, bool force, const std::string& option) {
  std::error_code error;
  if (!force && std::filesystem::exists(path, error))
    throw UserError(option + " " + path + ": file exists; pass --force to overwrite it");
}

// Written to PATH.tmp and renamed: never a half-written file under the real name.
void write_text_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!(out << text) || !out.flush()) throw UserError(path + ": cannot be written; check the folder and permissions");
  }
  std::filesystem::rename(temporary, path);
}

// --framework megatron-te: the stage Megatron-Core with Transformer Engine runs, on a GPU description's
// published kernel figures; no calibration.
int run_framework_predict(const PredictArgs& a, const LlamaSpec& spec, const ParallelConfig& config) {
  if (!a.source.empty()) {
    throw UserError(
        "--framework megatron-te predicts from the GPU's published kernel figures: give no calibration or model file (" +
        a.source + ")");
  }
  if (a.blind || !a.efficiency.empty()) throw UserError("--framework megatron-te takes neither --blind nor --efficiency");
  const predict::framework::FrameworkTarget target = predict::framework_target(a.hardware);
  check_nodes(a.nodes, config.world_size(), target.hardware);
  predict::framework::FrameworkRequest request;
  request.shape = predict::framework::shape_of(spec);
  request.config = config;
  request.recipe.precision = parse_precision(a.precision).name;
  request.recipe.fp8_recipe = predict::framework::parse_fp8_recipe(a.fp8_recipe);
  request.recipe.techniques = at_dp(parse_recipe_option(a.recipe, "--recipe"), config.reduction_ranks());
  request.recipe.tp_comm_overlap = a.tp_comm_overlap;
  request.recipe.fp8_param_gather = a.fp8_param_gather;
  if (a.fp8_param_gather && request.recipe.precision != PrecisionName::kFp8) {
    throw UserError("--fp8-param-gather needs --precision fp8");
  }
  const predict::framework::FrameworkOutcome outcome = predict::framework::predict_framework(target, request);
  if (!outcome.ok()) throw UserError(outcome.reason);
  const int64_t peak_bytes = outcome.prediction->peak_memory_bytes;  // megatron_memory's, in the prediction
  const double memory_limit = device_memory_bytes(a.device_memory_gib, target.hardware);
  validate::PredictionRecord record;
  record.source = "described " + target.hardware.name + ", framework megatron-te";
  record.described =
      "Megatron-Core + Transformer Engine stage (fused attention, norms, RoPE, SwiGLU, cross-entropy); kernels from " +
      target.kernels.path + " (published figures), communication from NCCL's cost model of the description; no calibration";
  record.model_name = spec.name;
  record.config = config;
  record.precision = a.precision;
  record.recipe = recipe_label(request.recipe.techniques) +
                  (predict::framework_switches(request.recipe).empty() ? "" : " " + predict::framework_switches(request.recipe));
  record.attention = "";  // the described text names TE's fused attention
  record.prediction = predict::to_prediction(*outcome.prediction);
  record.peak_memory_bytes = peak_bytes;
  record.exceeds_device_memory = memory_limit > 0 && static_cast<double>(peak_bytes) > memory_limit;
  record.throughput = predict::throughput(spec, config, request.recipe.precision, record.prediction.total_us, &target.hardware);
  record.hardware = target.hardware.name;
  if (a.json) {
    std::printf("%s\n", validate::prediction_json(record).c_str());
  } else {
    validate::print_prediction(record);
  }
  return 0;
}

int run_predict(const PredictArgs& a) {
  const LlamaSpec spec = load_llama_config(a.model_file);
  ParallelConfig config{a.dp, a.tp, a.pp, a.micro_batch, a.global_batch, a.seq_len};
  config.cp = a.cp;
  config.vp = a.vp;
  config.require_valid(spec, 0);
  if (predict::framework::parse_framework(a.framework) == predict::framework::Framework::kMegatronTe) {
    return run_framework_predict(a, spec, config);
  }
  if (a.tp_comm_overlap || a.fp8_param_gather || a.fp8_recipe != "delayed") {
    throw UserError("--tp-comm-overlap, --fp8-recipe and --fp8-param-gather need --framework megatron-te");
  }
  const PrecisionPolicy& policy = parse_precision(a.precision);
  const predict::FittedModel model = a.source.empty() ? predict::FittedModel{} : predict::load_or_fit(a.source);
  const predict::HardwareChoice choice = predict::choose_hardware(a.source.empty() ? nullptr : &model, a.hardware, a.efficiency);
  const std::optional<HardwareSpec>& hardware = choice.hardware;
  const predict::TargetDevice* target = choice.target ? &*choice.target : nullptr;
  check_nodes(a.nodes, config.world_size(), hardware);
  predict::PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;  // stages never traced are built from the model
  request.config = config;
  request.precision = policy.name;
  request.blind = a.blind;
  request.techniques = parse_recipe_option(a.recipe, "--recipe");
  request.calibrated = !a.raw;
  predict::StageResolver resolver = target != nullptr ? predict::StageResolver(model, target)
                                                      : predict::StageResolver(model, predict::StagePolicy::kTracedThenBuilt);
  const predict::PredictOutcome outcome = predict::predict(resolver, request);
  if (!outcome.ok()) throw UserError(outcome.reason);  // the CLI boundary: a prediction that cannot be made
  const predict::Prediction& p = *outcome.prediction;
  const int64_t peak_bytes = predict::peak_memory_bytes(
      spec, config, policy, target != nullptr ? target->attention : model.attention, request.techniques);
  const double memory_limit = device_memory_bytes(a.device_memory_gib, hardware);
  const bool too_big = memory_limit > 0 && static_cast<double>(peak_bytes) > memory_limit;
  validate::PredictionRecord record;
  record.source = target != nullptr ? "described " + target->hardware.name : a.source;
  if (target != nullptr) {
    const std::string& from = target->operators.fitted_from;
    const bool figures = from.rfind("published kernel figures", 0) == 0;
    record.described = "operator efficiencies " + std::string(figures ? "from " : "fitted on ") + from +
                       ", communication from NCCL's cost model of the description; no ground-truth factor";
  }
  record.model_name = spec.name;
  record.config = config;
  record.precision = a.precision;
  record.blind = a.blind;
  record.recipe = recipe_label(request.techniques);
  record.attention = target != nullptr ? to_string(target->attention) : to_string(model.attention);
  record.libtorch_version = target != nullptr ? "" : model.libtorch_version;
  record.prediction = p;
  record.peak_memory_bytes = peak_bytes;
  record.exceeds_device_memory = too_big;
  if (target == nullptr) record.regression_check = predict::pooled_regression_check(model);
  record.throughput = predict::throughput(spec, config, policy.name, p.total_us, hardware ? &*hardware : nullptr);
  record.hardware = hardware ? hardware->name : "";
  if (a.json) {
    std::printf("%s\n", validate::prediction_json(record).c_str());
  } else {
    validate::print_prediction(record);
  }
  return 0;
}

}  // namespace

void register_predict(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  // fit
  CLI::App* fit =
      app.add_subcommand("fit", "Fit the precision-aware model from a calibration file and save it (Boost.Serialization)");
  auto fit_in = std::make_shared<std::string>();
  auto fit_out = std::make_shared<std::string>();
  auto fit_force = std::make_shared<bool>(false);
  fit->add_option("CAL", *fit_in, "Calibration HDF5 file (with /comm and /ops)")->required();
  fit->add_option("-o,--output", *fit_out, "Where to save the fitted model")->required();
  fit->add_flag("--force", *fit_force, "Overwrite an existing model file");
  auto efficiency_out = std::make_shared<std::string>();
  fit->add_option("--efficiency-out", *efficiency_out,
                  "Also write the operator efficiencies (JSON) that `predict --hardware` carries to other devices");
  actions.emplace_back(fit, [fit_in, fit_out, fit_force, efficiency_out](Context&) {
    const predict::FittedModel model = predict::fit_model(*fit_in);
    if (!efficiency_out->empty() && model.roofline.empty()) {
      throw UserError("--efficiency-out " + *efficiency_out + ": " + *fit_in +
                      " has no operator efficiencies (its devices match no hardware description this build ships)");
    }
    if (!efficiency_out->empty()) refuse_existing(*efficiency_out, *fit_force, "--efficiency-out");
    predict::save_model(model, *fit_out, *fit_force);
    if (!efficiency_out->empty()) write_text_file(*efficiency_out, predict::roofline_to_json(model.roofline));
    validate::print_fit_summary(model, *fit_in, *fit_out);
    return 0;
  });

  // predict
  CLI::App* predict_cmd = app.add_subcommand("predict", "Predict the iteration time and its breakdown of one configuration");
  auto args = std::make_shared<PredictArgs>();
  predict_cmd->add_option("SOURCE", args->source,
                          "A model from `itertime fit`, or a calibration .h5 (fitted on the fly); optional with --hardware");
  predict_cmd->add_option("--model", args->model_file, "LLaMA config.json (the model that was traced)")->required();
  predict_cmd->add_option("--dp", args->dp, "Data-parallel degree")->capture_default_str();
  predict_cmd->add_option("--tp", args->tp, "Tensor-parallel degree")->capture_default_str();
  predict_cmd->add_option("--pp", args->pp, "Pipeline-parallel degree")->capture_default_str();
  predict_cmd->add_option("--cp", args->cp, "Context-parallel degree (the sequence split over cp ranks)")->capture_default_str();
  predict_cmd->add_option("--vp", args->vp, "Virtual pipeline stages (model chunks) per pipeline rank: > 1 is interleaved 1F1B")
      ->capture_default_str();
  predict_cmd->add_option("--mbs", args->micro_batch, "Micro-batch size")->capture_default_str();
  predict_cmd->add_option("--gbs", args->global_batch, "Global batch size")->capture_default_str();
  predict_cmd->add_option("--seq", args->seq_len, "Sequence length")->required();
  predict_cmd->add_option("--precision", args->precision, "fp32, tf32, bf16, fp16, amp-bf16 or amp-fp16")->capture_default_str();
  predict_cmd
      ->add_option("--recipe", args->recipe,
                   "Training techniques: plain, or sp, vp, dopt, rc-sel|rc-full, ovl, opg joined by '+' (e.g. sp+vp+rc-full)")
      ->capture_default_str();
  predict_cmd->add_flag("--blind", args->blind, "Precision-blind baseline (fp32 traces and messages)");
  predict_cmd->add_flag("--raw", args->raw, "Without the calibration factor fitted on ground truth");
  predict_cmd->add_flag("--json", args->json, "Print JSON instead of a table");
  predict_cmd->add_option("--device-memory-gib", args->device_memory_gib,
                          "Flag configurations whose peak memory exceeds this (default: the GPU description's memory)");
  predict_cmd->add_option("--hardware", args->hardware,
                          "Hardware description (data/hardware): the calibration's own (default) for MFU and the device memory, "
                          "or another device, predicted from its description with the calibration's operator efficiencies");
  predict_cmd->add_option(
      "--efficiency", args->efficiency,
      "Operator efficiencies to carry to --hardware (a file from `itertime fit --efficiency-out`; default on a "
      "GPU: a GPU calibration's, else its published kernel figures; on a CPU node: the calibration's, or "
      "data/efficiency/default.json)");
  predict_cmd->add_option("--nodes", args->nodes, "With --hardware: the nodes the layout fills (checked against its ranks)");
  predict_cmd
      ->add_option("--framework", args->framework,
                   "itertime (its own LibTorch trainer, as calibrated) or megatron-te (Megatron-Core with Transformer "
                   "Engine on --hardware, from published kernel figures)")
      ->capture_default_str();
  predict_cmd->add_option("--fp8-recipe", args->fp8_recipe, "megatron-te with --precision fp8: delayed or current scaling")
      ->capture_default_str();
  predict_cmd->add_flag("--fp8-param-gather", args->fp8_param_gather,
                        "megatron-te with --precision fp8: fp8 parameters gathered in fp8 (NeMo's fp8 recipe)");
  predict_cmd->add_flag("--tp-comm-overlap", args->tp_comm_overlap,
                        "megatron-te: TP collectives pipelined with their GEMMs (TE userbuffers; needs sp)");
  actions.emplace_back(predict_cmd, [args](Context&) { return run_predict(*args); });

  // validate
  CLI::App* validate_cmd = app.add_subcommand(
      "validate", "Predict every ground-truth configuration and report MAPE (leave-one-tuple-out or -precision-out)");
  auto cal = std::make_shared<std::string>();
  auto out_dir = std::make_shared<std::string>();
  auto no_store = std::make_shared<bool>(false);
  auto compute = std::make_shared<bool>(false);
  auto memory_model_file = std::make_shared<std::string>();
  auto model_file = std::make_shared<std::string>();
  auto holdout = std::make_shared<std::string>("tuple");
  validate_cmd->add_option("CAL", *cal, "Calibration HDF5 file with /comm, /ops and /groundtruth")->required();
  validate_cmd->add_option("--out-dir", *out_dir,
                           "Folder for validation.csv, .json and .svg (default: CAL's folder/<stem>-validation)");
  validate_cmd->add_flag("--no-store", *no_store, "Do not write /validation into the calibration file");
  validate_cmd->add_flag("--compute-report", *compute,
                         "Also compare each stage's summed profiled operator times with its measured compute time");
  validate_cmd->add_option(
      "--memory-report", *memory_model_file,
      "Also compare the memory model with the measured peak tensor bytes, for the model in this LLaMA config.json");
  validate_cmd->add_option("--model", *model_file,
                           "LLaMA config.json of the ground truth, for the builder-only predictions "
                           "(default: the --memory-report file, else the path /meta groundtruth_model names, when readable)");
  validate_cmd
      ->add_option("--holdout", *holdout,
                   "What each configuration's fitted terms leave out: tuple (leave-one-tuple-out), precision "
                   "(leave-one-precision-out: the unseen-precision setting) or both")
      ->capture_default_str();
  actions.emplace_back(validate_cmd, [cal, out_dir, no_store, compute, memory_model_file, model_file, holdout](Context&) {
    validate::ValidationRunOptions options;
    options.calibration_file = *cal;
    options.report_dir = *out_dir;
    options.store_in_calibration = !*no_store;
    options.compute_report = *compute;
    if (*holdout != "tuple" && *holdout != "precision" && *holdout != "both") {
      throw UserError("--holdout " + *holdout + ": use tuple, precision or both");
    }
    options.holdouts = *holdout == "both"
                           ? std::vector<validate::Holdout>{validate::Holdout::kTuple, validate::Holdout::kPrecision}
                           : std::vector<validate::Holdout>{validate::parse_holdout(*holdout)};
    // Read the model configs first: a wrong path is refused before any work.
    if (!memory_model_file->empty()) {
      options.model = load_llama_config(*memory_model_file);
      options.memory_report = true;
    }
    if (!model_file->empty()) options.model = load_llama_config(*model_file);
    validate::run_validation(options);
    return 0;
  });
}

}  // namespace itertime::launcher

namespace itertime::launcher {

void register_plan(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* plan_cmd = app.add_subcommand("plan", "List the fastest legal, memory-feasible configurations of a model on N GPUs");
  struct PlanArgs {
    std::string source, model_file;
    int gpus = 0, global_batch = 0, seq_len = 0, top = 10;
    std::vector<int> micro_batches = {1, 2, 4, 8};
    std::vector<int> virtual_stages = {1};
    std::vector<int> context_parallel = {1};
    std::vector<std::string> precisions = {"amp-bf16"};
    std::vector<std::string> recipes = {"plain"};
    bool all_recipes = false;
    double device_memory_gib = 0;
    std::string hardware, efficiency;
    int nodes = 0;
    bool json = false;
    std::string framework = "itertime";
    std::vector<std::string> fp8_recipes = {"delayed"};
  };
  auto a = std::make_shared<PlanArgs>();
  plan_cmd->add_option("SOURCE", a->source, "A model from `itertime fit`, or a calibration .h5; optional with --hardware");
  plan_cmd->add_option("--model", a->model_file, "LLaMA config.json")->required();
  CLI::Option* gpus = plan_cmd->add_option("--gpus", a->gpus, "Number of GPUs (ranks)");
  CLI::Option* nodes = plan_cmd->add_option("--nodes", a->nodes,
                                            "Number of nodes of the --hardware description (GPUs: nodes x its GPUs per node)");
  gpus->excludes(nodes);
  plan_cmd->add_option("--gbs", a->global_batch, "Global batch size")->required();
  plan_cmd->add_option("--seq", a->seq_len, "Sequence length")->required();
  plan_cmd->add_option("--mbs", a->micro_batches, "Micro-batch sizes to consider")->delimiter(',')->capture_default_str();
  plan_cmd->add_option("--cp", a->context_parallel, "Context-parallel degrees to consider (each dividing --gpus)")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd
      ->add_option("--vp", a->virtual_stages,
                   "Virtual pipeline stages per pipeline rank to consider (interleaved 1F1B when > 1; only with pp > 1)")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd->add_option("--precisions", a->precisions, "Precisions to consider")->delimiter(',')->capture_default_str();
  plan_cmd
      ->add_option("--recipes", a->recipes,
                   "Training recipes to consider: plain, or techniques joined by '+' (sp, vp, dopt, rc-sel|rc-full, ovl, opg), "
                   "e.g. plain,sp+vp,sp+vp+rc-full")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd->add_flag("--all-recipes", a->all_recipes,
                     "Consider every recipe the predictor models (sequence parallelism, vocabulary-parallel head, "
                     "distributed optimizer, recompute)");
  plan_cmd->add_option("--device-memory-gib", a->device_memory_gib,
                       "Device memory; larger configurations are infeasible (default: the GPU description's memory)");
  plan_cmd->add_option("--hardware", a->hardware,
                       "Hardware description (data/hardware): the calibration's own (default) for MFU and the device memory, "
                       "or another device, predicted from its description with the calibration's operator efficiencies");
  plan_cmd->add_option("--efficiency", a->efficiency,
                       "Operator efficiencies to carry to --hardware (default on a GPU: a GPU calibration's, else its published "
                       "kernel figures; on a CPU node: the calibration's, or data/efficiency/default.json)");
  plan_cmd->add_option("--top", a->top, "How many to list")->capture_default_str();
  plan_cmd
      ->add_option("--framework", a->framework,
                   "itertime (its own trainer) or megatron-te (Megatron-Core + Transformer Engine on --hardware, from "
                   "published kernel figures; recipes default to NeMo's: sp+dopt+ovl+opg with each recompute)")
      ->capture_default_str();
  plan_cmd->add_option("--fp8-recipes", a->fp8_recipes, "megatron-te: fp8 scaling recipes to consider (delayed, current)")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd->add_flag("--json", a->json, "Print JSON");
  actions.emplace_back(plan_cmd, [a, plan_cmd](Context&) {
    predict::PlanOptions options;
    options.model = load_llama_config(a->model_file);
    options.gpus = a->gpus;
    options.global_batch = a->global_batch;
    options.seq_len = a->seq_len;
    options.micro_batches = a->micro_batches;
    options.virtual_stages = a->virtual_stages;
    options.context_parallel = a->context_parallel;
    options.precisions.clear();
    for (const auto& p : a->precisions) options.precisions.push_back(parse_precision(p).name);
    options.recipes.clear();
    for (const auto& r : a->recipes) options.recipes.push_back(parse_recipe_option(r, "--recipes"));
    if (a->all_recipes) options.recipes = predict::modelled_recipes();
    if (predict::framework::parse_framework(a->framework) == predict::framework::Framework::kMegatronTe) {
      if (!a->source.empty())
        throw UserError("plan --framework megatron-te takes no calibration or model file (" + a->source + ")");
      const predict::framework::FrameworkTarget target = predict::framework_target(a->hardware);
      if (!plan_cmd->get_option("--recipes")->count() && !a->all_recipes) options.recipes = predict::megatron_recipes();
      predict::FrameworkPlanSpace space;
      space.fp8_recipes.clear();
      for (const auto& r : a->fp8_recipes) space.fp8_recipes.push_back(predict::framework::parse_fp8_recipe(r));
      options.hardware = target.hardware;
      options.gpus = a->nodes > 0 ? a->nodes * target.hardware.gpus_per_node.value_or(8) : a->gpus;
      if (options.gpus < 1) throw UserError("plan: give --gpus N, or --nodes N");
      options.device_memory_bytes = device_memory_bytes(a->device_memory_gib, options.hardware);
      const auto entries = predict::plan_framework(options, target, space);
      if (a->json) {
        std::printf("%s\n", validate::plan_json(entries).c_str());
      } else {
        validate::print_plan(options, entries, a->top);
      }
      return 0;
    }
    const predict::FittedModel model = a->source.empty() ? predict::FittedModel{} : predict::load_or_fit(a->source);
    const predict::HardwareChoice choice =
        predict::choose_hardware(a->source.empty() ? nullptr : &model, a->hardware, a->efficiency);
    options.hardware = choice.hardware;
    options.target = choice.target ? &*choice.target : nullptr;
    if (a->nodes > 0) {
      if (!choice.hardware || !choice.hardware->gpus_per_node)
        throw UserError("--nodes needs --hardware with a GPU description (GPUs per node)");
      options.gpus = a->nodes * *choice.hardware->gpus_per_node;
    } else if (a->gpus < 1) {
      throw UserError("plan: the number of GPUs must be positive: give --gpus N, or --hardware NAME --nodes N");
    }
    options.device_memory_bytes = device_memory_bytes(a->device_memory_gib, options.hardware);
    const auto entries = predict::plan(model, options);
    if (a->json) {
      std::printf("%s\n", validate::plan_json(entries).c_str());
    } else {
      validate::print_plan(options, entries, a->top);
    }
    return 0;
  });
}

}  // namespace itertime::launcher
