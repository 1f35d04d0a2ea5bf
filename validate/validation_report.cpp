// validation_report.cpp: the reporters of a validation (console, CSV, JSON, SVG) and of the compute and
// memory comparisons. They only present the records of validation.hpp; they compute nothing.
// Invariants: every MAPE printed or written has its group's measurement floor (MapeEntry::floor_pct)
// beside it; a NaN (no finite round spread) prints "-", is an empty CSV field and a JSON null. The
// machine drift (ValidationReport::drift) is printed beside the overall floor and written as the JSON's
// "drift" object: a calibration without a speed reference says unknown, never fails.
#include "validate/validation_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/errors.hpp"
#include "common/stats.hpp"

namespace itertime::predict {

// A fitted ground-truth term in the report's JSON: its members by their names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FittedCalibrationTerm, name, described, fitted, sigma)

}  // namespace itertime::predict

namespace itertime::validate {

// A MAPE entry in the report's JSON: its members by their names (a NaN floor is written null, as
// nlohmann writes every NaN).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MapeEntry, group, count, mape_pct, blind_mape_pct, blind_raw_mape_pct, built_count,
                                   built_mape_pct, floor_pct, disturbed_count)

namespace {

// "1.23", or "-" for NaN (no finite value).
std::string pct_or_dash(double value_pct) {
  if (!std::isfinite(value_pct)) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", value_pct);
  return text;
}

// A JSON number, or null for NaN and infinities.
nlohmann::json number_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }

// A CSV field: empty for NaN.
std::string csv_number(double value) {
  if (!std::isfinite(value)) return "";
  std::ostringstream out;
  out << value;
  return out.str();
}

// A CSV text field, quoted when it holds a comma, a quote or a line break.
std::string csv_text(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void print_mape_table(const char* title, const char* first_column, const std::vector<MapeEntry>& entries) {
  std::printf(
      "#\n# MAPE per %s (floor: mean round spread of the group's ground truth, below which no MAPE is meaningful)\n"
      "# %-16s %6s %9s %14s %14s %14s %8s %14s %6s\n",
      title, first_column, "n", "floor(%)", "aware(%)", "blind(%)", "blind_raw(%)", "n_built", "built-only(%)", "n_dist");
  for (const MapeEntry& e : entries) {
    char built[32] = "-";
    if (e.built_count > 0) std::snprintf(built, sizeof(built), "%.2f", e.built_mape_pct);
    std::printf("  %-16s %6d %9s %14.2f %14.2f %14.2f %8d %14s %6d\n", e.group.c_str(), e.count, pct_or_dash(e.floor_pct).c_str(),
                e.mape_pct, e.blind_mape_pct, e.blind_raw_mape_pct, e.built_count, built, e.disturbed_count);
  }
}

// After the per-configuration table: how many configurations stayed disturbed, and why each did.
void print_disturbed(const ValidationReport& report) {
  std::vector<const ValidationRow*> disturbed;
  int scored = 0;
  for (const ValidationRow& row : report.rows) {
    if (row.status != "ok") continue;
    ++scored;
    if (row.disturbed()) disturbed.push_back(&row);
  }
  if (disturbed.empty()) {
    std::printf("# no configuration stayed disturbed (of %d scored)\n", scored);
    return;
  }
  std::printf("# %zu of %d scored configurations stayed disturbed (marked !; their measured time is less reliable):\n",
              disturbed.size(), scored);
  for (const ValidationRow* row : disturbed) {
    std::printf("#   ! %-10s %-9s %s\n", row->tuple.c_str(), row->precision.c_str(), row->disturbance.c_str());
  }
}

// On a ground truth of several nodes: each tuple's MAPE again, beside where its groups sat (every row of a
// tuple sits alike: one layout, one placement).
void print_tuple_spans(const ValidationReport& report) {
  if (report.nodes_text.empty()) return;
  std::map<std::string, std::string> span_of_tuple;
  for (const ValidationRow& row : report.rows) span_of_tuple.emplace(row.tuple, row.span);
  std::printf("#\n# MAPE per tuple across nodes (the ground truth ran on %s; floor as above)\n", report.nodes_text.c_str());
  std::printf("# %-16s %-36s %6s %9s %14s\n", "tuple", "span", "n", "floor(%)", "aware(%)");
  for (const MapeEntry& e : report.per_tuple) {
    const auto span = span_of_tuple.find(e.group);
    std::printf("  %-16s %-36s %6d %9s %14.2f\n", e.group.c_str(), span == span_of_tuple.end() ? "-" : span->second.c_str(),
                e.count, pct_or_dash(e.floor_pct).c_str(), e.mape_pct);
  }
}

// "+1.2%", or "-" for NaN.
std::string signed_pct_or_dash(double value_pct) {
  if (!std::isfinite(value_pct)) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%+.1f%%", value_pct);
  return text;
}

// Beside the overall floor: the speed reference's drift per occupancy (the pass the fit used, and pass 0
// when it used another), whether the largest exceeds the floor and what to do then, and the first
// profiles' overall MAPE when the fit used a re-measured pass.
void print_drift(const ValidationReport& report) {
  const DriftSummary& drift = report.drift;
  if (!drift.known) {
    std::printf("# machine drift: unknown (no speed reference in this calibration)\n");
    return;
  }
  if (drift.occupancies.empty()) {
    std::printf(
        "# machine drift: unknown (no occupancy has speed-reference samples of both the operator profiles and the ground "
        "truth)\n");
    return;
  }
  std::printf(
      "# machine drift (speed reference: ground truth against the operator profiles; + = slower during the ground "
      "truth):\n");
  std::size_t label_width = 0;
  for (const DriftOccupancy& o : drift.occupancies) {
    label_width = std::max(label_width, std::to_string(o.occupancy).size() + (o.occupancy == 1 ? 5 : 6));
  }
  for (const DriftOccupancy& o : drift.occupancies) {
    const std::string label = std::to_string(o.occupancy) + (o.occupancy == 1 ? " rank" : " ranks");
    std::string which;
    if (o.ops_pass != 0) {
      which = "pass " + std::to_string(o.ops_pass) + ", re-measured; pass 0 was " + signed_pct_or_dash(o.first_pass_compute_pct);
    } else if (o.passes.size() > 1) {
      which = "profiling pass 0, the nearest of " + std::to_string(o.passes.size()) + " passes";
    } else {
      which = "profiling pass 0";
    }
    std::printf("#   %-*s: matrix product %-7s element-wise %-7s all-reduce %-6s  (%s)\n", static_cast<int>(label_width),
                label.c_str(), (signed_pct_or_dash(o.matmul_pct) + ",").c_str(),
                (signed_pct_or_dash(o.elementwise_pct) + ",").c_str(), signed_pct_or_dash(o.allreduce_pct).c_str(),
                which.c_str());
  }
  const double largest = std::fabs(drift.largest_compute_pct);
  if (drift.above_floor) {
    std::printf(
        "# drift above the floor (%.1f%% > %.2f%%): the machine ran at another speed while the operators were profiled than\n"
        "#   during the ground truth; the MAPE above mixes that in. Rerun on a quieter machine, or rerun `itertime run`\n"
        "#   (its drift stage profiles again the occupancies that drifted more than groundtruth.drift_pct; raise\n"
        "#   groundtruth.max_extra_rounds to allow more passes)\n",
        largest, report.overall.floor_pct);
  } else if (std::isfinite(report.overall.floor_pct)) {
    std::printf(
        "# drift within the floor (%.1f%% <= %.2f%%): the machine's speed moved less than the ground truth disagrees\n"
        "#   with itself\n",
        largest, report.overall.floor_pct);
  } else {
    std::printf("# largest compute drift %.1f%% (no floor to compare it with)\n", largest);
  }
  if (std::isfinite(drift.first_pass_mape_pct)) {
    std::printf(
        "# with the first profiles only (pass 0 at every occupancy) the overall MAPE (%s) is %.2f%% precision-aware,\n"
        "#   against %.2f%% above with the re-measured passes\n",
        to_string(report.holdout).c_str(), drift.first_pass_mape_pct, report.overall.mape_pct);
  }
}

const char* holdout_text(Holdout holdout) {
  return holdout == Holdout::kTuple ? "leave-one-tuple-out" : "leave-one-precision-out (each precision unseen by the fit)";
}

// The terms fitted on every scored row, each with one standard deviation (ln terms shown as factors,
// x exp(value) +- exp(value) sigma), then the overhead findings.
void print_terms(const ValidationReport& report) {
  if (report.terms.empty()) return;
  std::printf("# terms fitted on every scored row (precision-aware), +- one standard deviation%s:\n",
              report.terms_converged ? "" : " (the fit stopped on its evaluation limit, not converged)");
  for (const predict::FittedCalibrationTerm& t : report.terms) {
    if (t.name.rfind("ln_", 0) == 0) {
      const double value = std::exp(t.fitted);
      const std::string what =
          t.name == "ln_factor" ? std::string("factor") : "contention at occupancy " + t.name.substr(t.name.find('@') + 1);
      std::printf("#   %-30s x%.3f +- %.3f (described x%.3f)\n", what.c_str(), value, value * t.sigma, std::exp(t.described));
    } else {
      std::printf("#   %-30s %.2f +- %.2f us per operator call (described %.2f)\n", "per-call overhead", t.fitted, t.sigma,
                  t.described);
    }
  }
  if (report.overhead_findings.empty()) return;
  std::printf(
      "# finding: on %zu configurations the per-call overhead adds more than the compute, more than the\n"
      "#   measurements support (the terms above lean on it):\n",
      report.overhead_findings.size());
  constexpr std::size_t kShown = 4;  // the rest are in validation.json's overhead_findings
  for (std::size_t i = 0; i < report.overhead_findings.size() && i < kShown; ++i)
    std::printf("#   %s\n", report.overhead_findings[i].c_str());
  if (report.overhead_findings.size() > kShown)
    std::printf("#   and %zu more (validation.json overhead_findings)\n", report.overhead_findings.size() - kShown);
}

}  // namespace

void print_report(const ValidationReport& report) {
  std::printf("# validation of %s (calibration factors fitted %s)\n#\n", report.calibration_file.c_str(),
              holdout_text(report.holdout));
  std::printf("# spread(%%): the ground truth's round spread (mean |round median - time| / time); ! marks a disturbed one\n");
  std::printf("# %-10s %-9s %14s %9s  %14s %9s %16s %9s %16s %9s  %s\n", report.tuple_heading().c_str(), "precision",
              "measured_us", "spread(%)", "predicted_us", "APE(%)", "blind_pred_us", "blind(%)", "built_pred_us", "built(%)",
              "note");
  for (const ValidationRow& row : report.rows) {
    const std::string spread = pct_or_dash(row.round_spread_pct) + (row.disturbed() ? "!" : " ");
    if (row.status != "ok") {
      std::printf("  %-10s %-9s %14.0f %10s %14s %9s %16s %9s %16s %9s  unpredicted: %s\n", row.tuple.c_str(),
                  row.precision.c_str(), row.measured_us, spread.c_str(), "-", "-", "-", "-", "-", "-", row.reason.c_str());
      continue;
    }
    std::string note = row.factor_fitted ? ""
                                         : "terms of occupancy " + std::to_string(row.calibration_occupancy) + " (no other " +
                                               to_string(report.holdout) + " at occupancy " +
                                               std::to_string(row.dp * row.cp * row.tp * row.pp) + ")";
    if (row.recipe != "plain") note = "recipe " + row.recipe + (note.empty() ? "" : "; ") + note;
    if (!row.built_ok()) note += std::string(note.empty() ? "" : "; ") + "builder-only: " + row.built_status;
    char built_us[32] = "-", built_ape[32] = "-";
    if (row.built_ok()) {
      std::snprintf(built_us, sizeof(built_us), "%.0f", row.built_predicted_us);
      std::snprintf(built_ape, sizeof(built_ape), "%.2f", row.built_ape_pct);
    }
    std::printf("  %-10s %-9s %14.0f %10s %14.0f %9.2f %16.0f %9.2f %16s %9s  %s\n", row.tuple.c_str(), row.precision.c_str(),
                row.measured_us, spread.c_str(), row.predicted_us, row.ape_pct, row.blind_predicted_us, row.blind_ape_pct,
                built_us, built_ape, note.c_str());
  }
  print_disturbed(report);
  print_mape_table((report.tuple_heading() + " tuple").c_str(), "tuple", report.per_tuple);
  print_tuple_spans(report);
  print_mape_table("precision", "precision", report.per_precision);
  if (report.has_recipes()) print_mape_table("training recipe", "recipe", report.per_recipe);
  std::printf(
      "#\n# overall MAPE (%s): %.2f%% precision-aware, %.2f%% precision-blind with its own terms fitted on ground truth "
      "(held out alike), %.2f%% precision-blind raw (no term fitted on ground truth: the paper's baseline), "
      "over %d configurations (%d disturbed)\n",
      to_string(report.holdout).c_str(), report.overall.mape_pct, report.overall.blind_mape_pct,
      report.overall.blind_raw_mape_pct, report.overall.count, report.overall.disturbed_count);
  const std::string floor = pct_or_dash(report.overall.floor_pct);
  if (floor == "-") {
    std::printf(
        "# measurement floor: - (no scored configuration has 2 or more counted rounds: how well the ground truth\n"
        "#   agrees with itself is unknown)\n");
  } else {
    std::printf(
        "# measurement floor: %s%% (mean round spread of the ground truth: how well it agrees with itself; no\n"
        "#   MAPE above is meaningful below it)\n",
        floor.c_str());
  }
  print_drift(report);
  print_terms(report);
  if (report.overall.built_count > 0) {
    std::printf(
        "# builder-only MAPE: %.2f%% over %d configurations, floor %s%s (every stage built from the model, no trace\n"
        "#   used, the signatures profiled only for the configuration's own layout taken from the operator regression)\n",
        report.overall.built_mape_pct, report.overall.built_count, floor.c_str(), floor == "-" ? "" : "%");
  } else {
    std::printf("# builder-only MAPE: none (no model config: pass --model)\n");
  }
  const predict::PooledCheck& check = report.regression_check;
  if (check.groups > 0) {
    std::printf(
        "# operator regression (for signatures never profiled), fitted on the smaller 2/3 of each group and\n"
        "#   scored on the largest 1/3: MAPE %.2f%% (time-weighted %.2f%%) over %lld signatures in %lld groups\n",
        check.mape_pct, check.time_weighted_mape_pct, static_cast<long long>(check.held_out_points),
        static_cast<long long>(check.groups));
  }
}

void write_csv(const ValidationReport& report, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw UserError(path + ": cannot be written");
  out << "key,dp,tp,pp,precision,status,measured_us,predicted_us,raw_predicted_us,calibration_factor,factor_fitted,ape_pct,"
         "blind_predicted_us,blind_ape_pct,extrapolated_fraction,op_overhead_us,built_ok,built_predicted_us,built_ape_pct,"
         "built_extrapolated_fraction,blind_raw_predicted_us,blind_raw_ape_pct,round_spread_pct,disturbance,recipe,cp,vp,span\n";
  for (const ValidationRow& r : report.rows) {
    out << r.key << "," << r.dp << "," << r.tp << "," << r.pp << "," << r.precision << "," << r.status << "," << r.measured_us
        << "," << r.predicted_us << "," << r.raw_predicted_us << "," << r.factor << "," << (r.factor_fitted ? 1 : 0) << ","
        << r.ape_pct << "," << r.blind_predicted_us << "," << r.blind_ape_pct << "," << r.extrapolated_fraction << ","
        << r.op_overhead_us << "," << (r.built_ok() ? 1 : 0) << "," << r.built_predicted_us << "," << r.built_ape_pct << ","
        << r.built_extrapolated_fraction << "," << r.blind_raw_predicted_us << "," << r.blind_raw_ape_pct << ","
        << csv_number(r.round_spread_pct) << "," << csv_text(r.disturbance) << "," << r.recipe << "," << r.cp << "," << r.vp
        << "," << csv_text(r.span) << "\n";
  }
}

void write_json(const ValidationReport& report, const std::string& path) {
  nlohmann::json root;
  root["calibration_file"] = report.calibration_file;
  root["leave_one_tuple_out"] = report.holdout == Holdout::kTuple;
  root["holdout"] = to_string(report.holdout);
  root["nodes"] = report.nodes_text;  // "" on one node
  for (const ValidationRow& r : report.rows) {
    root["configurations"].push_back({{"key", r.key},
                                      {"dp", r.dp},
                                      {"tp", r.tp},
                                      {"pp", r.pp},
                                      {"cp", r.cp},
                                      {"vp", r.vp},
                                      {"span", r.span},
                                      {"precision", r.precision},
                                      {"status", r.status},
                                      {"measured_us", r.measured_us},
                                      {"predicted_us", r.predicted_us},
                                      {"raw_predicted_us", r.raw_predicted_us},
                                      {"calibration_factor", r.factor},
                                      {"factor_fitted", r.factor_fitted},
                                      {"ape_pct", r.ape_pct},
                                      {"blind_predicted_us", r.blind_predicted_us},
                                      {"blind_ape_pct", r.blind_ape_pct},
                                      {"extrapolated_fraction", r.extrapolated_fraction},
                                      {"op_overhead_us", r.op_overhead_us},
                                      {"calibration_rows", r.calibration_rows},
                                      {"reason", r.reason},
                                      {"built_status", r.built_status},
                                      {"built_predicted_us", r.built_predicted_us},
                                      {"built_ape_pct", r.built_ape_pct},
                                      {"built_extrapolated_fraction", r.built_extrapolated_fraction},
                                      {"blind_raw_predicted_us", r.blind_raw_predicted_us},
                                      {"blind_raw_ape_pct", r.blind_raw_ape_pct},
                                      {"round_spread_pct", number_or_null(r.round_spread_pct)},
                                      {"disturbance", r.disturbance},
                                      {"recipe", r.recipe}});
  }
  root["mape_per_tuple"] = report.per_tuple;
  root["mape_per_precision"] = report.per_precision;
  root["mape_per_tuple_precision"] = report.per_tuple_precision;
  root["mape_per_recipe"] = report.per_recipe;
  root["calibration_terms"] = report.terms;
  root["calibration_terms_converged"] = report.terms_converged;
  root["overhead_findings"] = report.overhead_findings;
  root["mape_overall"] = {{"count", report.overall.count},
                          {"mape_pct", report.overall.mape_pct},
                          {"blind_mape_pct", report.overall.blind_mape_pct},
                          {"blind_raw_mape_pct", report.overall.blind_raw_mape_pct},
                          {"built_count", report.overall.built_count},
                          {"built_mape_pct", report.overall.built_mape_pct},
                          {"floor_pct", number_or_null(report.overall.floor_pct)},
                          {"disturbed_count", report.overall.disturbed_count},
                          {"first_pass_mape_pct", number_or_null(report.drift.first_pass_mape_pct)}};
  nlohmann::json occupancies = nlohmann::json::array();
  for (const DriftOccupancy& o : report.drift.occupancies) {
    occupancies.push_back({{"occupancy", o.occupancy},
                           {"ops_pass", o.ops_pass},
                           {"passes", o.passes},
                           {"matmul_pct", number_or_null(o.matmul_pct)},
                           {"elementwise_pct", number_or_null(o.elementwise_pct)},
                           {"allreduce_pct", number_or_null(o.allreduce_pct)},
                           {"compute_pct", number_or_null(o.compute_pct)},
                           {"first_pass_compute_pct", number_or_null(o.first_pass_compute_pct)}});
  }
  root["drift"] = {{"known", report.drift.known},
                   {"occupancies", occupancies},
                   {"largest_compute_pct", number_or_null(report.drift.largest_compute_pct)},
                   {"above_floor", report.drift.above_floor}};
  root["regression_extrapolation_check"] = {{"groups", report.regression_check.groups},
                                            {"held_out_signatures", report.regression_check.held_out_points},
                                            {"mape_pct", report.regression_check.mape_pct},
                                            {"time_weighted_mape_pct", report.regression_check.time_weighted_mape_pct}};
  std::ofstream out(path);
  if (!out) throw UserError(path + ": cannot be written");
  out << root.dump(2) << "\n";
}

namespace {

constexpr double kSvgLeftWidth = 640;  // the MAPE bars; the scatter is to their right

// Left: MAPE per (tuple, precision), precision-aware bars beside the blind baseline's outline, each with
// its group's measurement floor as a black tick (none when the floor is NaN).
void write_svg_mape_bars(std::ostream& out, const ValidationReport& report, std::map<std::string, std::string>& color_of) {
  const double left_w = kSvgLeftWidth;
  char buf[512];
  const std::string floor = pct_or_dash(report.overall.floor_pct);
  std::snprintf(buf, sizeof(buf),
                "<text x='20' y='22' font-size='14'>MAPE per %s and precision, %s holdout: overall %.2f%% (blind %.2f%%, floor "
                "%s%s)</text>\n",
                report.tuple_heading().c_str(), to_string(report.holdout).c_str(), report.overall.mape_pct,
                report.overall.blind_mape_pct, floor.c_str(), floor == "-" ? "" : "%");
  out << buf;
  const std::vector<std::string> colors = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
  for (const MapeEntry& e : report.per_precision) color_of[e.group] = colors[color_of.size() % colors.size()];
  double max_mape = 1.0;
  for (const MapeEntry& e : report.per_tuple_precision) {
    max_mape = std::max({max_mape, e.mape_pct, std::min(e.blind_mape_pct, 200.0)});
    if (std::isfinite(e.floor_pct)) max_mape = std::max(max_mape, std::min(e.floor_pct, 200.0));
  }
  const double plot_x = 50, plot_y = 40, plot_h = 330, plot_w = left_w - 70;
  const double bar_w = report.per_tuple_precision.empty() ? 10 : plot_w / static_cast<double>(report.per_tuple_precision.size());
  out << "<line x1='" << plot_x << "' y1='" << plot_y + plot_h << "' x2='" << plot_x + plot_w << "' y2='" << plot_y + plot_h
      << "' stroke='black'/>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    const double value = max_mape * tick / 4.0;
    const double y = plot_y + plot_h - plot_h * tick / 4.0;
    std::snprintf(
        buf, sizeof(buf),
        "<text x='%.1f' y='%.1f' text-anchor='end'>%.0f%%</text><line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n",
        plot_x - 4, y + 4, value, plot_x, y, plot_x + plot_w, y);
    out << buf;
  }
  for (std::size_t i = 0; i < report.per_tuple_precision.size(); ++i) {
    const MapeEntry& e = report.per_tuple_precision[i];
    const std::string precision = e.group.substr(e.group.find(' ') + 1);
    const double x = plot_x + bar_w * static_cast<double>(i);
    const double h = plot_h * e.mape_pct / max_mape;
    const double hb = plot_h * std::min(e.blind_mape_pct, max_mape) / max_mape;
    std::snprintf(buf, sizeof(buf),
                  "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#999' stroke-dasharray='2,2'/>\n",
                  x + 1, plot_y + plot_h - hb, bar_w - 2, hb);
    out << buf;
    std::snprintf(
        buf, sizeof(buf),
        "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'><title>%s: %.2f%% (blind %.2f%%)</title></rect>\n", x + 3,
        plot_y + plot_h - h, bar_w - 6, h, color_of[precision].c_str(), e.group.c_str(), e.mape_pct, e.blind_mape_pct);
    out << buf;
    if (std::isfinite(e.floor_pct)) {
      const double y_floor = plot_y + plot_h - plot_h * std::min(e.floor_pct, max_mape) / max_mape;
      std::snprintf(buf, sizeof(buf),
                    "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='black' stroke-width='2'><title>%s: measurement floor "
                    "%.2f%%</title></line>\n",
                    x + 1, y_floor, x + bar_w - 1, y_floor, e.group.c_str(), e.floor_pct);
      out << buf;
    }
    std::snprintf(buf, sizeof(buf), "<text x='%.1f' y='%.1f' transform='rotate(60 %.1f %.1f)'>%s</text>\n", x + bar_w / 2,
                  plot_y + plot_h + 10, x + bar_w / 2, plot_y + plot_h + 10, e.group.substr(0, e.group.find(' ')).c_str());
    out << buf;
  }
  double legend_y = 40;
  for (const auto& [precision, color] : color_of) {
    std::snprintf(buf, sizeof(buf),
                  "<rect x='%.1f' y='%.1f' width='10' height='10' fill='%s'/><text x='%.1f' y='%.1f'>%s</text>\n", left_w - 110,
                  legend_y, color.c_str(), left_w - 95, legend_y + 9, precision.c_str());
    out << buf;
    legend_y += 15;
  }
  std::snprintf(buf, sizeof(buf),
                "<rect x='%.1f' y='%.1f' width='10' height='10' fill='none' stroke='#999' stroke-dasharray='2,2'/><text x='%.1f' "
                "y='%.1f'>blind baseline</text>\n",
                left_w - 110, legend_y, left_w - 95, legend_y + 9);
  out << buf;
  legend_y += 15;
  std::snprintf(buf, sizeof(buf),
                "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='black' stroke-width='2'/><text x='%.1f' "
                "y='%.1f'>measurement floor</text>\n",
                left_w - 110, legend_y + 5, left_w - 100, legend_y + 5, left_w - 95, legend_y + 9);
  out << buf;
}

// Right: predicted against measured time (log-log), with the y = x line.
void write_svg_scatter(std::ostream& out, const ValidationReport& report, std::map<std::string, std::string>& color_of) {
  const double left_w = kSvgLeftWidth;
  char buf[512];
  double lo = 1e300, hi = 0;
  for (const ValidationRow& r : report.rows) {
    if (r.status != "ok") continue;
    lo = std::min({lo, r.measured_us, r.predicted_us});
    hi = std::max({hi, r.measured_us, r.predicted_us});
  }
  if (hi > 0) {
    lo = std::log10(lo) - 0.1;
    hi = std::log10(hi) + 0.1;
    const double sx = left_w + 40, sy = 40, side = 360;
    auto px = [&](double v) { return sx + side * (std::log10(v) - lo) / (hi - lo); };
    auto py = [&](double v) { return sy + side - side * (std::log10(v) - lo) / (hi - lo); };
    std::snprintf(buf, sizeof(buf), "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='black'/>\n", sx, sy,
                  side, side);
    out << buf;
    std::snprintf(buf, sizeof(buf), "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#999'/>\n", sx, sy + side, sx + side,
                  sy);
    out << buf;
    std::snprintf(buf, sizeof(buf), "<text x='%.1f' y='%.1f'>predicted vs measured iteration time (log-log, us)</text>\n", sx,
                  sy - 8);
    out << buf;
    for (const ValidationRow& r : report.rows) {
      if (r.status != "ok") continue;
      std::snprintf(buf, sizeof(buf),
                    "<circle cx='%.1f' cy='%.1f' r='4' fill='%s'><title>%s %s: measured %.0f, predicted %.0f</title></circle>\n",
                    px(r.measured_us), py(r.predicted_us), color_of[r.precision].c_str(), r.tuple.c_str(), r.precision.c_str(),
                    r.measured_us, r.predicted_us);
      out << buf;
    }
    std::snprintf(buf, sizeof(buf), "<text x='%.1f' y='%.1f'>measured: %.3g .. %.3g us</text>\n", sx, sy + side + 18,
                  std::pow(10, lo + 0.1), std::pow(10, hi - 0.1));
    out << buf;
  }
}

}  // namespace

void write_svg(const ValidationReport& report, const std::string& path) {
  const double width = 1100, height = 460;
  std::ofstream out(path);
  if (!out) throw UserError(path + ": cannot be written");
  out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n";
  std::map<std::string, std::string> color_of;  // precision -> colour, shared by both plots
  write_svg_mape_bars(out, report, color_of);
  write_svg_scatter(out, report, color_of);
  out << "</svg>\n";
}

void print_compute_report(const std::vector<ComputeRow>& rows) {
  std::printf("#\n# stage compute: sum of profiled operator times vs measured forward+backward (no fitted term)\n");
  std::printf("# %-52s %5s %14s %14s %8s\n", "configuration", "stage", "profiled_us", "measured_us", "ratio");
  std::vector<double> ratios;
  for (const ComputeRow& r : rows) {
    std::printf("  %-52s %5d %14.0f %14.0f %8.2f\n", r.key.c_str(), r.stage, r.profiled_us, r.measured_us, r.ratio);
    ratios.push_back(r.ratio);
  }
  if (!ratios.empty()) {
    std::printf("# measured / profiled: median %.2f, min %.2f, max %.2f over %zu stages\n", stats::median(ratios),
                stats::min(ratios), stats::max(ratios), ratios.size());
  }
}

void print_memory_report(const std::vector<MemoryRow>& rows) {
  std::printf("#\n# stage memory: memory model peak vs measured peak tensor bytes (max over the stage's ranks)\n");
  std::printf("# %-52s %5s %14s %14s %8s\n", "configuration", "stage", "model_bytes", "measured_bytes", "ratio");
  std::vector<double> ratios;
  for (const MemoryRow& r : rows) {
    std::printf("  %-52s %5d %14lld %14lld %8.3f\n", r.key.c_str(), r.stage, static_cast<long long>(r.predicted_bytes),
                static_cast<long long>(r.measured_bytes), r.ratio);
    ratios.push_back(r.ratio);
  }
  if (!ratios.empty()) {
    std::printf("# measured / model: median %.3f, min %.3f, max %.3f over %zu stages\n", stats::median(ratios),
                stats::min(ratios), stats::max(ratios), ratios.size());
  } else {
    std::printf("# no stage has a measured peak_tensor_bytes for this model\n");
  }
}

}  // namespace itertime::validate
