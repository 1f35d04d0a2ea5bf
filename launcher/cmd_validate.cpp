// cmd_validate.cpp: `itertime validate`: options, then validate/validation_run. No MPI, no LibTorch.
// Invariant: CAL is only read unless --store asks for /validation in it (`itertime run` stores its own).
// Imported ground truth (`itertime import`) is scored apart (validate/validation_imported.hpp): by the source
// --framework / --hardware name, else by CAL's own calibration when it has /ops; a CAL without imports
// is validated exactly as before.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/model_spec.hpp"
#include "predict/framework/framework_types.hpp"
#include "launcher/commands.hpp"
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
  actions.emplace_back(validate_cmd, [cal, out_dir, store, no_store, compute, memory_model_file, model_file, holdout, hardware,
                                      framework](Context&) {
    // Imported ground truth: by the source named, or by CAL's own calibration.
    const predict::framework::Framework chosen = predict::framework::parse_framework(*framework);
    if (!hardware->empty() || chosen != predict::framework::Framework::kItertime) {
      if (hardware->empty())
        throw UserError("--framework " + *framework + " needs --hardware NAME (the device the run trained on)");
      if (*store || !out_dir->empty() || *compute || !memory_model_file->empty() || !model_file->empty() || *holdout != "tuple") {
        throw UserError(
            "--store, --out-dir, --compute-report, --memory-report, --model and --holdout are CAL's own validation's: give none "
            "with --hardware (the imported ground truth's scoring prints its table only)");
      }
      validate::ImportedSource source;
      source.kind = chosen == predict::framework::Framework::kMegatronTe ? validate::ImportedSource::Kind::kFramework
                                                                         : validate::ImportedSource::Kind::kDescribed;
      source.hardware = *hardware;
      validate::print_imported_report(validate::validate_imported(*cal, source));
      return 0;
    }
    bool imports = false, own = true, ops = false;
    {
      h5::Store file = h5::Store::open(*cal, false);
      imports = file.exists(store::kGroundTruthImports);
      if (imports) {
        own = !store::read_groundtruth_records(file).empty();
        ops = file.exists("/ops");
      }
    }
    if (imports && !ops) {
      throw UserError(*cal +
                      ": holds imported ground truth and no calibration of its own (/ops): score it with --hardware NAME "
                      "(described) or --framework megatron-te --hardware NAME");
    }
    validate::ValidationRunOptions options;
    options.calibration_file = *cal;
    options.report_dir = *out_dir;
    if (*store && *no_store) throw UserError("--store and --no-store: give one (without either, CAL is only read)");
    options.store_in_calibration = *store;
    options.compute_report = *compute;
    if (*holdout != "tuple" && *holdout != "precision" && *holdout != "both") {
      throw UserError("--holdout " + *holdout + ": use tuple, precision or both");
    }
    options.holdouts = *holdout == "both"
                           ? std::vector<validate::Holdout>{validate::Holdout::kTuple, validate::Holdout::kPrecision}
                           : std::vector<validate::Holdout>{validate::parse_holdout(*holdout)};
    // Read the model configs first: a wrong path is refused before any work.
    if (!memory_model_file->empty()) {
      options.model = load_llama_config(*memory_model_file);
      options.memory_report = true;
    }
    if (!model_file->empty()) options.model = load_llama_config(*model_file);
    if (own) validate::run_validation(options);
    if (imports) {
      validate::ImportedSource source;
      source.calibration_file = *cal;
      std::printf("\n");
      validate::print_imported_report(validate::validate_imported(*cal, source));
    }
    return 0;
  });
}

}  // namespace itertime::launcher
