// prediction_report.cpp: console and JSON reporters of fit, predict and plan (see the header).
#include "validate/prediction_report.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/parallel_config_json.hpp"
#include "common/training_techniques.hpp"
#include "validate/duration_text.hpp"

namespace itertime::validate {
namespace {

std::string libtorch_shown(const std::string& version) { return version.empty() ? "1.13 (not recorded)" : version; }

// What each training-condition line of the framework model is (docs/framework.md "Training conditions").
std::string training_cost_meaning(const std::string& name) {
  if (name == "clock") return "(the sustained training clock below the kernel figures')";
  if (name == "contention") return "(compute slowed beside overlapped communication)";
  if (name == "sync") return "(waiting for the latest rank at the gradient-norm all-reduce, and that all-reduce)";
  if (name == "host") return "(the GPU waiting for the host to issue kernels)";
  if (name == "straggler") return "(waiting for the slowest of the job's GPUs)";
  return "";
}

// The lines that add up to the iteration (with the adjustments): the framework model's training-condition
// lines (clock, contention, sync, host, straggler) among them.
nlohmann::json breakdown_json(const predict::Prediction& p) {
  nlohmann::json out{{"compute", p.compute_us},    {"tp_comm", p.tp_comm_us}, {"cp_comm", p.cp_comm_us},
                     {"pp_comm", p.pp_comm_us},    {"bubble", p.bubble_us},   {"dp_comm", p.dp_comm_us},
                     {"optimizer", p.optimizer_us}};
  for (const auto& [name, us] : p.training_costs_us) out[name] = us;
  return out;
}

std::string percent(double fraction, int decimals = 0) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f %%", decimals, 100.0 * fraction);
  return text;
}

std::string plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The memory limit's verdict: "device 80.00 GiB" and by how much it is exceeded.
std::string memory_verdict(const PredictionRecord& r) {
  if (r.device_memory_bytes <= 0) return "no device limit known (--device-memory-gib)";
  const double over = static_cast<double>(r.peak_memory_bytes) - r.device_memory_bytes;
  std::string out = "device " + bytes_text(static_cast<int64_t>(r.device_memory_bytes));
  if (over > 0) out += ": EXCEEDS the device memory by " + bytes_text(static_cast<int64_t>(over));
  return out;
}

// Whether the split was filled (a record made without it keeps its zero total).
bool has_split(const PredictionRecord& r) { return r.memory.total_bytes > 0 && r.memory.total_bytes == r.peak_memory_bytes; }

}  // namespace

std::string rests_on_text(const PredictionRecord& r) {
  const predict::Prediction& p = r.prediction;
  if (r.framework) {
    return "the Megatron-Core + TE stage built from the model (described), its kernels timed from published figures, "
           "communication from NCCL's cost model of the description (described); no calibration";
  }
  std::string out;
  if (p.stages_traced > 0) out += plural(p.stages_traced, "traced stage", "traced stages");
  if (p.stages_built > 0) {
    out += std::string(out.empty() ? "" : ", ") + plural(p.stages_built, "stage", "stages") + " built from the model (" +
           std::to_string(p.built_operators_profiled) + " of " + std::to_string(p.built_operators) + " operators profiled";
    if (p.built_operators_without_time > 0) out += ", " + std::to_string(p.built_operators_without_time) + " priced at zero";
    out += ")";
  }
  if (p.stages_described > 0) {
    out += std::string(out.empty() ? "" : ", ") + plural(p.stages_described, "stage", "stages") +
           " built from the model and timed by " + r.hardware + "'s operator roofline (described)";
  } else {
    out += "; operator time " + percent(1.0 - p.extrapolated_fraction) + " profiled, " + percent(p.extrapolated_fraction) +
           " from the regression (extrapolated)";
  }
  out += p.communication_described ? "; communication from NCCL's cost model of the description (described)"
                                   : "; communication measured (/comm)";
  if (p.calibration_rows > 0) {
    char text[160];
    std::snprintf(text, sizeof(text), "; calibration (x %.3f, %.1f \u00b5s per operator call) fitted on %lld ground-truth runs",
                  p.calibration_factor, p.op_overhead_us, static_cast<long long>(p.calibration_rows));
    out += text;
  } else if (p.stages_described > 0 || p.communication_described) {
    out += "; no ground-truth factor";
  } else {
    out += "; no calibration factor applied";
  }
  return out;
}

std::string prediction_json(const PredictionRecord& r) {
  const predict::Prediction& p = r.prediction;
  const predict::PooledCheck& check = r.regression_check;
  nlohmann::json flags = nlohmann::json::array();
  for (const predict::Finding& f : r.flags) {
    flags.push_back({{"code", f.code}, {"message", f.message}, {"hint", f.hint}});
  }
  nlohmann::json memory = nullptr;
  if (has_split(r)) {
    memory = {{"pipeline_rank", r.memory.pipeline_rank},   {"weights", r.memory.weights_bytes},
              {"gradients", r.memory.gradients_bytes},     {"optimizer", r.memory.optimizer_bytes},
              {"activations", r.memory.activations_bytes}, {"other", r.memory.other_bytes},
              {"other_holds", r.memory.other_holds}};
  }
  const double over = r.device_memory_bytes > 0 ? static_cast<double>(r.peak_memory_bytes) - r.device_memory_bytes : 0.0;
  nlohmann::json out = parallel_config_json(r.config);
  out.update(
      {{"model", r.model_name},
       {"precision", r.precision},
       {"precision_blind", r.blind},
       {"recipe", r.recipe},
       {"defaults", r.defaults},
       {"attention", r.attention},
       {"libtorch_version", r.described.empty() ? libtorch_shown(r.libtorch_version) : "2.x (described)"},
       {"described", r.described.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.described)},
       {"flags", flags},
       {"iteration_us", p.total_us},
       {"range_pct", r.range.pct ? nlohmann::json(*r.range.pct) : nlohmann::json(nullptr)},
       {"range_basis", r.range.basis},
       {"rests_on",
        {{"summary", rests_on_text(r)},
         {"stages_traced", p.stages_traced},
         {"stages_built", p.stages_built},
         {"stages_described", p.stages_described},
         {"built_operators", p.built_operators},
         {"built_operators_profiled", p.built_operators_profiled},
         {"built_operators_without_time", p.built_operators_without_time},
         {"operator_time_from_regression", p.extrapolated_fraction},
         {"communication", p.communication_described ? "described" : "measured"},
         {"calibration_runs", p.calibration_rows}}},
       {"raw_iteration_us", p.raw_total_us},
       {"calibration_factor", p.calibration_factor},
       {"op_overhead_us", p.op_overhead_us},
       {"op_calls", p.op_calls},
       {"critical_rank", p.critical_rank},
       {"breakdown_us", breakdown_json(p)},
       {"adjustments_us", {{"per_call_overhead", p.overhead_total_us}, {"calibration_factor", p.calibration_adjust_us}}},
       {"hidden_us", {{"dp_reduction", p.hidden_reduction_us}, {"parameter_gather", p.hidden_gather_us}}},
       {"stage_forward_us", p.stage_forward_us},
       {"stage_backward_us", p.stage_backward_us},
       {"extrapolated_fraction", p.extrapolated_fraction},
       {"peak_memory_bytes", r.peak_memory_bytes},
       {"memory_split_bytes", memory},
       {"device_memory_bytes", r.device_memory_bytes > 0 ? nlohmann::json(r.device_memory_bytes) : nlohmann::json(nullptr)},
       {"exceeds_device_memory", r.exceeds_device_memory},
       {"exceeds_by_bytes", over > 0 ? over : 0.0},
       {"notes", p.notes},
       {"tokens_per_s_per_rank", r.throughput.tokens_per_s_per_rank},
       {"model_flops_per_iteration", r.throughput.model_flops_per_iteration},
       {"hardware", r.hardware.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.hardware)},
       {"mfu", r.throughput.mfu ? nlohmann::json(*r.throughput.mfu) : nlohmann::json(nullptr)},
       {"regression_check",
        {{"groups", check.groups},
         {"held_out_signatures", check.held_out_points},
         {"mape_pct", check.mape_pct},
         {"time_weighted_mape_pct", check.time_weighted_mape_pct}}}});
  return out.dump(2);
}

void print_prediction(const PredictionRecord& r) {
  const predict::Prediction& p = r.prediction;
  const auto line = [](const char* label, const std::string& value, const std::string& comment = "") {
    std::printf("    %-20s %s%s%s\n", label, right_aligned(value, 12).c_str(), comment.empty() ? "" : "  ", comment.c_str());
  };
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
  for (const std::string& text : r.defaults) std::printf("  default            %s\n", text.c_str());
  for (const predict::Finding& f : r.flags) {
    std::printf("  FLAG               %s: %s; %s\n", f.code.c_str(), f.message.c_str(), f.hint.c_str());
  }
  std::printf("  iteration          %s", right_aligned(duration_text(p.total_us), 12).c_str());
  if (r.range.pct) {
    std::printf("  \u00b1 %.1f %% (%s)\n", *r.range.pct, r.range.basis.c_str());
  } else {
    std::printf("  range: %s\n", r.range.basis.c_str());
  }
  std::printf("  rests on           %s\n", rests_on_text(r).c_str());
  std::printf("  breakdown on pipeline rank %d, the last to finish (the lines add up to the iteration):\n", p.critical_rank);
  line("compute", duration_text(p.compute_us));
  line("TP comm", duration_text(p.tp_comm_us));
  if (r.config.cp > 1) line("CP comm", duration_text(p.cp_comm_us));
  line("PP comm", duration_text(p.pp_comm_us));
  line("bubble", duration_text(p.bubble_us));
  line("DP comm + buffer", duration_text(p.dp_comm_us));
  line("optimizer", duration_text(p.optimizer_us));
  for (const auto& [name, us] : p.training_costs_us) line(name.c_str(), duration_text(us), training_cost_meaning(name));
  if (p.overhead_total_us != 0.0) {
    char text[160];
    std::snprintf(text, sizeof(text), "(%.1f \u00b5s x %lld calls on the busiest rank, fitted on ground truth)", p.op_overhead_us,
                  static_cast<long long>(p.op_calls));
    line("per-call overhead", duration_text(p.overhead_total_us), text);
  }
  if (p.calibration_factor != 1.0) {
    char text[96];
    std::snprintf(text, sizeof(text), "(x %.3f, fitted on ground truth)", p.calibration_factor);
    line("calibration factor", duration_text(p.calibration_adjust_us), text);
  }
  line("= iteration", duration_text(p.total_us));
  if (p.hidden_reduction_us >= 0.05 || p.hidden_gather_us >= 0.05) {  // what shows as 0.0 µs is rounding
    std::printf("  hidden by overlap  (not counted) DP reduction %s, parameter gather %s\n",
                duration_text(p.hidden_reduction_us).c_str(), duration_text(p.hidden_gather_us).c_str());
  }
  if (!r.framework) {
    std::printf("  extrapolated       %12.1f %% of compute time from the operator regression\n", 100.0 * p.extrapolated_fraction);
  }
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
  std::printf("  peak memory        %s per rank (pipeline rank %d); %s\n",
              right_aligned(bytes_text(r.peak_memory_bytes), 12).c_str(), r.memory.pipeline_rank, memory_verdict(r).c_str());
  if (has_split(r)) {
    line("weights", bytes_text(r.memory.weights_bytes));
    line("gradients", bytes_text(r.memory.gradients_bytes));
    line("optimizer state", bytes_text(r.memory.optimizer_bytes));
    line("activations", bytes_text(r.memory.activations_bytes));
    line("other", bytes_text(r.memory.other_bytes), "(" + r.memory.other_holds + ")");
  }
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
