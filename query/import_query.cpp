// import_query.cpp: see the header.
#include "query/import_query.hpp"

#include <filesystem>
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
#include "formats/user_input.hpp"
#include "query/query_options.hpp"

namespace itertime::query {
namespace {

using ImportArgs = ImportRequest;

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

}  // namespace

const std::vector<std::string> kLayoutFlags = {"--dp",
                                               "--tp",
                                               "--pp",
                                               "--cp",
                                               "--vp",
                                               "--mbs",
                                               "--gbs",
                                               "--seq",
                                               "--precision",
                                               "--recipe",
                                               "--framework",
                                               "--fp8-recipe",
                                               "--tp-comm-overlap",
                                               "--fp8-param-gather"};

std::vector<formats::LogImport> import_logs(const ImportRequest& a) {
  std::vector<std::string> layout_flags;
  for (const std::string& flag : kLayoutFlags) {
    if (a.given.count(flag) != 0) layout_flags.push_back(flag);
  }
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
                                                  {store::meta_key::kArgv, a.command_line}});
    const h5::Store::Transaction together(store);
    for (const formats::LogImport& im : imports) {
      store::append_imported_groundtruth(store, formats::import_row(im, utc), formats::groundtruth_row(im, utc),
                                         im.measurement.steady_us);
    }
  }
  return imports;
}

nlohmann::json import_json(const formats::LogImport& im) {
  const formats::LogMeasurement& m = im.measurement;
  const formats::UserRun& run = im.run;
  return {{"log", im.log_name},
          {"format", formats::to_string(im.format)},
          {"sha256", im.sha256},
          {"key", im.key()},
          {"run",
           {{"model", run.model.name},
            {"layout", run.config.to_string()},
            {"precision", to_string(run.recipe.precision)},
            {"recipe", recipe_label(run.recipe.techniques)},
            {"framework", predict::framework::to_string(run.framework)}}},
          {"timing",
           {{"lines", m.intervals_total},
            {"warmup_lines", m.intervals_warmup},
            {"warmup_iterations", m.warmup_iters},
            {"steady_lines", m.steady_us.size()},
            {"first_steady_line", im.first_steady_line},
            {"last_line", im.last_line},
            {"timed_iterations", m.timed_iters}}},
          {"iteration_us", {{"median", m.time_us_median}, {"min", m.time_us_min}, {"max", m.time_us_max}}},
          {"floor_pct", m.spread_pct},
          {"assumed", run.assumed},
          {"not_used", run.not_understood}};
}

}  // namespace itertime::query
