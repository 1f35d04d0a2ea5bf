// validation_store.hpp: /validation in the calibration file: one row per scored configuration and one
// per MAPE group. Rewritten as a whole by every `itertime validate` (the tables are replaced, in one commit), so its
// row types may grow without a schema version.
#pragma once

#include <cstdint>

#include "common/h5store.hpp"
#include "validate/validation.hpp"

namespace itertime::validate {

struct ValidationStoreRow {
  char key[96];
  int64_t dp, tp, pp;
  char precision[12];
  char status[12];  // ok | unpredicted
  double measured_us, predicted_us, raw_predicted_us, calibration_factor;
  int64_t factor_fitted;
  double ape_pct, blind_predicted_us, blind_ape_pct, extrapolated_fraction;
  int64_t built_ok;  // 1 when the builder-only prediction exists (validation.hpp)
  double built_predicted_us, built_ape_pct;
  double blind_raw_predicted_us, blind_raw_ape_pct;  // the blind baseline with no term fitted on ground truth
  double round_spread_pct;                           // the ground truth's round spread, %; NaN below 2 rounds (validation.hpp)
  char disturbance[96];                              // why its ground truth stayed disturbed; "" when steady
};

struct MapeStoreRow {
  char kind[16];  // tuple | precision | tuple_precision | recipe | overall
  char group[40];
  int64_t count;
  double mape_pct, blind_mape_pct;
  int64_t built_count;  // rows of the group with a builder-only prediction
  double built_mape_pct;
  double blind_raw_mape_pct;
  double floor_pct;         // measurement floor: mean round spread of the group's rows, %; NaN when none has one
  int64_t disturbed_count;  // rows of the group whose ground truth stayed disturbed
};

void write_validation(h5::Store& store, const ValidationReport& report);

// The rows' HDF5 types (h5store.hpp: found by argument-dependent lookup).
h5::RowType row_type_of(h5::RowTag<ValidationStoreRow>);
h5::RowType row_type_of(h5::RowTag<MapeStoreRow>);

}  // namespace itertime::validate
