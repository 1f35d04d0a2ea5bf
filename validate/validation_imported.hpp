// validation_imported.hpp: imported ground truth (users' training logs, `itertime import`) scored by any
// prediction source: the calibrated prediction of the file's own /comm and /ops, a described device
// (--hardware NAME: itertime's operator model on a hardware description), or a framework model
// (--framework megatron-te --hardware NAME: Megatron-Core + Transformer Engine from published kernel figures).
// Invariants:
//  - Each imported configuration is predicted with the model, layout, precision, recipe and framework
//    switches its log stated (/groundtruth/imports); none of it is fitted on the imported times (the
//    calibrated source is fitted on the file's own ground truth only: read_groundtruth_records excludes
//    imported rows).
//  - A configuration the source cannot predict is listed "unpredicted" with the reason and left out of
//    every MAPE. MAPE per (DP,TP,PP[,CP,VP]) tuple, per precision and overall, each beside its floor (the
//    mean over its rows of the log's spread across steady intervals, groundtruth_store.hpp
//    round_spread_pct): a MAPE cannot meaningfully go below it.
//  - Presenting only: print_imported_report computes nothing.
#pragma once

#include <string>
#include <vector>

#include "common/calibration_records.hpp"
#include "predict/framework/framework_fit.hpp"
#include "validate/validation.hpp"

namespace itertime::validate {

struct ImportedSource {
  enum class Kind { kCalibrated, kDescribed, kFramework };
  Kind kind = Kind::kCalibrated;
  std::string hardware;          // described / framework: the data/hardware description
  std::string calibration_file;  // calibrated: the file whose /comm, /ops and own ground truth are fitted
};
std::string describe(const ImportedSource& source);  // "framework megatron-te on h100-sxm (published kernel figures)"

// Another predictor on the same rows (framework source only, issue 46): a constant MFU fitted
// leave-one-out on the other logs, and the framework model fitted on the other logs (leave-one-log-out)
// or on the other models' logs (leave-one-model-out). NaN where it has no prediction.
struct ImportedComparison {
  std::string name;
  std::vector<double> predicted_us;  // per row of ImportedValidation::rows
  std::vector<MapeEntry> per_tuple, per_precision;
  MapeEntry overall;
};

struct ImportedValidation {
  std::string calibration_file, source;
  std::vector<ValidationRow> rows;  // key, tuple, precision, recipe, measured, predicted, ape, floor
  std::vector<std::string> logs;    // per row: the log it was imported from
  std::vector<MapeEntry> per_tuple, per_precision;
  MapeEntry overall;
  std::vector<ImportedComparison> comparisons;  // framework source: constant MFU, fitted LOLO, fitted LOMO
};

ImportedValidation validate_imported(const std::string& calibration_file, const ImportedSource& source);

// The framework request an imported log's row states (its model, layout, precision, recipe and switches).
predict::framework::FrameworkRequest framework_request_of(const store::GroundTruthRecord& row, const store::ImportRecord& log);
// A file's imported rows as observations for the framework fit (predict/framework/framework_fit.hpp);
// UserError for a file that cannot be opened.
std::vector<predict::framework::FrameworkObservation> imported_observations(const std::string& file);
void print_imported_report(const ImportedValidation& report);

}  // namespace itertime::validate
