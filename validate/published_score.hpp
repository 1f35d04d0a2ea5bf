// published_score.hpp: how well each predictor does on public, measured training figures (issue 46): the
// described framework model (nothing fitted), a constant fraction of the peak (the simplest predictor:
// one MFU, fitted leave-one-out on the same rows), and the framework model fitted on the other models'
// rows of the same GPU (leave-one-model-out; predict/framework/framework_fit.hpp). `itertime
// score-published` prints them side by side.
// Invariants:
//  - error % = (predicted - measured) / measured x 100; a summary's MAPE is the mean |error %| over the
//    rows that predictor predicted, its bias the mean signed error; counts say how many.
//  - constant_mfu_leave_one_out: row i's prediction = ideal_i / exp(mean_{j != i} ln(ideal_j / measured_j)),
//    ideal = model FLOPs / (GPUs x the dense peak of the precision's GEMM math); nothing of row i is used
//    for its own prediction; NaN with fewer than two rows.
//  - The fitted column never uses a row of the model it predicts: per GPU, per model M, terms fitted on
//    the GPU's rows of the other models; NaN where the GPU has rows of only one model.
//  - Pure computation over rows already predicted; nothing is printed here.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "predict/framework/framework_fit.hpp"
#include "validate/published_figures.hpp"

namespace itertime::validate {

// The described target a published row runs on: its GPU's description (with the source's fabric where it
// differs), kernel figures and training conditions. UserError when the GPU has no kernel figures.
predict::framework::FrameworkTarget described_target_of(const PublishedRow& row);
// The row as an observation of the framework fit (id "<source id>/<row id>").
predict::framework::FrameworkObservation observation_of(const PublishedSource& source, const PublishedRow& row);

// Row i's constant-MFU prediction (seconds) from every other row's achieved fraction of its ideal time.
std::vector<double> constant_mfu_leave_one_out(const std::vector<double>& ideal_s, const std::vector<double>& measured_s);

struct ErrorSummary {
  int rows = 0, predicted = 0;
  double sum_abs = 0, sum_signed = 0;
  void add(double measured, double predicted_value);  // NaN predicted: counted as a row, not predicted
  double mape() const { return predicted > 0 ? sum_abs / predicted : NAN; }
  double bias() const { return predicted > 0 ? sum_signed / predicted : NAN; }
};

// One GPU's observations and the described target; rows of other GPUs are never mixed into a fit.
struct GpuRows {
  predict::framework::FrameworkTarget target;
  std::vector<predict::framework::FrameworkObservation> rows;
  std::vector<size_t> index;  // each row's position in the caller's list
};

// Fitted leave-one-model-out predictions (seconds, NaN where not possible), one per caller row
// (`total_rows` long), and the number of fits made.
std::vector<double> fitted_leave_one_model_out(const std::map<std::string, GpuRows>& by_gpu, size_t total_rows);

}  // namespace itertime::validate
