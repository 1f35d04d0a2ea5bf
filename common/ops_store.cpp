// ops_store.cpp: the /ops tables: row types, stage keys, append and resume (ops_store.hpp).
#include "common/ops_store.hpp"

#include "common/errors.hpp"
#include "common/h5_parent_rows.hpp"

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
                      const std::string& precision, const std::string& variant, const TrainingTechniques& techniques, int dp,
                      int cp) {
  const std::string recipe = recipe_text(techniques);
  std::string key = model + "/tp" + std::to_string(tp) + "/pp" + std::to_string(pp) + "/s" + std::to_string(stage) + "/mbs" +
                    std::to_string(micro_batch) + "/seq" + std::to_string(seq_len) + "/" + precision + "/" + variant +
                    (recipe.empty() ? "" : "/" + recipe);
  if (techniques.distributed_optimizer) {
    ITERTIME_CHECK(dp >= 1, "stage_key: a distributed-optimizer stage needs its dp degree");
    key += "/dp" + std::to_string(dp);
  }
  if (cp > 1) key += "/cp" + std::to_string(cp);
  return key;
}

namespace {
constexpr h5::ChildTable<OpStageRow> kSequenceSpan{kOpSequences, &OpStageRow::sequence_offset, &OpStageRow::sequence_count};
constexpr h5::ChildTable<OpStageRow> kCommSpan{kOpComms, &OpStageRow::comm_offset, &OpStageRow::comm_count};
}  // namespace

void append_stage(h5::Store& store, OpStageRow stage, const std::vector<OpSequenceRow>& sequence,
                  const std::vector<OpCommRow>& comms) {
  h5::append_with_children(store, kOpStages, stage, h5::child_rows(kSequenceSpan, sequence), h5::child_rows(kCommSpan, comms));
}

std::set<std::string> existing_stage_keys(h5::Store& store) {
  return h5::complete_parent_keys<OpStageRow>(
      store, kOpStages, [](const OpStageRow& row) { return h5::get_string(row.stage_key); }, kSequenceSpan, kCommSpan);
}

}  // namespace itertime::store
