// cmd_import.cpp: `itertime import LOG... -o CAL`: the options, the query (query/import_query.hpp: every
// log read and checked before CAL is written, all in one commit), then each import printed.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/training_techniques.hpp"
#include "formats/log_import.hpp"
#include "launcher/commands.hpp"
#include "launcher/option_table.hpp"
#include "query/import_query.hpp"
#include "validate/duration_text.hpp"

namespace itertime::launcher {

namespace {

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

void print_import(const formats::LogImport& im) {
  const formats::LogMeasurement& m = im.measurement;
  const formats::UserRun& run = im.run;
  std::printf("imported %s (%s, sha256 %s)\n", im.log_name.c_str(), formats::to_string(im.format).c_str(), im.sha256.c_str());
  std::printf("  key        %s\n", im.key().c_str());
  std::printf("  run        %s %s, %s, recipe %s, framework %s\n", run.model.name.c_str(), run.config.to_string().c_str(),
              to_string(run.recipe.precision).c_str(), recipe_label(run.recipe.techniques).c_str(),
              predict::framework::to_string(run.framework).c_str());
  std::printf(
      "  timing     %zu line(s): %zu dropped as warm-up (%lld iterations), %zu steady from line %zu to %zu (%lld iterations)\n",
      m.intervals_total, m.intervals_warmup, static_cast<long long>(m.warmup_iters), m.steady_us.size(), im.first_steady_line,
      im.last_line, static_cast<long long>(m.timed_iters));
  std::printf("  iteration  %s median (min %s, max %s); floor %.2f%% (mean |interval - median| / median)\n",
              validate::duration_text(m.time_us_median).c_str(), validate::duration_text(m.time_us_min).c_str(),
              validate::duration_text(m.time_us_max).c_str(), m.spread_pct);
  for (const std::string& assumed : run.assumed) std::printf("  assumed    %s\n", assumed.c_str());
  if (!run.not_understood.empty()) {
    std::printf("  not used   %zu: %s\n", run.not_understood.size(), join(run.not_understood, ", ").c_str());
  }
}

}  // namespace

namespace {

using Field = OptionField;

// import's options, in --help's order (a table, one row per option).
std::vector<OptionRow<query::ImportRequest>> import_options() {
  using R = query::ImportRequest;
  return {
      {"LOG", "Training logs (each one run)", [](R& r) -> Field { return &r.logs; }},
      {"-o,--output", "Calibration HDF5 file: created, or added to (its /groundtruth)", [](R& r) -> Field { return &r.output; }},
      {"--format", "auto (by content), megatron, nemo or torchtitan", [](R& r) -> Field { return &r.format; }, true},
      {"--config",
       "NeMo / torchtitan logs: the run's configuration (NeMo 2 / Megatron-Bridge YAML dump, torchtitan TOML, Megatron-LM "
       "arguments); --dp beside it when it states no data-parallel size",
       [](R& r) -> Field { return &r.config_file; }},
      {"--model", "NeMo / torchtitan logs: the LLaMA config.json of the run (a Megatron-LM log states its own)",
       [](R& r) -> Field { return &r.model_file; }},
      {"--dp", "Data-parallel degree (with --model)", [](R& r) -> Field { return &r.dp; }},
      {"--tp", "Tensor-parallel degree", [](R& r) -> Field { return &r.tp; }},
      {"--pp", "Pipeline-parallel degree", [](R& r) -> Field { return &r.pp; }},
      {"--cp", "Context-parallel degree", [](R& r) -> Field { return &r.cp; }},
      {"--vp", "Virtual pipeline stages per pipeline rank", [](R& r) -> Field { return &r.vp; }},
      {"--mbs", "Micro-batch size", [](R& r) -> Field { return &r.micro_batch; }},
      {"--gbs", "Global batch size", [](R& r) -> Field { return &r.global_batch; }},
      {"--seq", "Sequence length", [](R& r) -> Field { return &r.seq_len; }},
      {"--precision", "amp-bf16 (Megatron --bf16), amp-fp16 (--fp16) or fp8 (--fp8-format)",
       [](R& r) -> Field { return &r.precision; }},
      {"--recipe",
       "Training techniques: plain, or sp (sequence parallel), vp (vocabulary-parallel head), dopt (distributed optimizer), "
       "rc-sel|rc-full (recompute), ovl (overlapped gradient reduce), opg (overlapped param gather) joined by '+'",
       [](R& r) -> Field { return &r.recipe; }},
      {"--framework", "The framework that trained: megatron-te", [](R& r) -> Field { return &r.framework; }},
      {"--fp8-recipe", "delayed or current (with --precision fp8)", [](R& r) -> Field { return &r.fp8_recipe; }},
      {"--tp-comm-overlap", "The run overlapped TP communication (TE userbuffers)",
       [](R& r) -> Field { return &r.tp_comm_overlap; }},
      {"--fp8-param-gather", "The run gathered fp8 parameters", [](R& r) -> Field { return &r.fp8_param_gather; }},
  };
}

}  // namespace

void register_import(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* cmd = app.add_subcommand(
      "import", "Import users' training logs (Megatron-LM, NeMo 2, torchtitan) as ground truth into a calibration file");
  auto a = std::make_shared<query::ImportRequest>();
  add_options(*cmd, *a, import_options());
  cmd->get_option("LOG")->required()->check(CLI::ExistingFile);
  cmd->get_option("--output")->required();
  actions.emplace_back(cmd, [a, cmd](Context& context) {
    query::ImportRequest request = *a;
    request.given = given_flags(*cmd);
    request.command_line = context.command_line;
    const std::vector<formats::LogImport> imports = query::import_logs(request);
    for (const formats::LogImport& im : imports) print_import(im);
    std::printf(
        "# %zu log(s) into %s /groundtruth (imported); score them with `itertime validate %s --framework megatron-te "
        "--hardware NAME`\n",
        imports.size(), request.output.c_str(), request.output.c_str());
    return 0;
  });
}

}  // namespace itertime::launcher
