// published_query.cpp: see the header.
#include "query/published_query.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/hardware_spec.hpp"
#include "common/training_techniques.hpp"
#include "predict/framework/gpu_kernels.hpp"

namespace itertime::query {
namespace {

namespace fw = predict::framework;

// The shipped files when none is given: data/published/*.json, sorted.
std::vector<std::string> default_files() {
  std::vector<std::string> files;
  std::error_code error;
  const std::string dir = validate::published_figures_dir();
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw UserError(dir + ": no published figures (*.json) there; pass FILE...");
  return files;
}

std::string recipe_of(const validate::PublishedRow& row) {
  std::string text = to_string(row.recipe.precision) + " " + recipe_label(row.recipe.techniques);
  if (row.recipe.tp_comm_overlap) text += "+tpov";
  return text;
}

// The row's GPUs: its description with the source's fabric where it differs, and that GPU's kernel figures.
struct Targets {
  std::map<std::string, HardwareSpec> hardware;
  std::map<std::string, std::optional<fw::GpuKernelFigures>> kernels;
  std::map<std::string, std::string> kernel_errors;
};

Scored score_row(const validate::PublishedSource& source, const validate::PublishedRow& row, Targets& targets) {
  Scored s;
  s.source = &source;
  s.row = &row;
  s.measured_s = validate::measured_seconds_per_iteration(row);
  s.layout = row.config.to_string();
  s.recipe = recipe_of(row);
  const HardwareSpec& described = targets.hardware.at(row.hardware);
  s.ideal_s = validate::ideal_seconds(row.shape, row.config, row.recipe.precision, described);
  if (!targets.kernels.count(row.hardware)) {
    try {
      targets.kernels[row.hardware] = fw::load_gpu_kernel_figures(described);
    } catch (const UserError& error) {
      targets.kernels[row.hardware] = std::nullopt;
      targets.kernel_errors[row.hardware] = error.what();
    }
  }
  const auto& kernels = targets.kernels.at(row.hardware);
  if (!kernels) {
    s.reason = targets.kernel_errors.at(row.hardware);
    return s;
  }
  fw::FrameworkTarget target;
  target.hardware = described;
  if (row.fabric.nics_per_node) target.hardware.nics_per_node = row.fabric.nics_per_node;
  if (row.fabric.nic_bandwidth_bytes_per_s) target.hardware.nic_bandwidth_bytes_per_s = row.fabric.nic_bandwidth_bytes_per_s;
  target.kernels = *kernels;
  target.conditions = fw::load_training_conditions(described);
  s.target = target;
  target.tuning.amd_host_cpu = row.amd_host_cpu;
  fw::FrameworkRequest request;
  request.shape = row.shape;
  request.config = row.config;
  request.recipe = row.recipe;
  fw::FrameworkOutcome outcome;
  try {
    outcome = fw::predict_framework(target, request);
  } catch (const UserError& error) {  // a layout the model refuses by throwing rather than by an outcome
    s.reason = error.what();
    return s;
  }
  if (!outcome.ok()) {
    s.reason = outcome.reason;
    return s;
  }
  s.predicted = true;
  s.prediction = outcome.prediction;
  s.peak_memory_gib = static_cast<double>(outcome.prediction->peak_memory_bytes) / static_cast<double>(1ull << 30);
  s.predicted_s = outcome.prediction->total_us * 1e-6;
  s.error_percent = (s.predicted_s - s.measured_s) / s.measured_s * 100.0;
  return s;
}

}  // namespace

std::unique_ptr<PublishedScores> score_published(const std::vector<std::string>& given) {
  auto scores = std::make_unique<PublishedScores>();
  const std::vector<std::string> files = given.empty() ? default_files() : given;
  // Every file read and every hardware name found before anything is printed: a bad file is one line, exit 2.
  std::vector<validate::PublishedSource>& sources = scores->sources;
  for (const auto& file : files) sources.push_back(validate::load_published_figures(file));
  Targets targets;
  for (const auto& source : sources) {
    for (const auto& row : source.rows) {
      if (targets.hardware.count(row.hardware)) continue;
      try {
        targets.hardware.emplace(row.hardware, find_hardware_spec(row.hardware));
      } catch (const UserError& error) {
        throw UserError(source.path + ": row '" + row.id + "': field 'hardware': " + error.what());
      }
    }
  }
  std::vector<Scored>& scored = scores->scored;
  for (const auto& source : sources) {
    for (const auto& row : source.rows) scored.push_back(score_row(source, row, targets));
  }
  // The constant-MFU baseline over every row with a peak; the fitted column per GPU (and fabric).
  std::vector<double> ideal, measured;
  std::vector<size_t> with_peak;
  std::map<std::string, validate::GpuRows> by_gpu;
  for (size_t i = 0; i < scored.size(); ++i) {
    Scored& s = scored[i];
    if (std::isfinite(s.ideal_s)) ideal.push_back(s.ideal_s), measured.push_back(s.measured_s), with_peak.push_back(i);
    if (!s.predicted) continue;
    const validate::PublishedRow& row = *s.row;
    std::string key = row.hardware;
    if (row.fabric.nics_per_node || row.fabric.nic_bandwidth_bytes_per_s) key += " (" + s.source->id + " fabric)";
    validate::GpuRows& group = by_gpu[key];
    group.target = s.target;
    group.rows.push_back(fw::FrameworkObservation{s.source->id + "/" + row.id, row.shape.name,
                                                  fw::FrameworkRequest{row.shape, row.config, row.recipe}, s.measured_s * 1e6,
                                                  row.amd_host_cpu});
    group.index.push_back(i);
  }
  const std::vector<double> constant = validate::constant_mfu_leave_one_out(ideal, measured);
  for (size_t k = 0; k < with_peak.size(); ++k) scored[with_peak[k]].constant_s = constant[k];
  const std::vector<double> fitted = validate::fitted_leave_one_model_out(by_gpu, scored.size());
  for (size_t i = 0; i < scored.size(); ++i) scored[i].fitted_s = fitted[i];
  std::map<std::string, Summary>& per_source = scores->per_source;
  Summary& overall = scores->overall;
  for (const Scored& s : scored) {
    per_source[s.source->id].add(s);
    overall.add(s);
  }
  return scores;
}

nlohmann::json published_json(const PublishedScores& scores) {
  const std::vector<Scored>& scored = scores.scored;
  const std::map<std::string, Summary>& per_source = scores.per_source;
  const Summary& overall = scores.overall;
  using nlohmann::json;
  json rows = json::array();
  for (const Scored& s : scored) {
    const validate::PublishedRow& row = *s.row;
    json r;
    r["source"] = s.source->id;
    r["file"] = s.source->path;
    r["id"] = row.id;
    r["where"] = row.where;
    r["model"] = row.shape.name;
    r["hardware"] = row.hardware;
    r["gpus"] = row.gpus;
    r["layout"] = s.layout;
    r["recipe"] = s.recipe;
    r["measured"] = {{"value", row.measured_value}, {"unit", to_string(row.unit)}};
    if (row.formula != validate::FlopFormula::kNone) r["measured"]["flop_formula"] = to_string(row.formula);
    r["measured_s_per_iteration"] = s.measured_s;
    r["predicted"] = s.predicted;
    if (s.predicted) {
      r["predicted_s_per_iteration"] = s.predicted_s;
      r["error_percent"] = s.error_percent;
      const fw::FrameworkPrediction& p = *s.prediction;
      r["breakdown_s"] = {{"compute", p.compute_us * 1e-6},
                          {"tp_comm", p.tp_comm_us * 1e-6},
                          {"cp_comm", p.cp_comm_us * 1e-6},
                          {"pp_comm", p.pp_comm_us * 1e-6},
                          {"bubble", p.bubble_us * 1e-6},
                          {"dp_comm", p.dp_comm_us * 1e-6},
                          {"clock", p.clock_us * 1e-6},
                          {"contention", p.contention_us * 1e-6},
                          {"sync", p.sync_us * 1e-6},
                          {"host", p.host_us * 1e-6},
                          {"straggler", p.straggler_us * 1e-6},
                          {"optimizer", p.optimizer_us * 1e-6},
                          {"stage_forward", p.stage_forward_us * 1e-6},
                          {"stage_backward", p.stage_backward_us * 1e-6}};
      r["kernel_launches"] = p.kernel_launches;
      r["peak_memory_gib"] = s.peak_memory_gib;
      r["notes"] = p.notes;
    } else {
      r["reason"] = s.reason;
    }
    if (std::isfinite(s.constant_s)) r["constant_mfu_s_per_iteration"] = s.constant_s;
    if (std::isfinite(s.fitted_s)) r["fitted_lomo_s_per_iteration"] = s.fitted_s;
    rows.push_back(r);
  }
  auto summary_json = [](const Summary& summary) {
    json out{{"rows", summary.rows}, {"predicted", summary.predicted}};
    if (summary.predicted > 0) {
      out["mape_percent"] = summary.mape();
      out["mean_error_percent"] = summary.bias();
    }
    auto part = [](const validate::ErrorSummary& e) {
      json p{{"predicted", e.predicted}};
      if (e.predicted > 0) p["mape_percent"] = e.mape(), p["mean_error_percent"] = e.bias();
      return p;
    };
    out["constant_mfu"] = part(summary.constant);
    out["fitted_leave_one_model_out"] = part(summary.fitted);
    return out;
  };
  json sources = json::object();
  for (const auto& [id, summary] : per_source) sources[id] = summary_json(summary);
  json out{{"rows", rows}, {"sources", sources}, {"overall", summary_json(overall)}};
  return out;
}

}  // namespace itertime::query
