// cmd_predict.cpp: `itertime fit` and `predict`: the options, then the query (query/predict_query.hpp),
// then its answer printed (validate/prediction_report's table or JSON). No MPI, no LibTorch.
// Invariant: every rule of a prediction (defaults, --from, refusals, range, placement) is the query's; this
// file only binds the options and prints.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "launcher/commands.hpp"
#include "launcher/option_table.hpp"
#include "predict/fit_model.hpp"
#include "predict/framework/framework_types.hpp"
#include "predict/resolver/target_device.hpp"
#include "query/predict_query.hpp"
#include "query/query_options.hpp"
#include "validate/prediction_report.hpp"

namespace itertime::launcher {
namespace {

using query::PredictRequest;

using PredictCommand = QueryCommand<PredictRequest>;
using Field = OptionField;

// predict's options, in --help's order (a table, one row per option: its length is its rows').
std::vector<OptionRow<PredictCommand>> predict_options() {
  using C = PredictCommand;
  return {
      {"SOURCE", "A model from `itertime fit`, or a calibration .h5 (fitted on the fly); optional with --hardware",
       [](C& c) -> Field { return &c.request.source; }},
      model_row<C>(),
      {"--from",
       "Your own configuration: a Megatron-LM arguments file or launch line, a NeMo 2 / Megatron-Bridge YAML dump, or a "
       "torchtitan TOML (docs/formats.md); flags given beside it override its values",
       [](C& c) -> Field { return &c.request.from.file; }},
      from_format_row<C>(),
      megatron_args_row<C>(
          "A Megatron-LM command line, quoted ('--num-layers 32 --hidden-size 4096 ...'), read as --from reads a file"),
      {"--gpus", "GPUs (ranks): dp = gpus / (tp x pp x cp) when --dp is not given",
       [](C& c) -> Field { return &c.request.gpus; }},
      {"--dp", "Data-parallel degree", [](C& c) -> Field { return &c.request.dp; }, true},
      {"--tp", "Tensor-parallel degree", [](C& c) -> Field { return &c.request.tp; }, true},
      {"--pp", "Pipeline-parallel degree", [](C& c) -> Field { return &c.request.pp; }, true},
      {"--cp", "Context-parallel degree (the sequence split over cp ranks)", [](C& c) -> Field { return &c.request.cp; }, true},
      {"--vp",
       "Virtual pipeline stages (model chunks) per pipeline rank: > 1 is interleaved 1F1B (Megatron-LM's "
       "--num-layers-per-virtual-pipeline-stage = layers / (pp x vp)); not the recipe's vocab token",
       [](C& c) -> Field { return &c.request.vp; }, true},
      {"--mbs", "Micro-batch size", [](C& c) -> Field { return &c.request.micro_batch; }, true},
      {"--gbs", "Global batch size (default: the smallest the layout allows, dp x mbs, x pp with --vp > 1)",
       [](C& c) -> Field { return &c.request.global_batch; }},
      seq_row<C>(),
      {"--precision", std::string(query::kPrecisionsHelp) + " (default: amp-bf16 on a GPU description, else fp32)",
       [](C& c) -> Field { return &c.request.precision; }},
      {"--recipe", std::string("Training techniques: plain, or ") + query::kRecipeTokensHelp + " (e.g. sp+vocab+dopt+ovl+opg)",
       [](C& c) -> Field { return &c.request.recipe; }, true},
      {"--blind", "Precision-blind baseline (fp32 traces and messages)", [](C& c) -> Field { return &c.request.blind; }},
      {"--raw", "Without the calibration factor fitted on ground truth", [](C& c) -> Field { return &c.request.raw; }},
      json_row<C>("Print JSON instead of a table"),
      {"--allow-implausible",
       "Print a prediction the answer checks refuse (faster than the device's peak, operators priced at zero, a precision "
       "the calibration never ran, far extrapolation), with FLAG lines / \"flags\"",
       [](C& c) -> Field { return &c.request.allow_implausible; }},
      {"--device-memory-gib", "Flag configurations whose peak memory exceeds this (default: the GPU description's memory)",
       [](C& c) -> Field { return &c.request.device_memory_gib; }},
      hardware_row<C>(),
      {"--fitted",
       "With --framework megatron-te: terms fitted on your cluster's logs (`itertime fit --framework megatron-te`), quoted "
       "with the fit's leave-one-model-out range",
       [](C& c) -> Field { return &c.request.fitted; }},
      efficiency_row<C>(),
      {"--nodes", "With --hardware: the nodes the layout fills (checked against its ranks)",
       [](C& c) -> Field { return &c.request.nodes; }},
      ranks_per_node_row<C>(),
      {"--framework",
       "itertime (its own LibTorch trainer, as calibrated) or megatron-te (Megatron-Core with Transformer Engine on "
       "--hardware, from published kernel figures)",
       [](C& c) -> Field { return &c.request.framework; }, true},
      {"--fp8-recipe", "megatron-te with --precision fp8: delayed or current scaling",
       [](C& c) -> Field { return &c.request.fp8_recipe; }, true},
      {"--fp8-param-gather", "megatron-te with --precision fp8: fp8 parameters gathered in fp8 (NeMo's fp8 recipe)",
       [](C& c) -> Field { return &c.request.fp8_param_gather; }},
      {"--tp-comm-overlap", "megatron-te: TP collectives pipelined with their GEMMs (TE userbuffers; needs sp)",
       [](C& c) -> Field { return &c.request.tp_comm_overlap; }},
  };
}

// The answer as a table or JSON, after what --from read; on a calibration with the placement of its groups.
void print_answer(const query::PredictAnswer& answer, bool json) {
  if (json) {
    std::printf("%s\n", query::predict_json(answer).c_str());
    return;
  }
  for (const std::string& line : query::predict_preamble_lines(answer)) std::printf("%s\n", line.c_str());
  validate::print_prediction(answer.record);
  const std::string placement = query::predict_placement_line(answer);
  if (!placement.empty()) std::printf("%s\n", placement.c_str());
}

}  // namespace

void register_predict(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  // fit
  CLI::App* fit =
      app.add_subcommand("fit", "Fit the precision-aware model from a calibration file and save it (Boost.Serialization)");
  auto fit_files = std::make_shared<std::vector<std::string>>();
  auto fit_out = std::make_shared<std::string>();
  auto fit_force = std::make_shared<bool>(false);
  auto fit_framework = std::make_shared<std::string>("itertime");
  auto fit_hardware = std::make_shared<std::string>();
  fit->add_option("CAL", *fit_files,
                  "Calibration HDF5 file (with /comm and /ops); with --framework megatron-te: imported logs (.h5 of "
                  "`itertime import`) and published-figure files (.json), all of one GPU")
      ->required();
  fit->add_option("-o,--output", *fit_out, "Where to save the fitted model (the terms file with --framework megatron-te)")
      ->required();
  fit->add_flag("--force", *fit_force, "Overwrite an existing model file");
  fit->add_option("--framework", *fit_framework,
                  "itertime (this trainer's calibration) or megatron-te (the framework model's terms, fitted on logs)")
      ->capture_default_str();
  fit->add_option("--hardware", *fit_hardware, "With --framework megatron-te: the GPU the logs ran on (data/hardware)");
  auto efficiency_out = std::make_shared<std::string>();
  fit->add_option("--efficiency-out", *efficiency_out,
                  "Also write the operator efficiencies (JSON) that `predict --hardware` carries to other devices");
  actions.emplace_back(fit, [fit_files, fit_out, fit_force, fit_framework, fit_hardware, efficiency_out](Context&) {
    if (predict::framework::parse_framework(*fit_framework) == predict::framework::Framework::kMegatronTe) {
      if (!efficiency_out->empty()) throw UserError("--efficiency-out is for --framework itertime (a calibration's fit)");
      return run_framework_fit(*fit_files, *fit_hardware, *fit_out, *fit_force);
    }
    if (fit_files->size() != 1)
      throw UserError("fit: one calibration file (CAL); several files are for --framework megatron-te (logs)");
    if (!fit_hardware->empty()) throw UserError("--hardware is for --framework megatron-te (the GPU the logs ran on)");
    const std::string* fit_in = &fit_files->front();
    const predict::FittedModel model = predict::fit_model(*fit_in);
    if (!efficiency_out->empty() && model.roofline.empty()) {
      throw UserError("--efficiency-out " + *efficiency_out + ": " + *fit_in +
                      " has no operator efficiencies (its devices match no hardware description this build ships)");
    }
    if (!efficiency_out->empty()) query::refuse_existing(*efficiency_out, *fit_force, "--efficiency-out");
    predict::save_model(model, *fit_out, *fit_force);
    if (!efficiency_out->empty()) query::write_text_file(*efficiency_out, predict::roofline_to_json(model.roofline));
    validate::print_fit_summary(model, *fit_in, *fit_out);
    return 0;
  });

  // predict
  CLI::App* predict_cmd = app.add_subcommand("predict", "Predict the iteration time and its breakdown of one configuration");
  auto command = std::make_shared<PredictCommand>();
  add_options(*predict_cmd, *command, predict_options());
  actions.emplace_back(predict_cmd, [command, predict_cmd](Context&) {
    PredictRequest request = command->request;
    request.given = given_flags(*predict_cmd);
    print_answer(query::answer_predict(request), command->json);
    return 0;
  });
}

}  // namespace itertime::launcher
