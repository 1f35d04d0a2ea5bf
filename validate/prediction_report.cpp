// prediction_report.cpp: console and JSON reporters of fit, predict and plan (see the header).
#include "validate/prediction_report.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/training_techniques.hpp"

namespace itertime::validate {
namespace {

constexpr double kGiB = static_cast<double>(1ull << 30);

std::string libtorch_shown(const std::string& version) { return version.empty() ? "1.13 (not recorded)" : version; }

}  // namespace

std::string prediction_json(const PredictionRecord& r) {
  const predict::Prediction& p = r.prediction;
  const predict::PooledCheck& check = r.regression_check;
  const nlohmann::json out = {{"model", r.model_name},
                              {"dp", r.config.dp},
                              {"tp", r.config.tp},
                              {"pp", r.config.pp},
                              {"cp", r.config.cp},
                              {"vp", r.config.vp},
                              {"micro_batch", r.config.micro_batch},
                              {"global_batch", r.config.global_batch},
                              {"seq_len", r.config.seq_len},
                              {"precision", r.precision},
                              {"precision_blind", r.blind},
                              {"recipe", r.recipe},
                              {"attention", r.attention},
                              {"libtorch_version", r.described.empty() ? libtorch_shown(r.libtorch_version) : "2.x (described)"},
                              {"described", r.described.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.described)},
                              {"iteration_us", p.total_us},
                              {"raw_iteration_us", p.raw_total_us},
                              {"calibration_factor", p.calibration_factor},
                              {"op_overhead_us", p.op_overhead_us},
                              {"op_calls", p.op_calls},
                              {"breakdown_us",
                               {{"compute", p.compute_us},
                                {"tp_comm", p.tp_comm_us},
                                {"cp_comm", p.cp_comm_us},
                                {"pp_comm", p.pp_comm_us},
                                {"bubble", p.bubble_us},
                                {"dp_comm", p.dp_comm_us},
                                {"optimizer", p.optimizer_us}}},
                              {"stage_forward_us", p.stage_forward_us},
                              {"stage_backward_us", p.stage_backward_us},
                              {"extrapolated_fraction", p.extrapolated_fraction},
                              {"peak_memory_bytes", r.peak_memory_bytes},
                              {"exceeds_device_memory", r.exceeds_device_memory},
                              {"notes", p.notes},
                              {"tokens_per_s_per_rank", r.throughput.tokens_per_s_per_rank},
                              {"model_flops_per_iteration", r.throughput.model_flops_per_iteration},
                              {"hardware", r.hardware.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.hardware)},
                              {"mfu", r.throughput.mfu ? nlohmann::json(*r.throughput.mfu) : nlohmann::json(nullptr)},
                              {"regression_check",
                               {{"groups", check.groups},
                                {"held_out_signatures", check.held_out_points},
                                {"mape_pct", check.mape_pct},
                                {"time_weighted_mape_pct", check.time_weighted_mape_pct}}}};
  return out.dump(2);
}

void print_prediction(const PredictionRecord& r) {
  const predict::Prediction& p = r.prediction;
  std::printf("itertime predict: %s %s %s%s%s on %s\n", r.model_name.c_str(), r.config.to_string().c_str(), r.precision.c_str(),
              r.recipe == "plain" ? "" : (" " + r.recipe).c_str(), r.blind ? " (precision-blind)" : "", r.source.c_str());
  if (!r.described.empty() && r.attention.empty()) {  // a framework model: the description says it all
    std::printf("  described          %s\n", r.described.c_str());
  } else if (!r.described.empty()) {
    std::printf("  described          %s attention, LibTorch 2.x operator sequence; %s\n", r.attention.c_str(),
                r.described.c_str());
  } else {
    std::printf("  calibrated with    %s attention, LibTorch %s\n", r.attention.c_str(),
                libtorch_shown(r.libtorch_version).c_str());
  }
  std::printf("  iteration          %12.1f us", p.total_us);
  if (p.op_overhead_us != 0.0 || p.calibration_factor != 1.0) {
    std::printf("  (operators alone %.1f us; + %.1f us x %lld operator calls, x %.3f, fitted on ground truth)", p.raw_total_us,
                p.op_overhead_us, static_cast<long long>(p.op_calls), p.calibration_factor);
  }
  std::printf("\n  breakdown on the busiest stage (raw):\n");
  std::printf("    compute          %12.1f us\n    TP comm          %12.1f us\n", p.compute_us, p.tp_comm_us);
  if (r.config.cp > 1) std::printf("    CP comm          %12.1f us\n", p.cp_comm_us);
  std::printf("    PP comm          %12.1f us\n", p.pp_comm_us);
  std::printf("    bubble           %12.1f us\n    DP comm + buffer %12.1f us\n    optimizer        %12.1f us\n", p.bubble_us,
              p.dp_comm_us, p.optimizer_us);
  std::printf("  extrapolated       %12.1f %% of compute time from the operator regression\n", 100.0 * p.extrapolated_fraction);
  if (p.extrapolated_fraction > 0) {
    if (r.regression_check.groups > 0) {
      std::printf(
          "                     (that regression, scored on the largest third of this calibration's profiled\n"
          "                      signatures after fitting on the rest, is off by %.1f%% time-weighted; far beyond\n"
          "                      the profiled shapes expect more: profile this configuration with `calibrate ops`)\n",
          r.regression_check.time_weighted_mape_pct);
    } else {
      std::printf("                     (no regression group has enough profiled signatures to check it)\n");
    }
  }
  std::printf("  peak memory        %12.2f GiB per rank (busiest stage)%s\n", static_cast<double>(r.peak_memory_bytes) / kGiB,
              r.exceeds_device_memory ? "  EXCEEDS the device memory" : "");
  std::printf("  tokens/s per rank  %12.1f  (model: %.3g FLOP per iteration)\n", r.throughput.tokens_per_s_per_rank,
              r.throughput.model_flops_per_iteration);
  if (r.throughput.mfu) {
    std::printf("  MFU                %12.2f %% of %s's dense %s peak (%.3g FLOP/s over the ranks' devices)\n",
                100.0 * *r.throughput.mfu, r.hardware.c_str(),
                to_string(predict::compute_dtype_of(parse_precision(r.precision).name)).c_str(), *r.throughput.peak_flops_per_s);
  } else {
    std::printf("  MFU                %12s  (%s)\n", "-",
                r.hardware.empty() ? "the calibration names no hardware description; see --hardware"
                                   : (r.hardware + " has no dense peak for this precision's math").c_str());
  }
  for (const auto& note : p.notes) std::printf("  note: %s\n", note.c_str());
}

namespace {

// The transferable operator model: each class's efficiency and floor, and how the fit carries to the
// other profiled occupancies (predict/device/operator_roofline.hpp).
void print_roofline_summary(const predict::FittedModel& model) {
  if (model.roofline.empty()) {
    std::printf("operator roofline: none (the calibration's devices match no hardware description this build ships)\n");
    return;
  }
  std::printf("operator roofline against %s, fitted on %s:\n", model.roofline.fitted_on.c_str(),
              model.roofline.fitted_from.c_str());
  const auto line = [](const std::string& name, const predict::ClassEfficiency& e) {
    std::printf("  %-26s efficiency %7.4f  floor %8.2f us  over %5lld calls  rms log error %.3f\n", name.c_str(), e.efficiency,
                e.floor_us, static_cast<long long>(e.points), e.fit_rms_log);
  };
  for (const auto& [dtype, e] : model.roofline.matrix) line("matrix_product/" + to_string(dtype), e);
  for (const auto& [dtype, e] : model.roofline.attention) line("attention/" + to_string(dtype), e);
  for (const auto& [key, e] : model.roofline.memory) line(predict::to_string(key.first) + "/" + to_string(key.second), e);
  for (const predict::TransferCheck& check : model.roofline_transfer) {
    std::printf(
        "operator roofline transfer: fitted at occupancy %lld, predicting the %lld calls profiled at occupancy %lld: "
        "MAPE %.2f%%, time-weighted %.2f%%\n",
        static_cast<long long>(check.fit_occupancy), static_cast<long long>(check.calls),
        static_cast<long long>(check.check_occupancy), check.mape_pct, check.time_weighted_mape_pct);
    std::printf("   time-weighted by class:");
    for (const auto& [op_class, pct] : check.class_time_weighted_mape_pct)
      std::printf(" %s %.1f%%", predict::to_string(op_class).c_str(), pct);
    std::printf("\n");
  }
}

}  // namespace

void print_fit_summary(const predict::FittedModel& model, const std::string& calibration_file, const std::string& model_file) {
  std::printf("fitted %s -> %s: %zu comm tables, %zu operator signatures, %zu timings, %zu stage traces, %zu regressions\n",
              calibration_file.c_str(), model_file.c_str(), model.comm.tables().size(), model.signatures.size(),
              model.op_time_us.size(), model.stages.size(), model.regressions.size());
  std::printf("comm fit residuals (alpha-beta fit on the largest sizes):\n");
  for (const auto& r : model.comm.residuals()) {
    std::printf("  %-40s alpha %9.2f us  bandwidth %8.3f GB/s  MAPE %6.2f%% over %lld points\n", r.key.to_string().c_str(),
                r.alpha_us, r.bandwidth_GBps, r.mape_pct, static_cast<long long>(r.fit_points));
  }
  const predict::PooledCheck check = predict::pooled_regression_check(model);
  std::printf(
      "operator regression (signatures never profiled): upward check, fitted on the smaller 2/3 of each group,\n"
      "  scored on the largest 1/3: MAPE %.2f%% (time-weighted %.2f%%) over %lld signatures in %lld groups\n",
      check.mape_pct, check.time_weighted_mape_pct, static_cast<long long>(check.held_out_points),
      static_cast<long long>(check.groups));
  for (const auto& [occupancy, c] : model.calibration.per_occupancy) {
    std::printf("calibration at %lld busy rank(s): %.1f us per operator call, factor %.3f (from %lld configurations)\n",
                static_cast<long long>(occupancy), c.op_overhead_us, c.factor, static_cast<long long>(c.rows));
  }
  print_roofline_summary(model);
}

}  // namespace itertime::validate
