// cmd_predict.cpp: `itertime fit`, `itertime predict` and `itertime validate`: no MPI, no LibTorch.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/model_spec.hpp"
#include "launcher/commands.hpp"
#include "predict/fitted_model.hpp"
#include "predict/memory_model.hpp"
#include "predict/plan.hpp"
#include "predict/predictor.hpp"
#include "validate/validation.hpp"
#include "validate/validation_store.hpp"

namespace itertime::launcher {
namespace {

struct PredictArgs {
  std::string source;
  std::string model_file;
  int dp = 1, tp = 1, pp = 1, micro_batch = 1, global_batch = 1, seq_len = 0;
  std::string precision = "fp32";
  bool blind = false, raw = false, json = false;
  double device_memory_gib = 0;
};

int run_predict(const PredictArgs& a) {
  const LlamaSpec spec = load_llama_config(a.model_file);
  ParallelConfig config{a.dp, a.tp, a.pp, a.micro_batch, a.global_batch, a.seq_len};
  config.require_valid(spec, 0);
  const PrecisionPolicy& policy = parse_precision(a.precision);
  const predict::FittedModel model = predict::load_or_fit(a.source);
  predict::PredictRequest request;
  request.model_name = spec.name;
  request.model = &spec;  // stages never traced are built from the model
  request.config = config;
  request.precision = policy.name;
  request.blind = a.blind;
  request.calibrated = !a.raw;
  const predict::Prediction p = predict::predict(model, request);
  const auto memory = predict::memory_all_stages(spec, config, policy, parse_attention(model.attention));
  int64_t peak_bytes = 0;
  for (const auto& m : memory) peak_bytes = std::max(peak_bytes, m.total_bytes);
  const bool too_big = a.device_memory_gib > 0 && static_cast<double>(peak_bytes) > a.device_memory_gib * (1ull << 30);
  const predict::PooledCheck check = predict::pooled_regression_check(model);

  if (a.json) {
    nlohmann::json out = {{"model", spec.name}, {"dp", a.dp}, {"tp", a.tp}, {"pp", a.pp}, {"micro_batch", a.micro_batch},
                          {"global_batch", a.global_batch}, {"seq_len", a.seq_len}, {"precision", a.precision},
                          {"precision_blind", a.blind}, {"attention", model.attention},
                          {"libtorch_version", model.libtorch_version.empty() ? "1.13 (not recorded)" : model.libtorch_version},
                          {"iteration_us", p.total_us}, {"raw_iteration_us", p.raw_total_us},
                          {"calibration_factor", p.calibration_factor}, {"op_overhead_us", p.op_overhead_us}, {"op_calls", p.op_calls},
                          {"breakdown_us", {{"compute", p.compute_us}, {"tp_comm", p.tp_comm_us}, {"pp_comm", p.pp_comm_us},
                                            {"bubble", p.bubble_us}, {"dp_comm", p.dp_comm_us}, {"optimizer", p.optimizer_us}}},
                          {"stage_forward_us", p.stage_forward_us}, {"stage_backward_us", p.stage_backward_us},
                          {"extrapolated_fraction", p.extrapolated_fraction}, {"peak_memory_bytes", peak_bytes},
                          {"exceeds_device_memory", too_big}, {"notes", p.notes},
                          {"regression_check", {{"groups", check.groups}, {"held_out_signatures", check.held_out_points},
                                                {"mape_pct", check.mape_pct},
                                                {"time_weighted_mape_pct", check.time_weighted_mape_pct}}}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("itertime predict: %s %s %s%s on %s\n", spec.name.c_str(), config.to_string().c_str(), a.precision.c_str(),
              a.blind ? " (precision-blind)" : "", a.source.c_str());
  std::printf("  calibrated with    %s attention, LibTorch %s\n", model.attention.c_str(),
              model.libtorch_version.empty() ? "1.13 (not recorded)" : model.libtorch_version.c_str());
  std::printf("  iteration          %12.1f us", p.total_us);
  if (p.op_overhead_us != 0.0 || p.calibration_factor != 1.0) {
    std::printf("  (operators alone %.1f us; + %.1f us x %lld operator calls, x %.3f, fitted on ground truth)", p.raw_total_us,
                p.op_overhead_us, static_cast<long long>(p.op_calls), p.calibration_factor);
  }
  std::printf("\n  breakdown on the busiest stage (raw):\n");
  std::printf("    compute          %12.1f us\n    TP comm          %12.1f us\n    PP comm          %12.1f us\n",
              p.compute_us, p.tp_comm_us, p.pp_comm_us);
  std::printf("    bubble           %12.1f us\n    DP comm + buffer %12.1f us\n    optimizer        %12.1f us\n", p.bubble_us,
              p.dp_comm_us, p.optimizer_us);
  std::printf("  extrapolated       %12.1f %% of compute time from the operator regression\n", 100.0 * p.extrapolated_fraction);
  if (p.extrapolated_fraction > 0) {
    if (check.groups > 0) {
      std::printf("                     (that regression, scored on the largest third of this calibration's profiled\n"
                  "                      signatures after fitting on the rest, is off by %.1f%% time-weighted; far beyond\n"
                  "                      the profiled shapes expect more: profile this configuration with `calibrate ops`)\n",
                  check.time_weighted_mape_pct);
    } else {
      std::printf("                     (no regression group has enough profiled signatures to check it)\n");
    }
  }
  std::printf("  peak memory        %12.2f GiB per rank (busiest stage)%s\n", static_cast<double>(peak_bytes) / (1ull << 30),
              too_big ? "  EXCEEDS the device memory" : "");
  for (const auto& note : p.notes) std::printf("  note: %s\n", note.c_str());
  return 0;
}

}  // namespace

void register_predict(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  // fit
  CLI::App* fit = app.add_subcommand("fit", "Fit the precision-aware model from a calibration file and save it (Boost.Serialization)");
  auto fit_in = std::make_shared<std::string>();
  auto fit_out = std::make_shared<std::string>();
  auto fit_force = std::make_shared<bool>(false);
  fit->add_option("CAL", *fit_in, "Calibration HDF5 file (with /comm and /ops)")->required();
  fit->add_option("-o,--output", *fit_out, "Where to save the fitted model")->required();
  fit->add_flag("--force", *fit_force, "Overwrite an existing model file");
  actions.emplace_back(fit, [fit_in, fit_out, fit_force](Context&) {
    const predict::FittedModel model = predict::fit_model(*fit_in);
    predict::save_model(model, *fit_out, *fit_force);
    std::printf("fitted %s -> %s: %zu comm tables, %zu operator signatures, %zu timings, %zu stage traces, %zu regressions\n",
                fit_in->c_str(), fit_out->c_str(), model.comm.tables().size(), model.signatures.size(), model.op_time_us.size(),
                model.stages.size(), model.regressions.size());
    std::printf("comm fit residuals (alpha-beta fit on the largest sizes):\n");
    for (const auto& r : model.comm.residuals()) {
      std::printf("  %-40s alpha %9.2f us  bandwidth %8.3f GB/s  MAPE %6.2f%% over %lld points\n", r.key.to_string().c_str(),
                  r.alpha_us, r.bandwidth_GBps, r.mape_pct, static_cast<long long>(r.fit_points));
    }
    const predict::PooledCheck check = predict::pooled_regression_check(model);
    std::printf("operator regression (signatures never profiled): upward check, fitted on the smaller 2/3 of each group,\n"
                "  scored on the largest 1/3: MAPE %.2f%% (time-weighted %.2f%%) over %lld signatures in %lld groups\n",
                check.mape_pct, check.time_weighted_mape_pct, static_cast<long long>(check.held_out_points),
                static_cast<long long>(check.groups));
    for (const auto& [occupancy, c] : model.calibration.per_occupancy) {
      std::printf("calibration at %lld busy rank(s): %.1f us per operator call, factor %.3f (from %lld configurations)\n",
                  static_cast<long long>(occupancy), c.op_overhead_us, c.factor, static_cast<long long>(c.rows));
    }
    return 0;
  });

  // predict
  CLI::App* predict_cmd = app.add_subcommand("predict", "Predict the iteration time and its breakdown of one configuration");
  auto args = std::make_shared<PredictArgs>();
  predict_cmd->add_option("SOURCE", args->source, "A model from `itertime fit`, or a calibration .h5 (fitted on the fly)")->required();
  predict_cmd->add_option("--model", args->model_file, "LLaMA config.json (the model that was traced)")->required();
  predict_cmd->add_option("--dp", args->dp, "Data-parallel degree")->capture_default_str();
  predict_cmd->add_option("--tp", args->tp, "Tensor-parallel degree")->capture_default_str();
  predict_cmd->add_option("--pp", args->pp, "Pipeline-parallel degree")->capture_default_str();
  predict_cmd->add_option("--mbs", args->micro_batch, "Micro-batch size")->capture_default_str();
  predict_cmd->add_option("--gbs", args->global_batch, "Global batch size")->capture_default_str();
  predict_cmd->add_option("--seq", args->seq_len, "Sequence length")->required();
  predict_cmd->add_option("--precision", args->precision, "fp32, tf32, bf16, fp16, amp-bf16 or amp-fp16")->capture_default_str();
  predict_cmd->add_flag("--blind", args->blind, "Precision-blind baseline (fp32 traces and messages)");
  predict_cmd->add_flag("--raw", args->raw, "Without the calibration factor fitted on ground truth");
  predict_cmd->add_flag("--json", args->json, "Print JSON instead of a table");
  predict_cmd->add_option("--device-memory-gib", args->device_memory_gib, "Flag configurations whose peak memory exceeds this");
  actions.emplace_back(predict_cmd, [args](Context&) { return run_predict(*args); });

  // validate
  CLI::App* validate_cmd = app.add_subcommand("validate", "Predict every ground-truth configuration and report MAPE (leave-one-tuple-out)");
  auto cal = std::make_shared<std::string>();
  auto out_dir = std::make_shared<std::string>();
  auto no_store = std::make_shared<bool>(false);
  auto compute = std::make_shared<bool>(false);
  auto memory_model_file = std::make_shared<std::string>();
  validate_cmd->add_option("CAL", *cal, "Calibration HDF5 file with /comm, /ops and /groundtruth")->required();
  validate_cmd->add_option("--out-dir", *out_dir, "Folder for validation.csv, .json and .svg (default: CAL's folder/<stem>-validation)");
  validate_cmd->add_flag("--no-store", *no_store, "Do not write /validation into the calibration file");
  validate_cmd->add_flag("--compute-report", *compute,
                         "Also compare each stage's summed profiled operator times with its measured compute time");
  validate_cmd->add_option("--memory-report", *memory_model_file,
                           "Also compare the memory model with the measured peak tensor bytes, for the model in this LLaMA config.json");
  actions.emplace_back(validate_cmd, [cal, out_dir, no_store, compute, memory_model_file](Context&) {
    // Read the model config first: a wrong path is refused before any work.
    const std::optional<LlamaSpec> memory_spec =
        memory_model_file->empty() ? std::nullopt : std::optional<LlamaSpec>(load_llama_config(*memory_model_file));
    const predict::FittedModel model = predict::fit_model(*cal);
    std::vector<store::GroundTruthRow> rows;
    {
      h5::Store store = h5::Store::open(*cal, false);
      if (!store.exists(store::kGroundTruthTable)) {
        throw UserError(*cal + ": no /groundtruth table; run `itertime calibrate groundtruth --job JOB` first");
      }
      rows = store.table<store::GroundTruthRow>(store::kGroundTruthTable).read_all();
      if (*compute || memory_spec) {
        const auto ranks = store.table<store::GroundTruthRankRow>(store::kGroundTruthRanks).read_all();
        if (*compute) validate::print_compute_report(validate::compute_report(model, rows, ranks));
        if (memory_spec) validate::print_memory_report(validate::memory_report(*memory_spec, parse_attention(model.attention), rows, ranks));
      }
    }
    const validate::ValidationReport report = validate::validate(model, rows);
    validate::print_report(report);
    std::filesystem::path dir = out_dir->empty()
                                    ? std::filesystem::path(*cal).parent_path() / (std::filesystem::path(*cal).stem().string() + "-validation")
                                    : std::filesystem::path(*out_dir);
    std::filesystem::create_directories(dir);
    validate::write_csv(report, (dir / "validation.csv").string());
    validate::write_json(report, (dir / "validation.json").string());
    validate::write_svg(report, (dir / "validation.svg").string());
    if (!*no_store) {
      h5::Store store = h5::Store::open(*cal, true);
      validate::write_validation(store, report);
    }
    std::printf("# reports: %s/validation.{csv,json,svg}%s\n", dir.string().c_str(), *no_store ? "" : "; /validation in the calibration file");
    return 0;
  });
}

}  // namespace itertime::launcher

namespace itertime::launcher {

void register_plan(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* plan_cmd = app.add_subcommand("plan", "List the fastest legal, memory-feasible configurations of a model on N GPUs");
  struct PlanArgs {
    std::string source, model_file;
    int gpus = 1, global_batch = 0, seq_len = 0, top = 10;
    std::vector<int> micro_batches = {1, 2, 4, 8};
    std::vector<std::string> precisions = {"amp-bf16"};
    double device_memory_gib = 0;
    bool json = false;
  };
  auto a = std::make_shared<PlanArgs>();
  plan_cmd->add_option("SOURCE", a->source, "A model from `itertime fit`, or a calibration .h5")->required();
  plan_cmd->add_option("--model", a->model_file, "LLaMA config.json")->required();
  plan_cmd->add_option("--gpus", a->gpus, "Number of GPUs (ranks)")->required();
  plan_cmd->add_option("--gbs", a->global_batch, "Global batch size")->required();
  plan_cmd->add_option("--seq", a->seq_len, "Sequence length")->required();
  plan_cmd->add_option("--mbs", a->micro_batches, "Micro-batch sizes to consider")->delimiter(',')->capture_default_str();
  plan_cmd->add_option("--precisions", a->precisions, "Precisions to consider")->delimiter(',')->capture_default_str();
  plan_cmd->add_option("--device-memory-gib", a->device_memory_gib, "Device memory; larger configurations are infeasible");
  plan_cmd->add_option("--top", a->top, "How many to list")->capture_default_str();
  plan_cmd->add_flag("--json", a->json, "Print JSON");
  actions.emplace_back(plan_cmd, [a](Context&) {
    predict::PlanOptions options;
    options.model = load_llama_config(a->model_file);
    options.gpus = a->gpus;
    options.global_batch = a->global_batch;
    options.seq_len = a->seq_len;
    options.micro_batches = a->micro_batches;
    options.precisions.clear();
    for (const auto& p : a->precisions) options.precisions.push_back(parse_precision(p).name);
    options.device_memory_bytes = a->device_memory_gib * static_cast<double>(1ull << 30);
    const predict::FittedModel model = predict::load_or_fit(a->source);
    const auto entries = predict::plan(model, options);
    if (a->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : entries) {
        out.push_back({{"dp", e.config.dp}, {"tp", e.config.tp}, {"pp", e.config.pp}, {"micro_batch", e.config.micro_batch},
                       {"precision", to_string(e.precision)}, {"iteration_us", e.iteration_us},
                       {"peak_memory_bytes", e.peak_memory_bytes}, {"feasible", e.feasible}, {"reason", e.reason},
                       {"extrapolated_fraction", e.extrapolated_fraction}});
      }
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    std::printf("itertime plan: %s on %d GPUs, gbs %d, seq %d: %zu candidates\n", options.model.name.c_str(), a->gpus,
                a->global_batch, a->seq_len, entries.size());
    std::printf("  %-4s %-12s %5s %-9s %16s %14s %10s  %s\n", "rank", "(dp,tp,pp)", "mbs", "precision", "iteration_us", "memory_GiB",
                "extrap(%)", "note");
    int shown = 0;
    for (const auto& e : entries) {
      if (shown >= a->top) break;
      ++shown;
      std::printf("  %-4d %-12s %5d %-9s %16.0f %14.2f %10.1f  %s\n", shown, e.config.tuple_string().c_str(), e.config.micro_batch,
                  to_string(e.precision).c_str(), e.iteration_us, e.peak_memory_bytes / static_cast<double>(1ull << 30),
                  100.0 * e.extrapolated_fraction, e.feasible ? "" : e.reason.c_str());
    }
    return 0;
  });
}

}  // namespace itertime::launcher
