// cmd_validate.cpp: `itertime validate`: the options, the query's route (query/validate_query.hpp), then
// validate/validation_run or the imported ground truth's report. No MPI, no LibTorch.
// Invariant: CAL is only read unless --store asks for /validation in it (`itertime run` stores its own).
// Imported ground truth (`itertime import`) is scored apart (validate/validation_imported.hpp): by the source
// --framework / --hardware name, else by CAL's own calibration when it has /ops; a CAL without imports
// is validated exactly as before.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "launcher/commands.hpp"
#include "query/validate_query.hpp"
#include "validate/validation_imported.hpp"
#include "validate/validation_run.hpp"

namespace itertime::launcher {

void register_validate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* validate_cmd = app.add_subcommand(
      "validate", "Predict every ground-truth configuration and report MAPE (leave-one-tuple-out or -precision-out)");
  auto cal = std::make_shared<std::string>();
  auto out_dir = std::make_shared<std::string>();
  auto store = std::make_shared<bool>(false);
  auto no_store = std::make_shared<bool>(false);
  auto compute = std::make_shared<bool>(false);
  auto memory_model_file = std::make_shared<std::string>();
  auto model_file = std::make_shared<std::string>();
  auto holdout = std::make_shared<std::string>("tuple");
  auto hardware = std::make_shared<std::string>();
  auto framework = std::make_shared<std::string>("itertime");
  validate_cmd->add_option("CAL", *cal, "Calibration HDF5 file with /comm, /ops and /groundtruth")->required();
  validate_cmd->add_option("--out-dir", *out_dir,
                           "Folder for validation.csv, .json and .svg (default: CAL's folder/<stem>-validation)");
  validate_cmd->add_flag("--store", *store,
                         "Also write the leave-one-tuple-out report as /validation into CAL (default: CAL is only read)");
  validate_cmd->add_flag("--no-store", *no_store, "Do not write /validation into CAL (the default; kept for old scripts)");
  validate_cmd->add_flag("--compute-report", *compute,
                         "Also compare each stage's summed profiled operator times with its measured compute time");
  validate_cmd->add_option(
      "--memory-report", *memory_model_file,
      "Also compare the memory model with the measured peak tensor bytes, for the model in this LLaMA config.json");
  validate_cmd->add_option("--model", *model_file,
                           "LLaMA config.json of the ground truth, for the builder-only predictions "
                           "(default: the --memory-report file, else the path /meta groundtruth_model names, when readable)");
  validate_cmd
      ->add_option("--holdout", *holdout,
                   "What each configuration's fitted terms leave out: tuple (leave-one-tuple-out), precision "
                   "(leave-one-precision-out: the unseen-precision setting) or both")
      ->capture_default_str();
  validate_cmd->add_option("--hardware", *hardware,
                           "Score CAL's imported ground truth (`itertime import`) by this described device (data/hardware)");
  validate_cmd
      ->add_option("--framework", *framework,
                   "With --hardware: score the imported ground truth by this framework's model (megatron-te), or by itertime's "
                   "operator model (itertime)")
      ->capture_default_str();
  auto json = std::make_shared<bool>(false);
  validate_cmd->add_flag("--json", *json,
                         "With --hardware: print the imported ground truth's scoring as JSON instead of a table");
  actions.emplace_back(validate_cmd, [cal, out_dir, store, no_store, compute, memory_model_file, model_file, holdout, hardware,
                                      framework, json](Context&) {
    query::ValidateRequest request;
    request.calibration = *cal;
    request.out_dir = *out_dir;
    request.store = *store;
    request.no_store = *no_store;
    request.compute_report = *compute;
    request.memory_report_model = *memory_model_file;
    request.model_file = *model_file;
    request.holdout = *holdout;
    request.hardware = *hardware;
    request.framework = *framework;
    const query::ValidationRoute route = query::route_validation(request);
    if (*json && !route.named_source)
      throw UserError("--json: with --hardware NAME only (CAL's own validation writes validation.json)");
    if (route.named_source) {
      const validate::ImportedValidation report = query::score_imports(request, route);
      if (*json) {
        std::printf("%s\n", query::imported_json(report).dump(2).c_str());
      } else {
        validate::print_imported_report(report);
      }
      return 0;
    }
    if (route.own) validate::run_validation(route.run_options);
    if (route.imports) {
      std::printf("\n");
      validate::print_imported_report(query::score_imports(request, route));
    }
    return 0;
  });
}

}  // namespace itertime::launcher
