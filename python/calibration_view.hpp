// calibration_view.hpp: the Python module's reading of a calibration file: its contents as JSON values
// (read_calibration; the module's validate is the query layer's, query/validate_query.hpp).
// Invariants:
//  - It only reads the calibration file: it is opened read-only, and nothing is written into it.
//  - read_calibration gives the typed records of common/calibration_records.hpp (names as their text:
//    "all_reduce", "bf16", "forward") and /meta as its rendered attributes; an absent table is an empty list.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace itertime::python {

nlohmann::json read_calibration(const std::string& path);

}  // namespace itertime::python
