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
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/commands.hpp"
#include "query/published_query.hpp"
#include "validate/published_figures.hpp"

namespace itertime::launcher {
namespace {

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
  std::printf("%-22s %-12s %-6s %5s  %-44s %-24s %-24s %10s %10s %8s %8s\n", "source", "row", "gpu", "gpus", "layout", "recipe",
              "measured (as published)", "meas s/it", "pred s/it", "error", "peak GiB");
  for (const query::Scored& s : scored) {
    const validate::PublishedRow& row = *s.row;
    std::string gpu = row.hardware.substr(0, row.hardware.find('-'));
    if (s.predicted) {
      std::printf("%-22s %-12s %-6s %5d  %-44s %-24s %-24s %10.3f %10.3f %+7.1f%% %8.1f\n", s.source->id.c_str(), row.id.c_str(),
                  gpu.c_str(), row.gpus, s.layout.c_str(), s.recipe.c_str(), measured_text(row).c_str(), s.measured_s,
                  s.predicted_s, s.error_percent, s.peak_memory_gib);
    } else {
      std::printf("%-22s %-12s %-6s %5d  %-44s %-24s %-24s %10.3f %10s  not predicted: %s\n", s.source->id.c_str(),
                  row.id.c_str(), gpu.c_str(), row.gpus, s.layout.c_str(), s.recipe.c_str(), measured_text(row).c_str(),
                  s.measured_s, "-", s.reason.c_str());
    }
  }
  for (const auto& [id, summary] : per_source) {
    std::printf("MAPE %-22s %3d of %3d rows predicted  MAPE %6.1f%%  mean error %+6.1f%%\n", id.c_str(), summary.predicted,
                summary.rows, summary.mape(), summary.bias());
  }
  std::printf("MAPE %-22s %3d of %3d rows predicted  MAPE %6.1f%%  mean error %+6.1f%%\n", "overall", overall.predicted,
              overall.rows, overall.mape(), overall.bias());
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
