// validation_imported.cpp: see the header.
#include "validate/validation_imported.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "predict/fit_model.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework_plan.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/stage_resolver.hpp"
#include "validate/published_score.hpp"
#include "predict/resolver/target_device.hpp"
#include "validate/duration_text.hpp"

namespace itertime::validate {

std::string describe(const ImportedSource& source) {
  switch (source.kind) {
    case ImportedSource::Kind::kCalibrated:
      return "calibrated (" + source.calibration_file + ": /comm, /ops, its own ground truth)";
    case ImportedSource::Kind::kDescribed:
      return "described " + source.hardware + " (itertime's operator model on the description)";
    case ImportedSource::Kind::kFramework: return "framework megatron-te on " + source.hardware + " (published kernel figures)";
  }
  return "";
}

predict::framework::FrameworkRequest framework_request_of(const store::GroundTruthRecord& row, const store::ImportRecord& log) {
  LlamaSpec spec = log.model;
  spec.name = row.model;
  predict::framework::FrameworkRequest request;
  request.shape = predict::framework::shape_of(spec);
  request.config = row.config;
  request.recipe.precision = row.precision;
  request.recipe.techniques = at_dp(row.techniques, row.config.reduction_ranks());
  request.recipe.fp8_recipe = predict::framework::parse_fp8_recipe(log.fp8_recipe.empty() ? "delayed" : log.fp8_recipe);
  request.recipe.tp_comm_overlap = log.tp_comm_overlap;
  request.recipe.fp8_param_gather = log.fp8_param_gather;
  return request;
}

std::vector<predict::framework::FrameworkObservation> imported_observations(const std::string& file) {
  h5::Store store = h5::Store::open(file, false);
  const std::vector<store::GroundTruthRecord> rows = store::read_imported_groundtruth_records(store);
  std::map<std::string, store::ImportRecord> logs;
  for (store::ImportRecord& log : store::read_import_records(store)) logs[log.key] = std::move(log);
  std::vector<predict::framework::FrameworkObservation> out;
  for (const store::GroundTruthRecord& row : rows) {
    const auto log = logs.find(row.key);
    if (log == logs.end()) continue;
    predict::framework::FrameworkObservation o;
    o.id = file + ":" + row.key;
    o.request = framework_request_of(row, log->second);
    o.model = predict::framework::model_key(o.request.shape);
    o.measured_us = row.time_us_median;
    out.push_back(std::move(o));
  }
  return out;
}

namespace {

// One source's predictions, built once for the whole report.
class Predictor {
 public:
  explicit Predictor(const ImportedSource& source) : source_(source) {
    switch (source.kind) {
      case ImportedSource::Kind::kFramework: framework_ = predict::framework_target(source.hardware); break;
      case ImportedSource::Kind::kDescribed: {
        choice_ = predict::choose_hardware(nullptr, source.hardware, "");
        if (!choice_.target) throw UserError("--hardware " + source.hardware + ": no operator model for it (a described device)");
        resolver_.emplace(fitted_, &*choice_.target);
        break;
      }
      case ImportedSource::Kind::kCalibrated:
        fitted_ = predict::fit_model(source.calibration_file);
        resolver_.emplace(fitted_, predict::StagePolicy::kTracedThenBuilt);
        break;
    }
  }

  // The predicted iteration time, or the reason there is none.
  std::optional<double> predict(const store::GroundTruthRecord& row, const store::ImportRecord& log, std::string& reason) {
    LlamaSpec spec = log.model;
    spec.name = row.model;
    if (source_.kind == ImportedSource::Kind::kFramework) {
      const predict::framework::FrameworkOutcome outcome =
          predict::framework::predict_framework(*framework_, framework_request_of(row, log));
      if (!outcome.ok()) {
        reason = outcome.reason;
        return std::nullopt;
      }
      return outcome.prediction->total_us;
    }
    if (log.tp_comm_overlap || log.fp8_param_gather) {
      reason = "the run's TP comm overlap / fp8 parameters are modelled by --framework megatron-te only";
      return std::nullopt;
    }
    predict::PredictRequest request;
    request.model_name = spec.name;
    request.model = &spec;
    request.config = row.config;
    request.precision = row.precision;
    request.techniques = row.techniques;
    request.calibrated = true;
    try {
      const predict::PredictOutcome outcome = predict::predict(*resolver_, request);
      if (!outcome.ok()) {
        reason = outcome.reason;
        return std::nullopt;
      }
      return outcome.prediction->total_us;
    } catch (const UserError& error) {
      reason = error.what();
      return std::nullopt;
    }
  }

 private:
  ImportedSource source_;
  predict::FittedModel fitted_;
  predict::HardwareChoice choice_;
  std::optional<predict::framework::FrameworkTarget> framework_;
  std::optional<predict::StageResolver> resolver_;
};

std::vector<MapeEntry> grouped(const std::vector<ValidationRow>& rows, std::string (*group_of)(const ValidationRow&)) {
  std::map<std::string, std::vector<const ValidationRow*>> groups;
  for (const ValidationRow& row : rows) {
    if (row.status == "ok") groups[group_of(row)].push_back(&row);
  }
  std::vector<MapeEntry> out;
  for (const auto& [name, members] : groups) out.push_back(summarize(name, members));
  return out;
}

std::string floor_text(double pct) {
  if (!std::isfinite(pct)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "±%.2f%%", pct);
  return text;
}

}  // namespace

namespace {

// The comparison's MAPE entries over the rows it predicted (a copy of each row with its prediction).
void summarize_comparison(const ImportedValidation& report, ImportedComparison& c) {
  std::vector<ValidationRow> rows;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    ValidationRow row = report.rows[i];
    if (row.status != "ok" || !std::isfinite(c.predicted_us[i])) {
      row.status = "unpredicted";
    } else {
      row.predicted_us = row.raw_predicted_us = c.predicted_us[i];
      row.ape_pct = 100.0 * std::abs(row.predicted_us - row.measured_us) / row.measured_us;
    }
    rows.push_back(row);
  }
  c.per_tuple = grouped(rows, [](const ValidationRow& r) { return r.tuple; });
  c.per_precision = grouped(rows, [](const ValidationRow& r) { return r.precision; });
  std::vector<const ValidationRow*> scored;
  for (const ValidationRow& row : rows)
    if (row.status == "ok") scored.push_back(&row);
  c.overall = summarize("overall", scored);
}

void add_comparisons(ImportedValidation& report, const ImportedSource& source, const std::vector<store::GroundTruthRecord>& rows,
                     const std::map<std::string, store::ImportRecord>& logs) {
  namespace fw = predict::framework;
  const fw::FrameworkTarget target = predict::framework_target(source.hardware);
  const size_t n = rows.size();
  std::vector<fw::FrameworkObservation> observations(n);
  std::vector<size_t> ok;
  std::vector<double> ideal, measured;
  for (size_t i = 0; i < n; ++i) {
    if (report.rows[i].status != "ok") continue;
    fw::FrameworkObservation& o = observations[i];
    o.id = rows[i].key;
    o.request = framework_request_of(rows[i], logs.at(rows[i].key));
    o.model = fw::model_key(o.request.shape);
    o.measured_us = rows[i].time_us_median;
    ideal.push_back(ideal_seconds(o.request.shape, o.request.config, o.request.recipe.precision, target.hardware) * 1e6);
    measured.push_back(o.measured_us);
    ok.push_back(i);
  }
  ImportedComparison constant{"constant MFU (leave-one-out)", std::vector<double>(n, NAN), {}, {}, {}};
  const std::vector<double> c = constant_mfu_leave_one_out(ideal, measured);
  for (size_t k = 0; k < ok.size(); ++k) constant.predicted_us[ok[k]] = c[k];
  ImportedComparison lolo{"fitted, leave-one-log-out", std::vector<double>(n, NAN), {}, {}, {}};
  ImportedComparison lomo{"fitted, leave-one-model-out", std::vector<double>(n, NAN), {}, {}, {}};
  for (size_t k = 0; k < ok.size() && ok.size() >= 2; ++k) {
    std::vector<fw::FrameworkObservation> training;
    for (size_t j : ok)
      if (j != ok[k]) training.push_back(observations[j]);
    fw::FrameworkTarget fitted = target;
    fitted.terms = fw::fit_framework_terms(target, training).terms;
    lolo.predicted_us[ok[k]] = fw::predict_observation(fitted, observations[ok[k]]);
  }
  // Leave-one-model-out as score-published does it: one fit per model left out, not one per row.
  std::map<std::string, GpuRows> group;
  GpuRows& rows_of_gpu = group[source.hardware];
  rows_of_gpu.target = target;
  for (size_t j : ok) rows_of_gpu.rows.push_back(observations[j]), rows_of_gpu.index.push_back(j);
  const std::vector<double> held_out_s = fitted_leave_one_model_out(group, n);
  for (size_t j : ok) lomo.predicted_us[j] = held_out_s[j] * 1e6;
  for (ImportedComparison* comparison : {&constant, &lolo, &lomo}) {
    summarize_comparison(report, *comparison);
    report.comparisons.push_back(std::move(*comparison));
  }
}

}  // namespace

ImportedValidation validate_imported(const std::string& calibration_file, const ImportedSource& source) {
  std::vector<store::GroundTruthRecord> rows;
  std::map<std::string, store::ImportRecord> logs;
  {
    h5::Store store = h5::Store::open(calibration_file, false);
    rows = store::read_imported_groundtruth_records(store);
    for (store::ImportRecord& log : store::read_import_records(store)) logs[log.key] = std::move(log);
  }
  if (rows.empty()) {
    throw UserError(calibration_file + ": no imported ground truth (/groundtruth/imports); `itertime import LOG -o " +
                    calibration_file + "` first");
  }
  Predictor predictor(source);
  ImportedValidation report;
  report.calibration_file = calibration_file;
  report.source = describe(source);
  for (const store::GroundTruthRecord& record : rows) {
    ValidationRow row = unscored_row(record);
    std::string reason;
    const std::optional<double> predicted = predictor.predict(record, logs.at(record.key), reason);
    if (predicted) {
      row.status = "ok";
      row.predicted_us = *predicted;
      row.raw_predicted_us = *predicted;
      row.ape_pct = 100.0 * std::abs(*predicted - row.measured_us) / row.measured_us;
    } else {
      row.status = "unpredicted";
      row.reason = reason;
    }
    report.rows.push_back(row);
    report.logs.push_back(record.imported_from);
  }
  report.per_tuple = grouped(report.rows, [](const ValidationRow& r) { return r.tuple; });
  report.per_precision = grouped(report.rows, [](const ValidationRow& r) { return r.precision; });
  std::vector<const ValidationRow*> scored;
  for (const ValidationRow& row : report.rows) {
    if (row.status == "ok") scored.push_back(&row);
  }
  report.overall = summarize("overall", scored);
  if (source.kind == ImportedSource::Kind::kFramework) add_comparisons(report, source, rows, logs);
  return report;
}

void print_imported_report(const ImportedValidation& report) {
  std::printf("imported ground truth of %s scored by %s\n", report.calibration_file.c_str(), report.source.c_str());
  std::printf("%-28s %-14s %-9s %-20s %12s %12s %8s %8s\n", "log", "(dp,tp,pp)", "precision", "recipe", "measured", "predicted",
              "APE", "floor");
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const ValidationRow& row = report.rows[i];
    std::string log = report.logs[i];
    log = log.substr(log.find_last_of('/') == std::string::npos ? 0 : log.find_last_of('/') + 1);
    if (row.status == "ok") {
      std::printf("%-28s %-14s %-9s %-20s %12s %12s %7.1f%% %8s\n", log.c_str(), row.tuple.c_str(), row.precision.c_str(),
                  row.recipe.c_str(), duration_text(row.measured_us).c_str(), duration_text(row.predicted_us).c_str(),
                  row.ape_pct, floor_text(row.round_spread_pct).c_str());
    } else {
      std::printf("%-28s %-14s %-9s %-20s %12s %12s  unpredicted: %s\n", log.c_str(), row.tuple.c_str(), row.precision.c_str(),
                  row.recipe.c_str(), duration_text(row.measured_us).c_str(), "-", row.reason.c_str());
    }
  }
  const auto print_entries = [](const char* heading, const std::vector<MapeEntry>& entries) {
    for (const MapeEntry& e : entries) {
      std::printf("  %-10s %-16s MAPE %6.1f%% over %d, floor %s\n", heading, e.group.c_str(), e.mape_pct, e.count,
                  floor_text(e.floor_pct).c_str());
    }
  };
  print_entries("tuple", report.per_tuple);
  print_entries("precision", report.per_precision);
  if (report.overall.count > 0) {
    std::printf("  %-10s %-16s MAPE %6.1f%% over %d, floor %s\n", "overall", "", report.overall.mape_pct, report.overall.count,
                floor_text(report.overall.floor_pct).c_str());
  } else {
    std::printf("  overall: no configuration predicted\n");
  }
  for (const ImportedComparison& c : report.comparisons) {
    std::printf("beside it, on the same rows: %s\n", c.name.c_str());
    print_entries("tuple", c.per_tuple);
    print_entries("precision", c.per_precision);
    if (c.overall.count > 0) {
      std::printf("  %-10s %-16s MAPE %6.1f%% over %d\n", "overall", "", c.overall.mape_pct, c.overall.count);
    } else {
      std::printf("  overall: none (it needs other logs%s)\n",
                  c.name.find("model") != std::string::npos ? " of other models" : "");
    }
  }
}

}  // namespace itertime::validate
