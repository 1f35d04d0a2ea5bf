// comm_store.cpp: the /comm table: row type, keys, append and resume (comm_store.hpp).
#include "common/comm_store.hpp"

#include "common/h5_parent_rows.hpp"

namespace itertime::h5 {

RowType RowTraits<store::CommRow>::row_type() {
  using store::CommRow;
  RowType type(sizeof(CommRow));
  ITERTIME_H5_FIELD(type, CommRow, collective);
  ITERTIME_H5_FIELD(type, CommRow, dtype);
  ITERTIME_H5_FIELD(type, CommRow, group_size);
  ITERTIME_H5_FIELD(type, CommRow, layout);
  ITERTIME_H5_FIELD(type, CommRow, span);
  ITERTIME_H5_FIELD(type, CommRow, mode);
  ITERTIME_H5_FIELD(type, CommRow, backend);
  ITERTIME_H5_FIELD(type, CommRow, bytes);
  ITERTIME_H5_FIELD(type, CommRow, count);
  ITERTIME_H5_FIELD(type, CommRow, warmup_iters);
  ITERTIME_H5_FIELD(type, CommRow, iters);
  ITERTIME_H5_FIELD(type, CommRow, time_us_min);
  ITERTIME_H5_FIELD(type, CommRow, time_us_median);
  ITERTIME_H5_FIELD(type, CommRow, time_us_mean);
  ITERTIME_H5_FIELD(type, CommRow, time_us_p90);
  ITERTIME_H5_FIELD(type, CommRow, time_us_max);
  ITERTIME_H5_FIELD(type, CommRow, time_cv);
  ITERTIME_H5_FIELD(type, CommRow, algbw_GBps);
  ITERTIME_H5_FIELD(type, CommRow, busbw_GBps);
  ITERTIME_H5_FIELD(type, CommRow, check_errors);
  ITERTIME_H5_FIELD(type, CommRow, samples_offset);
  ITERTIME_H5_FIELD(type, CommRow, samples_count);
  ITERTIME_H5_FIELD(type, CommRow, measured_utc);
  return type;
}

}  // namespace itertime::h5

namespace itertime::store {

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
