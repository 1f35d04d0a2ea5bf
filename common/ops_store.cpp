#include "common/ops_store.hpp"

#include <algorithm>

namespace itertime::h5 {

RowType RowTraits<store::OpSignatureRow>::row_type() {
  using R = store::OpSignatureRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, id);
  ITERTIME_H5_FIELD(t, R, name);
  ITERTIME_H5_FIELD(t, R, signature);
  ITERTIME_H5_FIELD(t, R, input_dtypes);
  ITERTIME_H5_FIELD(t, R, output_dtype);
  ITERTIME_H5_FIELD(t, R, flops);
  ITERTIME_H5_FIELD(t, R, bytes);
  return t;
}

RowType RowTraits<store::OpTimingRow>::row_type() {
  using R = store::OpTimingRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, signature_id);
  ITERTIME_H5_FIELD(t, R, active_ranks);
  ITERTIME_H5_FIELD(t, R, backend);
  ITERTIME_H5_FIELD(t, R, time_us_median);
  ITERTIME_H5_FIELD(t, R, time_us_min);
  ITERTIME_H5_FIELD(t, R, time_us_max_rank);
  ITERTIME_H5_FIELD(t, R, time_cv);
  ITERTIME_H5_FIELD(t, R, repeats);
  ITERTIME_H5_FIELD(t, R, ok);
  return t;
}

RowType RowTraits<store::OpSequenceRow>::row_type() {
  using R = store::OpSequenceRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, stage_key);
  ITERTIME_H5_FIELD(t, R, phase);
  ITERTIME_H5_FIELD(t, R, signature_id);
  ITERTIME_H5_FIELD(t, R, count);
  return t;
}

RowType RowTraits<store::OpCommRow>::row_type() {
  using R = store::OpCommRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, stage_key);
  ITERTIME_H5_FIELD(t, R, phase);
  ITERTIME_H5_FIELD(t, R, kind);
  ITERTIME_H5_FIELD(t, R, dtype);
  ITERTIME_H5_FIELD(t, R, bytes);
  ITERTIME_H5_FIELD(t, R, count);
  return t;
}

RowType RowTraits<store::OpStageRow>::row_type() {
  using R = store::OpStageRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, stage_key);
  ITERTIME_H5_FIELD(t, R, model);
  ITERTIME_H5_FIELD(t, R, tp);
  ITERTIME_H5_FIELD(t, R, pp);
  ITERTIME_H5_FIELD(t, R, stage);
  ITERTIME_H5_FIELD(t, R, micro_batch);
  ITERTIME_H5_FIELD(t, R, seq_len);
  ITERTIME_H5_FIELD(t, R, precision);
  ITERTIME_H5_FIELD(t, R, variant);
  ITERTIME_H5_FIELD(t, R, local_params);
  ITERTIME_H5_FIELD(t, R, num_layers);
  ITERTIME_H5_FIELD(t, R, sequence_offset);
  ITERTIME_H5_FIELD(t, R, sequence_count);
  ITERTIME_H5_FIELD(t, R, comm_offset);
  ITERTIME_H5_FIELD(t, R, comm_count);
  return t;
}

}  // namespace itertime::h5

namespace itertime::store {

std::string stage_key(const std::string& model, int tp, int pp, int stage, int micro_batch, int seq_len,
                      const std::string& precision, const std::string& variant) {
  return model + "/tp" + std::to_string(tp) + "/pp" + std::to_string(pp) + "/s" + std::to_string(stage) + "/mbs" +
         std::to_string(micro_batch) + "/seq" + std::to_string(seq_len) + "/" + precision + "/" + variant;
}

void append_stage(h5::Store& store, OpStageRow stage, const std::vector<OpSequenceRow>& sequence,
                  const std::vector<OpCommRow>& comms) {
  auto sequences = store.table<OpSequenceRow>(kOpSequences);
  auto comm_table = store.table<OpCommRow>(kOpComms);
  stage.sequence_offset = static_cast<int64_t>(sequences.size());
  stage.sequence_count = static_cast<int64_t>(sequence.size());
  stage.comm_offset = static_cast<int64_t>(comm_table.size());
  stage.comm_count = static_cast<int64_t>(comms.size());
  sequences.append(sequence);
  comm_table.append(comms);
  store.table<OpStageRow>(kOpStages).append(stage);
}

std::set<std::string> existing_stage_keys(h5::Store& store) {
  std::set<std::string> keys;
  if (!store.exists(kOpStages)) return keys;
  int64_t sequence_end = 0;
  int64_t comm_end = 0;
  for (const auto& row : store.table<OpStageRow>(kOpStages).read_all()) {
    keys.insert(h5::get_string(row.stage_key));
    sequence_end = std::max(sequence_end, row.sequence_offset + row.sequence_count);
    comm_end = std::max(comm_end, row.comm_offset + row.comm_count);
  }
  if (store.writable()) {
    store.trim(kOpSequences, sequence_end);
    store.trim(kOpComms, comm_end);
  }
  return keys;
}

}  // namespace itertime::store
