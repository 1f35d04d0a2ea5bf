// calibration_view.cpp: see the header.
#include "python/calibration_view.hpp"

#include <cmath>
#include <filesystem>
#include <optional>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/h5store.hpp"
#include "common/parallel_config_json.hpp"
#include "common/store_meta.hpp"

namespace itertime::store {

// An operator signature as the module shows it: its members by their names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OpSignatureRecord, id, name, signature, input_dtypes, output_dtype, flops, bytes)

}  // namespace itertime::store

namespace itertime::python {
namespace {

nlohmann::json number_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }

h5::Store open_existing(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) throw UserError(path + ": no such calibration file");
  return h5::Store::open(path, false);
}

}  // namespace

nlohmann::json read_calibration(const std::string& path) {
  h5::Store store = open_existing(path);
  nlohmann::json out;
  out["file"] = path;
  out["meta"] = store.meta();
  nlohmann::json comm = nlohmann::json::array();
  for (const store::CommRecord& r : store::read_comm_records(store)) {
    comm.push_back({{"collective", to_string(r.collective)},
                    {"dtype", to_string(r.dtype)},
                    {"group_size", r.group_size},
                    {"layout", to_string(r.layout)},
                    {"mode", to_string(r.mode)},
                    {"bytes", r.bytes},
                    {"time_us_median", r.time_us_median},
                    {"check_errors", r.check_errors}});
  }
  out["comm"] = comm;
  const store::OpsRecords ops = store::read_ops_records(store);
  const nlohmann::json signatures = ops.signatures;
  nlohmann::json timings = nlohmann::json::array(), stages = nlohmann::json::array();
  for (const store::OpTimingRecord& r : ops.timings) {
    timings.push_back(
        {{"signature_id", r.signature_id}, {"active_ranks", r.active_ranks}, {"time_us_median", r.time_us_median}, {"ok", r.ok}});
  }
  for (const store::OpStageRecord& r : ops.stages) {
    nlohmann::json sequence = nlohmann::json::array(), comms = nlohmann::json::array();
    for (const store::StageSequenceRecord& s : r.sequence) {
      sequence.push_back({{"phase", to_string(s.phase)}, {"signature_id", s.signature_id}, {"count", s.count}});
    }
    for (const store::StageCommRecord& c : r.comms) {
      comms.push_back({{"phase", to_string(c.phase)},
                       {"kind", to_string(c.kind)},
                       {"dtype", to_string(c.dtype)},
                       {"bytes", c.bytes},
                       {"count", c.count}});
    }
    stages.push_back({{"stage_key", r.stage_key}, {"local_params", r.local_params}, {"sequence", sequence}, {"comms", comms}});
  }
  out["operators"] = {{"signatures", signatures}, {"timings", timings}, {"stages", stages}};
  nlohmann::json groundtruth = nlohmann::json::array();
  for (const store::GroundTruthRecord& r : store::read_groundtruth_records(store)) {
    nlohmann::json row = parallel_config_json(r.config);
    row.update({{"key", r.key},
                {"model", r.model},
                {"precision", to_string(r.precision)},
                {"recipe", recipe_label(r.techniques)},
                {"status", store::to_string(r.status)},
                {"reason", r.reason},
                {"num_micro_batches", r.num_micro_batches},
                {"time_us_median", r.time_us_median},
                {"round_spread_pct", number_or_null(r.round_spread_pct)},
                {"rounds_counted", r.rounds_counted},
                {"disturbance", r.disturbance}});
    groundtruth.push_back(row);
  }
  out["groundtruth"] = groundtruth;
  return out;
}

}  // namespace itertime::python
