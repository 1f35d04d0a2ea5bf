#include "common/comm_store.hpp"

#include <algorithm>

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
  return h5::get_string(row.collective) + "/" + h5::get_string(row.dtype) + "/g" + std::to_string(row.group_size) +
         "/" + h5::get_string(row.layout) + "/" + h5::get_string(row.mode) + "/" + std::to_string(row.bytes);
}

void append_comm_point(h5::Store& store, CommRow row, const std::vector<double>& samples_us) {
  auto samples = store.samples(kCommSamples);
  row.samples_offset = static_cast<int64_t>(samples.size());
  row.samples_count = static_cast<int64_t>(samples_us.size());
  samples.append(samples_us);
  store.table<CommRow>(kCommTable).append(row);
}

std::set<std::string> existing_comm_keys(h5::Store& store) {
  std::set<std::string> keys;
  if (!store.exists(kCommTable)) return keys;
  const auto rows = store.table<CommRow>(kCommTable).read_all();
  int64_t end = 0;
  for (const auto& row : rows) {
    keys.insert(comm_row_key(row));
    end = std::max(end, row.samples_offset + row.samples_count);
  }
  if (store.writable()) store.trim(kCommSamples, end);
  return keys;
}

}  // namespace itertime::store
