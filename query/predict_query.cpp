// predict_query.cpp: see the header. The record's assembly for itertime's own trainer (a calibration or
// a described device) and for the framework model (megatron-te), the answer checks, the range.
#include "query/predict_query.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
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

namespace itertime::query {
namespace {

using PredictArgs = PredictRequest;

// --from: the run's values where no flag was given; a flag given beside it overrides the file's value
// (a what-if: "my run at tp 4"), and the output lists each such override. --model is refused beside it
// (the model comes from the file). dp: --dp, else --gpus / (tp x pp x cp), else the file's world size.
void apply_user_run(const formats::UserRun& run, PredictArgs& a, PredictAnswer& answer, LlamaSpec& spec) {
  const auto given = [&a](const std::string& flag) { return a.was_given(flag); };
  if (!a.model_file.empty())
    throw UserError("--model " + a.model_file + " beside --from/--megatron-args: the model comes from " + run.source +
                    "; give one");
  const ParallelConfig& c = run.config;
  const auto take = [&](const std::string& flag, auto& value, const auto& file_value, const std::string& shown_value,
                        const std::string& file_text) {
    if (given(flag)) {
      if (!(value == file_value))
        answer.overridden.push_back(flag + " " + shown_value + " (" + run.source + ": " + file_text + ")");
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
  if (!given("--dp") && !given("--gpus")) {
    if (!run.data_parallel_given)
      throw UserError(run.source + " fixes no data-parallel size (no world size): give --gpus N or --dp N");
    a.dp = c.dp;
  } else if (given("--dp") && run.data_parallel_given && a.dp != c.dp) {
    answer.overridden.push_back("--dp " + std::to_string(a.dp) + " (" + run.source + ": " + std::to_string(c.dp) + ")");
  }
  if (given("--gpus") && !given("--dp")) {
    if (a.gpus < 1 || a.gpus % model_ranks != 0)
      throw UserError("--gpus " + std::to_string(a.gpus) + ": not a multiple of tp x pp x cp = " + std::to_string(model_ranks));
    a.dp = a.gpus / model_ranks;
  }
  if (given("--gbs")) {
    if (run.global_batch_given && a.global_batch != c.global_batch)
      answer.overridden.push_back("--gbs " + std::to_string(a.global_batch) + " (" + run.source + ": " +
                                  std::to_string(c.global_batch) + ")");
  } else {
    a.global_batch =
        run.global_batch_given ? c.global_batch : (run.batch_per_dp_rank > 0 ? run.batch_per_dp_rank : a.micro_batch) * a.dp;
    a.given.insert("--gbs");
  }
  const std::string precision = to_string(run.recipe.precision);
  take("--precision", a.precision, precision, a.precision, precision);
  a.given.insert("--precision");
  const std::string recipe = run.recipe.techniques.any() ? recipe_text(run.recipe.techniques) : "plain";
  take("--recipe", a.recipe, recipe, a.recipe, recipe);
  const std::string framework = predict::framework::to_string(run.framework);
  take("--framework", a.framework, framework, a.framework, framework);
  const std::string fp8_recipe = predict::framework::to_string(run.recipe.fp8_recipe);
  take("--fp8-recipe", a.fp8_recipe, fp8_recipe, a.fp8_recipe, fp8_recipe);
  if (!given("--tp-comm-overlap")) a.tp_comm_overlap = run.recipe.tp_comm_overlap;
  if (!given("--fp8-param-gather")) a.fp8_param_gather = run.recipe.fp8_param_gather;
  spec = run.model;
}

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
  if (!given.was_given("--precision")) {
    out.push_back("--precision " + used.precision +
                  (used.precision == "amp-bf16" ? " (mixed bf16, as GPUs train; " + hardware->name + " is a GPU)"
                                                : " (no GPU description: a CPU calibration's precision)") +
                  "; pass --precision to choose");
  }
  if (!given.was_given("--gbs")) {
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
validate::PredictionRecord framework_record(const PredictArgs& given, PredictArgs a, const LlamaSpec& spec,
                                            const ParallelConfig& config, const std::optional<formats::UserRun>& from_run) {
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
  if (!a.was_given("--precision")) a.precision = "amp-bf16";  // the framework trains in mixed precision on GPUs
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
  if (from_run && a.pp == from_run->config.pp && a.vp == from_run->config.vp)
    request.recipe.pipeline_split = from_run->recipe.pipeline_split;
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
  return record;
}

// The measured range of itertime's own trainer's answer: a description's; none for --raw or --blind (the
// validation measures neither); else the calibration's stored validation MAPE.
predict::PredictionRange own_range(const PredictArgs& a, const predict::TargetDevice* target, const predict::Prediction& p) {
  if (target != nullptr) return predict::described_range(target->hardware.name);
  if (a.raw || a.blind) {
    return {std::nullopt, "none: the validation measures the calibrated, precision-aware prediction (not --raw or --blind)"};
  }
  const std::optional<validate::StoredMape> stored = validate::read_validation_mape(a.source, a.precision, p.stages_built > 0);
  return stored ? predict::calibrated_range(stored->mape_pct, stored->count, stored->group, stored->built)
                : predict::calibrated_range(std::nullopt, 0, "", false);
}

// What the answer checks look at (calibration: the model on a calibration, nullptr on a description).
predict::AnswerFacts own_facts(const PredictArgs& a, const predict::FittedModel* calibration, const LlamaSpec& spec,
                               const predict::PredictRequest& request, const validate::PredictionRecord& record) {
  const predict::Prediction& p = record.prediction;
  predict::AnswerFacts facts;
  facts.mfu = record.throughput.mfu;
  facts.operators = p.built_operators;
  facts.operators_without_time = p.built_operators_without_time;
  facts.precision = a.precision;
  facts.blind = a.blind;
  if (calibration != nullptr) {
    facts.calibrated_precisions = predict::calibrated_precisions(*calibration);
    facts.largest_profiled_flops = predict::largest_profiled_flops(*calibration);
  }
  facts.extrapolated_fraction = p.extrapolated_fraction;
  facts.largest_matmul_flops = predict::largest_matmul_flops(spec, record.config, request.techniques);
  if (calibration == nullptr) {  // issue 44: on a described GPU an answer that does not fit is refused too
    facts.peak_memory_bytes = record.peak_memory_bytes;
    facts.device_memory_bytes = record.device_memory_bytes;
  }
  return facts;
}

// The configuration's record after the defaults: the framework model's, or itertime's own trainer's on a
// calibration or a described device.
void configuration_answer(const PredictArgs& given, const LlamaSpec& spec, PredictAnswer& answer) {
  PredictArgs a = given;
  if (!a.was_given("--gbs")) a.global_batch = smallest_global_batch(a);
  ParallelConfig config{a.dp, a.tp, a.pp, a.micro_batch, a.global_batch, a.seq_len};
  config.cp = a.cp;
  config.vp = a.vp;
  config.require_valid(spec, 0);
  if (predict::framework::parse_framework(a.framework) == predict::framework::Framework::kMegatronTe) {
    answer.record = framework_record(given, a, spec, config, answer.from_run);
    return;
  }
  if (a.tp_comm_overlap || a.fp8_param_gather || a.fp8_recipe != "delayed" || !a.fitted.empty()) {
    throw UserError("--tp-comm-overlap, --fp8-recipe, --fp8-param-gather and --fitted need --framework megatron-te");
  }
  if (a.was_given("--precision"))
    parse_precision(a.precision);  // a precision that does not exist: refused before any file is read
  const predict::FittedModel model = a.source.empty() ? predict::FittedModel{} : predict::load_or_fit(a.source);
  const predict::HardwareChoice choice = predict::choose_hardware(a.source.empty() ? nullptr : &model, a.hardware, a.efficiency);
  const std::optional<HardwareSpec>& hardware = choice.hardware;
  const predict::TargetDevice* target = choice.target ? &*choice.target : nullptr;
  if (!a.was_given("--precision")) a.precision = default_precision(hardware);
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
  record.range = own_range(a, target, p);
  refuse_or_flag(predict::check_answer(own_facts(a, target != nullptr ? nullptr : &model, spec, request, record)),
                 a.allow_implausible, record);
  answer.record = std::move(record);
  answer.ranks_per_node = target != nullptr ? -1 : ranks_per_node;
}

}  // namespace

PredictAnswer answer_predict(const PredictRequest& request) {
  PredictAnswer answer;
  PredictArgs a = request;
  answer.from_run = read_from(a.from);
  if (!a.was_given("--framework") && !answer.from_run)  // issue 44: a GPU question gets the GPU's framework
    a.framework = predict::framework::to_string(
        predict::default_framework(a.hardware, !a.source.empty() || !a.efficiency.empty() || a.blind));
  LlamaSpec spec;
  if (answer.from_run) {
    apply_user_run(*answer.from_run, a, answer, spec);
  } else {
    if (a.model_file.empty()) throw UserError("predict: give --model FILE (a LLaMA config.json), or --from / --megatron-args");
    if (!a.was_given("--seq")) throw UserError("predict: give --seq N (the sequence length)");
    if (a.was_given("--gpus")) {
      const int model_ranks = a.tp * a.pp * a.cp;
      if (a.gpus < 1 || a.gpus % model_ranks != 0)
        throw UserError("--gpus " + std::to_string(a.gpus) + ": not a multiple of tp x pp x cp = " + std::to_string(model_ranks));
      if (a.was_given("--dp") && a.dp != a.gpus / model_ranks)
        throw UserError("--gpus " + std::to_string(a.gpus) + " and --dp " + std::to_string(a.dp) + " disagree");
      a.dp = a.gpus / model_ranks;
    }
    spec = load_llama_config(a.model_file);
  }
  configuration_answer(a, spec, answer);
  return answer;
}

std::string predict_json(const PredictAnswer& answer) {
  std::string text = validate::prediction_json(answer.record);
  if (answer.ranks_per_node >= 0)
    text = with_placement_json(text, answer.record.config, answer.ranks_per_node, answer.record.prediction.inter_node_from_intra);
  return answer.from_run ? with_input_json(text, *answer.from_run, answer.overridden) : text;
}

std::vector<std::string> predict_preamble_lines(const PredictAnswer& answer) {
  return answer.from_run ? user_run_lines(*answer.from_run, answer.overridden) : std::vector<std::string>{};
}

std::string predict_placement_line(const PredictAnswer& answer) {
  if (answer.ranks_per_node < 0) return "";
  return placement_line(answer.record.config, answer.ranks_per_node) +
         (answer.record.prediction.inter_node_from_intra ? " (across nodes from one-node figures: none measured across nodes)"
                                                         : "");
}

}  // namespace itertime::query
