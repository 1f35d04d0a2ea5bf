// groundtruth_store.cpp: the /groundtruth tables: row types, append and resume (groundtruth_store.hpp).
#include "common/groundtruth_store.hpp"

#include <map>

#include "common/errors.hpp"
#include "common/h5_parent_rows.hpp"

namespace itertime::store {

namespace {
// The configuration row's members in file order as schema `version` (4, 5 or 6) stored them: 5 added
// `recipe` after `precision`, 6 added `cp` and `vp` after `pp`; the other names and their order are the
// same in all three. An older type is laid over the current struct, so HDF5 leaves the members it lacks
// as it finds them (read_groundtruth_rows sets them).
h5::RowType groundtruth_row_type(int64_t version) {
  using R = store::GroundTruthRow;
  h5::RowType t(sizeof(R));
  ITERTIME_H5_FIELDS(t, R, key, model, dp, tp, pp);
  if (version >= 6) ITERTIME_H5_FIELDS(t, R, cp, vp);
  ITERTIME_H5_FIELDS(t, R, micro_batch, global_batch, seq_len, num_micro_batches, precision);
  if (version >= 5) ITERTIME_H5_FIELDS(t, R, recipe);
  ITERTIME_H5_FIELDS(t, R, backend, status, reason, warmup_iters, timed_iters, time_us_min, time_us_median, time_us_mean,
                     time_us_p90, time_us_max, time_cv, tokens_per_s, loss_first, loss_last, samples_offset, samples_count,
                     ranks_offset, ranks_count, measured_utc, rounds_run, rounds_counted, round_spread_pct, disturbance,
                     rounds_offset, rounds_count);
  return t;
}
}  // namespace

h5::RowType row_type_of(h5::RowTag<GroundTruthRow>) { return groundtruth_row_type(h5::kSchemaVersion); }

h5::RowType row_type_of(h5::RowTag<GroundTruthRankRow>) {
  return ITERTIME_H5_ROW_TYPE(store::GroundTruthRankRow, key, rank, dp_idx, tp_idx, pp_idx, forward_us, backward_us, tp_comm_us,
                              pp_comm_us, dp_comm_us, optimizer_us, total_us, peak_rss_bytes, peak_tensor_bytes,
                              peak_allocated_bytes, peak_reserved_bytes, local_params);
}

h5::RowType row_type_of(h5::RowTag<GroundTruthRoundRow>) {
  return ITERTIME_H5_ROW_TYPE(store::GroundTruthRoundRow, key, round, position, samples, time_us_median, outside_load_cores,
                              steal_cores, verdict);
}

h5::RowType row_type_of(h5::RowTag<GroundTruthImportRow>) {
  return ITERTIME_H5_ROW_TYPE(store::GroundTruthImportRow, key, log_name, log_sha256, format, framework, hidden_size,
                              intermediate_size, num_layers, num_heads, num_kv_heads, head_dim, vocab_size, tie_word_embeddings,
                              fp8_recipe, tp_comm_overlap, fp8_param_gather, intervals_total, intervals_warmup, first_steady_line,
                              last_line, imported_utc);
}

GroundTruthRow configuration_row(const std::string& key, const std::string& model, const ParallelConfig& p,
                                 PrecisionName precision, const TrainingTechniques& techniques) {
  GroundTruthRow row{};
  h5::set_string(row.key, key);
  h5::set_string(row.model, model);
  row.dp = p.dp;
  row.tp = p.tp;
  row.pp = p.pp;
  row.cp = p.cp;
  row.vp = p.vp;
  row.micro_batch = p.micro_batch;
  row.global_batch = p.global_batch;
  row.seq_len = p.seq_len;
  row.num_micro_batches = (p.dp * p.micro_batch) > 0 ? p.global_batch / (p.dp * p.micro_batch) : 0;
  h5::set_string(row.precision, to_string(precision));
  h5::set_string(row.recipe, recipe_text(techniques));
  return row;
}

namespace {
constexpr h5::ChildTable<GroundTruthRow> kSamplesSpan{kGroundTruthSamples, &GroundTruthRow::samples_offset,
                                                      &GroundTruthRow::samples_count};
constexpr h5::ChildTable<GroundTruthRow> kRanksSpan{kGroundTruthRanks, &GroundTruthRow::ranks_offset,
                                                    &GroundTruthRow::ranks_count};
constexpr h5::ChildTable<GroundTruthRow> kRoundsSpan{kGroundTruthRounds, &GroundTruthRow::rounds_offset,
                                                     &GroundTruthRow::rounds_count};

// Ground truth is added to files of this schema only: an older file's rows lack columns a new row has
// (schema 5: cp and vp; schema 4: those and recipe).
void refuse_older_schema(h5::Store& store) {
  const int64_t version = store.schema_version();
  if (version == h5::kSchemaVersion) return;
  const std::string lacks = version == 5 ? "no cp or vp columns" : "no cp, vp or recipe columns";
  throw UserError(store.path() + ": written with itertime schema version " + std::to_string(version) +
                  ", whose ground truth has " + lacks + "; this itertime (schema version " + std::to_string(h5::kSchemaVersion) +
                  ") reads it but does not add ground truth to it: "
                  "calibrate ground truth into a new file, or resume it with the itertime that wrote it");
}

}  // namespace

void append_groundtruth(h5::Store& store, GroundTruthRow row, const std::vector<double>& samples_us,
                        const std::vector<GroundTruthRankRow>& ranks, const std::vector<GroundTruthRoundRow>& rounds) {
  refuse_older_schema(store);
  h5::append_with_children(store, kGroundTruthTable, row, h5::child_rows(kSamplesSpan, samples_us),
                           h5::child_rows(kRanksSpan, ranks), h5::child_rows(kRoundsSpan, rounds));
}

void append_imported_groundtruth(h5::Store& store, const GroundTruthImportRow& imported, const GroundTruthRow& row,
                                 const std::vector<double>& samples_us) {
  const std::set<std::string> keys = existing_groundtruth_keys(store);  // refuses an older schema
  const std::string key = h5::get_string(row.key);
  ITERTIME_CHECK(key == h5::get_string(imported.key), "an imports row and its configs row have different keys");
  if (keys.count(key) != 0) {
    throw UserError(store.path() + ": already holds ground truth " + key + " (the same log imported before?); nothing written");
  }
  const h5::Store::Transaction together(store);
  store.table<GroundTruthImportRow>(kGroundTruthImports).append(imported);
  append_groundtruth(store, row, samples_us, {}, {});
}

std::vector<GroundTruthImportRow> read_groundtruth_imports(h5::Store& store) {
  if (!store.exists(kGroundTruthImports)) return {};
  return store.table<GroundTruthImportRow>(kGroundTruthImports).read_all();
}

std::vector<GroundTruthRow> newest_groundtruth_rows(const std::vector<GroundTruthRow>& rows) {
  std::map<std::string, std::size_t> newest;  // key -> index of its last row
  for (std::size_t i = 0; i < rows.size(); ++i) newest[h5::get_string(rows[i].key)] = i;
  if (newest.size() == rows.size()) return rows;
  std::vector<GroundTruthRow> kept;
  kept.reserve(newest.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (newest[h5::get_string(rows[i].key)] == i) kept.push_back(rows[i]);
  }
  return kept;
}

std::vector<GroundTruthRow> read_groundtruth_rows(h5::Store& store) {
  return newest_groundtruth_rows(read_every_groundtruth_row(store));
}

std::vector<GroundTruthRow> read_every_groundtruth_row(h5::Store& store) {
  if (!store.exists(kGroundTruthTable)) return {};
  const int64_t version = store.schema_version();
  if (version == h5::kSchemaVersion) return store.table<GroundTruthRow>(kGroundTruthTable).read_all();
  // Schemas 4 and 5 measured (DP,TP,PP) layouts only, and schema 4 plain training only. The members the
  // stored type lacks are set here, not left to what HDF5's conversion does with their bytes.
  std::vector<GroundTruthRow> rows = store.table<GroundTruthRow>(kGroundTruthTable, groundtruth_row_type(version)).read_all();
  for (GroundTruthRow& row : rows) {
    row.cp = 1;
    row.vp = 1;
    if (version < 5) h5::set_string(row.recipe, "");
  }
  return rows;
}

std::set<std::string> existing_groundtruth_keys(h5::Store& store) {
  refuse_older_schema(store);
  return h5::complete_parent_keys<GroundTruthRow>(
      store, kGroundTruthTable, [](const GroundTruthRow& row) { return h5::get_string(row.key); }, kSamplesSpan, kRanksSpan,
      kRoundsSpan);
}

}  // namespace itertime::store
