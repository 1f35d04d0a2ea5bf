// validation.hpp: predictions against ground truth, per configuration, with MAPE per (DP,TP,PP) tuple,
// per precision and overall, for the precision-aware predictor, the precision-blind baseline and the
// builder-only predictor.
// Invariants:
//  - Only ground-truth rows with status ok are scored. A configuration the traced predictor cannot
//    predict (no stage trace, no comm table) is listed with status "unpredicted" and its reason, and is
//    left out of every MAPE.
//  - The calibration (per-operator overhead and factor, predict/model/fitted_model.hpp) applied to a
//    configuration is fitted without its holdout group: leave-one-tuple-out (every ground-truth row
//    except those of its own (dp,tp,pp) tuple) or leave-one-precision-out (except those of its own
//    precision: the unseen-precision setting). When no other group shares its occupancy, the terms of the
//    nearest occupancy fitted without it are used and the row says so (factor_fitted false).
//  - The precision-blind baseline is scored two ways: with its own terms fitted on ground truth the same
//    held-out way, and raw (no term fitted on ground truth: the paper's precision-blind predictor). The
//    fitted terms do not necessarily help it: fitted across precisions they pull every prediction
//    towards the majority precision.
//  - Builder-only (given the model's LlamaSpec): every stage built from the model (predict/op_builder),
//    no trace used, and the signatures profiled only for this configuration's layout (model, tp, pp,
//    micro-batch, sequence; any precision) treated as never profiled, so they take the operator
//    regression: the configuration is predicted as if its layout had never been traced or profiled.
//    It takes the same held-out calibration as the traced prediction (fitted on traced
//    predictions, as `predict` applies it to untraced configurations). The regression itself is fitted
//    on every profiled signature (a small leak, said in docs/method.md). Its MAPE covers the rows where
//    both it and the traced prediction exist.
//  - Measurement floor: each row carries its ground truth's round spread (round_spread_pct: mean
//    |round median - time| / time over the counted measurement rounds, in %; NaN below 2 rounds) and
//    why it stayed disturbed ("" when steady). A group's floor_pct is the mean round spread over its
//    scored rows with a finite one (NaN when none): how well the ground truth agrees with itself, so a
//    MAPE cannot meaningfully go below it. Reporters print it beside every MAPE.
//  - Rows of every training recipe are scored alike; those with techniques the predictor does not model
//    (predict/predictor.hpp) are unpredicted, with that reason. MAPE per recipe beside per tuple and precision.
//  - Machine drift (validation_drift.hpp): the speed reference's drift between the operator profiles and
//    the ground truth per occupancy, compared with the overall floor, filled by validation_run (validate()
//    leaves it unknown): a MAPE moved by the machine's speed says so beside the floor.
//  - Reporters (validation_report.hpp: console, CSV, JSON, SVG; validation_store.hpp: HDF5) only present
//    a ValidationReport; they compute nothing.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/groundtruth_store.hpp"
#include "common/model_spec.hpp"
#include "predict/model/fitted_model.hpp"
#include "validate/validation_drift.hpp"

namespace itertime::validate {

struct ValidationRow {
  std::string key, tuple, precision, status;  // status: ok | unpredicted
  std::string recipe = "plain";               // the training techniques (recipe_label, common/training_techniques.hpp)
  std::string reason;                         // why unpredicted
  int dp = 0, tp = 0, pp = 0, cp = 1, vp = 1;
  ParallelConfig layout() const;  // dp, tp, pp, cp and vp as a layout (batch and sequence left at their defaults)
  double measured_us = 0;
  // The ground truth's agreement with itself (common/calibration_records.hpp GroundTruthRecord): the
  // counted rounds' spread in % (NaN below 2 rounds) and why it stayed disturbed ("" when steady).
  double round_spread_pct = std::numeric_limits<double>::quiet_NaN();
  std::string disturbance;
  bool disturbed() const { return !disturbance.empty(); }
  double predicted_us = 0, raw_predicted_us = 0, factor = 1, ape_pct = 0;
  double blind_predicted_us = 0, blind_ape_pct = 0;          // blind, with its own held-out fitted terms
  double blind_raw_predicted_us = 0, blind_raw_ape_pct = 0;  // blind, no term fitted on ground truth
  double extrapolated_fraction = 0;
  double op_overhead_us = 0;                     // the fitted per-operator-call overhead applied
  double overhead_total_us = 0, compute_us = 0;  // what that overhead adds to the step; the step's compute
  int calibration_rows = 0;    // ground-truth configurations the applied calibration was fitted on (none of its holdout group)
  bool factor_fitted = false;  // false: no other group at this occupancy; calibration_occupancy's terms are used
  int64_t calibration_occupancy = -1;  // the occupancy whose fitted terms were applied (-1: none fitted)
  // Builder-only: built_status is ok, or why it could not be predicted (no model config given, another
  // model, a layout the builder refuses).
  std::string built_status;
  double built_predicted_us = 0, built_ape_pct = 0, built_extrapolated_fraction = 0;
  bool built_ok() const { return built_status == "ok"; }
  // Where its groups sat on the ground truth's nodes (node_span.hpp: "2 nodes: tp in, dp across 2"); ""
  // when the ground truth ran on one node or its nodes are not known.
  std::string span;
};

// A row naming `gt`'s configuration (key, tuple, precision, recipe, layout) and its measurement (median
// and round spread), nothing predicted yet: what every scoring starts from. Pure.
ValidationRow unscored_row(const store::GroundTruthRecord& gt);

struct MapeEntry {
  std::string group;  // a tuple "(2,1,2)", a precision, a "tuple precision" pair, a recipe, or "overall"
  double mape_pct = 0, blind_mape_pct = 0, blind_raw_mape_pct = 0;
  int count = 0;
  double built_mape_pct = 0;  // over the built_count rows of the group with a builder-only prediction
  int built_count = 0;
  // Measurement floor: mean round_spread_pct over the group's rows with a finite one, in %; NaN when
  // none has one (ground truth measured in fewer than 2 rounds).
  double floor_pct = std::numeric_limits<double>::quiet_NaN();
  int disturbed_count = 0;  // rows of the group whose ground truth stayed disturbed
};

// The MAPE entry of one group of scored rows (status ok; the caller groups them). Pure.
MapeEntry summarize(const std::string& group, const std::vector<const ValidationRow*>& rows);

// Which rows each configuration's calibration is fitted without.
enum class Holdout { kTuple, kPrecision };
std::string to_string(Holdout holdout);  // "tuple" | "precision"
Holdout parse_holdout(std::string_view text);
std::string holdout_group(const store::GroundTruthRecord& row, Holdout holdout);  // "(2,1,2)" or "amp-bf16"

struct ValidationReport {
  std::string calibration_file;
  Holdout holdout = Holdout::kTuple;
  std::vector<ValidationRow> rows;
  std::vector<MapeEntry> per_tuple, per_precision, per_tuple_precision;
  std::vector<MapeEntry> per_recipe;  // per training recipe ("plain", "sp+vp", ...), in recipe_label order
  bool has_recipes() const { return per_recipe.size() > 1 || (per_recipe.size() == 1 && per_recipe[0].group != "plain"); }
  // Whether a row has cp or vp > 1: tables then name their tuples (DP,TP,PP[,CP,VP]) (rows with both 1
  // keep their (dp,tp,pp) form, as ParallelConfig::tuple_string gives it); else today's (DP,TP,PP) view.
  bool has_extended_layouts() const;
  std::string tuple_heading() const { return has_extended_layouts() ? "(dp,tp,pp[,cp,vp])" : "(dp,tp,pp)"; }
  MapeEntry overall;
  // "2 ranks per node" when the ground truth ran on several nodes (rows then carry their span), else "".
  std::string nodes_text;
  // How well the operator regression (used for signatures never profiled) extrapolates upwards on this
  // calibration: fitted on the smaller two thirds of each group, scored on the largest third.
  predict::PooledCheck regression_check;
  // The speed reference's drift between the operator profiles and the ground truth (known false when
  // the calibration has none), with the first profiles' overall MAPE when the fit used another pass.
  DriftSummary drift;
  // The ground-truth terms fitted on every scored row (precision-aware), each with one standard deviation:
  // what the held-out fits above are variations of (predict::fit_calibration); whether the fit converged.
  std::vector<predict::FittedCalibrationTerm> terms;
  bool terms_converged = true;
  // A finding, not an answer: the scored rows whose aware prediction adds more per-call overhead than it
  // has compute (the fit leaning on the overhead beyond what the measurements support), each
  // "KEY: overhead X ms, compute Y ms".
  std::vector<std::string> overhead_findings;
};

// Fills the report's per-tuple, per-precision, per-pair, per-recipe and overall entries from its scored rows
// (status ok), each group in its name's order. Pure.
void summarize_groups(ValidationReport& report);

// `model_spec`: the LLaMA config the ground truth trained, for the builder-only predictions; nullptr
// leaves them out (built_status says so).
ValidationReport validate(const predict::FittedModel& model, const std::vector<store::GroundTruthRecord>& groundtruth,
                          const LlamaSpec* model_spec, Holdout holdout = Holdout::kTuple);

// Puts the machine's drift beside `report` (validation_drift.hpp): `drift` compared with the report's
// overall floor and, when `first_profiles` is given (the fit with the first profiles only, for a drift
// that used a re-measured pass), the overall precision-aware MAPE it gives under the report's holdout
// (traced predictions only). `itertime validate` and the Python module's validate both call it.
void attach_drift(ValidationReport& report, const DriftSummary& drift, const predict::FittedModel* first_profiles,
                  const std::vector<store::GroundTruthRecord>& groundtruth);
// The fit of `calibration_path` with the first profiles only (predict::FitOptions::first_profiles_only),
// when `drift` says the default fit used a re-measured pass somewhere; nothing otherwise.
std::optional<predict::FittedModel> fit_first_profiles(const std::string& calibration_path, const DriftSummary& drift);

}  // namespace itertime::validate

namespace itertime::validate {

// Per configuration and pipeline stage: the sum of the stage's profiled operator times (forward and
// backward, m micro-batches, at the configuration's occupancy, no fitted term) against the forward +
// backward compute time ground truth measured on that stage's ranks (median over them; TP all-reduces
// excluded on both sides).
struct ComputeRow {
  std::string key;
  int stage = 0;
  double profiled_us = 0, measured_us = 0, ratio = 0;  // ratio = measured / profiled
};
std::vector<ComputeRow> compute_report(const predict::FittedModel& model, const std::vector<store::GroundTruthRecord>& configs,
                                       const std::vector<store::GroundTruthRankRow>& ranks);

// Per configuration of `model` and pipeline stage: the memory model's peak (predict/memory/memory_model.hpp)
// against the largest peak_tensor_bytes measured on that stage's ranks (the exact tensor bytes LibTorch
// allocated during the configuration, weights and optimizer state included). Rows of other models, and
// rank rows without a measurement (<= 0), are left out.
struct MemoryRow {
  std::string key;
  int stage = 0;
  int64_t predicted_bytes = 0, measured_bytes = 0;
  double ratio = 0;  // measured / predicted
};
// `attention`: the kernel the ground truth ran with (predict::FittedModel::attention).
std::vector<MemoryRow> memory_report(const LlamaSpec& model, AttentionKernel attention,
                                     const std::vector<store::GroundTruthRecord>& configs,
                                     const std::vector<store::GroundTruthRankRow>& ranks);

}  // namespace itertime::validate
