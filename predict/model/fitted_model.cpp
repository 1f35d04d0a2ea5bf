// fitted_model.cpp: the fitted model's small queries: calibration terms per occupancy, the calibrated
// LibTorch's capabilities, the pooled regression checks (fitted_model.hpp). Fitting is predict/fit_model.cpp's,
// save and load fitted_model_io.cpp's.
#include "predict/model/fitted_model.hpp"

#include <cstdlib>
#include <vector>

namespace itertime::predict {

int64_t CalibrationSet::source_occupancy(int64_t occupancy) const {
  int64_t best = -1;
  for (const auto& entry : per_occupancy) {  // ascending, so a tie keeps the lower occupancy
    const int64_t fitted = entry.first;
    if (best < 0 || std::llabs(fitted - occupancy) < std::llabs(best - occupancy)) best = fitted;
  }
  return best;
}

const Calibration& CalibrationSet::for_occupancy(int64_t occupancy) const {
  static const Calibration kIdentity{};
  const int64_t source = source_occupancy(occupancy);
  return source < 0 ? kIdentity : per_occupancy.at(source);
}

BackendCapabilities backend_capabilities(const FittedModel& model) {
  return BackendCapabilities{model.libtorch_version.rfind("2.", 0) == 0};
}

PooledCheck pooled_regression_check(const FittedModel& model) {
  std::vector<RegressionCheck> checks;
  checks.reserve(model.regression_checks.size());
  for (const auto& [key, check] : model.regression_checks) checks.push_back(check);
  return pool_checks(checks);
}

}  // namespace itertime::predict
