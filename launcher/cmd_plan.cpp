// cmd_plan.cpp: `itertime plan`: the options, then the query (query/plan_query.hpp), then its answer
// printed (validate/plan_report's table or JSON). No MPI, no LibTorch.
// Invariant: every rule of the plan (--from, recipes, the tie rule, --emit) is the query's; this file only
// binds the options and prints.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "launcher/commands.hpp"
#include "query/plan_query.hpp"
#include "query/query_options.hpp"
#include "validate/plan_report.hpp"

namespace itertime::launcher {

void register_plan(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* plan_cmd = app.add_subcommand("plan", "List the fastest legal, memory-feasible configurations of a model on N GPUs");
  auto a = std::make_shared<query::PlanRequest>();
  auto json = std::make_shared<bool>(false);
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
  plan_cmd->add_option("--precisions", a->precisions, std::string("Precisions to consider: ") + query::kPrecisionsHelp)
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd
      ->add_option("--recipes", a->recipes,
                   std::string("Training recipes to consider, separated by ',': plain, or ") + query::kRecipeTokensHelp +
                       " (e.g. plain,sp+vocab,sp+vocab+rc-full)")
      ->delimiter(',')
      ->capture_default_str();
  plan_cmd->add_flag("--all-recipes", a->all_recipes,
                     "Consider every recipe the predictor models (sequence parallelism, vocabulary-parallel head, "
                     "distributed optimizer, recompute)");
  plan_cmd->add_option("--device-memory-gib", a->device_memory_gib,
                       "Device memory; larger configurations are infeasible (default: the GPU description's memory)");
  plan_cmd->add_option("--hardware", a->hardware,
                       "Hardware description (data/hardware): the calibration's own (default) for MFU and the device memory, "
                       "or another device, predicted from its description with the calibration's operator efficiencies");
  plan_cmd->add_option("--efficiency", a->efficiency,
                       "Operator efficiencies to carry to --hardware (default on a GPU: a GPU calibration's, else its published "
                       "kernel figures; on a CPU node: the calibration's, or data/efficiency/default.json)");
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
  plan_cmd->add_flag("--json", *json, "Print JSON (the first --top candidates, with the question and counts)");
  actions.emplace_back(plan_cmd, [a, json, plan_cmd](Context&) {
    query::PlanRequest request = *a;
    for (const CLI::Option* option : plan_cmd->get_options()) {
      if (option->count() > 0 && !option->get_lnames().empty()) request.given.insert("--" + option->get_lnames().front());
    }
    const std::unique_ptr<query::PlanAnswer> answer = query::answer_plan(request);
    if (*json) {
      std::printf("%s\n", query::plan_json(*answer).c_str());
    } else {
      for (const std::string& line : query::plan_preamble_lines(*answer)) std::printf("%s\n", line.c_str());
      validate::print_plan(answer->options, answer->question, answer->result, answer->top);
    }
    return 0;
  });
}

}  // namespace itertime::launcher
