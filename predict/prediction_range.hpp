// prediction_range.hpp: the range a prediction can quote, and only where something measured it
// (issue 33): no range is invented.
// Invariants:
//  - The framework model (--framework megatron-te): ± kFrameworkPublishedMapePct, the overall MAPE
//    `itertime score-published` measures on the shipped public runs (data/published). The e2e test
//    published_score bounds that measured MAPE by this constant (tests/e2e/CMakeLists.txt reads it from
//    this header), so the quoted range can never be smaller than the check that backs it.
//  - A calibrated prediction: ± the MAPE `itertime validate` stored in the calibration's /validation (its
//    precision's group, else overall; builder-only predictions' when the prediction has built stages),
//    when the file holds one; otherwise none, saying how to get one.
//  - A described device (an operator roofline of a description): none; nothing measured that device.
//  - A range is a mean absolute percentage error: a typical error, not a bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace itertime::predict {

inline constexpr double kFrameworkPublishedMapePct = 12.9;
inline constexpr int kFrameworkPublishedRuns = 11;

struct PredictionRange {
  std::optional<double> pct;  // ± this percent of the iteration; nullopt: no range
  std::string basis;          // where it comes from; or why there is none and how to get one
};

PredictionRange framework_range();
// mape_pct / count / group / built: the stored validation's figure (nullopt: the file holds none).
PredictionRange calibrated_range(std::optional<double> mape_pct, int64_t count, const std::string& group, bool built);
PredictionRange described_range(const std::string& hardware);

}  // namespace itertime::predict
