// published_query.hpp: `itertime score-published [FILE...]` as a typed request and answer for both front
// ends: every row of public, measured training figures (data/published/*.json,
// validate/published_figures.hpp) predicted with the framework model (predict::framework::predict_framework)
// on its GPU description and that GPU's kernel figures; beside it the constant-MFU baseline (leave-one-out)
// and the framework model fitted on the other models' rows of its GPU (leave-one-model-out); the MAPE per
// source and overall.
// Invariants:
//  - Nothing is calibrated: each row is predicted from its description alone (the fitted column is
//    fitted on the other models' rows only).
//  - A bad file (missing, malformed, a row refused, an unknown hardware name) is one UserError, before
//    anything is scored. A row the framework model refuses (or a GPU without kernel figures) is scored
//    not predicted, with the reason, and left out of the MAPE.
//  - error % = (predicted - measured) / measured x 100; MAPE = the mean of |error %| over predicted rows.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "predict/framework/framework_predictor.hpp"
#include "validate/published_figures.hpp"
#include "validate/published_score.hpp"

namespace itertime::query {

struct Scored {
  const validate::PublishedSource* source = nullptr;
  const validate::PublishedRow* row = nullptr;
  double measured_s = 0;
  bool predicted = false;
  double predicted_s = 0;
  double error_percent = 0;
  std::string reason;  // when not predicted
  std::optional<predict::framework::FrameworkPrediction> prediction;
  double peak_memory_gib = 0;  // the prediction's (megatron_memory's busiest rank)
  std::string layout;
  std::string recipe;
  double ideal_s = NAN;     // model FLOPs at the dense peak of the precision's GEMM math (the constant-MFU baseline's unit)
  double constant_s = NAN;  // the constant-MFU baseline, fitted leave-one-out on the other rows
  double fitted_s = NAN;    // the framework model fitted on the other models' rows of its GPU (leave-one-model-out)
  predict::framework::FrameworkTarget target;  // the described target it was predicted on
};

// Per predictor: the described framework model, the constant-MFU baseline, the fitted model (leave-one-model-out).
struct Summary {
  validate::ErrorSummary described, constant, fitted;
  int rows = 0, predicted = 0;
  double mape() const { return described.mape(); }
  double bias() const { return described.bias(); }
  void add(const Scored& s) {
    ++rows;
    if (s.predicted) ++predicted;
    described.add(s.measured_s, s.predicted ? s.predicted_s : NAN);
    constant.add(s.measured_s, s.constant_s);
    fitted.add(s.measured_s, s.fitted_s);
  }
};

struct PublishedScores {
  std::vector<validate::PublishedSource> sources;  // owned: each Scored points into them
  std::vector<Scored> scored;
  std::map<std::string, Summary> per_source;
  Summary overall;
};

// files empty: every data/published/*.json, sorted. The answer is never copied (Scored points into it).
std::unique_ptr<PublishedScores> score_published(const std::vector<std::string>& files);

// `itertime score-published --json`'s object: rows, sources, overall.
nlohmann::json published_json(const PublishedScores& scores);

}  // namespace itertime::query
