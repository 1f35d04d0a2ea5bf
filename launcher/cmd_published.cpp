// cmd_published.cpp: `itertime score-published [FILE...]`: every row of public, measured training figures
// (data/published/*.json, validate/published_figures.hpp) predicted with the framework model
// (predict::framework::predict_framework) on its GPU description and that GPU's kernel figures, one line
// per row (measured and predicted seconds per iteration, error, the predicted peak memory per GPU), the MAPE
// per source and overall; --json adds each prediction's breakdown and notes.
// Invariants:
//  - Nothing is fitted or calibrated here: each row is predicted from its description alone.
//  - A bad file (missing, malformed, a row refused, an unknown hardware name) is one line, exit 2, before
//    anything is printed. A row the framework model refuses (or a GPU without kernel figures) is printed
//    as not predicted, with the reason, and left out of the MAPE; the summary says how many were predicted.
//  - error % = (predicted - measured) / measured x 100; MAPE = the mean of |error %| over predicted rows.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/commands.hpp"
#include "query/published_query.hpp"
#include "validate/published_figures.hpp"
#include "validate/published_score.hpp"

namespace itertime::launcher {
namespace {

// "+12.3%", or "-" for no prediction.
std::string error_text(double predicted, double measured) {
  if (!std::isfinite(predicted)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", (predicted - measured) / measured * 100.0);
  return text;
}

std::string measured_text(const validate::PublishedRow& row) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g %s", row.measured_value, to_string(row.unit).c_str());
  return text;
}

void print_table(const std::vector<query::Scored>& scored, const std::map<std::string, query::Summary>& per_source,
                 const query::Summary& overall) {
  std::printf(
      "published figures predicted with the framework model (Megatron-Core + Transformer Engine, "
      "predict/framework); error = (predicted - measured) / measured\n");
  std::printf("%-22s %-12s %-6s %5s  %-44s %-24s %-24s %10s %10s %8s %8s %9s %9s\n", "source", "row", "gpu", "gpus", "layout",
              "recipe", "measured (as published)", "meas s/it", "pred s/it", "error", "peak GiB", "const err", "fit err");
  for (const query::Scored& s : scored) {
    const validate::PublishedRow& row = *s.row;
    std::string gpu = row.hardware.substr(0, row.hardware.find('-'));
    if (s.predicted) {
      std::printf("%-22s %-12s %-6s %5d  %-44s %-24s %-24s %10.3f %10.3f %+7.1f%% %8.1f %9s %9s\n", s.source->id.c_str(),
                  row.id.c_str(), gpu.c_str(), row.gpus, s.layout.c_str(), s.recipe.c_str(), measured_text(row).c_str(),
                  s.measured_s, s.predicted_s, s.error_percent, s.peak_memory_gib, error_text(s.constant_s, s.measured_s).c_str(),
                  error_text(s.fitted_s, s.measured_s).c_str());
    } else {
      std::printf("%-22s %-12s %-6s %5d  %-44s %-24s %-24s %10.3f %10s  not predicted: %s\n", s.source->id.c_str(),
                  row.id.c_str(), gpu.c_str(), row.gpus, s.layout.c_str(), s.recipe.c_str(), measured_text(row).c_str(),
                  s.measured_s, "-", s.reason.c_str());
    }
  }
  std::printf(
      "per source: the described model (nothing fitted); a constant fraction of the peak (one MFU against the dense peak of "
      "the precision's GEMM math, fitted leave-one-out on the other rows); the model fitted on the other models' rows of the "
      "same GPU (leave-one-model-out; '-' where that GPU has rows of one model only)\n");
  auto line = [](const std::string& id, const query::Summary& summary) {
    auto part = [](const validate::ErrorSummary& e) {
      char text[96];
      if (e.predicted == 0) return std::string("-");
      std::snprintf(text, sizeof text, "%5.1f%% (%+5.1f%%, %d rows)", e.mape(), e.bias(), e.predicted);
      return std::string(text);
    };
    std::printf("MAPE %-22s %3d of %3d rows predicted  described %s  constant-MFU %s  fitted (leave-one-model-out) %s\n",
                id.c_str(), summary.predicted, summary.rows, part(summary.described).c_str(), part(summary.constant).c_str(),
                part(summary.fitted).c_str());
  };
  for (const auto& [id, summary] : per_source) line(id, summary);
  line("overall", overall);
  std::printf("(MAPE (mean signed error, rows))\n");
}

}  // namespace

void register_published(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* cmd = app.add_subcommand(
      "score-published",
      "Predict public, measured training figures (data/published) with the framework model and report the error");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json_output = std::make_shared<bool>(false);
  cmd->add_option("FILE", *files, "Files of published figures (default: every data/published/*.json)");
  cmd->add_flag("--json", *json_output, "Print JSON instead of a table");
  actions.emplace_back(cmd, [files, json_output](Context&) {
    const std::unique_ptr<query::PublishedScores> scores = query::score_published(*files);
    if (*json_output) {
      std::printf("%s\n", query::published_json(*scores).dump(2).c_str());
    } else {
      print_table(scores->scored, scores->per_source, scores->overall);
    }
    return 0;
  });
}

}  // namespace itertime::launcher
