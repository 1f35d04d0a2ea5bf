// cmd_predict.cpp: `itertime fit` and `predict`: the options, then the query (query/predict_query.hpp),
// then its answer printed (validate/prediction_report's table or JSON). No MPI, no LibTorch.
// Invariant: every rule of a prediction (defaults, --from, refusals, range, placement) is the query's; this
// file only binds the options and prints.
#include <cstdio>
#include <memory>
#include <string>

#include "common/errors.hpp"
#include "launcher/commands.hpp"
#include "predict/fit_model.hpp"
#include "predict/resolver/target_device.hpp"
#include "query/predict_query.hpp"
#include "query/query_options.hpp"
#include "validate/prediction_report.hpp"

namespace itertime::launcher {
namespace {

using query::PredictRequest;

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
  auto fit_in = std::make_shared<std::string>();
  auto fit_out = std::make_shared<std::string>();
  auto fit_force = std::make_shared<bool>(false);
  fit->add_option("CAL", *fit_in, "Calibration HDF5 file (with /comm and /ops)")->required();
  fit->add_option("-o,--output", *fit_out, "Where to save the fitted model")->required();
  fit->add_flag("--force", *fit_force, "Overwrite an existing model file");
  auto efficiency_out = std::make_shared<std::string>();
  fit->add_option("--efficiency-out", *efficiency_out,
                  "Also write the operator efficiencies (JSON) that `predict --hardware` carries to other devices");
  actions.emplace_back(fit, [fit_in, fit_out, fit_force, efficiency_out](Context&) {
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
  auto args = std::make_shared<PredictRequest>();
  predict_cmd->add_option("SOURCE", args->source,
                          "A model from `itertime fit`, or a calibration .h5 (fitted on the fly); optional with --hardware");
  predict_cmd->add_option("--model", args->model_file,
                          "LLaMA config.json (the model that was traced); required unless --from or --megatron-args");
  predict_cmd->add_option("--from", args->from.file,
                          "Your own configuration: a Megatron-LM arguments file or launch line, a NeMo 2 / Megatron-Bridge "
                          "YAML dump, or a torchtitan TOML (docs/formats.md); flags given beside it override its values");
  predict_cmd->add_option("--from-format", args->from.format, "The format of --from: megatron-args, nemo or torchtitan")
      ->capture_default_str();
  predict_cmd->add_option(
      "--megatron-args", args->from.megatron_args,
      "A Megatron-LM command line, quoted ('--num-layers 32 --hidden-size 4096 ...'), read as --from reads a file");
  predict_cmd->add_option("--gpus", args->gpus, "GPUs (ranks): dp = gpus / (tp x pp x cp) when --dp is not given");
  predict_cmd->add_option("--dp", args->dp, "Data-parallel degree")->capture_default_str();
  predict_cmd->add_option("--tp", args->tp, "Tensor-parallel degree")->capture_default_str();
  predict_cmd->add_option("--pp", args->pp, "Pipeline-parallel degree")->capture_default_str();
  predict_cmd->add_option("--cp", args->cp, "Context-parallel degree (the sequence split over cp ranks)")->capture_default_str();
  predict_cmd
      ->add_option("--vp", args->vp,
                   "Virtual pipeline stages (model chunks) per pipeline rank: > 1 is interleaved 1F1B (Megatron-LM's "
                   "--num-layers-per-virtual-pipeline-stage = layers / (pp x vp)); not the recipe's vocab token")
      ->capture_default_str();
  predict_cmd->add_option("--mbs", args->micro_batch, "Micro-batch size")->capture_default_str();
  predict_cmd->add_option("--gbs", args->global_batch,
                          "Global batch size (default: the smallest the layout allows, dp x mbs, x pp with --vp > 1)");
  predict_cmd->add_option("--seq", args->seq_len, "Sequence length (required unless --from or --megatron-args)");
  predict_cmd->add_option("--precision", args->precision,
                          std::string(query::kPrecisionsHelp) + " (default: amp-bf16 on a GPU description, else fp32)");
  predict_cmd
      ->add_option("--recipe", args->recipe,
                   std::string("Training techniques: plain, or ") + query::kRecipeTokensHelp + " (e.g. sp+vocab+dopt+ovl+opg)")
      ->capture_default_str();
  predict_cmd->add_flag("--blind", args->blind, "Precision-blind baseline (fp32 traces and messages)");
  predict_cmd->add_flag("--raw", args->raw, "Without the calibration factor fitted on ground truth");
  auto json = std::make_shared<bool>(false);
  predict_cmd->add_flag("--json", *json, "Print JSON instead of a table");
  predict_cmd->add_flag("--allow-implausible", args->allow_implausible,
                        "Print a prediction the answer checks refuse (faster than the device's peak, operators priced at "
                        "zero, a precision the calibration never ran, far extrapolation), with FLAG lines / \"flags\"");
  predict_cmd->add_option("--device-memory-gib", args->device_memory_gib,
                          "Flag configurations whose peak memory exceeds this (default: the GPU description's memory)");
  predict_cmd->add_option("--hardware", args->hardware,
                          "Hardware description (data/hardware): the calibration's own (default) for MFU and the device memory, "
                          "or another device, predicted from its description with the calibration's operator efficiencies");
  predict_cmd->add_option(
      "--efficiency", args->efficiency,
      "Operator efficiencies to carry to --hardware (a file from `itertime fit --efficiency-out`; default on a "
      "GPU: a GPU calibration's, else its published kernel figures; on a CPU node: the calibration's, or "
      "data/efficiency/default.json)");
  predict_cmd->add_option("--nodes", args->nodes, "With --hardware: the nodes the layout fills (checked against its ranks)");
  predict_cmd->add_option("--ranks-per-node", args->ranks_per_node,
                          "On a calibration: world ranks per node, filled node by node (TP inside a node, DP and PP "
                          "across); default: the calibration's own when its comm calibration spanned nodes, else one node");
  predict_cmd
      ->add_option("--framework", args->framework,
                   "itertime (its own LibTorch trainer, as calibrated) or megatron-te (Megatron-Core with Transformer "
                   "Engine on --hardware, from published kernel figures)")
      ->capture_default_str();
  predict_cmd->add_option("--fp8-recipe", args->fp8_recipe, "megatron-te with --precision fp8: delayed or current scaling")
      ->capture_default_str();
  predict_cmd->add_flag("--fp8-param-gather", args->fp8_param_gather,
                        "megatron-te with --precision fp8: fp8 parameters gathered in fp8 (NeMo's fp8 recipe)");
  predict_cmd->add_flag("--tp-comm-overlap", args->tp_comm_overlap,
                        "megatron-te: TP collectives pipelined with their GEMMs (TE userbuffers; needs sp)");
  actions.emplace_back(predict_cmd, [args, json, predict_cmd](Context&) {
    PredictRequest request = *args;
    for (const CLI::Option* option : predict_cmd->get_options()) {
      if (option->count() > 0 && !option->get_lnames().empty()) request.given.insert("--" + option->get_lnames().front());
    }
    print_answer(query::answer_predict(request), *json);
    return 0;
  });
}

}  // namespace itertime::launcher
