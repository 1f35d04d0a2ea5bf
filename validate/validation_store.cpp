// validation_store.cpp: the /validation tables (validation_store.hpp).
#include "validate/validation_store.hpp"

namespace itertime::h5 {

RowType RowTraits<validate::ValidationStoreRow>::row_type() {
  using R = validate::ValidationStoreRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, key);
  ITERTIME_H5_FIELD(t, R, dp);
  ITERTIME_H5_FIELD(t, R, tp);
  ITERTIME_H5_FIELD(t, R, pp);
  ITERTIME_H5_FIELD(t, R, precision);
  ITERTIME_H5_FIELD(t, R, status);
  ITERTIME_H5_FIELD(t, R, measured_us);
  ITERTIME_H5_FIELD(t, R, predicted_us);
  ITERTIME_H5_FIELD(t, R, raw_predicted_us);
  ITERTIME_H5_FIELD(t, R, calibration_factor);
  ITERTIME_H5_FIELD(t, R, factor_fitted);
  ITERTIME_H5_FIELD(t, R, ape_pct);
  ITERTIME_H5_FIELD(t, R, blind_predicted_us);
  ITERTIME_H5_FIELD(t, R, blind_ape_pct);
  ITERTIME_H5_FIELD(t, R, extrapolated_fraction);
  ITERTIME_H5_FIELD(t, R, built_ok);
  ITERTIME_H5_FIELD(t, R, built_predicted_us);
  ITERTIME_H5_FIELD(t, R, built_ape_pct);
  ITERTIME_H5_FIELD(t, R, blind_raw_predicted_us);
  ITERTIME_H5_FIELD(t, R, blind_raw_ape_pct);
  ITERTIME_H5_FIELD(t, R, round_spread_pct);
  ITERTIME_H5_FIELD(t, R, disturbance);
  return t;
}

RowType RowTraits<validate::MapeStoreRow>::row_type() {
  using R = validate::MapeStoreRow;
  RowType t(sizeof(R));
  ITERTIME_H5_FIELD(t, R, kind);
  ITERTIME_H5_FIELD(t, R, group);
  ITERTIME_H5_FIELD(t, R, count);
  ITERTIME_H5_FIELD(t, R, mape_pct);
  ITERTIME_H5_FIELD(t, R, blind_mape_pct);
  ITERTIME_H5_FIELD(t, R, built_count);
  ITERTIME_H5_FIELD(t, R, built_mape_pct);
  ITERTIME_H5_FIELD(t, R, blind_raw_mape_pct);
  ITERTIME_H5_FIELD(t, R, floor_pct);
  ITERTIME_H5_FIELD(t, R, disturbed_count);
  return t;
}

}  // namespace itertime::h5

namespace itertime::validate {

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
