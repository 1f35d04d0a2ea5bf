// validate_query.cpp: see the header.
#include "query/validate_query.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/model_spec.hpp"
#include "common/reference_store.hpp"
#include "common/store_meta.hpp"
#include "predict/fit_model.hpp"
#include "predict/framework/framework_types.hpp"
#include "validate/validation.hpp"
#include "validate/validation_drift.hpp"
#include "validate/validation_report.hpp"

namespace itertime::query {
namespace {

nlohmann::json number_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }

// --hardware / --framework: the imported ground truth scored by the source named, and nothing else.
std::optional<validate::ImportedSource> named_source(const ValidateRequest& r) {
  const predict::framework::Framework chosen = predict::framework::parse_framework(r.framework);
  if (r.hardware.empty() && chosen == predict::framework::Framework::kItertime) return std::nullopt;
  if (r.hardware.empty())
    throw UserError("--framework " + r.framework + " needs --hardware NAME (the device the run trained on)");
  if (r.store || !r.out_dir.empty() || r.compute_report || !r.memory_report_model.empty() || !r.model_file.empty() ||
      r.holdout != "tuple") {
    throw UserError(
        "--store, --out-dir, --compute-report, --memory-report, --model and --holdout are CAL's own validation's: give none "
        "with --hardware (the imported ground truth's scoring prints its table only)");
  }
  validate::ImportedSource source;
  source.kind = chosen == predict::framework::Framework::kMegatronTe ? validate::ImportedSource::Kind::kFramework
                                                                     : validate::ImportedSource::Kind::kDescribed;
  source.hardware = r.hardware;
  return source;
}

nlohmann::json mape_json(const validate::MapeEntry& e) {
  return {{"group", e.group}, {"mape_pct", e.mape_pct}, {"count", e.count}, {"floor_pct", number_or_null(e.floor_pct)}};
}

}  // namespace

ValidationRoute route_validation(const ValidateRequest& r) {
  ValidationRoute route;
  route.named_source = named_source(r);
  if (route.named_source) return route;
  std::error_code error;
  if (!std::filesystem::is_regular_file(r.calibration, error)) throw UserError(r.calibration + ": no such calibration file");
  bool ops = false;
  route.own = true;
  {
    h5::Store file = h5::Store::open(r.calibration, false);
    route.imports = file.exists(store::kGroundTruthImports);
    if (route.imports) {
      route.own = !store::read_groundtruth_records(file).empty();
      ops = file.exists("/ops");
    }
  }
  if (route.imports && !ops) {
    throw UserError(r.calibration +
                    ": holds imported ground truth and no calibration of its own (/ops): score it with --hardware NAME "
                    "(described) or --framework megatron-te --hardware NAME");
  }
  validate::ValidationRunOptions& options = route.run_options;
  options.calibration_file = r.calibration;
  options.report_dir = r.out_dir;
  if (r.store && r.no_store) throw UserError("--store and --no-store: give one (without either, CAL is only read)");
  options.store_in_calibration = r.store;
  options.compute_report = r.compute_report;
  if (r.holdout != "tuple" && r.holdout != "precision" && r.holdout != "both") {
    throw UserError("--holdout " + r.holdout + ": use tuple, precision or both");
  }
  options.holdouts = r.holdout == "both"
                         ? std::vector<validate::Holdout>{validate::Holdout::kTuple, validate::Holdout::kPrecision}
                         : std::vector<validate::Holdout>{validate::parse_holdout(r.holdout)};
  // The model configs first: a wrong path is refused before any work.
  if (!r.memory_report_model.empty()) {
    options.model = load_llama_config(r.memory_report_model);
    options.memory_report = true;
  }
  if (!r.model_file.empty()) options.model = load_llama_config(r.model_file);
  return route;
}

validate::ImportedValidation score_imports(const ValidateRequest& request, const ValidationRoute& route) {
  if (route.named_source) return validate::validate_imported(request.calibration, *route.named_source);
  validate::ImportedSource own;
  own.calibration_file = request.calibration;
  return validate::validate_imported(request.calibration, own);
}

std::vector<nlohmann::json> validation_json(const ValidationRoute& route) {
  const std::string& path = route.run_options.calibration_file;
  std::optional<LlamaSpec> model_spec = route.run_options.model;
  std::vector<store::GroundTruthRecord> rows;
  validate::DriftSummary drift;
  {
    h5::Store store = h5::Store::open(path, false);
    if (!store.exists(store::kGroundTruthTable)) {
      throw UserError(path + ": no /groundtruth table; run `itertime calibrate groundtruth --job JOB` first");
    }
    if (!model_spec) {  // the model /meta names, when readable here (as `itertime validate`)
      const std::string recorded = store::read_store_meta(store).groundtruth_model;
      std::error_code error;
      if (!recorded.empty() && std::filesystem::is_regular_file(recorded, error)) model_spec = load_llama_config(recorded);
    }
    rows = store::read_groundtruth_records(store);
    drift = validate::summarize_drift(store::read_reference_samples(store));
  }
  const predict::FittedModel model = predict::fit_model(path);
  const std::optional<predict::FittedModel> first_profiles = validate::fit_first_profiles(path, drift);
  std::vector<nlohmann::json> out;
  for (const validate::Holdout holdout : route.run_options.holdouts) {
    validate::ValidationReport report = validate::validate(model, rows, model_spec ? &*model_spec : nullptr, holdout);
    // The machine's drift beside the floor, and the first profiles' MAPE where a re-measured pass was used
    // (as `itertime validate`, validate/validation_run.cpp).
    validate::attach_drift(report, drift, first_profiles ? &*first_profiles : nullptr, rows);
    // validation.json's object, from its one writer (a private temporary file, removed).
    // mkstemp: a name no other call (another thread, the GIL released) or process holds.
    std::string name = (std::filesystem::temp_directory_path() / "itertime-validation-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw UserError(name + ": cannot create a temporary file for the validation's JSON");
    ::close(fd);
    const std::filesystem::path temporary(name);
    validate::write_json(report, temporary.string());
    std::ostringstream text;
    text << std::ifstream(temporary).rdbuf();
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    out.push_back(nlohmann::json::parse(text.str()));
  }
  return out;
}

nlohmann::json imported_json(const validate::ImportedValidation& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const validate::ValidationRow& row = report.rows[i];
    nlohmann::json r = {{"key", row.key},
                        {"log", i < report.logs.size() ? report.logs[i] : ""},
                        {"tuple", row.tuple},
                        {"precision", row.precision},
                        {"recipe", row.recipe},
                        {"status", row.status},
                        {"measured_us", row.measured_us},
                        {"round_spread_pct", number_or_null(row.round_spread_pct)}};
    if (row.status == "ok") {
      r["predicted_us"] = row.predicted_us;
      r["ape_pct"] = row.ape_pct;
    } else {
      r["reason"] = row.reason;
    }
    rows.push_back(r);
  }
  nlohmann::json per_tuple = nlohmann::json::array(), per_precision = nlohmann::json::array();
  for (const validate::MapeEntry& e : report.per_tuple) per_tuple.push_back(mape_json(e));
  for (const validate::MapeEntry& e : report.per_precision) per_precision.push_back(mape_json(e));
  return {{"calibration_file", report.calibration_file},
          {"source", report.source},
          {"configurations", rows},
          {"mape_per_tuple", per_tuple},
          {"mape_per_precision", per_precision},
          {"mape_overall", mape_json(report.overall)}};
}

}  // namespace itertime::query
