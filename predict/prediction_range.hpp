// prediction_range.hpp: the range a prediction can quote, and only where something measured it
// (issue 33): no range is invented.
// Invariants:
//  - The framework model (--framework megatron-te), described: ± the described model's MAPE that
//    `itertime score-published` measures on the shipped public runs of the same GPU generation
//    (kFrameworkChecks: Ampere's A100 rows, Hopper's H100 rows); a generation no published run backs
//    (Blackwell) gets no number, and says so. The e2e test published_score checks each constant against
//    the measured MAPE of its rows (tests/e2e/CMakeLists.txt reads them from this header), two-sided.
//  - The framework model fitted on a cluster's logs (--fitted FILE): ± the fit's leave-one-model-out MAPE
//    stored in the file (itertime fit --framework megatron-te); none when the logs held one model.
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

// The described framework model's MAPE on the published runs of each GPU generation (score-published).
struct FrameworkCheck {
  const char* generation;
  const char* gpus;  // the data/hardware names of that generation, space-separated
  double mape_pct;
  int runs;
  const char* sources;
};
inline constexpr FrameworkCheck kFrameworkChecks[] = {
    {"Ampere", "a100-sxm-80gb", 9.8, 11, "narayanan2021-table1, bigscience-bloom176b"},
    {"Hopper", "h100-sxm h200-sxm", 10.8, 26, "nemotron4-dgxc-h100"},
};
// Every published run together (plan's tie rule where the GPU's generation has no check).
inline constexpr double kFrameworkPublishedMapePct = 10.5;
inline constexpr int kFrameworkPublishedRuns = 37;

struct PredictionRange {
  std::optional<double> pct;  // ± this percent of the iteration; nullopt: no range
  std::string basis;          // where it comes from; or why there is none and how to get one
};

// Described: the check of the hardware's generation (kFrameworkChecks), or none.
PredictionRange framework_range(const std::string& hardware);
// Fitted on logs: the fit's leave-one-model-out MAPE over `rows` rows of `models` models (NaN: none).
PredictionRange framework_fitted_range(double lomo_mape_pct, int rows, int models, const std::string& file);
// The fraction plan ties within for the framework model on `hardware` (its range, else every run's MAPE).
double framework_tie_fraction(const std::string& hardware);
// mape_pct / count / group / built: the stored validation's figure (nullopt: the file holds none).
PredictionRange calibrated_range(std::optional<double> mape_pct, int64_t count, const std::string& group, bool built);
PredictionRange described_range(const std::string& hardware);

}  // namespace itertime::predict
