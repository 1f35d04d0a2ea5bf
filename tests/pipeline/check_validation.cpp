// check_validation: checks the report `itertime run` / `itertime validate` wrote for a calibration file.
// Usage: check_validation CAL.h5 VALIDATION.json
// Checks: every ground-truth configuration with status ok appears in the report; every scored error is
// finite; the calibration applied to each configuration was fitted without its holdout group (the
// report's "holdout": its tuple or its precision): on at most the ok rows of the other groups, and on at
// least one; /validation/rows in the file has one row per configuration. The measurement floor: every
// configuration carries its ground truth's round_spread_pct (as /groundtruth holds it; null for NaN) and
// disturbance; every MAPE entry carries floor_pct and disturbed_count; the overall floor is finite, >= 0
// and the mean of the configurations' finite spreads, and /validation/mape's overall row holds it. The
// floor may be null only when every scored configuration stayed disturbed with fewer than 2 counted
// rounds (a machine busy throughout: said, not failed). The CSV beside the JSON has the round_spread_pct
// and disturbance columns. Prints what failed and exits 1, or exits 0.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/parallel_config.hpp"
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
  // Equal up to the rounding of a JSON or HDF5 round trip, relative to `reference`.
  auto same_value = [](double value, double reference) {
    return std::abs(value - reference) <= 1e-9 * (1 + std::abs(reference));
  };
  h5::Store store = h5::Store::open(argv[1], false);
  const auto groundtruth = store::read_groundtruth_rows(store);
  std::set<std::string> ok_keys;
  std::map<std::string, int> rows_per_group;  // ok rows per tuple "(2,1,2)" and per precision "bf16"
  std::map<std::string, double> spread_of;    // ok rows' round_spread_pct, by key
  for (const auto& row : groundtruth) {
    if (h5::get_string(row.status) != "ok") continue;
    ok_keys.insert(h5::get_string(row.key));
    spread_of[h5::get_string(row.key)] = row.round_spread_pct;
    ParallelConfig layout;  // the report's tuple: "(2,1,2)", or "(2,1,2,1,2)" with cp or vp not 1
    layout.dp = static_cast<int>(row.dp), layout.tp = static_cast<int>(row.tp), layout.pp = static_cast<int>(row.pp);
    layout.cp = static_cast<int>(row.cp), layout.vp = static_cast<int>(row.vp);
    rows_per_group[layout.tuple_string()]++;
    rows_per_group[h5::get_string(row.precision)]++;
  }
  if (ok_keys.empty()) fail("no ground-truth configuration with status ok");

  std::ifstream in(argv[2]);
  const nlohmann::json report = nlohmann::json::parse(in);
  const std::string holdout = report.value("holdout", "");
  if (holdout != "tuple" && holdout != "precision") fail("report names no holdout (tuple or precision)");
  if (report.value("leave_one_tuple_out", false) != (holdout == "tuple")) fail("leave_one_tuple_out disagrees with the holdout");
  std::set<std::string> reported;
  std::vector<double> spreads;  // the scored rows' finite round spreads
  int disturbed = 0, scored = 0;
  for (const auto& row : report.at("configurations")) {
    const std::string key = row.at("key");
    reported.insert(key);
    if (!row.contains("round_spread_pct") || !row.contains("disturbance") || !row.at("disturbance").is_string()) {
      fail(key + ": no round_spread_pct or disturbance");
    } else if (row.at("status") == "ok") {
      const nlohmann::json& spread = row.at("round_spread_pct");
      const double stored = spread_of.count(key) ? spread_of[key] : std::nan("");
      if (spread.is_null() ? std::isfinite(stored) : !same_value(spread.get<double>(), stored)) {
        fail(key + ": round_spread_pct " + spread.dump() + " is not the ground truth's " + std::to_string(stored));
      }
      ++scored;
      if (spread.is_number()) spreads.push_back(spread.get<double>());
      if (!row.at("disturbance").get<std::string>().empty()) ++disturbed;
    }
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
  // The measurement floor beside every MAPE.
  for (const char* list : {"mape_per_tuple", "mape_per_precision", "mape_per_tuple_precision"}) {
    for (const auto& entry : report.at(list)) {
      if (!entry.contains("floor_pct") || !entry.contains("disturbed_count")) {
        fail(std::string(list) + " " + entry.at("group").dump() + ": no floor_pct or disturbed_count");
      }
    }
  }
  const nlohmann::json& overall_entry = report.at("mape_overall");
  double floor = std::nan("");
  if (!overall_entry.contains("floor_pct")) {
    fail("mape_overall has no floor_pct");
  } else if (overall_entry.at("floor_pct").is_null()) {
    if (!spreads.empty() || disturbed < scored) {
      fail("mape_overall.floor_pct is null, but a configuration has a round spread or stayed steady");
    } else {
      std::printf(
          "note: measurement floor unknown: every configuration stayed disturbed with < 2 counted rounds (a busy machine)\n");
    }
  } else {
    floor = overall_entry.at("floor_pct");
    double mean = 0;
    for (const double s : spreads) mean += s / static_cast<double>(spreads.size());
    if (!std::isfinite(floor) || floor < 0) fail("mape_overall.floor_pct is not a finite non-negative number");
    if (!same_value(floor, mean)) {
      fail("mape_overall.floor_pct " + std::to_string(floor) + " is not the mean round spread " + std::to_string(mean));
    }
  }
  if (!overall_entry.contains("disturbed_count") || overall_entry.at("disturbed_count") != disturbed) {
    fail("mape_overall.disturbed_count is not the number of disturbed configurations (" + std::to_string(disturbed) + ")");
  }
  std::string csv_path = argv[2];
  csv_path = csv_path.substr(0, csv_path.size() - std::string(".json").size()) + ".csv";
  std::ifstream csv(csv_path);
  std::string header;
  if (!std::getline(csv, header) || header.find(",round_spread_pct,disturbance") == std::string::npos) {
    fail(csv_path + ": no round_spread_pct and disturbance columns");
  }
  if (holdout == "tuple" && store.exists("/validation/mape")) {
    const auto mape = store.table<validate::MapeStoreRow>("/validation/mape").read_all();
    const double stored = mape.empty() ? 0.0 : mape.back().floor_pct;
    const bool same = std::isnan(floor) ? std::isnan(stored) : same_value(stored, floor);
    if (mape.empty() || h5::get_string(mape.back().kind) != "overall" || !same) {
      fail("/validation/mape's overall row does not hold the overall floor_pct");
    }
  }
  if (!store.exists("/validation/rows")) {
    fail("no /validation/rows in the calibration file");
  } else if (store.table<validate::ValidationStoreRow>("/validation/rows").size() != ok_keys.size()) {
    fail("/validation/rows does not hold one row per ground-truth configuration");
  }
  std::printf(
      "%s: %zu configurations checked (%s holdout), overall MAPE %.2f%% (builder-only %.2f%%), floor %.2f%%, %d disturbed\n",
      failures ? "FAILED" : "ok", ok_keys.size(), holdout.c_str(), overall, built_overall, floor, disturbed);
  return failures ? 1 : 0;
}
