// comm_rows.hpp: synthetic /comm rows for the predict tests.
// Invariants: rows carry only what the comm model reads (collective, dtype, group size, layout, mode,
// bytes, median time, check errors); synthetic_rows gives time = alpha_us + bytes * us_per_byte at every
// power of two from first_bytes to last_bytes, both included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/comm_store.hpp"
#include "common/h5store.hpp"

namespace itertime::predict::test_rows {

inline store::CommRow make_row(const std::string& collective, const std::string& dtype, int64_t group_size,
                               const std::string& layout, const std::string& mode, int64_t bytes, double time_us) {
  store::CommRow row{};
  h5::set_string(row.collective, collective);
  h5::set_string(row.dtype, dtype);
  row.group_size = group_size;
  h5::set_string(row.layout, layout);
  h5::set_string(row.span, "intra-node");
  h5::set_string(row.mode, mode);
  h5::set_string(row.backend, "mpi");
  row.bytes = bytes;
  row.iters = 10;
  row.time_us_min = row.time_us_median = row.time_us_mean = row.time_us_p90 = row.time_us_max = time_us;
  row.check_errors = 0;
  return row;
}

inline std::vector<store::CommRow> synthetic_rows(const std::string& collective, const std::string& dtype, int64_t group_size,
                                                  const std::string& layout, double alpha_us, double us_per_byte,
                                                  int64_t first_bytes, int64_t last_bytes) {
  std::vector<store::CommRow> rows;
  for (int64_t bytes = first_bytes; bytes <= last_bytes; bytes *= 2) {
    rows.push_back(
        make_row(collective, dtype, group_size, layout, "latency", bytes, alpha_us + static_cast<double>(bytes) * us_per_byte));
  }
  return rows;
}

}  // namespace itertime::predict::test_rows
