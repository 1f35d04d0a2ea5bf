// comm_store.hpp: the /comm table of the HDF5 store (schema in docs/schema.md).
// Invariants: one CommRow per measured point, appended and flushed as soon as it is measured; its raw
// samples (microseconds, one per timed iteration, each the max over all ranks) go first to
// /comm/samples_us, and the row records where (samples_offset, samples_count), so a row never points
// past the samples array. Strings are fixed-length, NUL-padded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/h5store.hpp"

namespace itertime::store {

struct CommRow {
  char collective[16];
  char dtype[8];
  int64_t group_size;
  char layout[16];  // consecutive | strided
  char span[16];    // intra-node | inter-node | mixed: where this layout's groups really sit
  char mode[12];    // latency (barrier-separated per call) | pipelined (back-to-back calls)
  char backend[8];  // mpi | nccl
  int64_t bytes;    // nccl-tests size
  int64_t count;    // elements per call
  int64_t warmup_iters;
  int64_t iters;
  double time_us_min;
  double time_us_median;
  double time_us_mean;
  double time_us_p90;
  double time_us_max;
  double time_cv;
  double algbw_GBps;     // bytes / median time, 1e9 bytes per second
  double busbw_GBps;     // algbw * the collective's bus factor
  int64_t check_errors;  // elements that differed from the expected result, over all ranks
  int64_t samples_offset;
  int64_t samples_count;
  char measured_utc[24];
};

inline constexpr const char* kCommTable = "/comm/points";
inline constexpr const char* kCommSamples = "/comm/samples_us";

std::string comm_row_key(const CommRow& row);  // matches PointSpec::key()

// Appends a point: samples first, then the row (its offset/count filled in here).
void append_comm_point(h5::Store& store, CommRow row, const std::vector<double>& samples_us);
// Keys of the points already in the store; drops samples written after the last complete row (a job
// killed between the two writes) so that offsets stay consistent.
std::set<std::string> existing_comm_keys(h5::Store& store);

// The rows' HDF5 types (h5store.hpp: found by argument-dependent lookup).
h5::RowType row_type_of(h5::RowTag<CommRow>);

}  // namespace itertime::store
