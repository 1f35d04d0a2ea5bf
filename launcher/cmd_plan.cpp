// cmd_plan.cpp: `itertime plan`: the options, then the query (query/plan_query.hpp), then its answer
// printed (validate/plan_report's table or JSON). No MPI, no LibTorch.
// Invariant: every rule of the plan (--from, recipes, the tie rule, --emit) is the query's; this file only
// binds the options and prints.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "launcher/commands.hpp"
#include "launcher/option_table.hpp"
#include "query/plan_query.hpp"
#include "query/query_options.hpp"
#include "validate/plan_report.hpp"

namespace itertime::launcher {

namespace {

struct PlanCommand : QueryCommand<query::PlanRequest> {
  bool progress = false;  // --progress
};
using Field = OptionField;

// A running plan's progress on stderr (docs/cli.md, plan): from about 2 s into the search (at once with
// --progress), then at most about once a second, one line each (validate::plan_progress_line); the last
// layout's line too once anything was shown, so that a shown progress ends with the final count.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool at_once) : start_(Clock::now()), next_(start_ + (at_once ? kNone : kQuietFor)) {}

  void show(const predict::PlanProgress& progress) {
    const Clock::time_point now = Clock::now();
    const bool last = progress.layouts_done >= progress.layouts_total;
    if (now < next_ && !(last && shown_)) return;
    const double elapsed_s = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "%s\n", validate::plan_progress_line(progress, elapsed_s).c_str());
    std::fflush(stderr);
    shown_ = true;
    next_ = now + kEvery;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kNone{0}, kQuietFor{2}, kEvery{1};
  Clock::time_point start_, next_;
  bool shown_ = false;
};

// plan's options, in --help's order (a table, one row per option: its length is its rows').
std::vector<OptionRow<PlanCommand>> plan_options() {
  using C = PlanCommand;
  return {
      {"SOURCE", "A model from `itertime fit`, or a calibration .h5; optional with --hardware",
       [](C& c) -> Field { return &c.request.source; }},
      model_row<C>(),
      {"--from",
       "Your own configuration (a Megatron-LM arguments file or launch line, a NeMo 2 / Megatron-Bridge YAML dump, a "
       "torchtitan TOML; docs/formats.md): its model, GPUs, batch, sequence, precision, recipe and framework; the flags "
       "given beside it override them",
       [](C& c) -> Field { return &c.request.from.file; }},
      from_format_row<C>(),
      megatron_args_row<C>("A Megatron-LM command line, quoted, read as --from reads a file"),
      {"--emit",
       "megatron-args: after each shown candidate, the Megatron-LM command line that launches it (torchrun ... "
       "pretrain_gpt.py ARGS; JSON: \"megatron_args\"); --framework megatron-te only",
       [](C& c) -> Field { return &c.request.emit; }},
      {"--gpus", "Number of GPUs (ranks)", [](C& c) -> Field { return &c.request.gpus; }},
      ranks_per_node_row<C>(),
      {"--nodes", "Number of nodes of the --hardware description (GPUs: nodes x its GPUs per node)",
       [](C& c) -> Field { return &c.request.nodes; }},
      {"--gbs", "Global batch size (required unless --from gives it)", [](C& c) -> Field { return &c.request.global_batch; }},
      seq_row<C>(),
      {"--mbs", "Micro-batch sizes to consider", [](C& c) -> Field { return &c.request.micro_batches; }, true},
      {"--cp",
       "Context-parallel degrees to consider (each dividing --gpus); default 1, with megatron-te the powers of two "
       "leaving each CP rank at least 4096 tokens",
       [](C& c) -> Field { return &c.request.context_parallel; }, true},
      {"--vp",
       "Virtual pipeline stages per pipeline rank to consider (interleaved 1F1B when > 1; only with pp > 1); not the "
       "recipe's vocab token; default 1, with megatron-te 1 to 8",
       [](C& c) -> Field { return &c.request.virtual_stages; }, true},
      {"--precisions", std::string("Precisions to consider: ") + query::kPrecisionsHelp,
       [](C& c) -> Field { return &c.request.precisions; }, true},
      {"--recipes",
       std::string("Training recipes to consider, separated by ',': plain, or ") + query::kRecipeTokensHelp +
           " (e.g. plain,sp+vocab,sp+vocab+rc-full)",
       [](C& c) -> Field { return &c.request.recipes; }, true},
      {"--all-recipes",
       "Consider every recipe the predictor models (sequence parallelism, vocabulary-parallel head, distributed optimizer, "
       "recompute)",
       [](C& c) -> Field { return &c.request.all_recipes; }},
      {"--device-memory-gib", "Device memory; larger configurations are infeasible (default: the GPU description's memory)",
       [](C& c) -> Field { return &c.request.device_memory_gib; }},
      {"--memory-margin-gib",
       "megatron-te: headroom kept beside the peak and the runtime reserve (CUDA context, NCCL buffers) for the allocator's "
       "fragmentation (default 1)",
       [](C& c) -> Field { return &c.request.memory_margin_gib; }},
      hardware_row<C>(),
      efficiency_row<C>(),
      {"--fitted",
       "With --framework megatron-te: terms fitted on your cluster's logs (`itertime fit --framework megatron-te`); ties "
       "then within the fit's leave-one-model-out MAPE",
       [](C& c) -> Field { return &c.request.fitted; }},
      {"--top", "How many to list", [](C& c) -> Field { return &c.request.top; }, true},
      {"--framework",
       "itertime (its own trainer) or megatron-te (Megatron-Core + Transformer Engine on --hardware, from published kernel "
       "figures; recipes default to NeMo's: sp+dopt+ovl+opg with each recompute)",
       [](C& c) -> Field { return &c.request.framework; }, true},
      {"--fp8-recipes", "megatron-te: fp8 scaling recipes to consider (delayed, current)",
       [](C& c) -> Field { return &c.request.fp8_recipes; }, true},
      {"--tie-pct",
       "Candidates within this many percent (0-100) of the best rank 1= (ties); default: the model's stated uncertainty "
       "(megatron-te: its MAPE on published figures, 12.9%; itertime's trainer: 10%)",
       [](C& c) -> Field { return &c.request.tie_pct; }},
      json_row<C>("Print JSON (the first --top candidates, with the question and counts)"),
      {"--progress",
       "Show the search's progress on stderr from its start, also with --json (without it: only a plan that runs longer than "
       "about 2 s shows it, and never with --json)",
       [](C& c) -> Field { return &c.progress; }},
  };
}

}  // namespace

void register_plan(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* plan_cmd = app.add_subcommand("plan", "List the fastest legal, memory-feasible configurations of a model on N GPUs");
  auto command = std::make_shared<PlanCommand>();
  add_options(*plan_cmd, *command, plan_options());
  plan_cmd->get_option("--gpus")->excludes(plan_cmd->get_option("--nodes"));
  plan_cmd->get_option("--tie-pct")->check(CLI::Range(0.0, 100.0));
  actions.emplace_back(plan_cmd, [command, plan_cmd](Context&) {
    query::PlanRequest request = command->request;
    request.given = given_flags(*plan_cmd);
    ProgressPrinter printer(command->progress);
    if (command->progress || !command->json) {
      request.on_progress = [&printer](const predict::PlanProgress& progress) { printer.show(progress); };
    }
    const std::unique_ptr<query::PlanAnswer> answer = query::answer_plan(request);
    if (command->json) {
      std::printf("%s\n", query::plan_json(*answer).c_str());
    } else {
      for (const std::string& line : query::plan_preamble_lines(*answer)) std::printf("%s\n", line.c_str());
      validate::print_plan(answer->options, answer->question, answer->result, answer->top);
    }
    return 0;
  });
}

}  // namespace itertime::launcher
