// calibration_records.cpp: the one place where /comm, /ops and /groundtruth rows are parsed into typed
// records (calibration_records.hpp).
#include "common/calibration_records.hpp"

#include "common/errors.hpp"

namespace itertime::store {

CommRecord to_record(const CommRow& row) {
  CommRecord record;
  record.collective = parse_collective(h5::get_string(row.collective));
  record.dtype = parse_dtype(h5::get_string(row.dtype));
  record.group_size = row.group_size;
  record.layout = parse_group_layout(h5::get_string(row.layout));
  record.mode = parse_timing_mode(h5::get_string(row.mode));
  record.bytes = row.bytes;
  record.time_us_median = row.time_us_median;
  record.check_errors = row.check_errors;
  return record;
}

std::vector<CommRecord> to_records(const std::vector<CommRow>& rows) {
  std::vector<CommRecord> records;
  records.reserve(rows.size());
  for (const CommRow& row : rows) records.push_back(to_record(row));
  return records;
}

std::vector<CommRecord> read_comm_records(h5::Store& store) {
  if (!store.exists(kCommTable)) return {};
  return to_records(store.table<CommRow>(kCommTable).read_all());
}

namespace {

std::vector<OpSignatureRecord> read_signatures(h5::Store& store) {
  std::vector<OpSignatureRecord> records;
  if (!store.exists(kOpSignatures)) return records;
  for (const OpSignatureRow& row : store.table<OpSignatureRow>(kOpSignatures).read_all()) {
    records.push_back(OpSignatureRecord{row.id, h5::get_string(row.name), h5::get_string(row.signature),
                                        h5::get_string(row.input_dtypes), h5::get_string(row.output_dtype), row.flops,
                                        row.bytes});
  }
  return records;
}

std::vector<OpTimingRecord> read_timings(h5::Store& store) {
  std::vector<OpTimingRecord> records;
  if (!store.exists(kOpTimings)) return records;
  for (const OpTimingRow& row : store.table<OpTimingRow>(kOpTimings).read_all()) {
    records.push_back(OpTimingRecord{row.signature_id, row.active_ranks, row.time_us_median, row.ok != 0});
  }
  return records;
}

std::vector<OpStageRecord> read_stages(h5::Store& store) {
  std::vector<OpStageRecord> records;
  if (!store.exists(kOpStages)) return records;
  const auto sequences = store.table<OpSequenceRow>(kOpSequences).read_all();
  const auto comms = store.table<OpCommRow>(kOpComms).read_all();
  for (const OpStageRow& stage : store.table<OpStageRow>(kOpStages).read_all()) {
    OpStageRecord record;
    record.stage_key = h5::get_string(stage.stage_key);
    record.local_params = stage.local_params;
    h5::check_span(store.path(), kOpSequences, stage.sequence_offset, stage.sequence_count, sequences.size());
    h5::check_span(store.path(), kOpComms, stage.comm_offset, stage.comm_count, comms.size());
    for (int64_t i = stage.sequence_offset; i < stage.sequence_offset + stage.sequence_count; ++i) {
      const OpSequenceRow& row = sequences.at(static_cast<std::size_t>(i));
      record.sequence.push_back(StageSequenceRecord{parse_phase(h5::get_string(row.phase)), row.signature_id, row.count});
    }
    for (int64_t i = stage.comm_offset; i < stage.comm_offset + stage.comm_count; ++i) {
      const OpCommRow& row = comms.at(static_cast<std::size_t>(i));
      record.comms.push_back(StageCommRecord{parse_phase(h5::get_string(row.phase)), parse_comm_kind(h5::get_string(row.kind)),
                                             parse_dtype(h5::get_string(row.dtype)), row.bytes, row.count});
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace

OpsRecords read_ops_records(h5::Store& store) {
  OpsRecords records;
  records.signatures = read_signatures(store);
  records.timings = read_timings(store);
  records.stages = read_stages(store);
  return records;
}

std::string to_string(RunStatus status) {
  switch (status) {
    case RunStatus::kOk: return "ok";
    case RunStatus::kSkipped: return "skipped";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kOutOfMemory: return "oom";
  }
  throw InternalError("unknown run status", __FILE__, __LINE__);
}

RunStatus parse_run_status(std::string_view text) {
  if (text == "ok") return RunStatus::kOk;
  if (text == "skipped") return RunStatus::kSkipped;
  if (text == "failed") return RunStatus::kFailed;
  if (text == "oom") return RunStatus::kOutOfMemory;
  throw UserError("unknown ground-truth status '" + std::string(text) + "': use ok, skipped, failed or oom");
}

GroundTruthRecord to_record(const GroundTruthRow& row) {
  GroundTruthRecord record;
  record.key = h5::get_string(row.key);
  record.model = h5::get_string(row.model);
  record.config =
      ParallelConfig{static_cast<int>(row.dp),          static_cast<int>(row.tp),           static_cast<int>(row.pp),
                     static_cast<int>(row.micro_batch), static_cast<int>(row.global_batch), static_cast<int>(row.seq_len)};
  record.config.cp = static_cast<int>(row.cp);  // 1 in files before schema 6 (read_groundtruth_rows)
  record.config.vp = static_cast<int>(row.vp);
  record.precision = parse_trainable_precision(h5::get_string(row.precision)).name;
  record.techniques = parse_recipe_text(h5::get_string(row.recipe));
  record.status = parse_run_status(h5::get_string(row.status));
  record.reason = h5::get_string(row.reason);
  record.num_micro_batches = row.num_micro_batches;
  record.time_us_median = row.time_us_median;
  record.round_spread_pct = row.round_spread_pct;
  record.rounds_counted = row.rounds_counted;
  record.disturbance = h5::get_string(row.disturbance);
  record.ranks_offset = row.ranks_offset;
  record.ranks_count = row.ranks_count;
  return record;
}

std::vector<GroundTruthRecord> to_records(const std::vector<GroundTruthRow>& rows) {
  std::vector<GroundTruthRecord> records;
  records.reserve(rows.size());
  for (const GroundTruthRow& row : rows) records.push_back(to_record(row));
  return records;
}

std::vector<GroundTruthRecord> read_groundtruth_records(h5::Store& store) { return to_records(read_groundtruth_rows(store)); }

}  // namespace itertime::store
