// cmd_plan.cpp: `itertime plan`: options, then predict/plan (or predict/framework_plan); the reporter is
// validate/plan_report. No MPI, no LibTorch.
// Invariants:
//  - A search space with no candidate at all is a UserError (exit 2) with the planner's one-line reason.
//  - The tie rule's uncertainty: --tie-pct when given; else for --framework megatron-te the framework
//    model's MAPE on published figures (itertime score-published), else kOwnTrainerTieFraction (below).
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "common/training_techniques.hpp"
#include "formats/megatron_emit.hpp"
#include "launcher/commands.hpp"
#include "launcher/predict_options.hpp"
#include "predict/fit_model.hpp"
#include "predict/framework/framework_fit.hpp"
#include "predict/framework_plan.hpp"
#include "predict/plan.hpp"
#include "predict/prediction_range.hpp"
#include "predict/resolver/target_device.hpp"
#include "validate/plan_report.hpp"
#include "validate/validation_mape.hpp"

namespace itertime::launcher {

namespace {

// itertime's own trainer: the calibrated predictor's held-out overall MAPE on the local CPU job was 5.4% to
// 13.2% over its runs (docs/method.md, "Local job, measured"; out/local-cpu-after: 5.38%); 10% is their
// middle. No GPU run measures it, so a plan on a description is no more certain than that.
constexpr double kOwnTrainerTieFraction = 0.10;

}  // namespace

void register_plan(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* plan_cmd = app.add_subcommand("plan", "List the fastest legal, memory-feasible configurations of a model on N GPUs");
  struct PlanArgs {
    std::string source, model_file;
    int gpus = 0, global_batch = 0, seq_len = 0, top = 10;
    std::vector<int> micro_batches = {1, 2, 4, 8};
    std::vector<int> virtual_stages = {1};
    std::vector<int> context_parallel = {1};
    std::vector<std::string> precisions = {"amp-bf16"};
    std::vector<std::string> recipes = {"plain"};
    bool all_recipes = false;
    double device_memory_gib = 0;
    double memory_margin_gib = -1;  // -1: FrameworkPlanSpace's default (issue 44)
    std::string hardware, efficiency;
    std::string fitted;  // --fitted: the framework model's terms fitted on logs
    int nodes = 0;
    int64_t ranks_per_node = -1;  // --ranks-per-node on a calibration (-1: not given, its own)
    bool json = false;
    std::string framework = "itertime";
    std::vector<std::string> fp8_recipes = {"delayed"};
    double tie_pct = -1;  // -1: the default of the framework (see the top)
    FromOptions from;     // --from FILE / --from-format / --megatron-args
    std::string emit;     // --emit megatron-args
  };
  auto a = std::make_shared<PlanArgs>();
  plan_cmd->add_option("SOURCE", a->source, "A model from `itertime fit`, or a calibration .h5; optional with --hardware");
  plan_cmd->add_option("--model", a->model_file, "LLaMA config.json (required unless --from or --megatron-args)");
  plan_cmd->add_option("--from", a->from.file,
                       "Your own configuration (a Megatron-LM arguments file or launch line, a NeMo 2 / Megatron-Bridge YAML "
                       "dump, a torchtitan TOML; docs/formats.md): its model, GPUs, batch, sequence, precision, recipe and "
                       "framework; the flags given beside it override them");
  plan_cmd->add_option("--from-format", a->from.format, "The format of --from: megatron-args, nemo or torchtitan")
      ->capture_default_str();
  plan_cmd->add_option("--megatron-args", a->from.megatron_args,
                       "A Megatron-LM command line, quoted, read as --from reads a file");
  plan_cmd->add_option("--emit", a->emit,
                       "megatron-args: after each shown candidate, the Megatron-LM command line that launches it (torchrun "
                       "... pretrain_gpt.py ARGS; JSON: \"megatron_args\"); --framework megatron-te only");
  CLI::Option* gpus = plan_cmd->add_option("--gpus", a->gpus, "Number of GPUs (ranks)");
  plan_cmd->add_option("--ranks-per-node", a->ranks_per_node,
                       "On a calibration: world ranks per node, filled in rank order (TP inside a node, DP and PP across); "
                       "default: the calibration's own when its comm calibration spanned nodes, else one node");
  CLI::Option* nodes = plan_cmd->add_option("--nodes", a->nodes,
                                            "Number of nodes of the --hardware description (GPUs: nodes x its GPUs per node)");
  gpus->excludes(nodes);
  plan_cmd->add_option("--gbs", a->global_batch, "Global batch size (required unless --from gives it)");
  plan_cmd->add_option("--seq", a->seq_len, "Sequence length (required unless --from or --megatron-args)");
  plan_cmd->add_option("--mbs", a->micro_batches, "Micro-batch sizes to consider")->delimiter(',')->capture_default_str();
  plan_cmd->add_option("--cp", a->context_parallel, "Context-parallel degrees to consider (each dividing --gpus)")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd
      ->add_option("--vp", a->virtual_stages,
                   "Virtual pipeline stages per pipeline rank to consider (interleaved 1F1B when > 1; only with pp > 1); not "
                   "the recipe's vocab token")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd->add_option("--precisions", a->precisions, std::string("Precisions to consider: ") + kPrecisionsHelp)
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd
      ->add_option("--recipes", a->recipes,
                   std::string("Training recipes to consider, separated by ',': plain, or ") + kRecipeTokensHelp +
                       " (e.g. plain,sp+vocab,sp+vocab+rc-full)")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd->add_flag("--all-recipes", a->all_recipes,
                     "Consider every recipe the predictor models (sequence parallelism, vocabulary-parallel head, "
                     "distributed optimizer, recompute)");
  plan_cmd->add_option("--device-memory-gib", a->device_memory_gib,
                       "Device memory; larger configurations are infeasible (default: the GPU description's memory)");
  plan_cmd->add_option("--memory-margin-gib", a->memory_margin_gib,
                       "megatron-te: headroom kept beside the peak and the runtime reserve (CUDA context, NCCL buffers) "
                       "for the allocator's fragmentation (default 1)");
  plan_cmd->add_option("--hardware", a->hardware,
                       "Hardware description (data/hardware): the calibration's own (default) for MFU and the device memory, "
                       "or another device, predicted from its description with the calibration's operator efficiencies");
  plan_cmd->add_option("--efficiency", a->efficiency,
                       "Operator efficiencies to carry to --hardware (default on a GPU: a GPU calibration's, else its published "
                       "kernel figures; on a CPU node: the calibration's, or data/efficiency/default.json)");
  plan_cmd->add_option("--fitted", a->fitted,
                       "With --framework megatron-te: terms fitted on your cluster's logs (`itertime fit --framework "
                       "megatron-te`); ties then within the fit's leave-one-model-out MAPE");
  plan_cmd->add_option("--top", a->top, "How many to list")->capture_default_str();
  plan_cmd
      ->add_option("--framework", a->framework,
                   "itertime (its own trainer) or megatron-te (Megatron-Core + Transformer Engine on --hardware, from "
                   "published kernel figures; recipes default to NeMo's: sp+dopt+ovl+opg with each recompute)")
      ->capture_default_str();
  plan_cmd->add_option("--fp8-recipes", a->fp8_recipes, "megatron-te: fp8 scaling recipes to consider (delayed, current)")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd
      ->add_option("--tie-pct", a->tie_pct,
                   "Candidates within this many percent (0-100) of the best rank 1= (ties); default: the model's stated "
                   "uncertainty (megatron-te: its MAPE on published figures, 12.9%; itertime's trainer: 10%)")
      ->check(CLI::Range(0.0, 100.0));
  plan_cmd->add_flag("--json", a->json, "Print JSON (the first --top candidates, with the question and counts)");
  actions.emplace_back(plan_cmd, [a, plan_cmd](Context&) {
    const auto given = [plan_cmd](const char* flag) { return plan_cmd->get_option(flag)->count() > 0; };
    const std::optional<formats::UserRun> run = read_from(a->from);
    std::vector<std::string> overridden;
    predict::PlanOptions options;
    predict::FrameworkPlanSpace space;
    bool recipes_given = given("--recipes") || a->all_recipes;
    if (run) {
      // The run's model, GPUs, batch, sequence, precision, recipe and framework; flags beside --from override.
      if (!a->model_file.empty())
        throw UserError("--model " + a->model_file + " beside --from/--megatron-args: the model comes from " + run->source +
                        "; give one");
      const ParallelConfig& c = run->config;
      const auto take_int = [&](const char* flag, int& value, int file_value) {
        if (!given(flag)) {
          value = file_value;
        } else if (value != file_value) {
          overridden.push_back(std::string(flag) + " " + std::to_string(value) + " (" + run->source + ": " +
                               std::to_string(file_value) + ")");
        }
      };
      take_int("--seq", a->seq_len, c.seq_len);
      // The file's own cp and vp are searched beside 1 (unless --cp / --vp say otherwise).
      if (!given("--cp") && c.cp > 1) a->context_parallel = {1, c.cp};
      if (!given("--vp") && c.vp > 1) a->virtual_stages = {1, c.vp};
      if (run->global_batch_given || run->data_parallel_given) {
        take_int("--gbs", a->global_batch, c.global_batch);
      } else if (!given("--gbs")) {
        throw UserError(run->source + " fixes no global batch (nor the data-parallel size it follows): give --gbs N");
      }
      if (run->data_parallel_given && !given("--nodes")) {
        take_int("--gpus", a->gpus, c.world_size());
      } else if (!given("--gpus") && !given("--nodes")) {
        throw UserError(run->source + " fixes no world size: give --gpus N or --nodes N");
      }
      const std::string precision = to_string(run->recipe.precision);
      if (!given("--precisions")) {
        a->precisions = {precision};
      } else if (a->precisions != std::vector<std::string>{precision}) {
        overridden.push_back("--precisions " + predict::comma_list(a->precisions) + " (" + run->source + ": " + precision + ")");
      }
      TrainingTechniques techniques = run->recipe.techniques;
      if (!techniques.sequence_parallel) techniques.vocab_parallel = false;  // plain TP's candidates at every tp
      if (!recipes_given) {
        a->recipes = {techniques.any() ? recipe_text(techniques) : "plain"};
        recipes_given = true;
      } else {
        overridden.push_back("--recipes (" + run->source + ": " + recipe_label(techniques) + ")");
      }
      const std::string framework = predict::framework::to_string(run->framework);
      if (!given("--framework")) {
        a->framework = framework;
      } else if (a->framework != framework) {
        overridden.push_back("--framework " + a->framework + " (" + run->source + ": " + framework + ")");
      }
      if (!given("--fp8-recipes")) a->fp8_recipes = {predict::framework::to_string(run->recipe.fp8_recipe)};
      space.tp_comm_overlap = {run->recipe.tp_comm_overlap};
      space.fp8_param_gather = {run->recipe.fp8_param_gather};
      options.model = run->model;
    } else {
      if (a->model_file.empty()) throw UserError("plan: give --model FILE (a LLaMA config.json), or --from / --megatron-args");
      if (!given("--seq")) throw UserError("plan: give --seq N (the sequence length)");
      if (!given("--gbs")) throw UserError("plan: give --gbs N (the global batch size)");
      options.model = load_llama_config(a->model_file);
    }
    if (!a->emit.empty() && a->emit != "megatron-args")
      throw UserError("--emit " + a->emit + ": the one launch format plan writes is megatron-args");
    options.gpus = a->gpus;
    options.global_batch = a->global_batch;
    options.seq_len = a->seq_len;
    options.micro_batches = a->micro_batches;
    options.virtual_stages = a->virtual_stages;
    options.context_parallel = a->context_parallel;
    options.precisions.clear();
    for (const auto& p : a->precisions) options.precisions.push_back(parse_precision(p).name);
    options.recipes.clear();
    for (const auto& r : a->recipes) options.recipes.push_back(parse_recipe_option(r, "--recipes"));
    if (a->all_recipes) options.recipes = predict::modelled_recipes();
    if (!given("--framework") && !run)  // issue 44: a GPU question gets the GPU's framework
      a->framework =
          predict::framework::to_string(predict::default_framework(a->hardware, !a->source.empty() || !a->efficiency.empty()));
    if (a->memory_margin_gib >= 0) space.memory_margin_bytes = a->memory_margin_gib * 1024.0 * 1024.0 * 1024.0;
    validate::PlanQuestion question;
    question.source = a->source;
    if (!a->emit.empty()) {
      if (predict::framework::parse_framework(a->framework) != predict::framework::Framework::kMegatronTe)
        throw UserError("--emit megatron-args: launch lines are Megatron-LM's; give --framework megatron-te (or --from)");
      question.launch_line = [&options](const predict::PlanEntry& e) {
        predict::framework::FrameworkRecipe recipe;
        if (e.framework_recipe) {
          recipe = *e.framework_recipe;
        } else {
          recipe.precision = e.precision;
          recipe.techniques = e.techniques;
        }
        const int per_node =
            options.hardware && options.hardware->gpus_per_node ? static_cast<int>(*options.hardware->gpus_per_node) : 0;
        return formats::megatron_command_line(options.model, e.config, recipe, per_node);
      };
    }
    question.nodes = a->nodes;
    const bool megatron = predict::framework::parse_framework(a->framework) == predict::framework::Framework::kMegatronTe;
    if (!megatron && !a->fitted.empty()) throw UserError("--fitted needs --framework megatron-te (terms fitted on logs)");
    question.framework = predict::framework::to_string(predict::framework::parse_framework(a->framework));
    if (a->tie_pct >= 0) {
      options.tie_fraction = a->tie_pct / 100.0;
      options.tie_source = "--tie-pct";
    } else if (megatron && !a->fitted.empty()) {
      const predict::framework::FrameworkFit fit = predict::framework::read_fitted_terms(a->fitted);
      options.tie_fraction = (std::isfinite(fit.lomo_mape_pct) ? fit.lomo_mape_pct : predict::kFrameworkPublishedMapePct) / 100.0;
      options.tie_source = std::isfinite(fit.lomo_mape_pct)
                               ? "the fit's leave-one-model-out MAPE, " + a->fitted
                               : "every published run's MAPE (the fit in " + a->fitted + " saw one model only)";
    } else if (megatron) {
      options.tie_fraction = predict::framework_tie_fraction(a->hardware);
      options.tie_source =
          "the described framework model's MAPE on published runs of this GPU generation, itertime score-published";
    } else if (const auto stored = a->source.empty() ? std::nullopt : validate::read_validation_mape(a->source, "", false)) {
      options.tie_fraction = stored->mape_pct / 100.0;
      options.tie_source = "the calibration's MAPE over its " + std::to_string(stored->count) +
                           " validated configurations (/validation, itertime validate --store)";
    } else {
      options.tie_fraction = kOwnTrainerTieFraction;
      options.tie_source = "default 10%, the calibrated predictor's held-out MAPE on the local job (docs/cli.md)";
    }
    const auto report = [&](const predict::PlanResult& result) {
      if (result.entries.empty()) throw UserError("plan: no candidate to consider: " + result.empty_reason);
      if (a->json) {
        const std::string text = validate::plan_json(options, question, result, a->top);
        std::printf("%s\n", run ? with_input_json(text, *run, overridden).c_str() : text.c_str());
      } else {
        if (run)
          for (const std::string& line : user_run_lines(*run, overridden)) std::printf("%s\n", line.c_str());
        validate::print_plan(options, question, result, a->top);
      }
      return 0;
    };
    if (megatron) {
      if (!a->source.empty())
        throw UserError("plan --framework megatron-te takes no calibration or model file (" + a->source + ")");
      predict::framework::FrameworkTarget target = predict::framework_target(a->hardware);
      if (!a->fitted.empty()) predict::framework::apply_fitted_terms(target, a->fitted);
      if (!recipes_given) options.recipes = predict::megatron_recipes();
      space.fp8_recipes.clear();
      for (const auto& r : a->fp8_recipes) space.fp8_recipes.push_back(predict::framework::parse_fp8_recipe(r));
      for (const auto& r : space.fp8_recipes) question.fp8_recipes.push_back(predict::framework::to_string(r));
      options.hardware = target.hardware;
      options.gpus = a->nodes > 0 ? a->nodes * target.hardware.gpus_per_node.value_or(8) : a->gpus;
      if (options.gpus < 1) throw UserError("plan: give --gpus N, or --nodes N");
      options.device_memory_bytes = device_memory_bytes(a->device_memory_gib, options.hardware);
      return report(predict::plan_framework_search(options, target, space));
    }
    const predict::FittedModel model = a->source.empty() ? predict::FittedModel{} : predict::load_or_fit(a->source);
    const predict::HardwareChoice choice =
        predict::choose_hardware(a->source.empty() ? nullptr : &model, a->hardware, a->efficiency);
    options.hardware = choice.hardware;
    options.target = choice.target ? &*choice.target : nullptr;
    if (a->nodes > 0) {
      if (!choice.hardware || !choice.hardware->gpus_per_node)
        throw UserError("--nodes needs --hardware with a GPU description (GPUs per node)");
      options.gpus = a->nodes * *choice.hardware->gpus_per_node;
    } else if (a->gpus < 1) {
      throw UserError("plan: the number of GPUs must be positive: give --gpus N, or --hardware NAME --nodes N");
    }
    options.device_memory_bytes = device_memory_bytes(a->device_memory_gib, options.hardware);
    options.ranks_per_node =
        ranks_per_node_option(a->ranks_per_node, model.comm.calibration_ranks_per_node(), options.target != nullptr);
    if (!a->json && options.target == nullptr && options.ranks_per_node > 0) {
      std::printf("placement: %lld rank%s per node, filled in rank order (TP inside a node first, then CP, DP, PP)\n",
                  static_cast<long long>(options.ranks_per_node), options.ranks_per_node == 1 ? "" : "s");
    }
    return report(predict::plan_search(model, options));
  });
}

}  // namespace itertime::launcher
