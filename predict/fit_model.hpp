// fit_model.hpp: the fitted model (model/fitted_model.hpp) from one calibration file (cluster.h5).
// Invariants:
//  - fit_model() reads /meta, /ops and, when present, /comm and /groundtruth, as typed records
//    (common/calibration_records.hpp); it never writes the file. /meta's text (backend, attention kernel)
//    becomes the model's enums here; a value it cannot parse is a UserError naming the file.
//  - The calibration factors are fitted through the predictor (predictor.hpp's fit_calibration), on the
//    traced stages: fitting sits above the predictor, the model's data type below it.
//  - Operator times per occupancy come from the profiling pass common/speed_drift.hpp's choose_ops_passes
//    picks (pass 0, the first profiles, unless `calibrate drift` profiled that occupancy again); with
//    FitOptions::first_profiles_only, from pass 0 everywhere (what validation reports beside, issue 36).
#pragma once

#include <string>

#include "common/calibration_records.hpp"
#include "predict/model/fitted_model.hpp"

namespace itertime::predict {

struct FitOptions {
  // Pass 0's operator times at every occupancy, whatever passes `calibrate drift` added (default: the
  // pass whose speed reference lies nearest the ground truth's).
  bool first_profiles_only = false;
};

// Reads a calibration file. Throws UserError when it lacks /ops.
FittedModel fit_model(const std::string& calibration_path, const FitOptions& options = {});

// The operator part of fit_model (signatures, profiled times per occupancy, regressions, traced stages)
// added to `model` from /ops's records; the pass used per occupancy as FitOptions says.
void add_operator_profiles(FittedModel& model, const store::OpsRecords& ops, const FitOptions& options = {});
// A calibration file (.h5, HDF5 signature) is fitted on the fly; anything else is loaded as a saved model.
FittedModel load_or_fit(const std::string& path);

}  // namespace itertime::predict
