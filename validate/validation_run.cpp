// validation_run.cpp: see the header.
#include "validate/validation_run.hpp"

#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/errors.hpp"
#include "common/calibration_records.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "predict/fitted_model.hpp"
#include "validate/validation_report.hpp"
#include "validate/validation_store.hpp"

namespace itertime::validate {

std::string default_report_dir(const std::string& calibration_file) {
  const std::filesystem::path path(calibration_file);
  return (path.parent_path() / (path.stem().string() + "-validation")).string();
}

namespace {

// The model config /meta groundtruth_model names, when that file is readable here.
std::optional<LlamaSpec> recorded_model(const h5::Store& store) {
  const auto meta = store.meta();
  const auto found = meta.find("groundtruth_model");
  if (found == meta.end() || found->second.empty() || !std::filesystem::is_regular_file(found->second)) return std::nullopt;
  return load_llama_config(found->second);
}

}  // namespace

ValidationReport run_validation(const ValidationRunOptions& given) {
  ValidationRunOptions options = given;
  const std::string& file = options.calibration_file;
  const predict::FittedModel model = predict::fit_model(file);
  std::vector<store::GroundTruthRecord> rows;
  {
    h5::Store store = h5::Store::open(file, false);
    if (!store.exists(store::kGroundTruthTable)) {
      throw UserError(file + ": no /groundtruth table; run `itertime calibrate groundtruth --job JOB` first");
    }
    if (!options.model) options.model = recorded_model(store);
    rows = store::read_groundtruth_records(store);
    if (options.compute_report || options.memory_report) {
      const auto ranks = store.table<store::GroundTruthRankRow>(store::kGroundTruthRanks).read_all();
      if (options.compute_report) print_compute_report(compute_report(model, rows, ranks));
      if (options.memory_report && options.model) {
        print_memory_report(memory_report(*options.model, parse_attention(model.attention), rows, ranks));
      }
    }
  }
  const ValidationReport report = validate(model, rows, options.model ? &*options.model : nullptr);
  const std::filesystem::path dir(options.report_dir.empty() ? default_report_dir(file) : options.report_dir);
  std::filesystem::create_directories(dir);
  write_csv(report, (dir / "validation.csv").string());
  write_json(report, (dir / "validation.json").string());
  write_svg(report, (dir / "validation.svg").string());
  if (options.store_in_calibration) {
    h5::Store store = h5::Store::open(file, true);
    write_validation(store, report);
  }
  if (options.save_fitted_model) predict::save_model(model, (dir / "model.itertime").string(), /*force=*/true);
  std::printf("\n");
  print_report(report);
  std::printf("# reports in %s (validation.csv, validation.json, validation.svg%s)%s\n", dir.string().c_str(),
              options.save_fitted_model ? ", model.itertime" : "",
              options.store_in_calibration ? "; /validation in the calibration file" : "");
  return report;
}

}  // namespace itertime::validate
