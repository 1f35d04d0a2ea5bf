// validation_report.hpp: the reporters of validation.hpp's records: the console table, validation.csv,
// validation.json and validation.svg, and the compute and memory comparison tables. They present; they
// compute nothing (the HDF5 reporter is validation_store.hpp).
#pragma once

#include <string>
#include <vector>

#include "validate/validation.hpp"

namespace itertime::validate {

void print_report(const ValidationReport& report);
void write_csv(const ValidationReport& report, const std::string& path);
void write_json(const ValidationReport& report, const std::string& path);
void write_svg(const ValidationReport& report, const std::string& path);
void print_compute_report(const std::vector<ComputeRow>& rows);
void print_memory_report(const std::vector<MemoryRow>& rows);

}  // namespace itertime::validate
