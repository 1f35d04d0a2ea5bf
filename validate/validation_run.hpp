// validation_run.hpp: `itertime validate` and the validate stage of `itertime run`, written once: fit the
// model from a calibration file, predict every ground-truth configuration under each holdout asked for,
// print the tables and write the reports (validation[-precision].csv/.json/.svg, optionally
// model.itertime) and /validation (the leave-one-tuple-out report). Beside each report's floor, the
// machine drift of the calibration's speed reference (validation_drift.hpp); where the fit used a pass
// `calibrate drift` re-measured, the overall MAPE with the first profiles only too (fit once more, traced
// predictions only: nothing extra otherwise).
// Invariants: a calibration without /groundtruth is a UserError raised before any file is written; the
// report folder is created only after the validation succeeded; the calibration file is opened for
// writing only when store_in_calibration asks for /validation in it (off by default).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/model_spec.hpp"
#include "validate/validation.hpp"

namespace itertime::validate {

struct ValidationRunOptions {
  std::string calibration_file;
  std::string report_dir;             // empty: <calibration folder>/<stem>-validation
  bool store_in_calibration = false;  // write /validation into the calibration file (validate --store; run)
  bool compute_report = false;        // print the compute comparison (validation.hpp)
  bool memory_report = false;         // print the memory comparison (needs `model`)
  // The LLaMA config the ground truth trained: for the builder-only predictions and the memory
  // comparison. Unset: read from the path /meta groundtruth_model names, when that file exists.
  std::optional<LlamaSpec> model;
  bool save_fitted_model = false;  // also save the fitted model as <report_dir>/model.itertime
  // Validations to run, each reported in turn: leave-one-tuple-out (validation.*, and /validation) and
  // leave-one-precision-out (validation-precision.*; not stored in the file).
  std::vector<Holdout> holdouts = {Holdout::kTuple};
};

// The report files' stem of a holdout: validation (tuple) or validation-precision.
std::string report_stem(Holdout holdout);

std::string default_report_dir(const std::string& calibration_file);

// Returns the first holdout's report.
ValidationReport run_validation(const ValidationRunOptions& options);

}  // namespace itertime::validate
