// groundtruth.cpp: calibrate groundtruth: every job configuration trained and timed on its ranks, one row each (groundtruth.hpp).
#include "calibrate/groundtruth.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include "common/groundtruth_store.hpp"
#include "calibrate/recipe_stamp.hpp"
#include "calibrate/tensor_memory.hpp"
#include "calibrate/trainer.hpp"
#include "common/build_info.hpp"
#include "common/errors.hpp"
#include "common/timing_row.hpp"
#include "common/h5store.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/resume_plan.hpp"
#include "common/stats.hpp"

namespace itertime::calibrate {
using namespace itertime::store;

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kInFlightAttribute = "groundtruth_in_flight";

// Resets the kernel's peak-RSS counter of this process (Linux: writing 5 to clear_refs).
void reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  if (out) out << "5";
}

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

GroundTruthRow base_row(const Job& job, const JobConfig& config) {
  GroundTruthRow row{};
  h5::set_string(row.key, config.key(job.model.name));
  h5::set_string(row.model, job.model.name);
  const ParallelConfig& p = config.parallel;
  row.dp = p.dp;
  row.tp = p.tp;
  row.pp = p.pp;
  row.micro_batch = p.micro_batch;
  row.global_batch = p.global_batch;
  row.seq_len = p.seq_len;
  row.num_micro_batches = (p.dp * p.micro_batch) > 0 ? p.global_batch / (p.dp * p.micro_batch) : 0;
  h5::set_string(row.precision, to_string(config.precision));
  h5::set_string(row.backend, to_string(job.backend));
  row.warmup_iters = job.warmup_iters;
  row.timed_iters = job.timed_iters;
  h5::set_string(row.measured_utc, utc_timestamp());
  return row;
}

// The per-step timings the trainer reports (PhaseTimes): forward, backward, TP, PP and DP communication,
// optimizer and the whole step; not the operator phases of common/phase.hpp.
constexpr int kStepTimingCount = 7;

TrainerOptions trainer_options_for(const Job& job, const JobConfig& config) {
  TrainerOptions options;
  options.model = job.model;
  options.config = config.parallel;
  options.precision = config.precision;
  options.attention = job.attention;
  options.backend = job.backend;
  options.seed = job.seed;
  options.compute_threads = job.compute_threads;
  return options;
}

// One ground-truth run in progress: what every configuration reads, and the summary it fills.
struct GroundTruthRun {
  const GroundTruthOptions& options;
  int world_rank = 0;
  int world_size = 1;
  ResumePlan plan;
  std::string in_flight;  // rank 0: the configuration the previous run died measuring ("" if none)
  GroundTruthSummary summary;
};

// A configuration's result: its row and, when it ran, its samples and per-rank rows (rank 0).
struct ConfigOutcome {
  GroundTruthRow row;
  std::string skip_reason;  // why it did not run ("" when it ran)
  bool failed = false;      // the previous run died measuring it
  std::vector<double> samples_us;
  std::vector<GroundTruthRankRow> rank_rows;
};

void print_start(const GroundTruthRun& run) {
  const Job& job = run.options.job;
  std::printf("# itertime calibrate groundtruth: job %s, model %s, %zu configurations on up to %d ranks (backend %s)\n",
              job.name.c_str(), job.model.name.c_str(), job.configs.size(), run.world_size, to_string(job.backend).c_str());
  std::printf("# %d warm-up + %d timed iterations each; iteration time = barrier to the end of the slowest rank\n",
              job.warmup_iters, job.timed_iters);
  if (run.summary.configs_present) {
    std::printf("# %zu configurations already in %s (resuming)\n", run.summary.configs_present,
                run.options.output_path.c_str());
  }
  std::printf("#\n# %-7s %-34s %-9s %8s %14s %14s %7s %10s %10s  %s\n", "config", "key", "status", "ranks", "time_us(med)",
              "time_us(min)", "cv", "tokens/s", "loss", "reason");
  std::fflush(stdout);
}

// Decides, identically on every rank, whether the configuration can run (sets skip_reason and failed).
void decide_whether_it_runs(const GroundTruthRun& run, const JobConfig& config, const std::string& key,
                            ConfigOutcome& outcome) {
  std::string skip_reason;
  if (run.world_rank == 0 && !run.in_flight.empty() && run.in_flight == key) {
    skip_reason = "failed: the previous run died while measuring this configuration (out of memory or a crash); see its log";
  }
  outcome.skip_reason = broadcast_string(skip_reason, MPI_COMM_WORLD);
  outcome.failed = !outcome.skip_reason.empty();
  if (outcome.failed) return;
  const int needed = config.parallel.world_size();
  if (needed > run.world_size) {
    outcome.skip_reason = "needs " + std::to_string(needed) + " ranks, the job runs on " + std::to_string(run.world_size);
    return;
  }
  try {
    check_trainable(trainer_options_for(run.options.job, config), needed);
  } catch (const UserError& error) {
    outcome.skip_reason = error.what();
  }
}

// What one rank of a configuration measured.
struct RankTraining {
  std::vector<double> samples_us;                  // per timed step: the step's time (max over ranks)
  std::vector<std::vector<double>> phase_samples;  // per phase (kStepTimingCount), per timed step
  double loss_first = 0.0;
  double loss_last = 0.0;
  int64_t local_params = 0;
  int64_t peak_tensor_bytes = 0;
};

// Trains the configuration on `job_comm`: warm-up steps, then timed steps.
RankTraining train_and_time(const Job& job, const JobConfig& config, MPI_Comm job_comm) {
  RankTraining training;
  training.phase_samples.resize(kStepTimingCount);
  TensorMemoryProbe tensor_memory;  // from before the weights exist to after the last step
  Trainer trainer(trainer_options_for(job, config), job_comm);
  training.local_params = trainer.local_parameter_count();
  // Timed steps: at least timed_iters, then more until min_timed_seconds were timed. Every rank takes
  // the same decision: a step's time_us is the max over ranks, known to all of them.
  double timed_us = 0;
  for (int step = 0;; ++step) {
    const int timed = step - job.warmup_iters;
    const bool enough = timed >= job.timed_iters && (timed_us >= job.min_timed_seconds * 1e6 || timed >= kMaxTimedIters);
    if (enough) break;
    const StepResult result = trainer.step(step);
    if (step == 0) training.loss_first = result.loss;
    training.loss_last = result.loss;
    if (step < job.warmup_iters) continue;
    training.samples_us.push_back(result.time_us);
    timed_us += result.time_us;
    const PhaseTimes& ph = result.phases;
    const double values[kStepTimingCount] = {ph.forward_us, ph.backward_us, ph.tp_comm_us, ph.pp_comm_us,
                                        ph.dp_comm_us, ph.optimizer_us, ph.total_us};
    for (int k = 0; k < kStepTimingCount; ++k) training.phase_samples[static_cast<std::size_t>(k)].push_back(values[k]);
  }
  training.peak_tensor_bytes = tensor_memory.peak_bytes();
  return training;
}

// Per-rank breakdown (medians) gathered to rank 0 of `job_comm` (collective over it); empty elsewhere.
std::vector<GroundTruthRankRow> gather_rank_rows(const RankTraining& training, const JobConfig& config,
                                                 const std::string& key, MPI_Comm job_comm, int world_rank) {
  const int needed = config.parallel.world_size();
  const RankLayout layout(config.parallel.dp, config.parallel.tp, config.parallel.pp);
  constexpr int kValues = kStepTimingCount + 3;  // phases, peak RSS, local parameters, peak tensor bytes
  double local[kValues];
  for (int k = 0; k < kStepTimingCount; ++k) local[k] = stats::median(training.phase_samples[static_cast<std::size_t>(k)]);
  local[kStepTimingCount] = static_cast<double>(peak_rss_bytes());
  local[kStepTimingCount + 1] = static_cast<double>(training.local_params);
  local[kStepTimingCount + 2] = static_cast<double>(training.peak_tensor_bytes);
  std::vector<double> all(static_cast<std::size_t>(needed) * kValues);
  MPI_Gather(local, kValues, MPI_DOUBLE, all.data(), kValues, MPI_DOUBLE, 0, job_comm);
  std::vector<GroundTruthRankRow> rows;
  if (world_rank != 0) return rows;
  for (int r = 0; r < needed; ++r) {
    const double* v = &all[static_cast<std::size_t>(r) * kValues];
    const RankCoords c = layout.coords(r);
    GroundTruthRankRow rank_row{};
    h5::set_string(rank_row.key, key);
    rank_row.rank = r;
    rank_row.dp_idx = c.dp_idx;
    rank_row.tp_idx = c.tp_idx;
    rank_row.pp_idx = c.pp_idx;
    rank_row.forward_us = v[0];
    rank_row.backward_us = v[1];
    rank_row.tp_comm_us = v[2];
    rank_row.pp_comm_us = v[3];
    rank_row.dp_comm_us = v[4];
    rank_row.optimizer_us = v[5];
    rank_row.total_us = v[6];
    rank_row.peak_rss_bytes = static_cast<int64_t>(v[7]);
    rank_row.local_params = static_cast<int64_t>(v[8]);
    rank_row.peak_tensor_bytes = static_cast<int64_t>(v[9]);
    rows.push_back(rank_row);
  }
  return rows;
}

void fill_measured_row(GroundTruthRow& row, const RankTraining& training, const JobConfig& config) {
  const stats::Summary s = stats::summarize(training.samples_us);
  h5::set_string(row.status, "ok");
  row.timed_iters = static_cast<int64_t>(training.samples_us.size());  // as many as were timed
  store::set_time_summary(row, s);
  row.tokens_per_s = static_cast<double>(config.parallel.global_batch) * config.parallel.seq_len / (s.median * 1e-6);
  row.loss_first = training.loss_first;
  row.loss_last = training.loss_last;
}

// Trains the configuration on world ranks 0..N-1 while the others wait quietly (collective over
// MPI_COMM_WORLD); rank 0 marks it in flight first, and fills the outcome.
void measure_config(GroundTruthRun& run, const JobConfig& config, const std::string& key, ConfigOutcome& outcome) {
  const int needed = config.parallel.world_size();
  if (run.world_rank == 0) run.plan.store->set_meta(kInFlightAttribute, key);
  MPI_Comm job_comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, run.world_rank < needed ? 0 : MPI_UNDEFINED, run.world_rank, &job_comm);
  if (job_comm != MPI_COMM_NULL) {
    MpiComm owned(job_comm, true);
    reset_peak_rss();
    const RankTraining training = train_and_time(run.options.job, config, owned.get());
    outcome.samples_us = training.samples_us;
    outcome.rank_rows = gather_rank_rows(training, config, key, owned.get(), run.world_rank);
    if (run.world_rank == 0) fill_measured_row(outcome.row, training, config);
  }
  quiet_barrier(MPI_COMM_WORLD);
}

// Rank 0: appends the configuration's rows, clears the in-flight mark, prints its line.
void record_and_print(GroundTruthRun& run, std::size_t index, const std::string& key, int needed,
                      const ConfigOutcome& outcome) {
  const GroundTruthRow& row = outcome.row;
  const std::size_t total = run.options.job.configs.size();
  append_groundtruth(*run.plan.store, row, outcome.samples_us, outcome.rank_rows);
  run.plan.store->set_meta(kInFlightAttribute, std::string());
  const std::string status = h5::get_string(row.status);
  if (status == "ok") {
    ++run.summary.configs_ok;
    std::printf("  %3zu/%-3zu %-34s %-9s %8d %14.0f %14.0f %7.3f %10.0f %10.4f\n", index + 1, total, key.c_str(),
                status.c_str(), needed, row.time_us_median, row.time_us_min, row.time_cv, row.tokens_per_s, row.loss_last);
  } else {
    (status == "failed" ? run.summary.configs_failed : run.summary.configs_skipped) += 1;
    std::printf("  %3zu/%-3zu %-34s %-9s %8d %14s %14s %7s %10s %10s  %s\n", index + 1, total, key.c_str(),
                status.c_str(), needed, "-", "-", "-", "-", "-", outcome.skip_reason.c_str());
  }
  std::fflush(stdout);
}

// One configuration, collective over MPI_COMM_WORLD: skipped (with its reason) or measured, then stored.
void run_config(GroundTruthRun& run, std::size_t index) {
  const Job& job = run.options.job;
  const JobConfig& config = job.configs[index];
  const std::string key = config.key(job.model.name);
  ConfigOutcome outcome;
  outcome.row = base_row(job, config);
  decide_whether_it_runs(run, config, key, outcome);
  if (outcome.skip_reason.empty()) {
    measure_config(run, config, key, outcome);
  } else {
    h5::set_string(outcome.row.status, outcome.failed ? "failed" : "skipped");
    h5::set_string(outcome.row.reason, outcome.skip_reason);
  }
  if (run.world_rank == 0) record_and_print(run, index, key, config.parallel.world_size(), outcome);
}

}  // namespace

GroundTruthSummary calibrate_groundtruth(const GroundTruthOptions& options) {
  const auto started = Clock::now();
  const Job& job = options.job;
  GroundTruthRun run{options, 0, 1, {}, {}, {}};
  MPI_Comm_rank(MPI_COMM_WORLD, &run.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &run.world_size);

  std::vector<std::string> config_keys;
  for (const JobConfig& config : job.configs) config_keys.push_back(config.key(job.model.name));
  run.plan = open_resume_plan(StoreTarget{options.output_path, options.force, options.resume, options.provenance},
                              config_keys, existing_groundtruth_keys, [&](h5::Store& store) {
                                const auto meta = store.meta();
                                const auto found = meta.find(kInFlightAttribute);
                                if (found != meta.end()) run.in_flight = found->second;
                                stamp_recipe(store, resolve_attention_kernel(job.attention));
                                store.set_meta("groundtruth_job", job.path);
                                store.set_meta("groundtruth_model", job.model_path);
                              });
  run.summary.configs_total = job.configs.size();
  run.summary.configs_present = run.plan.present_count();
  if (run.world_rank == 0) print_start(run);

  for (std::size_t index = 0; index < job.configs.size(); ++index) {
    if (!run.plan.present[index]) run_config(run, index);
  }

  GroundTruthSummary& summary = run.summary;
  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  if (run.world_rank == 0) {
    std::printf("#\n# %zu measured, %zu skipped, %zu failed, %zu already present; %.1f s\n", summary.configs_ok,
                summary.configs_skipped, summary.configs_failed, summary.configs_present, summary.elapsed_s);
  }
  return summary;
}

}  // namespace itertime::calibrate
