// cmd_import.cpp: `itertime import LOG... -o CAL`: users' training logs (Megatron-LM, NeMo 2, torchtitan)
// into CAL's /groundtruth as imported ground truth (formats/log_import.hpp), for `validate` to score.
// Invariants:
//  - Every log is read, parsed and checked, and every key checked against CAL, before CAL is opened for
//    writing: a malformed log is one line "FILE:LINE: what" and exit 2, with CAL untouched (not created).
//  - All the logs of one command are appended in one commit (common/h5store.hpp): all or none.
//  - A Megatron-LM log states its run; for NeMo and torchtitan logs the run is given here (--model and the
//    layout flags), the same for every log of the command.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/build_info.hpp"
#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/model_spec.hpp"
#include "common/precision.hpp"
#include "common/store_meta.hpp"
#include "common/training_techniques.hpp"
#include "formats/log_import.hpp"
#include "formats/user_input.hpp"
#include "launcher/commands.hpp"
#include "launcher/predict_options.hpp"
#include "validate/duration_text.hpp"

namespace itertime::launcher {

namespace {

struct ImportArgs {
  std::vector<std::string> logs;
  std::string output;
  std::string format = "auto";
  // The run of a NeMo or torchtitan log (a Megatron-LM log states its own): a configuration file, or
  // --model and the layout flags.
  std::string config_file;
  std::string model_file;
  int dp = 1, tp = 1, pp = 1, cp = 1, vp = 1, micro_batch = 1, global_batch = 0, seq_len = 0;
  std::string precision = "amp-bf16";
  std::string recipe = "plain";
  std::string framework = "megatron-te";
  std::string fp8_recipe = "delayed";
  bool tp_comm_overlap = false, fp8_param_gather = false;
};

// The run given on the command line, when --model is (else none: the logs must state theirs).
std::optional<formats::UserRun> given_run(const ImportArgs& a, const std::vector<std::string>& layout_flags) {
  if (!a.config_file.empty()) {  // NeMo 2 / Megatron-Bridge YAML, torchtitan TOML, Megatron-LM arguments (formats/user_input.hpp)
    if (!a.model_file.empty()) throw UserError("--config and --model: give one (the configuration names the model)");
    for (const std::string& flag : layout_flags) {
      if (flag != "--dp")
        throw UserError(flag + " beside --config: the configuration states the run (only --dp, when it does not)");
    }
    formats::UserRun run = formats::read_user_run(a.config_file);
    if (!run.data_parallel_given) {
      if (layout_flags.empty()) throw UserError(a.config_file + ": states no data-parallel size; give --dp N");
      run = formats::with_data_parallel(run, a.dp, "--dp " + std::to_string(a.dp));
    } else if (!layout_flags.empty()) {
      throw UserError("--dp beside --config: " + a.config_file + " states its data-parallel size");
    }
    return run;
  }
  if (a.model_file.empty()) {
    if (!layout_flags.empty()) throw UserError(layout_flags.front() + " describes a run: give --model with it");
    return std::nullopt;
  }
  formats::UserRun run;
  run.source = "command line";
  run.model = load_llama_config(a.model_file);
  if (a.seq_len <= 0) throw UserError("--seq: the run's sequence length is needed with --model");
  if (a.global_batch <= 0) throw UserError("--gbs: the run's global batch is needed with --model");
  run.config = ParallelConfig{a.dp, a.tp, a.pp, a.micro_batch, a.global_batch, a.seq_len};
  run.config.cp = a.cp;
  run.config.vp = a.vp;
  run.config.require_valid(run.model, 0);
  run.framework = predict::framework::parse_framework(a.framework);
  run.recipe.precision = parse_precision(a.precision).name;
  run.recipe.techniques = parse_recipe_option(a.recipe, "--recipe");
  run.recipe.fp8_recipe = predict::framework::parse_fp8_recipe(a.fp8_recipe);
  run.recipe.tp_comm_overlap = a.tp_comm_overlap;
  run.recipe.fp8_param_gather = a.fp8_param_gather;
  if (a.fp8_param_gather && run.recipe.precision != PrecisionName::kFp8)
    throw UserError("--fp8-param-gather needs --precision fp8");
  return run;
}

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

int run_import(const ImportArgs& a, const std::vector<std::string>& layout_flags, const Context& context) {
  const formats::LogFormat format = formats::parse_log_format(a.format);
  const std::optional<formats::UserRun> given = given_run(a, layout_flags);
  std::vector<formats::LogImport> imports;
  std::set<std::string> keys;
  for (const std::string& path : a.logs) {
    imports.push_back(formats::import_log(formats::read_log(path), format, given));
    const std::string key = imports.back().key();
    if (!keys.insert(key).second) throw UserError(path + ": the same run as another log of this command (" + key + ")");
  }
  const bool exists = std::filesystem::exists(a.output);
  if (exists) {  // refuse what append would refuse, before the file is opened for writing
    h5::Store store = h5::Store::open(a.output, false);
    for (const store::GroundTruthRow& row : store::read_every_groundtruth_row(store)) {
      const std::string key = h5::get_string(row.key);
      if (keys.count(key) != 0) {
        throw UserError(a.output + ": already holds ground truth " + key + " (the same log imported before?); nothing written");
      }
    }
    if (store.schema_version() != h5::kSchemaVersion) {
      throw UserError(a.output + ": written with itertime schema version " + std::to_string(store.schema_version()) +
                      "; ground truth is imported into a file of version " + std::to_string(h5::kSchemaVersion) + " only");
    }
  }
  const std::string utc = utc_timestamp();
  {
    h5::Store store = exists ? h5::Store::open(a.output, true)
                             : h5::Store::create(a.output, false,
                                                 {{store::meta_key::kItertimeVersion, build_info().itertime_version},
                                                  {store::meta_key::kGitRevision, build_info().git_revision},
                                                  {store::meta_key::kCreatedUtc, utc},
                                                  {store::meta_key::kArgv, context.command_line}});
    const h5::Store::Transaction together(store);
    for (const formats::LogImport& im : imports) {
      store::append_imported_groundtruth(store, formats::import_row(im, utc), formats::groundtruth_row(im, utc),
                                         im.measurement.steady_us);
    }
  }
  for (const formats::LogImport& im : imports) print_import(im);
  std::printf(
      "# %zu log(s) into %s /groundtruth (imported); score them with `itertime validate %s --framework megatron-te "
      "--hardware NAME`\n",
      imports.size(), a.output.c_str(), a.output.c_str());
  return 0;
}

}  // namespace

void register_import(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* cmd = app.add_subcommand(
      "import", "Import users' training logs (Megatron-LM, NeMo 2, torchtitan) as ground truth into a calibration file");
  auto a = std::make_shared<ImportArgs>();
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
    return run_import(*a, given, context);
  });
}

}  // namespace itertime::launcher
