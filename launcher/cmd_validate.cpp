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
#include "launcher/option_table.hpp"
#include "query/validate_query.hpp"
#include "validate/validation_imported.hpp"
#include "validate/validation_run.hpp"

namespace itertime::launcher {

namespace {

using ValidateCommand = QueryCommand<query::ValidateRequest>;
using Field = OptionField;

// validate's options, in --help's order (a table, one row per option).
std::vector<OptionRow<ValidateCommand>> validate_options() {
  using C = ValidateCommand;
  return {
      {"CAL", "Calibration HDF5 file with /comm, /ops and /groundtruth", [](C& c) -> Field { return &c.request.calibration; }},
      {"--out-dir", "Folder for validation.csv, .json and .svg (default: CAL's folder/<stem>-validation)",
       [](C& c) -> Field { return &c.request.out_dir; }},
      {"--store", "Also write the leave-one-tuple-out report as /validation into CAL (default: CAL is only read)",
       [](C& c) -> Field { return &c.request.store; }},
      {"--no-store", "Do not write /validation into CAL (the default; kept for old scripts)",
       [](C& c) -> Field { return &c.request.no_store; }},
      {"--compute-report", "Also compare each stage's summed profiled operator times with its measured compute time",
       [](C& c) -> Field { return &c.request.compute_report; }},
      {"--memory-report",
       "Also compare the memory model with the measured peak tensor bytes, for the model in this LLaMA config.json",
       [](C& c) -> Field { return &c.request.memory_report_model; }},
      {"--model",
       "LLaMA config.json of the ground truth, for the builder-only predictions (default: the --memory-report file, else "
       "the path /meta groundtruth_model names, when readable)",
       [](C& c) -> Field { return &c.request.model_file; }},
      {"--holdout",
       "What each configuration's fitted terms leave out: tuple (leave-one-tuple-out), precision (leave-one-precision-out: "
       "the unseen-precision setting) or both",
       [](C& c) -> Field { return &c.request.holdout; }, true},
      {"--hardware", "Score CAL's imported ground truth (`itertime import`) by this described device (data/hardware)",
       [](C& c) -> Field { return &c.request.hardware; }},
      {"--framework",
       "With --hardware: score the imported ground truth by this framework's model (megatron-te), or by itertime's operator "
       "model (itertime)",
       [](C& c) -> Field { return &c.request.framework; }, true},
      json_row<C>("With --hardware: print the imported ground truth's scoring as JSON instead of a table"),
  };
}

}  // namespace

void register_validate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* validate_cmd = app.add_subcommand(
      "validate", "Predict every ground-truth configuration and report MAPE (leave-one-tuple-out or -precision-out)");
  auto command = std::make_shared<ValidateCommand>();
  add_options(*validate_cmd, *command, validate_options());
  validate_cmd->get_option("CAL")->required();
  actions.emplace_back(validate_cmd, [command](Context&) {
    const query::ValidateRequest& request = command->request;
    const bool json = command->json;
    const query::ValidationRoute route = query::route_validation(request);
    if (json && !route.named_source)
      throw UserError("--json: with --hardware NAME only (CAL's own validation writes validation.json)");
    if (route.named_source) {
      const validate::ImportedValidation report = query::score_imports(request, route);
      if (json) {
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
