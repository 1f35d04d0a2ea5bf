// published_query.hpp: `itertime score-published [FILE...]` as a typed request and answer for both front
// ends: every row of public, measured training figures (data/published/*.json,
// validate/published_figures.hpp) predicted with the framework model (predict::framework::predict_framework)
// on its GPU description and that GPU's kernel figures; the MAPE per source and overall.
// Invariants:
//  - Nothing is fitted or calibrated: each row is predicted from its description alone.
//  - A bad file (missing, malformed, a row refused, an unknown hardware name) is one UserError, before
//    anything is scored. A row the framework model refuses (or a GPU without kernel figures) is scored
//    not predicted, with the reason, and left out of the MAPE.
//  - error % = (predicted - measured) / measured x 100; MAPE = the mean of |error %| over predicted rows.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "predict/framework/framework_predictor.hpp"
#include "validate/published_figures.hpp"

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
};

struct Summary {
  int rows = 0, predicted = 0;
  double sum_abs = 0, sum_signed = 0;
  double mape() const { return predicted > 0 ? sum_abs / predicted : 0; }
  double bias() const { return predicted > 0 ? sum_signed / predicted : 0; }
  void add(const Scored& s) {
    ++rows;
    if (!s.predicted) return;
    ++predicted;
    sum_abs += std::fabs(s.error_percent);
    sum_signed += s.error_percent;
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
