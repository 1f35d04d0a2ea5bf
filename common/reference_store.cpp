// reference_store.cpp: the /reference/probes table: row type, append, read (reference_store.hpp).
#include "common/reference_store.hpp"

namespace itertime::store {

h5::RowType row_type_of(h5::RowTag<ReferenceProbeRow>) {
  return ITERTIME_H5_ROW_TYPE(store::ReferenceProbeRow, stage, pass, occupancy, unix_time_s, matmul_us, elementwise_us,
                              allreduce_us);
}

void append_reference_sample(h5::Store& store, const ReferenceSample& sample) {
  ReferenceProbeRow row{};
  h5::set_string(row.stage, to_string(sample.stage));
  row.pass = sample.pass;
  row.occupancy = sample.occupancy;
  row.unix_time_s = sample.unix_time_s;
  row.matmul_us = sample.matmul_us;
  row.elementwise_us = sample.elementwise_us;
  row.allreduce_us = sample.allreduce_us;
  store.table<ReferenceProbeRow>(kReferenceProbes).append(row);
}

std::vector<ReferenceSample> read_reference_samples(h5::Store& store) {
  std::vector<ReferenceSample> samples;
  if (!store.exists(kReferenceProbes)) return samples;
  for (const ReferenceProbeRow& row : store.table<ReferenceProbeRow>(kReferenceProbes).read_all()) {
    const std::string stage = h5::get_string(row.stage);
    if (stage != "comm" && stage != "ops" && stage != "groundtruth") {
      throw h5::damaged_file(store.path(), std::string(kReferenceProbes) + " holds a row of stage '" + stage + "'");
    }
    samples.push_back(ReferenceSample{parse_reference_stage(stage), static_cast<int>(row.pass), static_cast<int>(row.occupancy),
                                      row.unix_time_s, row.matmul_us, row.elementwise_us, row.allreduce_us});
  }
  return samples;
}

}  // namespace itertime::store
