// calibration_records.cpp: the one place where /comm, /ops and /groundtruth rows are parsed into typed
// records (calibration_records.hpp).
#include "common/calibration_records.hpp"

#include <map>
#include <utility>

#include "common/enum_names.hpp"
#include "common/errors.hpp"
#include "common/reference_store.hpp"
#include "common/store_meta.hpp"

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

namespace {
// to_record of each row, in order: the one loop of every to_records.
template <typename Row>
auto records_of(const std::vector<Row>& rows) {
  std::vector<decltype(to_record(std::declval<const Row&>()))> records;
  records.reserve(rows.size());
  for (const Row& row : rows) records.push_back(to_record(row));
  return records;
}
}  // namespace

std::vector<CommRecord> to_records(const std::vector<CommRow>& rows) { return records_of(rows); }

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
    records.push_back(OpTimingRecord{row.signature_id, row.active_ranks, row.time_us_median, row.ok != 0, 0});
  }
  if (!store.exists(kOpRetimings)) return records;
  for (const OpRetimingRow& row : store.table<OpRetimingRow>(kOpRetimings).read_all()) {
    records.push_back(
        OpTimingRecord{row.signature_id, row.active_ranks, row.time_us_median, row.ok != 0, static_cast<int>(row.pass)});
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
  records.reference = read_reference_samples(store);
  return records;
}

constexpr EnumName<RunStatus> kRunStatusNames[] = {
    {RunStatus::kOk, "ok"}, {RunStatus::kSkipped, "skipped"}, {RunStatus::kFailed, "failed"}, {RunStatus::kOutOfMemory, "oom"}};
static_assert(enum_names_one_to_one(kRunStatusNames));

std::string to_string(RunStatus status) { return name_of(kRunStatusNames, status, "run status"); }

RunStatus parse_run_status(std::string_view text) { return parse_named(kRunStatusNames, text, "ground-truth status"); }

GroundTruthRecord to_record(const GroundTruthRow& row) {
  GroundTruthRecord record;
  record.key = h5::get_string(row.key);
  record.model = h5::get_string(row.model);
  record.config =
      ParallelConfig{static_cast<int>(row.dp),          static_cast<int>(row.tp),           static_cast<int>(row.pp),
                     static_cast<int>(row.micro_batch), static_cast<int>(row.global_batch), static_cast<int>(row.seq_len)};
  record.config.cp = static_cast<int>(row.cp);  // 1 in files before schema 6 (read_groundtruth_rows)
  record.config.vp = static_cast<int>(row.vp);
  // Imported rows (backend "log") may hold a precision only a framework runs (fp8).
  const bool imported = h5::get_string(row.backend) == kImportedBackend;
  record.precision = imported ? parse_precision(h5::get_string(row.precision)).name
                              : parse_trainable_precision(h5::get_string(row.precision)).name;
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

std::vector<GroundTruthRecord> to_records(const std::vector<GroundTruthRow>& rows) { return records_of(rows); }

namespace {
// The records of `store`, split by whether an imports row names their key.
std::vector<GroundTruthRecord> groundtruth_records(h5::Store& store, bool imported) {
  std::vector<GroundTruthRecord> records = to_records(read_groundtruth_rows(store));
  const int64_t ranks_per_node = job_ranks_per_node(read_store_meta(store));
  for (GroundTruthRecord& record : records) record.ranks_per_node = ranks_per_node;
  if (!store.exists(kGroundTruthImports)) return imported ? std::vector<GroundTruthRecord>{} : records;
  std::map<std::string, std::string> log_of;
  for (const GroundTruthImportRow& row : read_groundtruth_imports(store))
    log_of[h5::get_string(row.key)] = h5::get_string(row.log_name);
  std::vector<GroundTruthRecord> kept;
  for (GroundTruthRecord& record : records) {
    const auto found = log_of.find(record.key);
    if ((found != log_of.end()) != imported) continue;
    if (imported) record.imported_from = found->second.empty() ? "(unnamed log)" : found->second;
    if (imported) record.ranks_per_node = 0;  // the log's own run: its nodes are not known here
    kept.push_back(std::move(record));
  }
  return kept;
}
}  // namespace

std::vector<GroundTruthRecord> read_groundtruth_records(h5::Store& store) { return groundtruth_records(store, false); }

std::vector<GroundTruthRecord> read_imported_groundtruth_records(h5::Store& store) { return groundtruth_records(store, true); }

ImportRecord to_record(const GroundTruthImportRow& row) {
  ImportRecord r;
  r.key = h5::get_string(row.key);
  r.log_name = h5::get_string(row.log_name);
  r.log_sha256 = h5::get_string(row.log_sha256);
  r.format = h5::get_string(row.format);
  r.framework = h5::get_string(row.framework);
  r.model.hidden_size = row.hidden_size;
  r.model.intermediate_size = row.intermediate_size;
  r.model.num_layers = row.num_layers;
  r.model.num_heads = row.num_heads;
  r.model.num_kv_heads = row.num_kv_heads;
  r.model.head_dim = row.head_dim;
  r.model.vocab_size = row.vocab_size;
  r.model.tie_word_embeddings = row.tie_word_embeddings != 0;
  r.fp8_recipe = h5::get_string(row.fp8_recipe);
  r.tp_comm_overlap = row.tp_comm_overlap != 0;
  r.fp8_param_gather = row.fp8_param_gather != 0;
  r.intervals_total = row.intervals_total;
  r.intervals_warmup = row.intervals_warmup;
  r.first_steady_line = row.first_steady_line;
  r.last_line = row.last_line;
  return r;
}

std::vector<ImportRecord> read_import_records(h5::Store& store) {
  std::vector<ImportRecord> out;
  for (const GroundTruthImportRow& row : read_groundtruth_imports(store)) out.push_back(to_record(row));
  return out;
}

}  // namespace itertime::store
