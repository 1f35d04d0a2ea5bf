// cmd_framework_fit.cpp: `itertime fit --framework megatron-te FILE... -o TERMS.json`: the framework model
// fitted on a cluster's own logs (predict/framework/framework_fit.hpp): imported training logs (.h5 from
// `itertime import`) and published-figure files (.json, data/published format), all of one GPU.
// Invariants:
//  - Every input is read and every row predicted (described) before anything is written; a row the model
//    refuses is listed and left out; no usable row, or rows of several GPUs without --hardware, is one
//    line, exit 2, and no output file.
//  - The printed table gives each term's meaning, described value, fitted value +- one sigma and how far
//    the logs moved it (in prior sigmas); then the leave-one-model-out MAPE (the fitted path's range),
//    beside the described model's MAPE on the same rows.
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "launcher/commands.hpp"
#include "query/query_options.hpp"
#include "predict/framework/framework_fit.hpp"
#include "predict/framework_plan.hpp"
#include "validate/published_figures.hpp"
#include "validate/published_score.hpp"
#include "validate/validation_imported.hpp"

namespace itertime::launcher {

namespace fw = predict::framework;

namespace {

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The rows of the files, each with its GPU: published rows name theirs (those of another fabric left out,
// said); imported logs run on --hardware.
std::vector<std::pair<std::string, fw::FrameworkObservation>> rows_of_files(const std::vector<std::string>& files,
                                                                            const std::string& hardware_option) {
  std::vector<std::pair<std::string, fw::FrameworkObservation>> rows;  // (gpu, row)
  for (const std::string& file : files) {
    if (ends_with(file, ".json")) {
      const validate::PublishedSource source = validate::load_published_figures(file);
      for (const validate::PublishedRow& row : source.rows) {
        if (!hardware_option.empty() && row.hardware != hardware_option) continue;
        if (row.fabric.nics_per_node || row.fabric.nic_bandwidth_bytes_per_s) {
          std::printf("left out %s/%s: its nodes' fabric differs from the description's\n", source.id.c_str(), row.id.c_str());
          continue;
        }
        rows.emplace_back(row.hardware, validate::observation_of(source, row));
      }
    } else {
      if (hardware_option.empty())
        throw UserError(file + ": imported logs do not name their GPU; pass --hardware NAME (a data/hardware description)");
      for (fw::FrameworkObservation& o : validate::imported_observations(file)) rows.emplace_back(hardware_option, std::move(o));
    }
  }
  return rows;
}

}  // namespace

int run_framework_fit(const std::vector<std::string>& files, const std::string& hardware_option, const std::string& output,
                      bool force) {
  query::refuse_existing(output, force, "-o");
  std::vector<std::pair<std::string, fw::FrameworkObservation>> rows = rows_of_files(files, hardware_option);
  std::set<std::string> gpus;
  for (const auto& [gpu, row] : rows) gpus.insert(gpu);
  if (gpus.empty())
    throw UserError("no rows to fit in the files given" +
                    (hardware_option.empty() ? std::string() : " for --hardware " + hardware_option));
  if (gpus.size() > 1) {
    std::string list;
    for (const std::string& g : gpus) list += (list.empty() ? "" : ", ") + g;
    throw UserError("the rows run on several GPUs (" + list + "); one fit is one cluster: pass --hardware NAME");
  }
  const std::string gpu = *gpus.begin();
  const fw::FrameworkTarget described = predict::framework_target(gpu);
  std::vector<fw::FrameworkObservation> usable;
  validate::ErrorSummary described_error;
  for (auto& [g, row] : rows) {
    try {
      const double predicted = fw::predict_observation(described, row);
      described_error.add(row.measured_us, predicted);
      usable.push_back(std::move(row));
    } catch (const UserError& error) {
      std::printf("left out %s: %s\n", row.id.c_str(), error.what());
    }
  }
  if (usable.empty()) throw UserError("no row the framework model can predict; nothing to fit");
  fw::FrameworkFit fit = fw::fit_framework_terms(described, usable);
  // The fitted path's range: leave-one-model-out over the same rows.
  std::map<std::string, validate::GpuRows> one;
  validate::GpuRows& group = one[gpu];
  group.target = described;
  group.rows = usable;
  for (size_t i = 0; i < usable.size(); ++i) group.index.push_back(i);
  std::set<std::string> models;
  for (const fw::FrameworkObservation& row : usable) models.insert(row.model);
  fit.models = static_cast<int>(models.size());
  const std::vector<double> held_out = validate::fitted_leave_one_model_out(one, usable.size());
  validate::ErrorSummary lomo;
  for (size_t i = 0; i < usable.size(); ++i) lomo.add(usable[i].measured_us, held_out[i] * 1e6);
  if (lomo.predicted > 0) fit.lomo_mape_pct = lomo.mape(), fit.lomo_rows = lomo.predicted;
  query::write_text_file(output, fw::write_fitted_terms_json(fit));

  std::printf("itertime fit: framework megatron-te on %s, %zu rows of %d model(s), written to %s\n", gpu.c_str(), usable.size(),
              fit.models, output.c_str());
  std::printf("  %-26s %-10s %-10s %-18s %-8s  %s\n", "term", "described", "fitted", "+- 1 sigma", "moved", "meaning");
  for (const fw::FittedTerm& t : fit.table) {
    std::printf("  %-26s %-10.4g %-10.4g +- %-15.3g %+6.2f sigma  %s (%s)\n", t.name.c_str(), t.described, t.fitted, t.sigma,
                t.moved_sigmas, t.meaning.c_str(), t.unit.c_str());
  }
  std::printf("  rms log error: described %.4f, fitted %.4f (in-sample); described MAPE %.1f%% (mean error %+.1f%%) on %d rows\n",
              fit.rms_log_error_described, fit.rms_log_error_fitted, described_error.mape(), described_error.bias(),
              described_error.predicted);
  std::printf("  each row trusted to %.1f%% (%s)\n", 100.0 * fit.step_time_sigma,
              fit.step_time_sigma > 0.0301 ? "the rows' own scatter: they disagree beyond a step time's 3%"
                                           : "a step time's repeatability");
  if (std::isfinite(fit.lomo_mape_pct)) {
    std::printf("  leave-one-model-out: MAPE %.1f%% (mean error %+.1f%%) on %d rows: the range fitted predictions quote\n",
                fit.lomo_mape_pct, lomo.bias(), fit.lomo_rows);
  } else {
    std::printf("  leave-one-model-out: not measured (rows of one model only): fitted predictions quote no range\n");
  }
  std::printf("  moved: (fitted - described) in the prior's sigmas; use it with predict/plan --fitted %s\n", output.c_str());
  return 0;
}

}  // namespace itertime::launcher
