// check_validation: checks the report `itertime run` / `itertime validate` wrote for a calibration file.
// Usage: check_validation CAL.h5 VALIDATION.json
// Checks: every ground-truth configuration with status ok appears in the report; every scored error is
// finite; the calibration applied to each configuration was fitted without its holdout group (the
// report's "holdout": its tuple or its precision): on at most the ok rows of the other groups, and on at
// least one; /validation/rows in the file has one row per configuration. Prints what failed and exits 1,
// or exits 0.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "validate/validation_store.hpp"

using namespace itertime;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: check_validation CAL.h5 VALIDATION.json\n");
    return 2;
  }
  int failures = 0;
  auto fail = [&](const std::string& message) {
    std::fprintf(stderr, "FAIL: %s\n", message.c_str());
    ++failures;
  };
  h5::Store store = h5::Store::open(argv[1], false);
  const auto groundtruth = store.table<store::GroundTruthRow>(store::kGroundTruthTable).read_all();
  std::set<std::string> ok_keys;
  std::map<std::string, int> rows_per_group;  // ok rows per tuple "(2,1,2)" and per precision "bf16"
  for (const auto& row : groundtruth) {
    if (h5::get_string(row.status) != "ok") continue;
    ok_keys.insert(h5::get_string(row.key));
    rows_per_group["(" + std::to_string(row.dp) + "," + std::to_string(row.tp) + "," + std::to_string(row.pp) + ")"]++;
    rows_per_group[h5::get_string(row.precision)]++;
  }
  if (ok_keys.empty()) fail("no ground-truth configuration with status ok");

  std::ifstream in(argv[2]);
  const nlohmann::json report = nlohmann::json::parse(in);
  const std::string holdout = report.value("holdout", "");
  if (holdout != "tuple" && holdout != "precision") fail("report names no holdout (tuple or precision)");
  if (report.value("leave_one_tuple_out", false) != (holdout == "tuple")) fail("leave_one_tuple_out disagrees with the holdout");
  std::set<std::string> reported;
  for (const auto& row : report.at("configurations")) {
    const std::string key = row.at("key");
    reported.insert(key);
    if (row.at("status") != "ok") {
      fail(key + " not scored (status " + row.at("status").get<std::string>() + ")");
      continue;
    }
    // The job's model config is readable here (its path in /meta): every scored row has a builder-only
    // prediction too.
    if (row.at("built_status") != "ok") {
      fail(key + ": no builder-only prediction (" + row.at("built_status").get<std::string>() + ")");
      continue;
    }
    for (const char* field : {"ape_pct", "blind_ape_pct", "blind_raw_ape_pct", "predicted_us", "blind_predicted_us",
                              "blind_raw_predicted_us", "built_ape_pct", "built_predicted_us"}) {
      const double value = row.at(field);
      if (!std::isfinite(value) || value < 0) fail(key + ": " + field + " is not a finite non-negative number");
    }
    const std::string group = holdout == "precision" ? row.at("precision").get<std::string>()
                                                     : "(" + std::to_string(row.at("dp").get<int>()) + "," +
                                                           std::to_string(row.at("tp").get<int>()) + "," +
                                                           std::to_string(row.at("pp").get<int>()) + ")";
    const int fitted_on = row.at("calibration_rows");
    const int others = static_cast<int>(ok_keys.size()) - rows_per_group[group];
    if (fitted_on < 1 || fitted_on > others) {
      fail(key + ": calibration fitted on " + std::to_string(fitted_on) + " rows, but only " + std::to_string(others) +
           " lie outside its " + holdout + " " + group + " (not held out)");
    }
  }
  for (const auto& key : ok_keys) {
    if (!reported.count(key)) fail("ground-truth configuration " + key + " missing from the report");
  }
  const double overall = report.at("mape_overall").at("mape_pct");
  if (!std::isfinite(overall)) fail("overall MAPE is not finite");
  const double built_overall = report.at("mape_overall").at("built_mape_pct");
  if (report.at("mape_overall").at("built_count") != report.at("mape_overall").at("count") || !std::isfinite(built_overall)) {
    fail("the builder-only MAPE does not cover every scored configuration");
  }
  if (!store.exists("/validation/rows")) {
    fail("no /validation/rows in the calibration file");
  } else if (store.table<validate::ValidationStoreRow>("/validation/rows").size() != ok_keys.size()) {
    fail("/validation/rows does not hold one row per ground-truth configuration");
  }
  std::printf("%s: %zu configurations checked (%s holdout), overall MAPE %.2f%% (builder-only %.2f%%)\n",
              failures ? "FAILED" : "ok", ok_keys.size(), holdout.c_str(), overall, built_overall);
  return failures ? 1 : 0;
}
