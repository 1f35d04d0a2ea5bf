// validation_run.hpp: `itertime validate` and the validate stage of `itertime run`, written once: fit the
// model from a calibration file, predict every ground-truth configuration, print the tables and write
// the reports (validation.csv/.json/.svg, optionally model.itertime) and /validation.
// Invariants: a calibration without /groundtruth is a UserError raised before any file is written; the
// report folder is created only after the validation succeeded.
#pragma once

#include <optional>
#include <string>

#include "common/model_spec.hpp"
#include "validate/validation.hpp"

namespace itertime::validate {

struct ValidationRunOptions {
  std::string calibration_file;
  std::string report_dir;             // empty: <calibration folder>/<stem>-validation
  bool store_in_calibration = true;   // write /validation into the calibration file
  bool compute_report = false;        // print the compute comparison (validation.hpp)
  bool memory_report = false;         // print the memory comparison (needs `model`)
  // The LLaMA config the ground truth trained: for the builder-only predictions and the memory
  // comparison. Unset: read from the path /meta groundtruth_model names, when that file exists.
  std::optional<LlamaSpec> model;
  bool save_fitted_model = false;     // also save the fitted model as <report_dir>/model.itertime
};

std::string default_report_dir(const std::string& calibration_file);

ValidationReport run_validation(const ValidationRunOptions& options);

}  // namespace itertime::validate
