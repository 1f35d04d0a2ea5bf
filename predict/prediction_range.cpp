// prediction_range.cpp: the quoted ranges (prediction_range.hpp).
#include "predict/prediction_range.hpp"

#include <cstdio>

namespace itertime::predict {

PredictionRange framework_range() {
  char basis[200];
  std::snprintf(basis, sizeof(basis),
                "the framework model's MAPE on %d published runs (itertime score-published); typical, not a bound",
                kFrameworkPublishedRuns);
  return {kFrameworkPublishedMapePct, basis};
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
