// validate_query.hpp: `itertime validate` as a typed request for both front ends: which validation a
// calibration file gets (its own ground truth left out per holdout, its imported ground truth scored by
// its own calibration, a described device or a framework model), decided once, and the answers as
// validation.json's objects.
// Invariants:
//  - route_validation checks every option and opens CAL read-only to see what it holds; a refused
//    combination is a UserError before any work or any file is written.
//  - The in-memory validation (validation_json) writes nothing but a private temporary file, removed; the
//    command's own reports and /validation are validate/validation_run's (run_validation).
//  - holdout "both" is tuple then precision, in that order, in both front ends.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/validation_imported.hpp"
#include "validate/validation_run.hpp"

namespace itertime::query {

struct ValidateRequest {
  std::string calibration;  // CAL
  std::string out_dir;      // --out-dir
  bool store = false, no_store = false, compute_report = false;
  std::string memory_report_model;  // --memory-report FILE
  std::string model_file;           // --model
  std::string holdout = "tuple";    // tuple | precision | both
  std::string hardware;             // --hardware: score imported ground truth by this description
  std::string framework = "itertime";
  std::set<std::string> given;  // the options the user gave, by their command-line names (for the fronts)
};

struct ValidationRoute {
  // Imported ground truth scored by the source named (--hardware / --framework): nothing else is done.
  std::optional<validate::ImportedSource> named_source;
  bool own = false;      // CAL's own ground truth validated (run_options)
  bool imports = false;  // CAL's imported ground truth scored by CAL's own calibration afterwards
  validate::ValidationRunOptions run_options;
};

ValidationRoute route_validation(const ValidateRequest& request);

// The imported ground truth scored by the route's source (named, or CAL's own calibration).
validate::ImportedValidation score_imports(const ValidateRequest& request, const ValidationRoute& route);

// validation.json's object of each holdout of the route, computed in memory (no report written).
std::vector<nlohmann::json> validation_json(const ValidationRoute& route);

// The imported ground truth's scoring as JSON: calibration_file, source, configurations (each with its
// log), mape_per_tuple, mape_per_precision, mape_overall.
nlohmann::json imported_json(const validate::ImportedValidation& report);

}  // namespace itertime::query
