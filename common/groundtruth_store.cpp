// groundtruth_store.cpp: the /groundtruth tables: row types, append and resume (groundtruth_store.hpp).
#include "common/groundtruth_store.hpp"

#include <map>

#include "common/errors.hpp"
#include "common/h5_parent_rows.hpp"

namespace itertime::h5 {

namespace {
// The configuration row's members in file order as schema `version` (4, 5 or 6) stored them: 5 added
// `recipe` after `precision`, 6 added `cp` and `vp` after `pp`; the other names and their order are the
// same in all three. An older type is laid over the current struct, so HDF5 leaves the members it lacks
// as it finds them (read_groundtruth_rows sets them).
RowType groundtruth_row_type(int64_t version) {
  using R = store::GroundTruthRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, key);
  ITERTIME_H5_FIELD(t, R, model);
  ITERTIME_H5_FIELD(t, R, dp);
  ITERTIME_H5_FIELD(t, R, tp);
  ITERTIME_H5_FIELD(t, R, pp);
  if (version >= 6) {
    ITERTIME_H5_FIELD(t, R, cp);
    ITERTIME_H5_FIELD(t, R, vp);
  }
  ITERTIME_H5_FIELD(t, R, micro_batch);
  ITERTIME_H5_FIELD(t, R, global_batch);
  ITERTIME_H5_FIELD(t, R, seq_len);
  ITERTIME_H5_FIELD(t, R, num_micro_batches);
  ITERTIME_H5_FIELD(t, R, precision);
  if (version >= 5) ITERTIME_H5_FIELD(t, R, recipe);
  ITERTIME_H5_FIELD(t, R, backend);
  ITERTIME_H5_FIELD(t, R, status);
  ITERTIME_H5_FIELD(t, R, reason);
  ITERTIME_H5_FIELD(t, R, warmup_iters);
  ITERTIME_H5_FIELD(t, R, timed_iters);
  ITERTIME_H5_FIELD(t, R, time_us_min);
  ITERTIME_H5_FIELD(t, R, time_us_median);
  ITERTIME_H5_FIELD(t, R, time_us_mean);
  ITERTIME_H5_FIELD(t, R, time_us_p90);
  ITERTIME_H5_FIELD(t, R, time_us_max);
  ITERTIME_H5_FIELD(t, R, time_cv);
  ITERTIME_H5_FIELD(t, R, tokens_per_s);
  ITERTIME_H5_FIELD(t, R, loss_first);
  ITERTIME_H5_FIELD(t, R, loss_last);
  ITERTIME_H5_FIELD(t, R, samples_offset);
  ITERTIME_H5_FIELD(t, R, samples_count);
  ITERTIME_H5_FIELD(t, R, ranks_offset);
  ITERTIME_H5_FIELD(t, R, ranks_count);
  ITERTIME_H5_FIELD(t, R, measured_utc);
  ITERTIME_H5_FIELD(t, R, rounds_run);
  ITERTIME_H5_FIELD(t, R, rounds_counted);
  ITERTIME_H5_FIELD(t, R, round_spread_pct);
  ITERTIME_H5_FIELD(t, R, disturbance);
  ITERTIME_H5_FIELD(t, R, rounds_offset);
  ITERTIME_H5_FIELD(t, R, rounds_count);
  return t;
}
}  // namespace

RowType RowTraits<store::GroundTruthRow>::row_type() { return groundtruth_row_type(kSchemaVersion); }

RowType RowTraits<store::GroundTruthRankRow>::row_type() {
  using R = store::GroundTruthRankRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, key);
  ITERTIME_H5_FIELD(t, R, rank);
  ITERTIME_H5_FIELD(t, R, dp_idx);
  ITERTIME_H5_FIELD(t, R, tp_idx);
  ITERTIME_H5_FIELD(t, R, pp_idx);
  ITERTIME_H5_FIELD(t, R, forward_us);
  ITERTIME_H5_FIELD(t, R, backward_us);
  ITERTIME_H5_FIELD(t, R, tp_comm_us);
  ITERTIME_H5_FIELD(t, R, pp_comm_us);
  ITERTIME_H5_FIELD(t, R, dp_comm_us);
  ITERTIME_H5_FIELD(t, R, optimizer_us);
  ITERTIME_H5_FIELD(t, R, total_us);
  ITERTIME_H5_FIELD(t, R, peak_rss_bytes);
  ITERTIME_H5_FIELD(t, R, peak_tensor_bytes);
  ITERTIME_H5_FIELD(t, R, peak_allocated_bytes);
  ITERTIME_H5_FIELD(t, R, peak_reserved_bytes);
  ITERTIME_H5_FIELD(t, R, local_params);
  return t;
}

RowType RowTraits<store::GroundTruthRoundRow>::row_type() {
  using R = store::GroundTruthRoundRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, key);
  ITERTIME_H5_FIELD(t, R, round);
  ITERTIME_H5_FIELD(t, R, position);
  ITERTIME_H5_FIELD(t, R, samples);
  ITERTIME_H5_FIELD(t, R, time_us_median);
  ITERTIME_H5_FIELD(t, R, outside_load_cores);
  ITERTIME_H5_FIELD(t, R, steal_cores);
  ITERTIME_H5_FIELD(t, R, verdict);
  return t;
}

}  // namespace itertime::h5

namespace itertime::store {

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
  std::vector<GroundTruthRow> rows = store.table<GroundTruthRow>(kGroundTruthTable, h5::groundtruth_row_type(version)).read_all();
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
