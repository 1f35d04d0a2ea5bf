// cmd_import.cpp: `itertime import LOG... -o CAL`: the options, the query (query/import_query.hpp: every
// log read and checked before CAL is written, all in one commit), then each import printed.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/training_techniques.hpp"
#include "formats/log_import.hpp"
#include "launcher/commands.hpp"
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

void register_import(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* cmd = app.add_subcommand(
      "import", "Import users' training logs (Megatron-LM, NeMo 2, torchtitan) as ground truth into a calibration file");
  auto a = std::make_shared<query::ImportRequest>();
  cmd->add_option("LOG", a->logs, "Training logs (each one run)")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", a->output, "Calibration HDF5 file: created, or added to (its /groundtruth)")->required();
  cmd->add_option("--format", a->format, "auto (by content), megatron, nemo or torchtitan")->capture_default_str();
  cmd->add_option("--config", a->config_file,
                  "NeMo / torchtitan logs: the run's configuration (NeMo 2 / Megatron-Bridge YAML dump, torchtitan TOML, "
                  "Megatron-LM arguments); --dp beside it when it states no data-parallel size");
  auto* model = cmd->add_option("--model", a->model_file,
                                "NeMo / torchtitan logs: the LLaMA config.json of the run (a Megatron-LM log states its own)");
  std::vector<CLI::Option*> layout = {
      cmd->add_option("--dp", a->dp, "Data-parallel degree (with --model)"),
      cmd->add_option("--tp", a->tp, "Tensor-parallel degree"),
      cmd->add_option("--pp", a->pp, "Pipeline-parallel degree"),
      cmd->add_option("--cp", a->cp, "Context-parallel degree"),
      cmd->add_option("--vp", a->vp, "Virtual pipeline stages per pipeline rank"),
      cmd->add_option("--mbs", a->micro_batch, "Micro-batch size"),
      cmd->add_option("--gbs", a->global_batch, "Global batch size"),
      cmd->add_option("--seq", a->seq_len, "Sequence length"),
      cmd->add_option("--precision", a->precision, "amp-bf16 (Megatron --bf16), amp-fp16 (--fp16) or fp8 (--fp8-format)"),
      cmd->add_option("--recipe", a->recipe,
                      "Training techniques: plain, or sp (sequence parallel), vp (vocabulary-parallel head), dopt (distributed "
                      "optimizer), rc-sel|rc-full (recompute), ovl (overlapped gradient reduce), opg (overlapped param "
                      "gather) joined by '+'"),
      cmd->add_option("--framework", a->framework, "The framework that trained: megatron-te"),
      cmd->add_option("--fp8-recipe", a->fp8_recipe, "delayed or current (with --precision fp8)"),
      cmd->add_flag("--tp-comm-overlap", a->tp_comm_overlap, "The run overlapped TP communication (TE userbuffers)"),
      cmd->add_flag("--fp8-param-gather", a->fp8_param_gather, "The run gathered fp8 parameters"),
  };
  (void)model;
  actions.emplace_back(cmd, [a, layout](Context& context) {
    std::vector<std::string> given;
    for (const CLI::Option* option : layout) {
      if (option->count() > 0) given.push_back(option->get_name());
    }
    query::ImportRequest request = *a;
    request.layout_flags = given;
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
