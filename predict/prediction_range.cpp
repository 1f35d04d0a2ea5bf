// prediction_range.cpp: the quoted ranges (prediction_range.hpp).
#include "predict/prediction_range.hpp"

#include <cmath>
#include <cstdio>

namespace itertime::predict {

namespace {

const FrameworkCheck* check_of(const std::string& hardware) {
  for (const FrameworkCheck& check : kFrameworkChecks) {
    const std::string gpus = std::string(" ") + check.gpus + " ";
    if (gpus.find(" " + hardware + " ") != std::string::npos) return &check;
  }
  return nullptr;
}

}  // namespace

PredictionRange framework_range(const std::string& hardware) {
  const FrameworkCheck* check = check_of(hardware);
  if (check == nullptr) {
    return {std::nullopt, "none: no published run of " + hardware +
                              "'s GPU generation backs the described framework model (itertime score-published); fit it "
                              "on your own logs (itertime fit --framework megatron-te) for one"};
  }
  char basis[320];
  std::snprintf(basis, sizeof(basis),
                "the described framework model's MAPE on %d published %s runs (%s; itertime score-published); typical, not "
                "a bound",
                check->runs, check->generation, check->sources);
  return {check->mape_pct, basis};
}

PredictionRange framework_fitted_range(double lomo_mape_pct, int rows, int models, const std::string& file) {
  if (!std::isfinite(lomo_mape_pct)) {
    return {std::nullopt, "none: the fit in " + file + " saw one model only, so no model it did not see checks it"};
  }
  char basis[320];
  std::snprintf(basis, sizeof(basis),
                "the fit's leave-one-model-out MAPE on %d logged runs of %d models (%s); typical, not a bound", rows, models,
                file.c_str());
  return {lomo_mape_pct, basis};
}

double framework_tie_fraction(const std::string& hardware) {
  const FrameworkCheck* check = check_of(hardware);
  return (check != nullptr ? check->mape_pct : kFrameworkPublishedMapePct) / 100.0;
}

PredictionRange calibrated_range(std::optional<double> mape_pct, int64_t count, const std::string& group, bool built) {
  if (!mape_pct) {
    return {std::nullopt, "none: this file holds no validation; run `itertime validate CAL` on the calibration to measure one"};
  }
  const std::string what = built ? "builder-only predictions'" : "predictions'";
  const std::string where = group == "overall" ? "overall" : "at " + group;
  return {*mape_pct, "the calibration's validation: its " + what + " MAPE " + where + " over " + std::to_string(count) +
                         " ground-truth configurations; typical for configurations like those, not a bound"};
}

PredictionRange described_range(const std::string& hardware) {
  return {std::nullopt, "none: no measurement checks itertime's trainer described on " + hardware +
                            "; the framework model (--framework megatron-te) quotes its published check"};
}

}  // namespace itertime::predict
