// cmd_predict.cpp: `itertime fit` and `predict`: options, then the libraries; the reporter is
// validate/prediction_report. No MPI, no LibTorch. (validate: cmd_validate.cpp; plan: cmd_plan.cpp.)
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
#include "launcher/commands.hpp"
#include "launcher/predict_options.hpp"
#include "predict/answer_check.hpp"
#include "predict/fit_model.hpp"
#include "predict/framework/framework_fit.hpp"
#include "predict/framework/megatron_memory.hpp"
#include "predict/framework_plan.hpp"
#include "predict/memory/memory_model.hpp"
#include "predict/memory_split.hpp"
#include "predict/prediction_range.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/target_device.hpp"
#include "predict/throughput.hpp"
#include "validate/prediction_report.hpp"
#include "validate/validation_mape.hpp"

namespace itertime::launcher {
namespace {

struct PredictArgs {
  std::string source;
  std::string model_file;
  int dp = 1, tp = 1, pp = 1, cp = 1, vp = 1, micro_batch = 1, seq_len = 0;
  int global_batch = 0;                             // gbs_given false: the smallest the layout allows (smallest_global_batch)
  std::string precision;                            // precision_given false: default_precision's
  bool gbs_given = false, precision_given = false;  // whether --gbs / --precision were on the command line
  bool allow_implausible = false;                   // --allow-implausible: print a refused answer, flagged
  std::string recipe = "plain";
  bool blind = false, raw = false, json = false;
  double device_memory_gib = 0;
  std::string hardware;                // --hardware: a data/hardware description (another than the calibration's: described)
  std::string efficiency;              // --efficiency: operator efficiencies to carry to a described device
  std::string fitted;                  // --fitted: the framework model's terms fitted on logs (megatron-te)
  int nodes = 0;                       // --nodes: must agree with the layout on the described device
  int64_t ranks_per_node = -1;         // --ranks-per-node on a calibration (-1: not given, its own)
  std::string framework = "itertime";  // --framework: itertime's own trainer, or megatron-te
  std::string fp8_recipe = "delayed";  // --fp8-recipe (megatron-te, --precision fp8)
  bool tp_comm_overlap = false;        // --tp-comm-overlap (megatron-te)
  bool fp8_param_gather = false;       // --fp8-param-gather (megatron-te, --precision fp8)
  int gpus = 0;                        // --gpus: dp = gpus / (tp x pp x cp) when --dp is not given
  FromOptions from;                    // --from FILE / --from-format / --megatron-args
  std::optional<formats::UserRun> from_run;  // what --from read
  std::vector<std::string> overridden;       // flags given beside --from that changed its values
};

// --from: the run's values where no flag was given; a flag given beside it overrides the file's value
// (a what-if: "my run at tp 4"), and the output lists each such override. --model is refused beside it
// (the model comes from the file). dp: --dp, else --gpus / (tp x pp x cp), else the file's world size.
void apply_user_run(const std::map<std::string, bool>& given, PredictArgs& a, LlamaSpec& spec) {
  const formats::UserRun& run = *a.from_run;
  if (!a.model_file.empty())
    throw UserError("--model " + a.model_file + " beside --from/--megatron-args: the model comes from " + run.source +
                    "; give one");
  const ParallelConfig& c = run.config;
  const auto take = [&](const std::string& flag, auto& value, const auto& file_value, const std::string& shown_value,
                        const std::string& file_text) {
    if (given.at(flag)) {
      if (!(value == file_value)) a.overridden.push_back(flag + " " + shown_value + " (" + run.source + ": " + file_text + ")");
    } else {
      value = file_value;
    }
  };
  take("--tp", a.tp, c.tp, std::to_string(a.tp), std::to_string(c.tp));
  take("--pp", a.pp, c.pp, std::to_string(a.pp), std::to_string(c.pp));
  take("--cp", a.cp, c.cp, std::to_string(a.cp), std::to_string(c.cp));
  take("--vp", a.vp, c.vp, std::to_string(a.vp), std::to_string(c.vp));
  take("--mbs", a.micro_batch, c.micro_batch, std::to_string(a.micro_batch), std::to_string(c.micro_batch));
  take("--seq", a.seq_len, c.seq_len, std::to_string(a.seq_len), std::to_string(c.seq_len));
  const int model_ranks = a.tp * a.pp * a.cp;
  if (!given.at("--dp") && !given.at("--gpus")) {
    if (!run.data_parallel_given)
      throw UserError(run.source + " fixes no data-parallel size (no world size): give --gpus N or --dp N");
    a.dp = c.dp;
  } else if (given.at("--dp") && run.data_parallel_given && a.dp != c.dp) {
    a.overridden.push_back("--dp " + std::to_string(a.dp) + " (" + run.source + ": " + std::to_string(c.dp) + ")");
  }
  if (given.at("--gpus") && !given.at("--dp")) {
    if (a.gpus < 1 || a.gpus % model_ranks != 0)
      throw UserError("--gpus " + std::to_string(a.gpus) + ": not a multiple of tp x pp x cp = " + std::to_string(model_ranks));
    a.dp = a.gpus / model_ranks;
  }
  if (given.at("--gbs")) {
    if (run.global_batch_given && a.global_batch != c.global_batch)
      a.overridden.push_back("--gbs " + std::to_string(a.global_batch) + " (" + run.source + ": " +
                             std::to_string(c.global_batch) + ")");
  } else {
    a.global_batch =
        run.global_batch_given ? c.global_batch : (run.batch_per_dp_rank > 0 ? run.batch_per_dp_rank : a.micro_batch) * a.dp;
    a.gbs_given = true;
  }
  const std::string precision = to_string(run.recipe.precision);
  take("--precision", a.precision, precision, a.precision, precision);
  a.precision_given = true;
  const std::string recipe = run.recipe.techniques.any() ? recipe_text(run.recipe.techniques) : "plain";
  take("--recipe", a.recipe, recipe, a.recipe, recipe);
  const std::string framework = predict::framework::to_string(run.framework);
  take("--framework", a.framework, framework, a.framework, framework);
  const std::string fp8_recipe = predict::framework::to_string(run.recipe.fp8_recipe);
  take("--fp8-recipe", a.fp8_recipe, fp8_recipe, a.fp8_recipe, fp8_recipe);
  if (!given.at("--tp-comm-overlap")) a.tp_comm_overlap = run.recipe.tp_comm_overlap;
  if (!given.at("--fp8-param-gather")) a.fp8_param_gather = run.recipe.fp8_param_gather;
  spec = run.model;
}

// The record as a table or JSON, after what --from read; on a calibration (ranks_per_node >= 0) with the
// placement of its groups on nodes (a line after the table; "placement" in JSON).
void print_record(const PredictArgs& a, const validate::PredictionRecord& record, int64_t ranks_per_node = -1) {
  if (a.json) {
    std::string text = validate::prediction_json(record);
    if (ranks_per_node >= 0)
      text = with_placement_json(text, record.config, ranks_per_node, record.prediction.inter_node_from_intra);
    std::printf("%s\n", a.from_run ? with_input_json(text, *a.from_run, a.overridden).c_str() : text.c_str());
    return;
  }
  if (a.from_run)
    for (const std::string& line : user_run_lines(*a.from_run, a.overridden)) std::printf("%s\n", line.c_str());
  validate::print_prediction(record);
  if (ranks_per_node >= 0) {
    std::printf(
        "%s%s\n", placement_line(record.config, ranks_per_node).c_str(),
        record.prediction.inter_node_from_intra ? " (across nodes from one-node figures: none measured across nodes)" : "");
  }
}

// --gbs left out: the smallest global batch the layout allows: one micro-batch per data-parallel rank
// (dp x mbs), and with interleaving (vp > 1) pp of them, as the interleaved schedule needs a micro-batch
// count that is a multiple of pp (ParallelConfig's rules).
int smallest_global_batch(const PredictArgs& a) { return a.dp * a.micro_batch * (a.vp > 1 ? a.pp : 1); }

// --precision left out: a GPU trains in mixed bf16 (amp-bf16: fp32 weights and optimizer, bf16 math),
// the precision LLaMA training runs at; a CPU calibration (or nothing to say which device) in fp32, the
// one precision every CPU LibTorch runs at full speed and traces everywhere.
std::string default_precision(const std::optional<HardwareSpec>& hardware) {
  return hardware && hardware->kind == DeviceKind::kGpu ? "amp-bf16" : "fp32";
}

// The options left out, in words, for the output.
std::vector<std::string> defaulted(const PredictArgs& given, const PredictArgs& used,
                                   const std::optional<HardwareSpec>& hardware) {
  std::vector<std::string> out;
  if (!given.precision_given) {
    out.push_back("--precision " + used.precision +
                  (used.precision == "amp-bf16" ? " (mixed bf16, as GPUs train; " + hardware->name + " is a GPU)"
                                                : " (no GPU description: a CPU calibration's precision)") +
                  "; pass --precision to choose");
  }
  if (!given.gbs_given) {
    std::string why = "dp " + std::to_string(used.dp) + " x mbs " + std::to_string(used.micro_batch);
    if (used.vp > 1) why += " x pp " + std::to_string(used.pp) + " (interleaving needs micro-batches in multiples of pp)";
    out.push_back("--gbs " + std::to_string(used.global_batch) + " (the smallest the layout allows: " + why +
                  "); pass --gbs for your batch");
  }
  return out;
}

// The findings of the answer checks: refused in one line (exit 2, nothing on stdout) unless
// --allow-implausible, which keeps them as the record's FLAG lines.
void refuse_or_flag(std::vector<predict::Finding> findings, bool allow, validate::PredictionRecord& record) {
  if (findings.empty()) return;
  const auto refusing = std::find_if(findings.begin(), findings.end(), [](const predict::Finding& f) { return f.refuse; });
  if (!allow && refusing != findings.end()) {
    const predict::Finding& first = *refusing;
    std::string text = "prediction refused (" + first.code + "): " + first.message + "; " + first.hint;
    if (findings.size() > 1) {
      text += "; also";
      bool more = false;
      for (const predict::Finding& f : findings) {
        if (&f == &first) continue;
        text += (more ? ", " : " ") + f.code;
        more = true;
      }
    }
    throw UserError(text + " (--allow-implausible prints it anyway, flagged)");
  }
  // A measured range holds for answers like the ones it was measured on, not for one refused but shown.
  if (refusing != findings.end() && record.range.pct)
    record.range = {std::nullopt, "none: the FLAG lines void the measured range"};
  record.flags = std::move(findings);
}

// --framework megatron-te: the stage Megatron-Core with Transformer Engine runs, on a GPU description's
// published kernel figures; no calibration.
int run_framework_predict(const PredictArgs& given, PredictArgs a, const LlamaSpec& spec, const ParallelConfig& config) {
  if (!a.source.empty()) {
    throw UserError(
        "--framework megatron-te predicts from the GPU's published kernel figures: give no calibration or model file (" +
        a.source + ")");
  }
  if (a.blind || !a.efficiency.empty()) throw UserError("--framework megatron-te takes neither --blind nor --efficiency");
  predict::framework::FrameworkTarget target = predict::framework_target(a.hardware);
  std::optional<predict::framework::FrameworkFit> fitted;
  if (!a.fitted.empty()) fitted = predict::framework::apply_fitted_terms(target, a.fitted);
  check_nodes(a.nodes, config.world_size(), target.hardware);
  if (!a.precision_given) a.precision = "amp-bf16";  // the framework trains in mixed precision on GPUs
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
  // issue 44: the layer split a --from file states (its --account-for-* / --decoder-*-pipeline-num-layers).
  if (a.from_run && a.pp == a.from_run->config.pp && a.vp == a.from_run->config.vp)
    request.recipe.pipeline_split = a.from_run->recipe.pipeline_split;
  const predict::framework::FrameworkOutcome outcome = predict::framework::predict_framework(target, request);
  if (!outcome.ok()) throw UserError(outcome.reason);
  const int64_t peak_bytes = outcome.prediction->peak_memory_bytes;  // megatron_memory's, in the prediction
  const double memory_limit = device_memory_bytes(a.device_memory_gib, target.hardware);
  validate::PredictionRecord record;
  record.source = (fitted ? "fitted (" + a.fitted + ") " : "described ") + target.hardware.name + ", framework megatron-te";
  record.described =
      "Megatron-Core + Transformer Engine stage (fused attention, norms, RoPE, SwiGLU, cross-entropy); kernels from " +
      target.kernels.shown_path() +
      " (published figures), communication from NCCL's cost model of the description; no calibration";
  record.model_name = spec.name;
  record.config = config;
  record.precision = a.precision;
  record.recipe = recipe_label(request.recipe.techniques) +
                  (predict::framework_switches(request.recipe).empty() ? "" : " " + predict::framework_switches(request.recipe));
  record.attention = "";  // the described text names TE's fused attention
  record.prediction = predict::to_prediction(*outcome.prediction);
  record.prediction.critical_rank = outcome.prediction->critical_rank;  // the breakdown's rank (no overhead, no factor)
  record.prediction.split_raw_us = outcome.prediction->total_us;
  record.prediction.communication_described = true;
  record.peak_memory_bytes = peak_bytes;
  record.exceeds_device_memory = memory_limit > 0 && static_cast<double>(peak_bytes) > memory_limit;
  record.memory = predict::memory_split(predict::framework::megatron_te_peak_memory(request.shape, config, request.recipe));
  record.device_memory_bytes = memory_limit;
  record.throughput = predict::throughput(spec, config, request.recipe.precision, record.prediction.total_us, &target.hardware);
  record.hardware = target.hardware.name;
  record.framework = true;
  record.range = fitted ? predict::framework_fitted_range(fitted->lomo_mape_pct, fitted->lomo_rows, fitted->models, a.fitted)
                        : predict::framework_range(target.hardware.name);
  record.defaults = defaulted(given, a, target.hardware);
  predict::AnswerFacts facts;
  facts.mfu = record.throughput.mfu;
  facts.precision = a.precision;
  facts.peak_memory_bytes = peak_bytes;  // issue 44: an answer that does not fit is refused (exceeds_device_memory)
  facts.memory_reserve_bytes = predict::runtime_reserve(target, config).total_bytes();
  facts.device_memory_bytes = memory_limit;
  refuse_or_flag(predict::check_answer(facts), a.allow_implausible, record);
  print_record(a, record);
  return 0;
}

int run_predict(const PredictArgs& given, const LlamaSpec& spec) {
  PredictArgs a = given;
  if (!a.gbs_given) a.global_batch = smallest_global_batch(a);
  ParallelConfig config{a.dp, a.tp, a.pp, a.micro_batch, a.global_batch, a.seq_len};
  config.cp = a.cp;
  config.vp = a.vp;
  config.require_valid(spec, 0);
  if (predict::framework::parse_framework(a.framework) == predict::framework::Framework::kMegatronTe) {
    return run_framework_predict(given, a, spec, config);
  }
  if (a.tp_comm_overlap || a.fp8_param_gather || a.fp8_recipe != "delayed" || !a.fitted.empty()) {
    throw UserError("--tp-comm-overlap, --fp8-recipe, --fp8-param-gather and --fitted need --framework megatron-te");
  }
  if (a.precision_given) parse_precision(a.precision);  // a precision that does not exist: refused before any file is read
  const predict::FittedModel model = a.source.empty() ? predict::FittedModel{} : predict::load_or_fit(a.source);
  const predict::HardwareChoice choice = predict::choose_hardware(a.source.empty() ? nullptr : &model, a.hardware, a.efficiency);
  const std::optional<HardwareSpec>& hardware = choice.hardware;
  const predict::TargetDevice* target = choice.target ? &*choice.target : nullptr;
  if (!a.precision_given) a.precision = default_precision(hardware);
  const PrecisionPolicy& policy = parse_precision(a.precision);
  check_nodes(a.nodes, config.world_size(), hardware);
  const int64_t ranks_per_node =
      ranks_per_node_option(a.ranks_per_node, model.comm.calibration_ranks_per_node(), target != nullptr);
  predict::PredictRequest request;
  request.ranks_per_node = ranks_per_node;
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
  const predict::MemoryBreakdown peak = predict::peak_memory_breakdown(
      spec, config, policy, target != nullptr ? target->attention : model.attention, request.techniques);
  const int64_t peak_bytes = peak.total_bytes;
  const double memory_limit = device_memory_bytes(a.device_memory_gib, hardware);
  const bool too_big = memory_limit > 0 && static_cast<double>(peak_bytes) > memory_limit;
  validate::PredictionRecord record;
  record.source = (target != nullptr ? "described " + target->hardware.name : a.source) + ", framework itertime";  // issue 44
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
  record.memory = predict::memory_split(peak);
  record.device_memory_bytes = memory_limit;
  record.defaults = defaulted(given, a, hardware);
  if (target != nullptr) {
    record.range = predict::described_range(target->hardware.name);
  } else if (a.raw || a.blind) {
    record.range = {std::nullopt,
                    "none: the validation measures the calibrated, precision-aware prediction (not --raw or --blind)"};
  } else {
    const std::optional<validate::StoredMape> stored = validate::read_validation_mape(a.source, a.precision, p.stages_built > 0);
    record.range = stored ? predict::calibrated_range(stored->mape_pct, stored->count, stored->group, stored->built)
                          : predict::calibrated_range(std::nullopt, 0, "", false);
  }
  predict::AnswerFacts facts;
  facts.mfu = record.throughput.mfu;
  facts.operators = p.built_operators;
  facts.operators_without_time = p.built_operators_without_time;
  facts.precision = a.precision;
  facts.blind = a.blind;
  if (target == nullptr) {
    facts.calibrated_precisions = predict::calibrated_precisions(model);
    facts.largest_profiled_flops = predict::largest_profiled_flops(model);
  }
  facts.extrapolated_fraction = p.extrapolated_fraction;
  facts.largest_matmul_flops = predict::largest_matmul_flops(spec, config, request.techniques);
  if (target != nullptr) {  // issue 44: on a described GPU an answer that does not fit is refused too
    facts.peak_memory_bytes = peak_bytes;
    facts.device_memory_bytes = memory_limit;
  }
  refuse_or_flag(predict::check_answer(facts), a.allow_implausible, record);
  print_record(a, record, target != nullptr ? -1 : ranks_per_node);
  return 0;
}

}  // namespace

void register_predict(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  // fit
  CLI::App* fit =
      app.add_subcommand("fit", "Fit the precision-aware model from a calibration file and save it (Boost.Serialization)");
  auto fit_files = std::make_shared<std::vector<std::string>>();
  auto fit_out = std::make_shared<std::string>();
  auto fit_force = std::make_shared<bool>(false);
  auto fit_framework = std::make_shared<std::string>("itertime");
  auto fit_hardware = std::make_shared<std::string>();
  fit->add_option("CAL", *fit_files,
                  "Calibration HDF5 file (with /comm and /ops); with --framework megatron-te: imported logs (.h5 of "
                  "`itertime import`) and published-figure files (.json), all of one GPU")
      ->required();
  fit->add_option("-o,--output", *fit_out, "Where to save the fitted model (the terms file with --framework megatron-te)")
      ->required();
  fit->add_flag("--force", *fit_force, "Overwrite an existing model file");
  fit->add_option("--framework", *fit_framework,
                  "itertime (this trainer's calibration) or megatron-te (the framework model's terms, fitted on logs)")
      ->capture_default_str();
  fit->add_option("--hardware", *fit_hardware, "With --framework megatron-te: the GPU the logs ran on (data/hardware)");
  auto efficiency_out = std::make_shared<std::string>();
  fit->add_option("--efficiency-out", *efficiency_out,
                  "Also write the operator efficiencies (JSON) that `predict --hardware` carries to other devices");
  actions.emplace_back(fit, [fit_files, fit_out, fit_force, fit_framework, fit_hardware, efficiency_out](Context&) {
    if (predict::framework::parse_framework(*fit_framework) == predict::framework::Framework::kMegatronTe) {
      if (!efficiency_out->empty()) throw UserError("--efficiency-out is for --framework itertime (a calibration's fit)");
      return run_framework_fit(*fit_files, *fit_hardware, *fit_out, *fit_force);
    }
    if (fit_files->size() != 1)
      throw UserError("fit: one calibration file (CAL); several files are for --framework megatron-te (logs)");
    if (!fit_hardware->empty()) throw UserError("--hardware is for --framework megatron-te (the GPU the logs ran on)");
    const std::string* fit_in = &fit_files->front();
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
  predict_cmd->add_option("--model", args->model_file,
                          "LLaMA config.json (the model that was traced); required unless --from or --megatron-args");
  predict_cmd->add_option("--from", args->from.file,
                          "Your own configuration: a Megatron-LM arguments file or launch line, a NeMo 2 / Megatron-Bridge "
                          "YAML dump, or a torchtitan TOML (docs/formats.md); flags given beside it override its values");
  predict_cmd->add_option("--from-format", args->from.format, "The format of --from: megatron-args, nemo or torchtitan")
      ->capture_default_str();
  predict_cmd->add_option(
      "--megatron-args", args->from.megatron_args,
      "A Megatron-LM command line, quoted ('--num-layers 32 --hidden-size 4096 ...'), read as --from reads a file");
  predict_cmd->add_option("--gpus", args->gpus, "GPUs (ranks): dp = gpus / (tp x pp x cp) when --dp is not given");
  predict_cmd->add_option("--dp", args->dp, "Data-parallel degree")->capture_default_str();
  predict_cmd->add_option("--tp", args->tp, "Tensor-parallel degree")->capture_default_str();
  predict_cmd->add_option("--pp", args->pp, "Pipeline-parallel degree")->capture_default_str();
  predict_cmd->add_option("--cp", args->cp, "Context-parallel degree (the sequence split over cp ranks)")->capture_default_str();
  predict_cmd
      ->add_option("--vp", args->vp,
                   "Virtual pipeline stages (model chunks) per pipeline rank: > 1 is interleaved 1F1B (Megatron-LM's "
                   "--num-layers-per-virtual-pipeline-stage = layers / (pp x vp)); not the recipe's vocab token")
      ->capture_default_str();
  predict_cmd->add_option("--mbs", args->micro_batch, "Micro-batch size")->capture_default_str();
  CLI::Option* gbs_option = predict_cmd->add_option(
      "--gbs", args->global_batch, "Global batch size (default: the smallest the layout allows, dp x mbs, x pp with --vp > 1)");
  predict_cmd->add_option("--seq", args->seq_len, "Sequence length (required unless --from or --megatron-args)");
  CLI::Option* precision_option = predict_cmd->add_option(
      "--precision", args->precision, std::string(kPrecisionsHelp) + " (default: amp-bf16 on a GPU description, else fp32)");
  predict_cmd
      ->add_option("--recipe", args->recipe,
                   std::string("Training techniques: plain, or ") + kRecipeTokensHelp + " (e.g. sp+vocab+dopt+ovl+opg)")
      ->capture_default_str();
  predict_cmd->add_flag("--blind", args->blind, "Precision-blind baseline (fp32 traces and messages)");
  predict_cmd->add_flag("--raw", args->raw, "Without the calibration factor fitted on ground truth");
  predict_cmd->add_flag("--json", args->json, "Print JSON instead of a table");
  predict_cmd->add_flag("--allow-implausible", args->allow_implausible,
                        "Print a prediction the answer checks refuse (faster than the device's peak, operators priced at "
                        "zero, a precision the calibration never ran, far extrapolation), with FLAG lines / \"flags\"");
  predict_cmd->add_option("--device-memory-gib", args->device_memory_gib,
                          "Flag configurations whose peak memory exceeds this (default: the GPU description's memory)");
  predict_cmd->add_option("--hardware", args->hardware,
                          "Hardware description (data/hardware): the calibration's own (default) for MFU and the device memory, "
                          "or another device, predicted from its description with the calibration's operator efficiencies");
  predict_cmd->add_option("--fitted", args->fitted,
                          "With --framework megatron-te: terms fitted on your cluster's logs (`itertime fit --framework "
                          "megatron-te`), quoted with the fit's leave-one-model-out range");
  predict_cmd->add_option(
      "--efficiency", args->efficiency,
      "Operator efficiencies to carry to --hardware (a file from `itertime fit --efficiency-out`; default on a "
      "GPU: a GPU calibration's, else its published kernel figures; on a CPU node: the calibration's, or "
      "data/efficiency/default.json)");
  predict_cmd->add_option("--nodes", args->nodes, "With --hardware: the nodes the layout fills (checked against its ranks)");
  predict_cmd->add_option("--ranks-per-node", args->ranks_per_node,
                          "On a calibration: world ranks per node, filled node by node (TP inside a node, DP and PP "
                          "across); default: the calibration's own when its comm calibration spanned nodes, else one node");
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
  actions.emplace_back(predict_cmd, [args, gbs_option, precision_option, predict_cmd](Context&) {
    args->gbs_given = gbs_option->count() > 0;
    args->precision_given = precision_option->count() > 0;
    std::map<std::string, bool> given;
    for (const char* flag : {"--dp", "--tp", "--pp", "--cp", "--vp", "--mbs", "--gbs", "--seq", "--precision", "--recipe",
                             "--framework", "--fp8-recipe", "--tp-comm-overlap", "--fp8-param-gather", "--gpus"})
      given[flag] = predict_cmd->get_option(flag)->count() > 0;
    PredictArgs a = *args;
    a.from_run = read_from(a.from);
    if (!given.at("--framework") && !a.from_run)  // issue 44: a GPU question gets the GPU's framework
      a.framework = predict::framework::to_string(
          predict::default_framework(a.hardware, !a.source.empty() || !a.efficiency.empty() || a.blind));
    LlamaSpec spec;
    if (a.from_run) {
      apply_user_run(given, a, spec);
    } else {
      if (a.model_file.empty()) throw UserError("predict: give --model FILE (a LLaMA config.json), or --from / --megatron-args");
      if (!given.at("--seq")) throw UserError("predict: give --seq N (the sequence length)");
      if (given.at("--gpus")) {
        const int model_ranks = a.tp * a.pp * a.cp;
        if (a.gpus < 1 || a.gpus % model_ranks != 0)
          throw UserError("--gpus " + std::to_string(a.gpus) +
                          ": not a multiple of tp x pp x cp = " + std::to_string(model_ranks));
        if (given.at("--dp") && a.dp != a.gpus / model_ranks)
          throw UserError("--gpus " + std::to_string(a.gpus) + " and --dp " + std::to_string(a.dp) + " disagree");
        a.dp = a.gpus / model_ranks;
      }
      spec = load_llama_config(a.model_file);
    }
    return run_predict(a, spec);
  });
}

}  // namespace itertime::launcher
