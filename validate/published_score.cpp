// published_score.cpp: the baselines and the fitted column of `itertime score-published` (published_score.hpp).
#include "validate/published_score.hpp"

#include <set>

#include "common/hardware_spec.hpp"

namespace itertime::validate {

predict::framework::FrameworkTarget described_target_of(const PublishedRow& row) {
  namespace fw = predict::framework;
  fw::FrameworkTarget target;
  target.hardware = find_hardware_spec(row.hardware);
  target.kernels = fw::load_gpu_kernel_figures(target.hardware);
  target.conditions = fw::load_training_conditions(target.hardware);
  if (row.fabric.nics_per_node) target.hardware.nics_per_node = row.fabric.nics_per_node;
  if (row.fabric.nic_bandwidth_bytes_per_s) target.hardware.nic_bandwidth_bytes_per_s = row.fabric.nic_bandwidth_bytes_per_s;
  target.tuning.amd_host_cpu = row.amd_host_cpu;
  return target;
}

predict::framework::FrameworkObservation observation_of(const PublishedSource& source, const PublishedRow& row) {
  predict::framework::FrameworkObservation o;
  o.id = source.id + "/" + row.id;
  o.model = row.shape.name;
  o.request = predict::framework::FrameworkRequest{row.shape, row.config, row.recipe};
  o.measured_us = measured_seconds_per_iteration(row) * 1e6;
  o.amd_host_cpu = row.amd_host_cpu;
  return o;
}

std::vector<double> constant_mfu_leave_one_out(const std::vector<double>& ideal_s, const std::vector<double>& measured_s) {
  const size_t n = ideal_s.size();
  std::vector<double> out(n, NAN);
  if (n < 2 || measured_s.size() != n) return out;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::log(ideal_s[i] / measured_s[i]);
  for (size_t i = 0; i < n; ++i) {
    const double mean_log_mfu = (sum - std::log(ideal_s[i] / measured_s[i])) / static_cast<double>(n - 1);
    out[i] = ideal_s[i] / std::exp(mean_log_mfu);
  }
  return out;
}

void ErrorSummary::add(double measured, double predicted_value) {
  ++rows;
  if (!std::isfinite(predicted_value)) return;
  ++predicted;
  const double error = (predicted_value - measured) / measured * 100.0;
  sum_abs += std::fabs(error);
  sum_signed += error;
}

std::vector<double> fitted_leave_one_model_out(const std::map<std::string, GpuRows>& by_gpu, size_t total_rows) {
  namespace fw = predict::framework;
  std::vector<double> out(total_rows, NAN);
  for (const auto& [gpu, group] : by_gpu) {
    std::set<std::string> models;
    for (const fw::FrameworkObservation& row : group.rows) models.insert(row.model);
    if (models.size() < 2) continue;
    for (const std::string& held_out : models) {
      std::vector<fw::FrameworkObservation> training;
      for (const fw::FrameworkObservation& row : group.rows)
        if (row.model != held_out) training.push_back(row);
      const fw::FrameworkFit fit = fw::fit_framework_terms(group.target, training);
      fw::FrameworkTarget fitted = group.target;
      fitted.terms = fit.terms;
      for (size_t k = 0; k < group.rows.size(); ++k) {
        if (group.rows[k].model != held_out) continue;
        out[group.index[k]] = fw::predict_observation(fitted, group.rows[k]) * 1e-6;
      }
    }
  }
  return out;
}

}  // namespace itertime::validate
