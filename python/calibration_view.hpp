// calibration_view.hpp: the Python module's reading of a calibration file: its contents as JSON values
// (read_calibration) and the validation of its ground truth (validate).
// Invariants:
//  - Both only read the calibration file: it is opened read-only, and nothing is written into it.
//  - read_calibration gives the typed records of common/calibration_records.hpp (names as their text:
//    "all_reduce", "bf16", "forward") and /meta as its rendered attributes; an absent table is an empty list.
//  - validate gives validation.json's object (validate/validation_report.hpp's write_json, the same keys
//    as `itertime validate` writes), for one holdout, with the builder-only predictions when /meta names
//    a readable model config (as `itertime validate` without --model).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace itertime::python {

nlohmann::json read_calibration(const std::string& path);

// holdout: "tuple" (leave-one-tuple-out) or "precision" (leave-one-precision-out).
// model_file: the LLaMA config of the ground truth ("": the one /meta groundtruth_model names, when readable).
nlohmann::json validate_calibration(const std::string& path, const std::string& holdout, const std::string& model_file);

}  // namespace itertime::python
