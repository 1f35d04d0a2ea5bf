// test_published_golden.cpp: every development row of data/published/*.json predicted by the framework
// model (predict/framework/framework_predictor.hpp) as `itertime score-published` predicts it (the row's
// GPU description with its fabric, that GPU's shipped kernel figures, NCCL's host-CPU overhead), against
// the GOLDEN values of tests/data/published-golden.json (issue 45): a change of the framework model in
// either direction shows, row by row and in the aggregate.
// Invariants checked:
//  - Every row of every shipped file is predicted, and has a golden entry ("<source id>/<row id>"): a new
//    data/published file or row without one fails with a message saying to re-bless; a golden entry
//    without its row fails as stale.
//  - Each row's measured seconds per iteration (the reader's conversion) equals the golden one to 1e-9,
//    and its predicted seconds to the golden file's row_tolerance_pct (0.1 %: predictions are
//    deterministic; the tolerance absorbs only floating-point differences between compilers and libm).
//  - The range `predict --framework megatron-te` quotes (predict/prediction_range.hpp) is this check: its
//    MAPE is the overall MAPE rounded to 0.1 point and its run count the number of rows.
//  - Two-sided aggregate bands: the overall MAPE and the mean signed error ((predicted - measured) /
//    measured, %) each within the golden file's band (percentage points) of the blessed value, so a change
//    that makes the model slower (lowering the MAPE of this optimistic model) is seen as well as one that
//    makes it worse.
// These are golden values, not hand-derived figures: they pin today's end-to-end predictions so that a
// deliberate change of the model is re-blessed on purpose, with its reason in the commit:
//   tests/e2e/bless_published_golden.sh [BUILD_DIR]
// (runs this binary with ITERTIME_BLESS_PUBLISHED_GOLDEN=1, which rewrites the file instead of comparing).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/hardware_spec.hpp"
#include "predict/framework/framework_predictor.hpp"
#include "predict/framework/gpu_kernels.hpp"
#include "predict/prediction_range.hpp"
#include "validate/published_figures.hpp"
#include "validate/published_score.hpp"

namespace itertime::validate {
namespace {

using nlohmann::json;
namespace fw = predict::framework;

const std::string kGolden = std::string(ITERTIME_SOURCE_DIR) + "/tests/data/published-golden.json";
constexpr double kRowTolerancePct = 0.1;  // written into the file when blessing
constexpr double kBandPct = 0.5;          // percentage points around the blessed MAPE and mean error

struct Scored {
  std::string key;  // "<source id>/<row id>"
  double measured_s = 0, predicted_s = 0;
  std::string reason;  // when not predicted
  double error_pct() const { return (predicted_s - measured_s) / measured_s * 100.0; }
};

// Every row of every data/published/*.json (sorted), predicted as score-published does.
std::vector<Scored> score_all() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(published_figures_dir())) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<Scored> out;
  for (const std::string& file : files) {
    const PublishedSource source = load_published_figures(file);
    for (const PublishedRow& row : source.rows) {
      Scored s;
      s.key = source.id + "/" + row.id;
      s.measured_s = measured_seconds_per_iteration(row);
      // The row's described target as score-published builds it: description and fabric, kernel figures,
      // training conditions, NCCL's host overhead (validate/published_score.hpp).
      const fw::FrameworkTarget target = described_target_of(row);
      const fw::FrameworkOutcome outcome = fw::predict_framework(target, fw::FrameworkRequest{row.shape, row.config, row.recipe});
      if (outcome.ok()) {
        s.predicted_s = outcome.prediction->total_us * 1e-6;
      } else {
        s.reason = outcome.reason;
      }
      out.push_back(s);
    }
  }
  return out;
}

struct Aggregate {
  double mape_pct = 0, mean_error_pct = 0;
};
Aggregate aggregate(const std::vector<Scored>& rows) {
  Aggregate a;
  for (const Scored& s : rows) {
    a.mape_pct += std::fabs(s.error_pct()) / static_cast<double>(rows.size());
    a.mean_error_pct += s.error_pct() / static_cast<double>(rows.size());
  }
  return a;
}

json read_golden() {
  std::ifstream in(kGolden);
  if (!in) return json();
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

void bless(const std::vector<Scored>& rows) {
  json doc;
  doc["comment"] =
      "GOLDEN values of `itertime score-published` (the framework model on data/published/*.json), pinned by "
      "tests/e2e/test_published_golden.cpp. Not hand-derived: re-bless on purpose with "
      "tests/e2e/bless_published_golden.sh and give the reason in the commit.";
  doc["row_tolerance_pct"] = kRowTolerancePct;
  doc["band_pct"] = kBandPct;
  const Aggregate a = aggregate(rows);
  doc["mape_pct"] = a.mape_pct;
  doc["mean_error_pct"] = a.mean_error_pct;
  json entries = json::object();
  for (const Scored& s : rows) entries[s.key] = {{"measured_s", s.measured_s}, {"predicted_s", s.predicted_s}};
  doc["rows"] = entries;
  std::ofstream(kGolden) << doc.dump(2) << "\n";
}

bool blessing() {
  const char* flag = std::getenv("ITERTIME_BLESS_PUBLISHED_GOLDEN");
  return flag != nullptr && std::string(flag) == "1";
}

const char* kRebless =
    " (a deliberate change of the model or a new data/published row: run tests/e2e/bless_published_golden.sh "
    "and give the reason in the commit)";

TEST(PublishedGolden, EveryRowIsPredictedAsBlessed) {
  const std::vector<Scored> rows = score_all();
  ASSERT_FALSE(rows.empty());
  for (const Scored& s : rows) ASSERT_TRUE(s.reason.empty()) << s.key << " not predicted: " << s.reason;
  if (blessing()) {
    bless(rows);
    GTEST_SKIP() << "blessed " << rows.size() << " rows into " << kGolden;
  }
  const json golden = read_golden();
  ASSERT_TRUE(golden.is_object() && golden.contains("rows")) << kGolden << " is missing or malformed" << kRebless;
  const double tolerance = golden.at("row_tolerance_pct").get<double>();
  ASSERT_LE(tolerance, kRowTolerancePct) << "the golden file's row tolerance was widened";
  const json& entries = golden.at("rows");
  std::map<std::string, bool> seen;
  for (const Scored& s : rows) {
    seen[s.key] = true;
    if (!entries.contains(s.key)) {
      ADD_FAILURE() << s.key << " has no golden value" << kRebless;
      continue;
    }
    const double measured = entries.at(s.key).at("measured_s").get<double>();
    const double predicted = entries.at(s.key).at("predicted_s").get<double>();
    EXPECT_NEAR(s.measured_s, measured, 1e-9 * measured) << s.key << ": the measured figure's conversion changed";
    EXPECT_NEAR(s.predicted_s, predicted, tolerance / 100 * predicted)
        << s.key << ": predicted " << s.predicted_s << " s, golden " << predicted << " s ("
        << (s.predicted_s - predicted) / predicted * 100 << " %)" << kRebless;
  }
  for (const auto& item : entries.items()) {
    EXPECT_TRUE(seen.count(item.key())) << item.key() << " is golden but no data/published row has it (stale)" << kRebless;
  }
}

TEST(PublishedGolden, AggregateMapeAndMeanErrorStayInTheirBands) {
  if (blessing()) GTEST_SKIP() << "blessing";
  const std::vector<Scored> rows = score_all();
  const json golden = read_golden();
  ASSERT_TRUE(golden.is_object() && golden.contains("mape_pct")) << kGolden << kRebless;
  const double band = golden.at("band_pct").get<double>();
  ASSERT_LE(band, kBandPct) << "the golden file's band was widened";
  const Aggregate a = aggregate(rows);
  const double mape = golden.at("mape_pct").get<double>(), bias = golden.at("mean_error_pct").get<double>();
  EXPECT_NEAR(a.mape_pct, mape, band) << "overall MAPE " << a.mape_pct << " %, blessed " << mape << " %" << kRebless;
  EXPECT_NEAR(a.mean_error_pct, bias, band) << "mean signed error " << a.mean_error_pct << " %, blessed " << bias << " %"
                                            << kRebless;
}

TEST(PublishedGolden, TheQuotedRangeIsThisChecksMape) {
  const std::vector<Scored> rows = score_all();
  const Aggregate a = aggregate(rows);
  EXPECT_EQ(predict::kFrameworkPublishedRuns, static_cast<int>(rows.size()))
      << "predict/prediction_range.hpp kFrameworkPublishedRuns names the published runs scored";
  EXPECT_NEAR(predict::kFrameworkPublishedMapePct, a.mape_pct, 0.05 + 1e-9)
      << "predict/prediction_range.hpp kFrameworkPublishedMapePct must be the measured MAPE (" << a.mape_pct << " %)";
}

}  // namespace
}  // namespace itertime::validate
