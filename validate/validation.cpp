// validation.cpp: each ground-truth configuration predicted (calibration fitted without its tuple or its
// precision) and scored;
// the compute and memory comparisons. Records only; the reporters are in validation_report.cpp.
#include "validate/validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <iterator>
#include <memory>
#include <set>

#include "common/errors.hpp"
#include "common/ops_store.hpp"
#include "common/stats.hpp"
#include "predict/memory/memory_model.hpp"
#include "predict/predictor.hpp"

namespace itertime::validate {

bool ValidationReport::has_extended_layouts() const {
  return std::any_of(rows.begin(), rows.end(), [](const ValidationRow& row) { return row.cp != 1 || row.vp != 1; });
}

ParallelConfig ValidationRow::layout() const {
  ParallelConfig config;
  config.dp = dp;
  config.tp = tp;
  config.pp = pp;
  config.cp = cp;
  config.vp = vp;
  return config;
}

std::string to_string(Holdout holdout) { return holdout == Holdout::kTuple ? "tuple" : "precision"; }

Holdout parse_holdout(std::string_view text) {
  if (text == "tuple") return Holdout::kTuple;
  if (text == "precision") return Holdout::kPrecision;
  throw UserError("holdout '" + std::string(text) + "': use tuple (leave-one-tuple-out) or precision (leave-one-precision-out)");
}

std::string holdout_group(const store::GroundTruthRecord& row, Holdout holdout) {
  return holdout == Holdout::kTuple ? row.tuple() : to_string(row.precision);
}

ValidationRow unscored_row(const store::GroundTruthRecord& gt) {
  ValidationRow row;
  row.key = gt.key;
  row.tuple = gt.tuple();
  row.precision = to_string(gt.precision);
  row.recipe = recipe_label(gt.techniques);
  row.dp = gt.config.dp;
  row.tp = gt.config.tp;
  row.pp = gt.config.pp;
  row.cp = gt.config.cp;
  row.vp = gt.config.vp;
  row.measured_us = gt.time_us_median;
  row.round_spread_pct = gt.round_spread_pct;
  return row;
}

MapeEntry summarize(const std::string& group, const std::vector<const ValidationRow*>& rows) {
  MapeEntry entry;
  entry.group = group;
  std::vector<double> aware, blind, blind_raw, built, spread;
  for (const ValidationRow* row : rows) {
    if (std::isfinite(row->round_spread_pct)) spread.push_back(row->round_spread_pct);
    if (row->disturbed()) ++entry.disturbed_count;
    aware.push_back(row->ape_pct);
    blind.push_back(row->blind_ape_pct);
    blind_raw.push_back(row->blind_raw_ape_pct);
    if (row->built_ok()) built.push_back(row->built_ape_pct);
  }
  entry.count = static_cast<int>(rows.size());
  entry.built_count = static_cast<int>(built.size());
  if (!rows.empty()) {
    entry.mape_pct = stats::mean(aware);
    entry.blind_mape_pct = stats::mean(blind);
    entry.blind_raw_mape_pct = stats::mean(blind_raw);
  }
  if (!built.empty()) entry.built_mape_pct = stats::mean(built);
  if (!spread.empty()) entry.floor_pct = stats::mean(spread);
  return entry;
}

namespace {

// Held-out calibrations (aware and blind), fitted once per held-out group (a tuple or a precision) on
// the traced predictions of every other group's rows.
struct HeldOutCalibrations {
  std::map<std::string, predict::CalibrationSet> aware, blind;
};

HeldOutCalibrations fit_per_group(predict::StageResolver& resolver, const std::vector<store::GroundTruthRecord>& records,
                                  Holdout holdout) {
  std::set<std::string> groups;
  for (const auto& row : records) {
    if (row.status == store::RunStatus::kOk) groups.insert(holdout_group(row, holdout));
  }
  HeldOutCalibrations out;
  for (const std::string& group : groups) {
    if (holdout == Holdout::kTuple) {
      out.aware[group] = predict::fit_calibration(resolver, records, false, {group}).calibration;
      out.blind[group] = predict::fit_calibration(resolver, records, true, {group}).calibration;
      continue;
    }
    std::vector<store::GroundTruthRecord> others;
    for (const auto& row : records) {
      if (holdout_group(row, holdout) != group) others.push_back(row);
    }
    out.aware[group] = predict::fit_calibration(resolver, others, false, {}).calibration;
    out.blind[group] = predict::fit_calibration(resolver, others, true, {}).calibration;
  }
  return out;
}

// The layout a ground-truth configuration's stage traces share, whatever their precision and variant.
std::string layout_key(const store::GroundTruthRecord& gt) {
  const ParallelConfig& c = gt.config;
  return gt.model + " tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp) + " mbs" + std::to_string(c.micro_batch) +
         " seq" + std::to_string(c.seq_len);
}

// Whether a stage key (common/ops_store.hpp stage_key) is one of gt's layout: any stage, precision,
// variant, training recipe and CP degree of its (model, tp, pp*vp, micro-batch, sequence) (with vp > 1
// the traced stages are those of the pp*vp pipeline).
bool of_layout(const std::string& stage_key, const store::GroundTruthRecord& gt) {
  const ParallelConfig& c = gt.config;
  for (int s = 0; s < c.pp * c.vp; ++s) {
    // Every key of the layout begins with the key of stage s up to its sequence length.
    const std::string plain = store::stage_key(gt.model, c.tp, c.pp * c.vp, s, c.micro_batch, c.seq_len, "", "", {}, c.dp);
    const std::string prefix = plain.substr(0, plain.size() - 1);  // ".../seqS/" (the empty precision's slash kept)
    if (stage_key.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

// Signature ids that only the stage traces of gt's layout (any precision, aware or blind, any recipe) use:
// the ones this layout's own trace and profiling added to the calibration.
std::set<int64_t> layout_only_signatures(const predict::FittedModel& model, const store::GroundTruthRecord& gt) {
  std::set<int64_t> own, others;
  for (const auto& [key, stage] : model.stages) {
    std::set<int64_t>& into = of_layout(key, gt) ? own : others;
    for (const auto& entry : stage.sequence) into.insert(entry.signature_id);
  }
  std::set<int64_t> only;
  std::set_difference(own.begin(), own.end(), others.begin(), others.end(), std::inserter(only, only.end()));
  return only;
}

// Builder-only resolvers, one per layout (each with that layout's signatures treated as unprofiled).
class BuiltOnlyResolvers {
 public:
  explicit BuiltOnlyResolvers(const predict::FittedModel& model) : model_(model) {}
  predict::StageResolver& for_row(const store::GroundTruthRecord& gt) {
    std::unique_ptr<predict::StageResolver>& slot = by_layout_[layout_key(gt)];
    if (!slot) {
      slot =
          std::make_unique<predict::StageResolver>(model_, predict::StagePolicy::kBuiltOnly, layout_only_signatures(model_, gt));
    }
    return *slot;
  }

 private:
  const predict::FittedModel& model_;
  std::map<std::string, std::unique_ptr<predict::StageResolver>> by_layout_;
};

// The traced aware and blind predictions of one configuration, with the tuple's calibrations.
ValidationRow score_traced(predict::StageResolver& resolver, const store::GroundTruthRecord& gt,
                           const HeldOutCalibrations& calibrations, Holdout holdout) {
  ValidationRow row = unscored_row(gt);
  row.disturbance = gt.disturbance;
  const int64_t occupancy = gt.occupancy();
  // Calibration fitted without this row's group: its own occupancy's when other groups share it, else
  // the nearest occupancy's.
  const std::string group = holdout_group(gt, holdout);
  const predict::CalibrationSet& set = calibrations.aware.at(group);
  row.calibration_occupancy = set.source_occupancy(occupancy);
  row.factor_fitted = row.calibration_occupancy == occupancy;
  const predict::Calibration& calibration = set.for_occupancy(occupancy);
  predict::PredictRequest request = predict::request_for(gt, /*blind=*/false);
  request.override_calibration = &calibration;
  const predict::PredictOutcome aware = predict::predict(resolver, request);
  request.blind = true;
  request.override_calibration = &calibrations.blind.at(group).for_occupancy(occupancy);
  const predict::PredictOutcome blind = predict::predict(resolver, request);
  if (!aware.ok() || !blind.ok()) {
    row.status = "unpredicted";
    row.reason = !aware.ok() ? aware.reason : "precision-blind: " + blind.reason;
    return row;
  }
  row.factor = calibration.factor;
  row.op_overhead_us = calibration.op_overhead_us;
  row.calibration_rows = static_cast<int>(calibration.rows);
  row.raw_predicted_us = aware.prediction->raw_total_us;
  row.predicted_us = aware.prediction->total_us;
  row.blind_predicted_us = blind.prediction->total_us;
  row.ape_pct = stats::ape_pct(row.predicted_us, row.measured_us);
  row.blind_ape_pct = stats::ape_pct(row.blind_predicted_us, row.measured_us);
  row.blind_raw_predicted_us = blind.prediction->raw_total_us;  // no term fitted on ground truth
  row.blind_raw_ape_pct = stats::ape_pct(row.blind_raw_predicted_us, row.measured_us);
  row.extrapolated_fraction = aware.prediction->extrapolated_fraction;
  row.overhead_total_us = aware.prediction->overhead_total_us;
  row.compute_us = aware.prediction->compute_us;
  row.status = "ok";
  return row;
}

// Adds the builder-only prediction to a scored row (same calibration as its traced prediction).
void score_built_only(BuiltOnlyResolvers& resolvers, const store::GroundTruthRecord& gt, const LlamaSpec* model_spec,
                      const HeldOutCalibrations& calibrations, Holdout holdout, ValidationRow& row) {
  if (model_spec == nullptr) {
    row.built_status = "no model config given";
    return;
  }
  if (gt.model != model_spec->name) {
    row.built_status = "another model (" + gt.model + ")";
    return;
  }
  predict::PredictRequest request = predict::request_for(gt, /*blind=*/false, model_spec);
  request.override_calibration = &calibrations.aware.at(holdout_group(gt, holdout)).for_occupancy(gt.occupancy());
  const predict::PredictOutcome built = predict::predict(resolvers.for_row(gt), request);
  if (!built.ok()) {
    row.built_status = built.reason;
    return;
  }
  row.built_status = "ok";
  row.built_predicted_us = built.prediction->total_us;
  row.built_ape_pct = stats::ape_pct(row.built_predicted_us, row.measured_us);
  row.built_extrapolated_fraction = built.prediction->extrapolated_fraction;
}

}  // namespace

void summarize_groups(ValidationReport& report) {
  std::map<std::string, std::vector<const ValidationRow*>> by_tuple, by_precision, by_pair, by_recipe;
  std::vector<const ValidationRow*> all;
  for (const ValidationRow& row : report.rows) {
    if (row.status != "ok") continue;
    by_tuple[row.tuple].push_back(&row);
    by_precision[row.precision].push_back(&row);
    by_pair[row.tuple + " " + row.precision].push_back(&row);
    by_recipe[row.recipe].push_back(&row);
    all.push_back(&row);
  }
  for (const auto& [group, rows] : by_tuple) report.per_tuple.push_back(summarize(group, rows));
  for (const auto& [group, rows] : by_precision) report.per_precision.push_back(summarize(group, rows));
  for (const auto& [group, rows] : by_pair) report.per_tuple_precision.push_back(summarize(group, rows));
  for (const auto& [group, rows] : by_recipe) report.per_recipe.push_back(summarize(group, rows));
  report.overall = summarize("overall", all);
}

ValidationReport validate(const predict::FittedModel& model, const std::vector<store::GroundTruthRecord>& groundtruth,
                          const LlamaSpec* model_spec, Holdout holdout) {
  ValidationReport report;
  report.calibration_file = model.source_file;
  report.holdout = holdout;
  report.regression_check = predict::pooled_regression_check(model);
  predict::StageResolver resolver(model, predict::StagePolicy::kTracedThenBuilt);
  BuiltOnlyResolvers built_resolvers(model);
  const HeldOutCalibrations calibrations = fit_per_group(resolver, groundtruth, holdout);
  for (const auto& gt : groundtruth) {
    if (gt.status != store::RunStatus::kOk) continue;
    ValidationRow row = score_traced(resolver, gt, calibrations, holdout);
    if (row.status == "ok") score_built_only(built_resolvers, gt, model_spec, calibrations, holdout, row);
    report.rows.push_back(std::move(row));
  }
  summarize_groups(report);
  const predict::CalibrationFit all_rows = predict::fit_calibration(resolver, groundtruth, false, {});
  report.terms = all_rows.terms;
  report.terms_converged = all_rows.converged;
  for (const ValidationRow& row : report.rows) {
    if (row.status == "ok" && row.overhead_total_us > row.compute_us) {
      char text[64];
      std::snprintf(text, sizeof(text), ": overhead %.1f ms, compute %.1f ms", row.overhead_total_us * 1e-3,
                    row.compute_us * 1e-3);
      report.overhead_findings.push_back(row.key + text);
    }
  }
  return report;
}

}  // namespace itertime::validate

namespace itertime::validate {

std::vector<ComputeRow> compute_report(const predict::FittedModel& model, const std::vector<store::GroundTruthRecord>& configs,
                                       const std::vector<store::GroundTruthRankRow>& ranks) {
  std::vector<ComputeRow> out;
  for (const auto& gt : configs) {
    if (gt.status != store::RunStatus::kOk) continue;
    const ParallelConfig& c = gt.config;
    // The traced stages as calibrate ops keys them: at the reduction size dp*cp, and with vp > 1 those of
    // the pp*vp pipeline, pipeline rank s running stages chunk*pp + s.
    const int reduction = c.reduction_ranks();
    const TrainingTechniques techniques = at_dp(gt.techniques, reduction);
    for (int s = 0; s < c.pp; ++s) {
      double profiled = 0;
      bool traced = true;
      for (int chunk = 0; chunk < c.vp && traced; ++chunk) {
        const std::string key = store::stage_key(gt.model, c.tp, c.pp * c.vp, chunk * c.pp + s, c.micro_batch, c.seq_len,
                                                 to_string(gt.precision), "aware", techniques, reduction, c.cp);
        const auto stage = model.stages.find(key);
        traced = stage != model.stages.end();
        if (!traced) break;
        for (const auto& entry : stage->second.sequence) {
          if (entry.phase != Phase::kForward && entry.phase != Phase::kBackward) continue;
          const auto t = model.op_time_us.find({entry.signature_id, gt.occupancy()});
          if (t != model.op_time_us.end()) profiled += t->second * static_cast<double>(entry.count);
        }
      }
      if (!traced) continue;
      profiled *= static_cast<double>(gt.num_micro_batches);
      std::vector<double> measured;
      for (int64_t i = gt.ranks_offset; i < gt.ranks_offset + gt.ranks_count; ++i) {
        const auto& r = ranks.at(static_cast<std::size_t>(i));
        if (r.pp_idx == s) measured.push_back(r.forward_us + r.backward_us);
      }
      if (measured.empty() || profiled <= 0) continue;
      ComputeRow row;
      row.key = gt.key;
      row.stage = s;
      row.profiled_us = profiled;
      row.measured_us = stats::median(measured);
      row.ratio = row.measured_us / profiled;
      out.push_back(row);
    }
  }
  return out;
}

std::vector<MemoryRow> memory_report(const LlamaSpec& model, AttentionKernel attention,
                                     const std::vector<store::GroundTruthRecord>& configs,
                                     const std::vector<store::GroundTruthRankRow>& ranks) {
  std::vector<MemoryRow> out;
  for (const auto& gt : configs) {
    if (gt.status != store::RunStatus::kOk || gt.model != model.name) continue;
    const auto predicted = predict::memory_all_stages(model, gt.config, precision_policy(gt.precision), attention, gt.techniques);
    for (int s = 0; s < gt.config.pp; ++s) {
      int64_t measured = 0;
      for (int64_t i = gt.ranks_offset; i < gt.ranks_offset + gt.ranks_count; ++i) {
        const auto& r = ranks.at(static_cast<std::size_t>(i));
        if (r.pp_idx == s) measured = std::max(measured, r.peak_tensor_bytes);
      }
      if (measured <= 0) continue;
      MemoryRow row;
      row.key = gt.key;
      row.stage = s;
      row.predicted_bytes = predicted.at(static_cast<std::size_t>(s)).total_bytes;
      row.measured_bytes = measured;
      row.ratio = row.predicted_bytes > 0 ? static_cast<double>(measured) / static_cast<double>(row.predicted_bytes) : 0.0;
      out.push_back(row);
    }
  }
  return out;
}

}  // namespace itertime::validate
