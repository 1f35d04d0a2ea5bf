// validation_run.cpp: see the header.
#include "validate/validation_run.hpp"

#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/errors.hpp"
#include "common/calibration_records.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/reference_store.hpp"
#include "common/store_meta.hpp"
#include "predict/fit_model.hpp"
#include "validate/node_span.hpp"
#include "validate/validation_report.hpp"
#include "validate/validation_store.hpp"

namespace itertime::validate {

std::string report_stem(Holdout holdout) { return holdout == Holdout::kTuple ? "validation" : "validation-precision"; }

std::string default_report_dir(const std::string& calibration_file) {
  const std::filesystem::path path(calibration_file);
  return (path.parent_path() / (path.stem().string() + "-validation")).string();
}

namespace {

// The model config /meta groundtruth_model names, when that file is readable here.
std::optional<LlamaSpec> recorded_model(const h5::Store& store) {
  const std::string model_path = store::read_store_meta(store).groundtruth_model;
  if (model_path.empty() || !std::filesystem::is_regular_file(model_path)) return std::nullopt;
  return load_llama_config(model_path);
}

// The ground truth's nodes (store_meta.hpp job_ranks_per_node: how the predictor placed its
// configurations too): each scored row's span in words (node_span.hpp), when the job ran on more than one node.
void annotate_spans(ValidationReport& report, const store::StoreMeta& meta) {
  const int64_t ranks_per_node = store::job_ranks_per_node(meta);
  if (ranks_per_node <= 0) return;
  report.nodes_text = std::to_string(ranks_per_node) + " ranks per node";
  for (ValidationRow& row : report.rows) row.span = node_span_text(row.layout(), ranks_per_node);
}

}  // namespace

ValidationReport run_validation(const ValidationRunOptions& given) {
  ValidationRunOptions options = given;
  const std::string& file = options.calibration_file;
  const predict::FittedModel model = predict::fit_model(file);
  std::vector<store::GroundTruthRecord> rows;
  store::StoreMeta meta;
  DriftSummary drift;
  {
    h5::Store store = h5::Store::open(file, false);
    meta = store::read_store_meta(store);
    if (!store.exists(store::kGroundTruthTable)) {
      throw UserError(file + ": no /groundtruth table; run `itertime calibrate groundtruth --job JOB` first");
    }
    if (!options.model) options.model = recorded_model(store);
    rows = store::read_groundtruth_records(store);
    drift = summarize_drift(store::read_reference_samples(store));
    if (options.compute_report || options.memory_report) {
      const auto ranks = store.table<store::GroundTruthRankRow>(store::kGroundTruthRanks).read_all();
      for (const auto& row : rows)
        h5::check_span(file, store::kGroundTruthRanks, row.ranks_offset, row.ranks_count, ranks.size());
      if (options.compute_report) print_compute_report(compute_report(model, rows, ranks));
      if (options.memory_report && options.model) {
        print_memory_report(memory_report(*options.model, model.attention, rows, ranks));
      }
    }
  }
  ITERTIME_CHECK(!options.holdouts.empty(), "run_validation needs at least one holdout");
  const std::filesystem::path dir(options.report_dir.empty() ? default_report_dir(file) : options.report_dir);
  std::vector<ValidationReport> reports;
  // The raw figures stay beside: where the fit used a re-measured pass somewhere, the same validation
  // with the first profiles only (traced predictions alone; no builder-only), for its overall MAPE.
  const std::optional<predict::FittedModel> first_profiles_model = fit_first_profiles(file, drift);
  for (const Holdout holdout : options.holdouts) {
    reports.push_back(validate(model, rows, options.model ? &*options.model : nullptr, holdout));
    ValidationReport& report = reports.back();
    annotate_spans(report, meta);
    attach_drift(report, drift, first_profiles_model ? &*first_profiles_model : nullptr, rows);
  }
  std::filesystem::create_directories(dir);
  for (const ValidationReport& report : reports) {
    const std::string stem = report_stem(report.holdout);
    write_csv(report, (dir / (stem + ".csv")).string());
    write_json(report, (dir / (stem + ".json")).string());
    write_svg(report, (dir / (stem + ".svg")).string());
  }
  const ValidationReport* tuple_report = nullptr;
  for (const ValidationReport& report : reports) {
    if (report.holdout == Holdout::kTuple) tuple_report = &report;
  }
  const bool stored = options.store_in_calibration && tuple_report != nullptr;
  if (stored) {
    h5::Store store = h5::Store::open(file, true);
    write_validation(store, *tuple_report);
  }
  if (options.save_fitted_model) predict::save_model(model, (dir / "model.itertime").string(), /*force=*/true);
  std::string files;
  for (const ValidationReport& report : reports) {
    const std::string stem = report_stem(report.holdout);
    files += (files.empty() ? "" : ", ") + stem + ".csv, " + stem + ".json, " + stem + ".svg";
    std::printf("\n");
    print_report(report);
  }
  std::printf("# reports in %s (%s%s)%s\n", dir.string().c_str(), files.c_str(),
              options.save_fitted_model ? ", model.itertime" : "", stored ? "; /validation in the calibration file" : "");
  return reports.front();
}

}  // namespace itertime::validate
