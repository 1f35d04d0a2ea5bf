// ops_store.cpp: the /ops tables: row types, stage keys, append and resume (ops_store.hpp).
#include "common/ops_store.hpp"

#include "common/errors.hpp"
#include "common/h5_parent_rows.hpp"

namespace itertime::store {

h5::RowType row_type_of(h5::RowTag<OpSignatureRow>) {
  return ITERTIME_H5_ROW_TYPE(store::OpSignatureRow, id, name, signature, input_dtypes, output_dtype, flops, bytes);
}

h5::RowType row_type_of(h5::RowTag<OpTimingRow>) {
  return ITERTIME_H5_ROW_TYPE(store::OpTimingRow, signature_id, active_ranks, backend, time_us_median, time_us_min,
                              time_us_max_rank, time_cv, repeats, ok);
}

h5::RowType row_type_of(h5::RowTag<OpRetimingRow>) {
  return ITERTIME_H5_ROW_TYPE(store::OpRetimingRow, pass, signature_id, active_ranks, backend, time_us_median, time_us_min,
                              time_us_max_rank, time_cv, repeats, ok);
}

h5::RowType row_type_of(h5::RowTag<OpSequenceRow>) {
  return ITERTIME_H5_ROW_TYPE(store::OpSequenceRow, stage_key, phase, signature_id, count);
}

h5::RowType row_type_of(h5::RowTag<OpCommRow>) {
  return ITERTIME_H5_ROW_TYPE(store::OpCommRow, stage_key, phase, kind, dtype, bytes, count);
}

h5::RowType row_type_of(h5::RowTag<OpStageRow>) {
  return ITERTIME_H5_ROW_TYPE(store::OpStageRow, stage_key, model, tp, pp, stage, micro_batch, seq_len, precision, variant,
                              local_params, num_layers, sequence_offset, sequence_count, comm_offset, comm_count);
}

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
