// fit_model.cpp: the fitted model from a calibration file's records (fit_model.hpp): /meta read into
// the model's typed fields, the operator profiles, regressions and traced stages, the operator roofline,
// the comm model, and the calibration fitted on ground truth through the predictor.
#include "predict/fit_model.hpp"

#include <H5public.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "common/store_meta.hpp"
#include "common/hardware_spec.hpp"
#include "common/speed_drift.hpp"
#include "predict/predictor.hpp"
#include "predict/resolver/stage_resolver.hpp"

namespace itertime::predict {

// The operator part of the model: signatures, profiled times per occupancy, the regressions fitted on
// them, and the traced stages.
void add_operator_profiles(FittedModel& model, const store::OpsRecords& ops, const FitOptions& options) {
  for (const store::OpSignatureRecord& row : ops.signatures) {
    model.signatures[row.id] = OpInfo{row.name, row.signature, row.input_dtypes, row.output_dtype, row.flops, row.bytes};
    model.signature_ids[row.signature] = row.id;
  }
  // Per occupancy, the profiling pass whose speed reference lies nearest the ground truth's (pass 0, the
  // first profiles, unless calibrate drift measured them again: common/speed_drift.hpp); a signature the
  // chosen pass lacks keeps its pass-0 time. First profiles only: no pass chosen, pass 0 everywhere.
  const std::map<int, int> chosen_pass = options.first_profiles_only ? std::map<int, int>{} : choose_ops_passes(ops.reference);
  std::map<std::pair<int64_t, int64_t>, const store::OpTimingRecord*> used;  // (signature, occupancy) -> timing
  for (const store::OpTimingRecord& row : ops.timings) {
    const auto chosen = chosen_pass.find(static_cast<int>(row.active_ranks));
    const int pass = chosen != chosen_pass.end() ? chosen->second : 0;
    if (row.pass != 0 && row.pass != pass) continue;
    const auto [entry, inserted] = used.emplace(std::make_pair(row.signature_id, row.active_ranks), &row);
    if (!inserted && row.pass == pass) entry->second = &row;  // the chosen pass over pass 0
  }
  std::set<int64_t> occupancies;
  std::map<std::pair<std::string, int64_t>, std::vector<RegressionPoint>> regression_points;
  for (const store::OpTimingRecord& row : ops.timings) {  // in file order, as the regressions always saw them
    if (used.at({row.signature_id, row.active_ranks}) != &row || !row.ok) continue;
    model.op_time_us[{row.signature_id, row.active_ranks}] = row.time_us_median;
    occupancies.insert(row.active_ranks);
    const auto info = model.signatures.find(row.signature_id);
    if (info != model.signatures.end()) {
      regression_points[{regression_key(info->second.name, info->second.input_dtypes), row.active_ranks}].push_back(
          RegressionPoint{info->second.flops, info->second.bytes, row.time_us_median});
    }
  }
  model.occupancies.assign(occupancies.begin(), occupancies.end());
  for (const auto& [key, points] : regression_points) {
    model.regressions[key] = fit_op_regression(points);
    const RegressionCheck check = check_extrapolation(points);
    if (check.held_out_points > 0) model.regression_checks[key] = check;
  }
  for (const store::OpStageRecord& stage : ops.stages) {
    StageOps stage_ops;
    stage_ops.local_params = stage.local_params;
    for (const store::StageSequenceRecord& row : stage.sequence) {
      stage_ops.sequence.push_back(SequenceEntry{row.phase, row.signature_id, row.count});
    }
    for (const store::StageCommRecord& row : stage.comms) {
      stage_ops.comms.push_back(CommOp{row.phase, row.kind, row.dtype, row.bytes, row.count});
    }
    model.stages[stage.stage_key] = std::move(stage_ops);
  }
}

namespace {

// The transferable operator model (device/operator_roofline.hpp): fitted at the lowest profiled occupancy
// against the description the devices matched, checked at every other occupancy. Nothing when the
// description is not shipped here (the file still predicts with its own profiles).
void add_roofline(FittedModel& model, const store::OpsRecords& ops, int threads_per_rank) {
  if (model.hardware.empty() || model.occupancies.empty()) return;
  HardwareSpec hardware;
  try {
    hardware = find_hardware_spec(model.hardware);
  } catch (const UserError&) {
    return;
  }
  std::set<int64_t> optimizer_signatures;
  for (const store::OpStageRecord& stage : ops.stages) {
    for (const store::StageSequenceRecord& row : stage.sequence) {
      if (row.phase == Phase::kOptimizer) optimizer_signatures.insert(row.signature_id);
    }
  }
  std::map<int64_t, std::vector<ProfiledCall>> calls_by_occupancy;
  for (const auto& [key, time_us] : model.op_time_us) {
    const OpInfo& info = model.signatures.at(key.first);
    ProfiledCall call;
    call.op_class = classify_operator(info.name, optimizer_signatures.count(key.first) ? Phase::kOptimizer : Phase::kForward);
    call.math = math_dtype_of(info.input_dtypes, call.op_class, false);
    call.flops = call.op_class == OperatorClass::kAttention ? attention_flops(info.name, info.signature) : info.flops;
    call.bytes = info.bytes;
    call.time_us = time_us;
    calls_by_occupancy[key.second].push_back(call);
  }
  const int64_t fit_occupancy = model.occupancies.front();
  model.roofline =
      fit_operator_roofline(calls_by_occupancy[fit_occupancy], rank_rates(hardware, fit_occupancy, threads_per_rank));
  model.roofline.fitted_on = hardware.name;
  model.roofline.fitted_from = model.source_file + " at occupancy " + std::to_string(fit_occupancy);
  for (int64_t occupancy : model.occupancies) {
    if (occupancy == fit_occupancy) continue;
    model.roofline_transfer.push_back(check_transfer(model.roofline, rank_rates(hardware, occupancy, threads_per_rank),
                                                     calls_by_occupancy[occupancy], fit_occupancy, occupancy));
  }
}

}  // namespace

FittedModel fit_model(const std::string& calibration_path, const FitOptions& options) {
  h5::Store store = h5::Store::open(calibration_path, /*writable=*/false);
  if (!store.exists(store::kOpStages)) {
    throw UserError(calibration_path + ": no /ops tables; run `itertime calibrate ops --job JOB` on this cluster first");
  }
  FittedModel model;
  model.source_file = calibration_path;
  // The text boundary: /meta is read once into typed fields (common/store_meta.hpp).
  const store::StoreMeta meta = store::read_store_meta(store);
  model.backend = meta.backend;
  if (meta.attention) model.attention = *meta.attention;
  model.libtorch_version = meta.libtorch_version;
  model.hardware = meta.hardware;
  int threads_per_rank = 1;
  // Oversubscribed CPU ranks share cores (predict/schedule/schedule.hpp): how many can compute at once.
  if (model.backend == Backend::kCpu && meta.cpu_cores_per_node > 0 && meta.num_nodes <= 1) {
    threads_per_rank = static_cast<int>(std::max<int64_t>(1, meta.ops_compute_threads));
    model.rank_slots = std::max(1.0, std::floor(static_cast<double>(meta.cpu_cores_per_node) / threads_per_rank));
    model.node_ranks = static_cast<double>(meta.world_size);
  }
  // Without /comm (a machine of one GPU has no communicator to measure) the comm model is empty: a
  // configuration that communicates is then unpredicted, with the reason, and one that does not is
  // predicted as usual.
  // Its tables are placed on the calibration's nodes (/meta comm_node_of_rank; absent: one node).
  if (store.exists(store::kCommTable)) model.comm = CommModel(store::read_comm_records(store), meta.comm_node_of_rank);
  const store::OpsRecords ops = store::read_ops_records(store);
  add_operator_profiles(model, ops, options);
  add_roofline(model, ops, threads_per_rank);
  const std::vector<store::GroundTruthRecord> groundtruth = store::read_groundtruth_records(store);
  if (!groundtruth.empty()) {
    StageResolver resolver(model, StagePolicy::kTracedThenBuilt);
    model.calibration = fit_calibration(resolver, groundtruth, /*blind=*/false, {}).calibration;
    model.calibration_blind = fit_calibration(resolver, groundtruth, /*blind=*/true, {}).calibration;
  }
  return model;
}

FittedModel load_or_fit(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw UserError(path + ": no such file; pass a calibration .h5 or a model from `itertime fit`");
  if (H5Fis_hdf5(path.c_str()) > 0) return fit_model(path);
  return load_model(path);
}

}  // namespace itertime::predict
