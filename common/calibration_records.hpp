// calibration_records.hpp: the rows of a calibration file (/comm, /ops, /groundtruth) read once, at the
// store boundary, into typed records: names become enums (Collective, GroupLayout, TimingMode, DType,
// PrecisionName, Phase, CommKind, RunStatus), a ground-truth layout a ParallelConfig, its recipe
// TrainingTechniques (parse_recipe_text). Everything past this file works on records and never goes
// back to the rows' text fields.
// Invariants:
//  - Reading never writes; an absent table reads as no records.
//  - Ground truth of a schema-4 file (no recipe column) reads as plain techniques.
//  - Imported ground truth (a user's training log, `itertime import`) is read apart: read_groundtruth_records
//    returns itertime's own measurements only (what fit, validate's calibrated scoring and inspect read, so
//    an import never changes them), read_imported_groundtruth_records the imported ones, marked with
//    imported_from (the log); their precision may be one no itertime trainer runs (fp8), and the log's
//    model and framework switches are in their ImportRecord.
//  - Any name a field does not admit is a UserError naming the text (the parse functions of
//    common/dtype, precision, collective and phase), so a damaged file fails where it is read.
//  - A stage record carries its own sequence and comm rows (the stage row's offsets resolved here).
//  - OpSignatureRecord::input_dtypes stays the stored text: the field holds at most 63 characters and
//    long lists are cut mid-name, so it is an opaque grouping key (the regression's), not a dtype list.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "common/collective.hpp"
#include "common/comm_store.hpp"
#include "common/dtype.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/speed_drift.hpp"
#include "common/model_spec.hpp"
#include "common/ops_store.hpp"
#include "common/parallel_config.hpp"
#include "common/phase.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"

namespace itertime::store {

// ---- /comm ----
struct CommRecord {
  Collective collective = Collective::kAllReduce;
  DType dtype = DType::kFloat32;
  int64_t group_size = 0;
  GroupLayout layout = GroupLayout::kConsecutive;
  TimingMode mode = TimingMode::kLatency;
  int64_t bytes = 0;  // nccl-tests size
  double time_us_median = 0;
  int64_t check_errors = 0;
};
CommRecord to_record(const CommRow& row);
std::vector<CommRecord> to_records(const std::vector<CommRow>& rows);
std::vector<CommRecord> read_comm_records(h5::Store& store);

// ---- /ops ----
struct OpSignatureRecord {
  int64_t id = 0;
  std::string name;          // aten::mm
  std::string signature;     // the tracer's canonical text, as stored
  std::string input_dtypes;  // as stored: comma-joined, cut at 63 characters (see above)
  std::string output_dtype;  // "" when the operator returns no tensor
  double flops = 0, bytes = 0;
};

struct OpTimingRecord {
  int64_t signature_id = 0;
  int64_t active_ranks = 0;  // occupancy
  double time_us_median = 0;
  bool ok = false;  // false: could not be replayed in isolation (no time)
  int pass = 0;     // 0: /ops/timings (calibrate ops); 1..: /ops/retimings (calibrate drift)
};

struct StageSequenceRecord {
  Phase phase = Phase::kForward;
  int64_t signature_id = 0;
  int64_t count = 0;  // calls per micro-batch (forward/backward) or per iteration (others)
};

struct StageCommRecord {
  Phase phase = Phase::kForward;
  CommKind kind = CommKind::kTpAllReduce;
  DType dtype = DType::kFloat32;
  int64_t bytes = 0;
  int64_t count = 0;  // calls per micro-batch (or per iteration for dp_all_reduce)
};

struct OpStageRecord {
  std::string stage_key;  // common/ops_store.hpp stage_key()
  int64_t local_params = 0;
  std::vector<StageSequenceRecord> sequence;
  std::vector<StageCommRecord> comms;
};

struct OpsRecords {
  std::vector<OpSignatureRecord> signatures;
  std::vector<OpTimingRecord> timings;  // /ops/timings (pass 0), then /ops/retimings; empty when absent
  std::vector<OpStageRecord> stages;
  std::vector<ReferenceSample> reference;  // /reference/probes (every stage's); empty when absent
};
OpsRecords read_ops_records(h5::Store& store);

// ---- /groundtruth ----
// oom: the configuration's one rank ran out of memory (calibrate/groundtruth.hpp); the job went on.
enum class RunStatus { kOk, kSkipped, kFailed, kOutOfMemory };
std::string to_string(RunStatus status);  // "ok" | "skipped" | "failed" | "oom"
RunStatus parse_run_status(std::string_view text);

struct GroundTruthRecord {
  std::string key;
  std::string model;      // model name
  ParallelConfig config;  // cp and vp from the row: 1 in files before schema 6
  PrecisionName precision = PrecisionName::kFp32;
  TrainingTechniques techniques;  // the row's recipe; all off (plain) for "" and in schema-4 files
  RunStatus status = RunStatus::kOk;
  std::string reason;  // why skipped or failed
  int64_t num_micro_batches = 0;
  double time_us_median = 0;  // measured iteration time
  // How well the measurement agrees with itself: the counted rounds' spread (NaN below 2 rounds), and
  // why the configuration stayed disturbed ("" when steady). groundtruth_store.hpp.
  double round_spread_pct = std::numeric_limits<double>::quiet_NaN();
  int64_t rounds_counted = 0;
  std::string disturbance;
  int64_t ranks_offset = 0, ranks_count = 0;  // its /groundtruth/ranks rows
  std::string imported_from;                  // the training log it was imported from; "" for itertime's own measurement
  // Ranks per node of the job that measured it (store_meta.hpp job_ranks_per_node); 0: one
  // node, or not recorded (imported rows). The predictor places its groups on nodes with it.
  int64_t ranks_per_node = 0;
  bool imported() const { return !imported_from.empty(); }

  std::string tuple() const { return config.tuple_string(); }  // "(2,1,2)"
  int64_t occupancy() const { return config.world_size(); }    // ranks busy at once
};
GroundTruthRecord to_record(const GroundTruthRow& row);
std::vector<GroundTruthRecord> to_records(const std::vector<GroundTruthRow>& rows);
// itertime's own configurations (none imported).
std::vector<GroundTruthRecord> read_groundtruth_records(h5::Store& store);
// The imported configurations, imported_from set (none when /groundtruth/imports is absent).
std::vector<GroundTruthRecord> read_imported_groundtruth_records(h5::Store& store);

// What a log said of an imported configuration (/groundtruth/imports).
struct ImportRecord {
  std::string key, log_name, log_sha256, format, framework;  // framework: predict/framework's text ("megatron-te")
  LlamaSpec model;                                           // its sizes; name = the configs row's model
  std::string fp8_recipe;                                    // "delayed" | "current"
  bool tp_comm_overlap = false, fp8_param_gather = false;
  int64_t intervals_total = 0, intervals_warmup = 0, first_steady_line = 0, last_line = 0;
};
ImportRecord to_record(const GroundTruthImportRow& row);
std::vector<ImportRecord> read_import_records(h5::Store& store);

}  // namespace itertime::store
