// log_import.cpp: see the header.
#include "formats/log_import.hpp"

#include <cmath>
#include <limits>

#include "common/job.hpp"
#include "common/training_techniques.hpp"
#include "formats/megatron_arguments.hpp"
#include "formats/megatron_log.hpp"
#include "formats/nemo_log.hpp"
#include "formats/torchtitan_log.hpp"

namespace itertime::formats {

LogFormat parse_log_format(const std::string& text) {
  if (text == "auto") return LogFormat::kAuto;
  if (text == "megatron") return LogFormat::kMegatron;
  if (text == "nemo") return LogFormat::kNemo;
  if (text == "torchtitan") return LogFormat::kTorchtitan;
  throw UserError("--format " + text + ": use auto, megatron, nemo or torchtitan");
}

std::string to_string(LogFormat format) {
  switch (format) {
    case LogFormat::kAuto: return "auto";
    case LogFormat::kMegatron: return "megatron-log";
    case LogFormat::kNemo: return "nemo-log";
    case LogFormat::kTorchtitan: return "torchtitan-log";
  }
  throw InternalError("unknown log format", __FILE__, __LINE__);
}

LogFormat detect_log_format(const LogText& log) {
  // NeMo first: a NeMo log may also hold Megatron-Core's own lines, never the reverse.
  if (is_nemo_log(log)) return LogFormat::kNemo;
  if (is_megatron_log(log)) return LogFormat::kMegatron;
  if (is_torchtitan_log(log)) return LogFormat::kTorchtitan;
  throw UserError(log.source +
                  ": not a training log itertime reads (no Megatron-LM 'elapsed time per iteration (ms)', NeMo "
                  "'train_step_timing in s' or torchtitan 'step: N ... tps:' line); --format names one");
}

std::string LogImport::key() const {
  JobConfig config;
  config.parallel = run.config;
  config.precision = run.recipe.precision;
  config.techniques = run.recipe.techniques;
  const std::string prefix = "log-" + sha256.substr(0, 12) + ":";
  std::string key = prefix + config.key(run.model.name);
  if (key.size() > 95) {  // the key column holds 95 characters: shorten the model's name, keep the layout
    const std::size_t over = key.size() - 95;
    const std::string name = run.model.name.size() > over ? run.model.name.substr(0, run.model.name.size() - over) : "";
    key = prefix + config.key(name);
  }
  return key;
}

LogImport import_log(const LogText& log, LogFormat format, const std::optional<UserRun>& given) {
  LogImport out;
  out.log_name = log.source;
  out.sha256 = sha256_hex(log.bytes);
  out.format = format == LogFormat::kAuto ? detect_log_format(log) : format;
  std::vector<LogInterval> intervals;
  switch (out.format) {
    case LogFormat::kMegatron: {
      // A run given: a Megatron-Bridge log (no arguments block; its configuration is a YAML file).
      const MegatronLog parsed = parse_megatron_log(log, /*arguments_required=*/!given);
      if (given) {
        if (!parsed.arguments.line_of.empty()) {
          throw UserError(log.source +
                          ": a Megatron-LM log states its run in its arguments block; give no layout, model or "
                          "precision beside it");
        }
        out.run = *given;
        intervals = parsed.intervals;
        break;
      }
      out.run = user_run_from_megatron(parsed.arguments);
      // The model is named by the log it came from (its file name without folder and suffix), not its path.
      const std::size_t slash = log.source.find_last_of('/');
      const std::string file = log.source.substr(slash == std::string::npos ? 0 : slash + 1);
      if (out.run.model.name == log.source)
        out.run.model.name = file.substr(0, file.rfind(".log") == std::string::npos ? file.size() : file.rfind(".log"));
      intervals = parsed.intervals;
      break;
    }
    case LogFormat::kNemo:
    case LogFormat::kTorchtitan: {
      // Parse first: a malformed log is refused before the missing layout is.
      std::vector<TorchtitanStep> steps;
      if (out.format == LogFormat::kNemo) {
        intervals = parse_nemo_log(log);
      } else {
        steps = parse_torchtitan_log(log);
      }
      if (!given) {
        throw UserError(
            log.source + ": a " + std::string(out.format == LogFormat::kNemo ? "NeMo" : "torchtitan") +
            " log does not state its layout: give the run's --config FILE, or --model and the layout flags (--dp --tp --pp "
            "--mbs --gbs --seq, --precision, --recipe)");
      }
      out.run = *given;
      if (out.format == LogFormat::kTorchtitan) {
        const ParallelConfig& c = out.run.config;
        intervals = torchtitan_intervals(steps, static_cast<int64_t>(c.global_batch) * c.seq_len, c.world_size());
      }
      break;
    }
    case LogFormat::kAuto: throw InternalError("log format not resolved", __FILE__, __LINE__);
  }
  out.run.source = log.source;
  out.run.format = to_string(out.format);
  out.measurement = settle(log.source, intervals);
  out.first_steady_line = intervals[out.measurement.intervals_warmup].line;
  out.last_line = intervals.back().line;
  return out;
}

store::GroundTruthRow groundtruth_row(const LogImport& imported, const std::string& utc) {
  const ParallelConfig& p = imported.run.config;
  const LogMeasurement& m = imported.measurement;
  store::GroundTruthRow row = store::configuration_row(imported.key(), imported.run.model.name, p, imported.run.recipe.precision,
                                                       imported.run.recipe.techniques);
  h5::set_string(row.backend, store::kImportedBackend);
  h5::set_string(row.status, "ok");
  row.warmup_iters = m.warmup_iters;
  row.timed_iters = m.timed_iters;
  row.time_us_min = m.time_us_min;
  row.time_us_median = m.time_us_median;
  row.time_us_mean = m.time_us_mean;
  row.time_us_p90 = m.time_us_p90;
  row.time_us_max = m.time_us_max;
  row.time_cv = m.time_cv;
  row.tokens_per_s = static_cast<double>(p.global_batch) * p.seq_len / (m.time_us_median * 1e-6);
  row.loss_first = std::numeric_limits<double>::quiet_NaN();
  row.loss_last = std::numeric_limits<double>::quiet_NaN();
  h5::set_string(row.measured_utc, utc);
  row.rounds_run = static_cast<int64_t>(m.intervals_total);
  row.rounds_counted = static_cast<int64_t>(m.steady_us.size());
  row.round_spread_pct = m.spread_pct;
  return row;
}

store::GroundTruthImportRow import_row(const LogImport& imported, const std::string& utc) {
  store::GroundTruthImportRow row{};
  const LlamaSpec& model = imported.run.model;
  const predict::framework::FrameworkRecipe& recipe = imported.run.recipe;
  h5::set_string(row.key, imported.key());
  // The name as given; a path too long for the column keeps its file name.
  const std::string& name = imported.log_name;
  h5::set_string(row.log_name, name.size() < sizeof(row.log_name) ? name : name.substr(name.find_last_of('/') + 1));
  h5::set_string(row.log_sha256, imported.sha256);
  h5::set_string(row.format, to_string(imported.format));
  h5::set_string(row.framework, predict::framework::to_string(imported.run.framework));
  row.hidden_size = model.hidden_size;
  row.intermediate_size = model.intermediate_size;
  row.num_layers = model.num_layers;
  row.num_heads = model.num_heads;
  row.num_kv_heads = model.num_kv_heads;
  row.head_dim = model.head_dim;
  row.vocab_size = model.vocab_size;
  row.tie_word_embeddings = model.tie_word_embeddings ? 1 : 0;
  h5::set_string(row.fp8_recipe, predict::framework::to_string(recipe.fp8_recipe));
  row.tp_comm_overlap = recipe.tp_comm_overlap ? 1 : 0;
  row.fp8_param_gather = recipe.fp8_param_gather ? 1 : 0;
  row.intervals_total = static_cast<int64_t>(imported.measurement.intervals_total);
  row.intervals_warmup = static_cast<int64_t>(imported.measurement.intervals_warmup);
  row.first_steady_line = static_cast<int64_t>(imported.first_steady_line);
  row.last_line = static_cast<int64_t>(imported.last_line);
  h5::set_string(row.imported_utc, utc);
  return row;
}

}  // namespace itertime::formats
