// fit_model.hpp: the fitted model (model/fitted_model.hpp) from one calibration file (cluster.h5).
// Invariants:
//  - fit_model() reads /meta, /ops and, when present, /comm and /groundtruth, as typed records
//    (common/calibration_records.hpp); it never writes the file. /meta's text (backend, attention kernel)
//    becomes the model's enums here; a value it cannot parse is a UserError naming the file.
//  - The calibration factors are fitted through the predictor (predictor.hpp's fit_calibration), on the
//    traced stages: fitting sits above the predictor, the model's data type below it.
#pragma once

#include <string>

#include "predict/model/fitted_model.hpp"

namespace itertime::predict {

// Reads a calibration file. Throws UserError when it lacks /ops.
FittedModel fit_model(const std::string& calibration_path);
// A calibration file (.h5, HDF5 signature) is fitted on the fly; anything else is loaded as a saved model.
FittedModel load_or_fit(const std::string& path);

}  // namespace itertime::predict
