// test_validation_summary.cpp: validate::summarize's measurement floor and disturbed count, and the
// reporters that carry them (JSON, CSV, /validation).
// Invariants: rows are synthetic (no model is fitted); the floor is the mean round_spread_pct over a
// group's rows with a finite one, NaN when none has one; NaN is a JSON null, an empty CSV field and a NaN
// in /validation/mape. Files are written only in a temporary folder, removed afterwards.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/h5store.hpp"
#include "tests/unit/temp_dir.hpp"
#include "validate/validation.hpp"
#include "validate/validation_report.hpp"
#include "validate/validation_store.hpp"

namespace itertime::validate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ValidationRow scored_row(const std::string& tuple, double ape_pct, double round_spread_pct, const std::string& disturbance) {
  ValidationRow row;
  row.key = "k" + tuple;
  row.tuple = tuple;
  row.precision = "bf16";
  row.status = "ok";
  row.measured_us = 1000;
  row.predicted_us = 1000 * (1 + ape_pct / 100);
  row.ape_pct = ape_pct;
  row.blind_ape_pct = 2 * ape_pct;
  row.blind_raw_ape_pct = 3 * ape_pct;
  row.round_spread_pct = round_spread_pct;
  row.disturbance = disturbance;
  row.built_status = "ok";
  row.built_ape_pct = ape_pct;
  return row;
}

std::vector<const ValidationRow*> pointers(const std::vector<ValidationRow>& rows) {
  std::vector<const ValidationRow*> out;
  for (const ValidationRow& row : rows) out.push_back(&row);
  return out;
}

TEST(ValidationSummary, FloorIsTheMeanOfTheFiniteRoundSpreads) {
  const std::vector<ValidationRow> rows = {scored_row("(1,1,1)", 4, 1.0, ""), scored_row("(1,1,2)", 8, 3.0, ""),
                                           scored_row("(1,2,1)", 6, kNaN, "")};
  const MapeEntry entry = summarize("bf16", pointers(rows));
  EXPECT_EQ(entry.group, "bf16");
  EXPECT_EQ(entry.count, 3);
  EXPECT_DOUBLE_EQ(entry.mape_pct, 6.0);   // every row counts in the MAPE
  EXPECT_DOUBLE_EQ(entry.floor_pct, 2.0);  // the NaN spread (one round) is left out of the floor
  EXPECT_EQ(entry.disturbed_count, 0);
}

TEST(ValidationSummary, FloorIsNaNWhenNoRowHasASpread) {
  const std::vector<ValidationRow> rows = {scored_row("(1,1,1)", 4, kNaN, ""), scored_row("(1,1,2)", 8, kNaN, "")};
  const MapeEntry entry = summarize("overall", pointers(rows));
  EXPECT_TRUE(std::isnan(entry.floor_pct));
  EXPECT_DOUBLE_EQ(entry.mape_pct, 6.0);
  const MapeEntry empty = summarize("overall", {});
  EXPECT_TRUE(std::isnan(empty.floor_pct));
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(empty.disturbed_count, 0);
}

TEST(ValidationSummary, CountsTheDisturbedRows) {
  const std::vector<ValidationRow> rows = {scored_row("(1,1,1)", 4, 0.5, "outside load in 3 of 6 rounds"),
                                           scored_row("(1,1,2)", 8, 1.5, ""), scored_row("(1,2,1)", 6, 2.5, "rounds disagree")};
  const MapeEntry entry = summarize("overall", pointers(rows));
  EXPECT_EQ(entry.disturbed_count, 2);
  EXPECT_DOUBLE_EQ(entry.floor_pct, 1.5);  // disturbed rows keep their spread in the floor
}

// A report as validate() would leave it: two scored rows, one disturbed, one without a spread.
ValidationReport two_row_report(double second_spread_pct) {
  ValidationReport report;
  report.calibration_file = "synthetic.h5";
  report.rows = {scored_row("(1,1,1)", 4, 1.25, "outside load in 3 of 6 rounds, \"busy\""),
                 scored_row("(1,1,2)", 8, second_spread_pct, "")};
  const auto all = pointers(report.rows);
  report.per_tuple = {summarize("(1,1,1)", {all[0]}), summarize("(1,1,2)", {all[1]})};
  report.per_precision = {summarize("bf16", all)};
  report.per_tuple_precision = {summarize("(1,1,1) bf16", {all[0]}), summarize("(1,1,2) bf16", {all[1]})};
  report.overall = summarize("overall", all);
  return report;
}

TEST(ValidationReporters, JsonCarriesTheFloorAndWritesNaNAsNull) {
  const testing::TempDir dir;
  write_json(two_row_report(kNaN), dir.file("v.json"));
  const nlohmann::json json = nlohmann::json::parse(testing::read_bytes(dir.file("v.json")));
  EXPECT_DOUBLE_EQ(json.at("mape_overall").at("floor_pct").get<double>(), 1.25);
  EXPECT_EQ(json.at("mape_overall").at("disturbed_count"), 1);
  EXPECT_DOUBLE_EQ(json.at("mape_per_precision").at(0).at("floor_pct").get<double>(), 1.25);
  EXPECT_TRUE(json.at("mape_per_tuple").at(1).at("floor_pct").is_null());  // (1,1,2): no spread
  EXPECT_TRUE(json.at("mape_per_tuple_precision").at(1).at("floor_pct").is_null());
  EXPECT_EQ(json.at("mape_per_tuple").at(0).at("disturbed_count"), 1);
  EXPECT_DOUBLE_EQ(json.at("configurations").at(0).at("round_spread_pct").get<double>(), 1.25);
  EXPECT_TRUE(json.at("configurations").at(1).at("round_spread_pct").is_null());
  EXPECT_EQ(json.at("configurations").at(0).at("disturbance"), "outside load in 3 of 6 rounds, \"busy\"");
  EXPECT_EQ(json.at("configurations").at(1).at("disturbance"), "");
}

TEST(ValidationReporters, CsvCarriesSpreadAndQuotedDisturbance) {
  const testing::TempDir dir;
  write_csv(two_row_report(kNaN), dir.file("v.csv"));
  const std::string csv = testing::read_bytes(dir.file("v.csv"));
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_NE(header.find(",round_spread_pct,disturbance,recipe,cp,vp,span"), std::string::npos) << header;
  EXPECT_NE(csv.find(",1.25,\"outside load in 3 of 6 rounds, \"\"busy\"\"\",plain,1,1,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",,plain,1,1,\n"), std::string::npos) << csv;  // NaN spread and no disturbance: two empty fields
}

// A report with a cp or vp layout heads its tuples (dp,tp,pp[,cp,vp]) and carries cp and vp per row; one
// without keeps today's (dp,tp,pp) view.
TEST(ValidationReporters, ExtendedLayoutsNameAllFiveDegrees) {
  ValidationReport report = two_row_report(kNaN);
  EXPECT_FALSE(report.has_extended_layouts());
  EXPECT_EQ(report.tuple_heading(), "(dp,tp,pp)");
  report.rows[1].vp = 2;
  report.rows[1].tuple = "(1,1,2,1,2)";
  EXPECT_TRUE(report.has_extended_layouts());
  EXPECT_EQ(report.tuple_heading(), "(dp,tp,pp[,cp,vp])");
  const testing::TempDir dir;
  write_json(report, dir.file("v.json"));
  const nlohmann::json json = nlohmann::json::parse(testing::read_bytes(dir.file("v.json")));
  EXPECT_EQ(json.at("configurations").at(1).at("vp"), 2);
  EXPECT_EQ(json.at("configurations").at(1).at("cp"), 1);
  write_csv(report, dir.file("v.csv"));
  EXPECT_NE(testing::read_bytes(dir.file("v.csv")).find(",plain,1,2,\n"), std::string::npos);
}

TEST(ValidationReporters, StoreCarriesTheFloor) {
  const testing::TempDir dir;
  {
    h5::Store store = h5::Store::create(dir.file("cal.h5"), false, {{"argv", "test"}});
    write_validation(store, two_row_report(2.75));
  }
  h5::Store store = h5::Store::open(dir.file("cal.h5"), false);
  const auto mape = store.table<MapeStoreRow>("/validation/mape").read_all();
  ASSERT_EQ(mape.size(), 6u);  // 2 tuples, 1 precision, 2 pairs, overall
  EXPECT_EQ(h5::get_string(mape.back().kind), "overall");
  EXPECT_DOUBLE_EQ(mape.back().floor_pct, 2.0);
  EXPECT_EQ(mape.back().disturbed_count, 1);
  const auto rows = store.table<ValidationStoreRow>("/validation/rows").read_all();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[1].round_spread_pct, 2.75);
  EXPECT_EQ(h5::get_string(rows[0].disturbance), "outside load in 3 of 6 rounds, \"busy\"");
  EXPECT_EQ(h5::get_string(rows[1].disturbance), "");
}

// Rows of several training recipes: one MAPE entry per recipe, in name order, over the scored rows only;
// a report of plain rows alone has no recipe table to print.
TEST(ValidationSummary, GroupsByRecipe) {
  ValidationReport report;
  report.rows = {scored_row("(1,2,1)", 4, 1, ""), scored_row("(1,2,1)", 8, 1, ""), scored_row("(2,2,1)", 6, 1, ""),
                 scored_row("(2,1,1)", 2, 1, "")};
  report.rows[1].recipe = "sp+vp";
  report.rows[2].recipe = "sp+vp";
  report.rows[3].recipe = "dopt";
  report.rows[3].status = "unpredicted";
  summarize_groups(report);
  ASSERT_EQ(report.per_recipe.size(), 2u);  // the unpredicted dopt row is in no group
  EXPECT_EQ(report.per_recipe[0].group, "plain");
  EXPECT_EQ(report.per_recipe[0].count, 1);
  EXPECT_DOUBLE_EQ(report.per_recipe[0].mape_pct, 4.0);
  EXPECT_EQ(report.per_recipe[1].group, "sp+vp");
  EXPECT_EQ(report.per_recipe[1].count, 2);
  EXPECT_DOUBLE_EQ(report.per_recipe[1].mape_pct, 7.0);
  EXPECT_EQ(report.overall.count, 3);
  EXPECT_EQ(report.per_tuple.size(), 2u);
  EXPECT_TRUE(report.has_recipes());

  const testing::TempDir dir;
  write_json(report, dir.file("v.json"));
  const nlohmann::json json = nlohmann::json::parse(testing::read_bytes(dir.file("v.json")));
  EXPECT_EQ(json.at("mape_per_recipe").at(1).at("group"), "sp+vp");
  EXPECT_EQ(json.at("configurations").at(3).at("recipe"), "dopt");

  ValidationReport plain;
  plain.rows = {scored_row("(1,1,1)", 4, 1, "")};
  summarize_groups(plain);
  EXPECT_FALSE(plain.has_recipes());
}

}  // namespace
}  // namespace itertime::validate
