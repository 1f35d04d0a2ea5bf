// reference_store.hpp: the /reference/probes table of the HDF5 store (schema in docs/schema.md): every
// timing of the speed reference (runtime/speed_reference.hpp) the calibration stages took, with the
// stage, pass (or round) and occupancy it was taken at (common/speed_drift.hpp reads them).
// Invariants: one row per timing, appended (one commit) as soon as it is taken, by the stage's rank 0; rows
// are never rewritten, so a resumed stage adds to them. Reading a store without the table gives no rows.
#pragma once

#include <cstdint>
#include <vector>

#include "common/h5store.hpp"
#include "common/speed_drift.hpp"

namespace itertime::store {

struct ReferenceProbeRow {
  char stage[16];      // comm | ops | groundtruth
  int64_t pass;        // ops: profiling pass (0: calibrate ops; 1..: calibrate drift); groundtruth: round
  int64_t occupancy;   // ranks busy at once
  double unix_time_s;  // when it was taken
  double matmul_us;    // median over repeats, median over the ranks
  double elementwise_us;
  double allreduce_us;  // NaN at occupancy 1
};

inline constexpr const char* kReferenceProbes = "/reference/probes";

void append_reference_sample(h5::Store& store, const ReferenceSample& sample);
// Every row, in file order; none when the table does not exist.
std::vector<ReferenceSample> read_reference_samples(h5::Store& store);

// The rows' HDF5 types (h5store.hpp: found by argument-dependent lookup).
h5::RowType row_type_of(h5::RowTag<ReferenceProbeRow>);

}  // namespace itertime::store
