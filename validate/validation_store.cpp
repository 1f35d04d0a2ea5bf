// validation_store.cpp: the /validation tables (validation_store.hpp).
#include "validate/validation_store.hpp"

namespace itertime::validate {

h5::RowType row_type_of(h5::RowTag<ValidationStoreRow>) {
  return ITERTIME_H5_ROW_TYPE(validate::ValidationStoreRow, key, dp, tp, pp, precision, status, measured_us, predicted_us,
                              raw_predicted_us, calibration_factor, factor_fitted, ape_pct, blind_predicted_us, blind_ape_pct,
                              extrapolated_fraction, built_ok, built_predicted_us, built_ape_pct, blind_raw_predicted_us,
                              blind_raw_ape_pct, round_spread_pct, disturbance);
}

h5::RowType row_type_of(h5::RowTag<MapeStoreRow>) {
  return ITERTIME_H5_ROW_TYPE(validate::MapeStoreRow, kind, group, count, mape_pct, blind_mape_pct, built_count, built_mape_pct,
                              blind_raw_mape_pct, floor_pct, disturbed_count);
}

void write_validation(h5::Store& store, const ValidationReport& report) {
  const h5::Store::Transaction whole(store);  // the old /validation is replaced in one commit
  store.remove("/validation");
  std::vector<ValidationStoreRow> rows;
  for (const ValidationRow& r : report.rows) {
    ValidationStoreRow row{};
    h5::set_string(row.key, r.key);
    row.dp = r.dp;
    row.tp = r.tp;
    row.pp = r.pp;
    h5::set_string(row.precision, r.precision);
    h5::set_string(row.status, r.status);
    row.measured_us = r.measured_us;
    row.predicted_us = r.predicted_us;
    row.raw_predicted_us = r.raw_predicted_us;
    row.calibration_factor = r.factor;
    row.factor_fitted = r.factor_fitted ? 1 : 0;
    row.ape_pct = r.ape_pct;
    row.blind_predicted_us = r.blind_predicted_us;
    row.blind_ape_pct = r.blind_ape_pct;
    row.extrapolated_fraction = r.extrapolated_fraction;
    row.built_ok = r.built_ok() ? 1 : 0;
    row.built_predicted_us = r.built_predicted_us;
    row.built_ape_pct = r.built_ape_pct;
    row.blind_raw_predicted_us = r.blind_raw_predicted_us;
    row.blind_raw_ape_pct = r.blind_raw_ape_pct;
    row.round_spread_pct = r.round_spread_pct;
    h5::set_string(row.disturbance, r.disturbance);
    rows.push_back(row);
  }
  store.table<ValidationStoreRow>("/validation/rows").append(rows);
  std::vector<MapeStoreRow> mape;
  auto add = [&](const char* kind, const MapeEntry& e) {
    MapeStoreRow row{};
    h5::set_string(row.kind, kind);
    h5::set_string(row.group, e.group);
    row.count = e.count;
    row.mape_pct = e.mape_pct;
    row.blind_mape_pct = e.blind_mape_pct;
    row.built_count = e.built_count;
    row.built_mape_pct = e.built_mape_pct;
    row.blind_raw_mape_pct = e.blind_raw_mape_pct;
    row.floor_pct = e.floor_pct;
    row.disturbed_count = e.disturbed_count;
    mape.push_back(row);
  };
  for (const auto& e : report.per_tuple) add("tuple", e);
  for (const auto& e : report.per_precision) add("precision", e);
  for (const auto& e : report.per_tuple_precision) add("tuple_precision", e);
  for (const auto& e : report.per_recipe) add("recipe", e);
  add("overall", report.overall);
  store.table<MapeStoreRow>("/validation/mape").append(mape);
}

}  // namespace itertime::validate
