// comm_store.cpp: the /comm table: row type, keys, append and resume (comm_store.hpp).
#include "common/comm_store.hpp"

#include "common/h5_parent_rows.hpp"

namespace itertime::store {

h5::RowType row_type_of(h5::RowTag<CommRow>) {
  return ITERTIME_H5_ROW_TYPE(store::CommRow, collective, dtype, group_size, layout, span, mode, backend, bytes, count,
                              warmup_iters, iters, time_us_min, time_us_median, time_us_mean, time_us_p90, time_us_max, time_cv,
                              algbw_GBps, busbw_GBps, check_errors, samples_offset, samples_count, measured_utc);
}

std::string comm_row_key(const CommRow& row) {
  return h5::get_string(row.collective) + "/" + h5::get_string(row.dtype) + "/g" + std::to_string(row.group_size) + "/" +
         h5::get_string(row.layout) + "/" + h5::get_string(row.mode) + "/" + std::to_string(row.bytes);
}

namespace {
constexpr h5::ChildTable<CommRow> kSamplesSpan{kCommSamples, &CommRow::samples_offset, &CommRow::samples_count};
}  // namespace

void append_comm_point(h5::Store& store, CommRow row, const std::vector<double>& samples_us) {
  h5::append_with_children(store, kCommTable, row, h5::child_rows(kSamplesSpan, samples_us));
}

std::set<std::string> existing_comm_keys(h5::Store& store) {
  return h5::complete_parent_keys<CommRow>(store, kCommTable, comm_row_key, kSamplesSpan);
}

}  // namespace itertime::store
