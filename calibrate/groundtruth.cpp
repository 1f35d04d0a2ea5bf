// groundtruth.cpp: calibrate groundtruth: every job configuration trained and timed on its ranks, one row each (groundtruth.hpp).
#include "calibrate/groundtruth.hpp"

#include <c10/util/Exception.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <memory>
#include <set>
#include <thread>

#include <unistd.h>

#include "common/groundtruth_store.hpp"
#include "calibrate/recipe_stamp.hpp"
#include "calibrate/tensor_memory.hpp"
#include "calibrate/trainer.hpp"
#include "common/build_info.hpp"
#include "common/errors.hpp"
#include "common/timing_row.hpp"
#include "common/h5store.hpp"
#include "common/interruption_journal.hpp"
#include "common/measurement_rounds.hpp"
#include "common/reference_store.hpp"
#include "runtime/job_abort.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/outside_load_probe.hpp"
#include "runtime/resume_plan.hpp"
#include "runtime/speed_reference.hpp"
#include "common/stats.hpp"
#include "common/store_meta.hpp"

namespace itertime::calibrate {
using namespace itertime::store;

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kInFlightAttribute = store::meta_key::kGroundTruthInFlight;

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
  GroundTruthRow row =
      configuration_row(config.key(job.model.name), job.model.name, config.parallel, config.precision, config.techniques);
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
  options.techniques = config.techniques;
  return options;
}

// What rank 0 keeps of one round of one configuration, beside its RoundMeasurement.
struct MeasuredRound {
  int64_t round = 0, position = 0;            // which round of the run, and its place in that round
  std::vector<double> samples_us;             // its timed steps
  std::vector<GroundTruthRankRow> rank_rows;  // its per-rank breakdown
};

// One configuration's measurement across rounds. Every rank keeps whether it runs; rank 0 keeps the rest.
struct ConfigProgress {
  std::size_t index = 0;  // in the job
  std::string key;
  std::string skip_reason;               // why it does not run ("" when it does)
  bool failed = false;                   // the previous run died measuring it
  int interruptions = 0;                 // rank 0: times in a row a signal ended a run while it was in flight (journaled)
  std::string oom;                       // rank 0: what ran out of memory ("" unless it did; then it gets no more rounds)
  std::vector<RoundMeasurement> rounds;  // what assess_rounds judges, one per round measured
  std::vector<MeasuredRound> measured;   // the rest of each round, in the same order
  double loss_first = 0, loss_last = 0;  // of its first round
  RoundsAssessment assessment;
};

// One ground-truth run in progress: what every configuration reads, and the summary it fills.
struct GroundTruthRun {
  explicit GroundTruthRun(const GroundTruthOptions& run_options) : options(run_options) {}
  const GroundTruthOptions& options;
  int world_rank = 0;
  int world_size = 1;
  ResumePlan plan;
  std::string in_flight;                   // rank 0: the configuration the previous run died measuring ("" if none)
  std::string in_flight_reason;            // rank 0: why it is recorded failed
  std::string interrupted;                 // rank 0: the configuration a signal interrupted, measured again ("" if none)
  int interrupted_count = 0;               // rank 0: its interruptions in a row so far
  std::size_t retried = 0;                 // rank 0: failed configurations measured again (--retry-failed)
  InterruptionJournal* journal = nullptr;  // rank 0: the interruption journal (null elsewhere)
  double hold_in_flight_s = 0;             // rank 0: the test hook's hold (ITERTIME_TEST_HOLD_IN_FLIGHT_S), once
  GroundTruthSummary summary;
  SpeedReference reference;                        // timed by a configuration's ranks after each of its rounds
  std::vector<ReferenceSample> pending_reference;  // rank 0: those samples, recorded with the next round's
  int key_width = 34;  // of the key column in the printed tables: the job's longest key (recipes make them long)
};

void print_start(const GroundTruthRun& run, std::size_t measuring) {
  const Job& job = run.options.job;
  const RoundPolicy& policy = job.rounds;
  std::printf("# itertime calibrate groundtruth: job %s, model %s, %zu configurations on up to %d ranks (backend %s)\n",
              job.name.c_str(), job.model.name.c_str(), job.configs.size(), run.world_size, to_string(job.backend).c_str());
  std::printf(
      "# %zu to measure in %d interleaved rounds (up to %d more for a disturbed one: outside load above %.2f cores, "
      "or a round more than %.0f%% from the others)\n",
      measuring, policy.rounds, policy.max_extra_rounds, policy.outside_load_cores, policy.disagreement_pct);
  std::printf(
      "# per round: %d warm-up + at least %d timed iterations (and %.1f s); iteration time = barrier to the end "
      "of the slowest rank (with opg: from the previous iteration's end, its all-gathers started, to this one's)\n",
      job.warmup_iters, job.timed_iters, job.min_timed_seconds);
  if (run.summary.configs_present) {
    std::printf("# %zu configurations already in %s (resuming)\n", run.summary.configs_present, run.options.output_path.c_str());
  }
  if (run.retried) std::printf("# %zu recorded failed, measured again (--retry-failed)\n", run.retried);
  if (!run.interrupted.empty() && run.interrupted_count > 0) {
    std::printf("# %s was in flight when the previous run was interrupted (%d in a row): measured again\n",
                run.interrupted.c_str(), run.interrupted_count);
  } else if (!run.interrupted.empty()) {
    std::printf("# %s was in flight when the previous run ended: measured again (--retry-failed)\n", run.interrupted.c_str());
  }
  std::printf("#\n# %-5s %-7s %-*s %14s %9s %9s  %s\n", "round", "config", run.key_width, "key", "time_us(med)", "load", "steal",
              "verdict so far");
  std::fflush(stdout);
}

// Decides, identically on every rank, whether the configuration can run (sets skip_reason and failed).
void decide_whether_it_runs(const GroundTruthRun& run, const JobConfig& config, ConfigProgress& progress) {
  std::string skip_reason;
  if (run.world_rank == 0 && !run.in_flight.empty() && run.in_flight == progress.key) {
    skip_reason = run.in_flight_reason;
  }
  progress.skip_reason = broadcast_string(skip_reason, MPI_COMM_WORLD);
  progress.failed = !progress.skip_reason.empty();
  if (progress.failed) return;
  const int needed = config.parallel.world_size();
  if (needed > run.world_size) {
    progress.skip_reason = "needs " + std::to_string(needed) + " ranks, the job runs on " + std::to_string(run.world_size);
    return;
  }
  try {
    check_trainable(trainer_options_for(run.options.job, config), needed);
  } catch (const UserError& error) {
    progress.skip_reason = error.what();
  }
}

// What one rank of a configuration measured in one round.
struct RankTraining {
  std::vector<double> samples_us;                  // per timed step: the step's time (max over ranks)
  std::vector<std::vector<double>> phase_samples;  // per phase (kStepTimingCount), per timed step
  double loss_first = 0.0;
  double loss_last = 0.0;
  int64_t local_params = 0;
  int64_t peak_tensor_bytes = 0;
  int64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;  // the allocator's totals at their largest
  OutsideLoad outside_load;                                   // during the timed steps
};

// How long the ranks of an aborted configuration wait for each other to stop training. A rank that does
// not come is blocked in a collective that cannot be abandoned (an MPI collective on CPU ranks); the job
// then ends, as any internal failure does.
constexpr std::chrono::seconds kSettleTimeout{60};

// Whether `error` is an allocation that did not fit: CUDA's caching allocator throws
// c10::OutOfMemoryError; the CPU allocator a c10::Error saying it "can't allocate memory".
bool is_out_of_memory(const c10::Error& error) {
  return dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr ||
         std::string(error.what()).find("can't allocate memory") != std::string::npos;
}

// The first line of an error's text, shortened to fit the reason column.
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 180 ? line.substr(0, 177) + "..." : line;
}

// A configuration that ended on every rank of its job because one of them ran out of memory.
struct ConfigurationAborted {
  std::string reason;  // "out of memory on rank R of N: <the allocator's words>"
};

// Trains the configuration on `job_comm`: warm-up steps, then timed steps, with the outside load probed
// around the timed ones. A rank that runs out of memory raises `abort`; every rank of the job then stops
// training, abandons its communication, waits for the others (settle) and throws ConfigurationAborted.
RankTraining train_and_time(const Job& job, const JobConfig& config, MPI_Comm job_comm, JobAbort& abort) {
  RankTraining training;
  training.phase_samples.resize(kStepTimingCount);
  OutsideLoadProbe probe(job_comm);
  TensorMemoryProbe tensor_memory;  // from before the weights exist to after the last step
  std::optional<Trainer> trainer;   // destroyed after settle(): it keeps the buffers of unmatched sends
  try {
    trainer.emplace(trainer_options_for(job, config), job_comm, &abort);
    training.local_params = trainer->local_parameter_count();
    // Timed steps: at least timed_iters, then more until min_timed_seconds were timed. Every rank takes
    // the same decision: a step's time_us is the max over ranks, known to all of them.
    double timed_us = 0;
    for (int step = 0;; ++step) {
      const int timed = step - job.warmup_iters;
      const bool enough = timed >= job.timed_iters && (timed_us >= job.min_timed_seconds * 1e6 || timed >= kMaxTimedIters);
      if (enough) break;
      if (timed == 0) probe.start();
      const StepResult result = trainer->step(step);
      if (step == 0) training.loss_first = result.loss;
      training.loss_last = result.loss;
      if (step < job.warmup_iters) continue;
      training.samples_us.push_back(result.time_us);
      timed_us += result.time_us;
      const PhaseTimes& ph = result.phases;
      const double values[kStepTimingCount] = {ph.forward_us, ph.backward_us,  ph.tp_comm_us, ph.pp_comm_us,
                                               ph.dp_comm_us, ph.optimizer_us, ph.total_us};
      for (int k = 0; k < kStepTimingCount; ++k) training.phase_samples[static_cast<std::size_t>(k)].push_back(values[k]);
    }
    training.outside_load = probe.stop();
    training.peak_tensor_bytes = tensor_memory.peak_bytes();
    training.peak_allocated_bytes = tensor_memory.allocator_peak_allocated_bytes();
    training.peak_reserved_bytes = tensor_memory.allocator_peak_reserved_bytes();
    return training;
  } catch (const c10::Error& error) {
    if (!is_out_of_memory(error)) throw;
    int rank = 0, size = 1;
    MPI_Comm_rank(job_comm, &rank);
    MPI_Comm_size(job_comm, &size);
    abort.raise(first_line("out of memory on rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " +
                           error.what_without_backtrace()));
  } catch (const JobAborted&) {
    // another rank raised: stop here too
  }
  if (trainer) trainer->abandon();
  if (!abort.settle(kSettleTimeout)) {
    throw InternalError("configuration " + config.key(job.model.name) + " ended (" + abort.reason() +
                            ") but a rank of it did not stop training within " + std::to_string(kSettleTimeout.count()) +
                            " s: it is blocked in a collective that cannot be abandoned; the job ends, and --resume "
                            "records the configuration as failed",
                        __FILE__, __LINE__);
  }
  throw ConfigurationAborted{abort.reason()};
}

// Per-rank breakdown (medians) gathered to rank 0 of `job_comm` (collective over it); empty elsewhere.
std::vector<GroundTruthRankRow> gather_rank_rows(const RankTraining& training, const JobConfig& config, const std::string& key,
                                                 MPI_Comm job_comm, int world_rank) {
  const int needed = config.parallel.world_size();
  const RankLayout layout(config.parallel.dp, config.parallel.tp, config.parallel.pp, config.parallel.cp);
  // phases, peak RSS, local parameters, peak tensor bytes, the allocator's peak allocated and reserved
  constexpr int kValues = kStepTimingCount + 5;
  double local[kValues];
  for (int k = 0; k < kStepTimingCount; ++k) local[k] = stats::median(training.phase_samples[static_cast<std::size_t>(k)]);
  local[kStepTimingCount] = static_cast<double>(peak_rss_bytes());
  local[kStepTimingCount + 1] = static_cast<double>(training.local_params);
  local[kStepTimingCount + 2] = static_cast<double>(training.peak_tensor_bytes);
  local[kStepTimingCount + 3] = static_cast<double>(training.peak_allocated_bytes);
  local[kStepTimingCount + 4] = static_cast<double>(training.peak_reserved_bytes);
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
    rank_row.peak_allocated_bytes = static_cast<int64_t>(v[10]);
    rank_row.peak_reserved_bytes = static_cast<int64_t>(v[11]);
    rows.push_back(rank_row);
  }
  return rows;
}

// One round of one configuration: trained on world ranks 0..N-1 while the others wait quietly
// (collective over MPI_COMM_WORLD); rank 0 marks it in flight first, and adds the round to `progress`.
// A configuration in which a rank runs out of memory is recorded as such (progress.oom), on any number
// of ranks, and the job goes on (train_and_time).
void measure_round(GroundTruthRun& run, const JobConfig& config, ConfigProgress& progress, int round, int position) {
  const int needed = config.parallel.world_size();
  if (run.world_rank == 0) {
    // The journal first: while it is rewritten the attribute does not name this key (interruption_journal.hpp).
    if (run.journal) run.journal->begin(progress.key, progress.interruptions);
    run.plan.store->set_meta(kInFlightAttribute, progress.key);
    if (run.hold_in_flight_s > 0) {  // test hook (groundtruth.hpp)
      std::fprintf(stderr, "itertime: test hook: holding %s in flight for %.0f s (pid %d)\n", progress.key.c_str(),
                   run.hold_in_flight_s, static_cast<int>(::getpid()));
      std::this_thread::sleep_for(std::chrono::duration<double>(run.hold_in_flight_s));
      run.hold_in_flight_s = 0;
    }
  }
  MPI_Comm job_comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, run.world_rank < needed ? 0 : MPI_UNDEFINED, run.world_rank, &job_comm);
  if (job_comm != MPI_COMM_NULL) {
    MpiComm owned(job_comm, true);
    JobAbort abort(owned.get());  // the configuration's abort channel (runtime/job_abort.hpp)
    reset_peak_rss();
    std::optional<RankTraining> training;
    try {
      training = train_and_time(run.options.job, config, owned.get(), abort);
    } catch (const ConfigurationAborted& aborted) {
      progress.oom = aborted.reason;  // known on every rank of the job; world rank 0 records it
    }
    if (training) {
      std::vector<GroundTruthRankRow> rank_rows = gather_rank_rows(*training, config, progress.key, owned.get(), run.world_rank);
      if (run.world_rank == 0) {
        if (progress.rounds.empty()) {
          progress.loss_first = training->loss_first;
          progress.loss_last = training->loss_last;
        }
        progress.rounds.push_back(RoundMeasurement{stats::median(training->samples_us), training->outside_load.outside_cores,
                                                   training->outside_load.steal_cores});
        progress.measured.push_back(MeasuredRound{round, position, training->samples_us, std::move(rank_rows)});
      }
      // The machine's state right after this configuration's timed steps, at its occupancy.
      const ReferenceSample sample = run.reference.measure(owned.get(), ReferenceStage::kGroundTruth, round);
      if (run.world_rank == 0) run.pending_reference.push_back(sample);
    }
  }
  quiet_barrier(MPI_COMM_WORLD);
  if (run.world_rank != 0) return;
  run.plan.store->set_meta(kInFlightAttribute, std::string());
  progress.interruptions = 0;  // it came through a round
  const std::size_t total = run.options.job.configs.size();
  if (!progress.oom.empty()) {
    progress.assessment.wants_another_round = false;
    std::printf("  %5d %3zu/%-3zu %-*s %14s %9s %9s  %s\n", round, progress.index + 1, total, run.key_width, progress.key.c_str(),
                "-", "-", "-", progress.oom.c_str());
    std::fflush(stdout);
    return;
  }
  progress.assessment = assess_rounds(progress.rounds, run.options.job.rounds);
  const RoundMeasurement& last = progress.rounds.back();
  const RoundsAssessment& a = progress.assessment;
  std::printf("  %5d %3zu/%-3zu %-*s %14.0f %9.2f %9.2f  %s, %d of %zu counted\n", round, progress.index + 1, total,
              run.key_width, progress.key.c_str(), last.time_us_median, last.outside_load_cores, last.steal_cores,
              to_string(a.verdicts.back()).c_str(), a.counted, a.verdicts.size());
  std::fflush(stdout);
}

// Rank 0: the configuration's /groundtruth rows from its rounds.
void fill_measured(const ConfigProgress& progress, const JobConfig& config, GroundTruthRow& row, std::vector<double>& samples_us,
                   std::vector<GroundTruthRoundRow>& round_rows) {
  const RoundsAssessment& a = progress.assessment;
  std::vector<double> used_samples_us;
  for (std::size_t r = 0; r < progress.rounds.size(); ++r) {
    const std::vector<double>& samples = progress.measured[r].samples_us;
    samples_us.insert(samples_us.end(), samples.begin(), samples.end());
    if (a.used[r]) used_samples_us.insert(used_samples_us.end(), samples.begin(), samples.end());
    GroundTruthRoundRow round_row{};
    h5::set_string(round_row.key, progress.key);
    round_row.round = progress.measured[r].round;
    round_row.position = progress.measured[r].position;
    round_row.samples = static_cast<int64_t>(samples.size());
    round_row.time_us_median = progress.rounds[r].time_us_median;
    round_row.outside_load_cores = progress.rounds[r].outside_load_cores;
    round_row.steal_cores = progress.rounds[r].steal_cores;
    h5::set_string(round_row.verdict, to_string(a.verdicts[r]));
    round_rows.push_back(round_row);
  }
  h5::set_string(row.status, "ok");
  row.timed_iters = static_cast<int64_t>(used_samples_us.size());  // as many as the time comes from
  store::set_time_summary(row, stats::summarize(used_samples_us));
  row.time_us_median = a.time_us;  // the median of the used rounds' medians (measurement_rounds.hpp)
  row.tokens_per_s = static_cast<double>(config.parallel.global_batch) * config.parallel.seq_len / (a.time_us * 1e-6);
  row.loss_first = progress.loss_first;
  row.loss_last = progress.loss_last;
  row.rounds_run = static_cast<int64_t>(progress.rounds.size());
  row.rounds_counted = a.counted;
  row.round_spread_pct = a.spread_pct;
  h5::set_string(row.disturbance, a.disturbance);
}

// The per-rank rows of the used round whose median lies nearest the configuration's time.
const std::vector<GroundTruthRankRow>& representative_rank_rows(const ConfigProgress& progress) {
  std::size_t best = 0;
  double best_distance = -1;
  for (std::size_t r = 0; r < progress.rounds.size(); ++r) {
    if (!progress.assessment.used[r]) continue;
    const double distance = std::fabs(progress.rounds[r].time_us_median - progress.assessment.time_us);
    if (best_distance < 0 || distance < best_distance) {
      best = r;
      best_distance = distance;
    }
  }
  return progress.measured[best].rank_rows;
}

// Rank 0: appends the configuration's rows and prints its line in the summary table.
void record_and_print(GroundTruthRun& run, const ConfigProgress& progress) {
  const Job& job = run.options.job;
  const JobConfig& config = job.configs[progress.index];
  GroundTruthRow row = base_row(job, config);
  std::vector<double> samples_us;
  std::vector<GroundTruthRoundRow> round_rows;
  std::vector<GroundTruthRankRow> rank_rows;
  if (!progress.oom.empty()) {
    h5::set_string(row.status, "oom");
    h5::set_string(row.reason, progress.oom);
    row.round_spread_pct = std::numeric_limits<double>::quiet_NaN();
  } else if (progress.skip_reason.empty()) {
    fill_measured(progress, config, row, samples_us, round_rows);
    rank_rows = representative_rank_rows(progress);
  } else {
    h5::set_string(row.status, progress.failed ? "failed" : "skipped");
    h5::set_string(row.reason, progress.skip_reason);
    row.round_spread_pct = std::numeric_limits<double>::quiet_NaN();
  }
  append_groundtruth(*run.plan.store, row, samples_us, rank_rows, round_rows);
  const std::string status = h5::get_string(row.status);
  const std::size_t total = job.configs.size();
  const int needed = config.parallel.world_size();
  if (status == "ok") {
    ++run.summary.configs_ok;
    if (!progress.assessment.disturbance.empty()) ++run.summary.configs_disturbed;
    std::printf("  %3zu/%-3zu %-*s %-9s %6d %14.0f %7.3f %9s %10.0f %10.4f  %s\n", progress.index + 1, total, run.key_width,
                progress.key.c_str(), status.c_str(), needed, row.time_us_median, row.time_cv,
                (std::to_string(row.rounds_counted) + "/" + std::to_string(row.rounds_run)).c_str(), row.tokens_per_s,
                row.loss_last,
                progress.assessment.disturbance.empty() ? "" : ("disturbed: " + progress.assessment.disturbance).c_str());
  } else {
    (status == "oom"      ? run.summary.configs_oom
     : status == "failed" ? run.summary.configs_failed
                          : run.summary.configs_skipped) += 1;
    std::printf("  %3zu/%-3zu %-*s %-9s %6d %14s %7s %9s %10s %10s  %s\n", progress.index + 1, total, run.key_width,
                progress.key.c_str(), status.c_str(), needed, "-", "-", "-", "-", "-", h5::get_string(row.reason).c_str());
  }
  std::fflush(stdout);
}

// Rank 0 decides which configurations get another round; every rank learns it (collective).
std::vector<char> wanting_another_round(const GroundTruthRun& run, const std::vector<ConfigProgress*>& measuring, int round) {
  std::vector<char> wants(measuring.size(), round == 0 ? 1 : 0);
  if (round > 0 && run.world_rank == 0) {
    for (std::size_t i = 0; i < measuring.size(); ++i) wants[i] = measuring[i]->assessment.wants_another_round ? 1 : 0;
  }
  MPI_Bcast(wants.data(), static_cast<int>(wants.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  return wants;
}

// Interleaved rounds over the configurations that run (collective over MPI_COMM_WORLD): every round
// measures, in that round's order, each configuration that still wants a round.
void measure_in_rounds(GroundTruthRun& run, const std::vector<ConfigProgress*>& measuring) {
  const Job& job = run.options.job;
  // The speed reference at every occupancy the configurations use, before each round and after the last.
  std::vector<int> occupancies;
  for (const ConfigProgress* p : measuring) occupancies.push_back(job.configs[p->index].parallel.world_size());
  OccupancyReference reference(occupancies);
  const auto probe = [&](int round) {
    const std::vector<ReferenceSample> samples = reference.measure_all(ReferenceStage::kGroundTruth, round);
    if (run.world_rank != 0 || samples.empty()) return;
    const h5::Store::Transaction together(*run.plan.store);
    record_reference(*run.plan.store, run.pending_reference, "");  // the last round's, after each configuration
    run.pending_reference.clear();
    record_reference(*run.plan.store, samples, round == 0 ? "before round 0" : "after round " + std::to_string(round - 1));
  };
  for (int round = 0;; ++round) {
    const std::vector<char> wants = wanting_another_round(run, measuring, round);
    probe(round);  // nothing when no configuration is measured (no occupancy to probe)
    if (std::none_of(wants.begin(), wants.end(), [](char w) { return w != 0; })) return;
    const std::vector<std::size_t> order = round_order(measuring.size(), round, job.seed);
    int position = 0;
    for (const std::size_t i : order) {
      if (!wants[i]) continue;
      measure_round(run, job.configs[measuring[i]->index], *measuring[i], round, position++);
    }
  }
}

void print_table_header(const GroundTruthRun& run) {
  std::printf("#\n# %-7s %-*s %-9s %6s %14s %7s %9s %10s %10s  %s\n", "config", run.key_width, "key", "status", "ranks",
              "time_us", "cv", "rounds", "tokens/s", "loss", "reason");
}

// Every configuration's key, checked to fit /groundtruth/configs' column (collective: every rank sees the
// same); the console table's key width follows them.
std::vector<std::string> configuration_keys(GroundTruthRun& run) {
  const Job& job = run.options.job;
  std::vector<std::string> config_keys;
  for (const JobConfig& config : job.configs) {
    config_keys.push_back(config.key(job.model.name));
    const std::string& key = config_keys.back();
    // A key the row's column would cut could not be found again by --resume (every rank sees the same).
    if (key.size() >= sizeof(GroundTruthRow::key)) {
      throw CollectiveUserError(job.path + ": configuration key " + key + " has " + std::to_string(key.size()) +
                                " characters; /groundtruth/configs keeps " + std::to_string(sizeof(GroundTruthRow::key) - 1) +
                                ": give the model a shorter name");
    }
    run.key_width = std::max(run.key_width, static_cast<int>(key.size()));
  }
  return config_keys;
}

// The configurations the file does not hold yet, each with whether it runs (or why it is skipped).
std::vector<ConfigProgress> configurations_to_do(GroundTruthRun& run, const std::vector<std::string>& config_keys) {
  const Job& job = run.options.job;
  std::vector<ConfigProgress> progress;
  for (std::size_t index = 0; index < job.configs.size(); ++index) {
    if (run.plan.present[index]) continue;
    ConfigProgress& p = progress.emplace_back();
    p.index = index;
    p.key = config_keys[index];
    if (p.key == run.interrupted) p.interruptions = run.interrupted_count;
    decide_whether_it_runs(run, job.configs[index], p);
  }
  return progress;
}

}  // namespace

GroundTruthSummary calibrate_groundtruth(const GroundTruthOptions& options) {
  const auto started = Clock::now();
  const Job& job = options.job;
  GroundTruthRun run{options};
  MPI_Comm_rank(MPI_COMM_WORLD, &run.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &run.world_size);
  // Where the job's ranks sit (collective): the predictor places each configuration's groups with it.
  const NodeInfo nodes = detect_nodes();
  std::string node_of_rank;
  for (std::size_t r = 0; r < nodes.node_of_rank.size(); ++r)
    node_of_rank += (r ? "," : "") + std::to_string(nodes.node_of_rank[r]);
  if (options.retry_failed && !options.resume) {
    throw CollectiveUserError("--retry-failed measures again what a file already holds: use it with --resume");
  }
  // Rank 0 journals the in-flight configuration for the signal handler (common/interruption_journal.hpp).
  std::optional<InterruptionJournal> journal;
  if (run.world_rank == 0) {
    journal.emplace(interruption_journal_path(options.output_path));
    run.journal = &*journal;
    if (const char* text = std::getenv("ITERTIME_TEST_HOLD_IN_FLIGHT_S")) run.hold_in_flight_s = std::atof(text);
  }

  const std::vector<std::string> config_keys = configuration_keys(run);
  // Present: a key with a row, unless --retry-failed and its newest row is failed.
  const auto present_keys = [&](h5::Store& store) {
    std::set<std::string> keys = existing_groundtruth_keys(store);
    if (!options.retry_failed) return keys;
    const std::set<std::string> planned(config_keys.begin(), config_keys.end());
    for (const GroundTruthRow& row : read_groundtruth_rows(store)) {
      const std::string key = h5::get_string(row.key);
      if (h5::get_string(row.status) == "failed" && planned.count(key) && keys.erase(key)) ++run.retried;
    }
    return keys;
  };
  run.plan = open_resume_plan(StoreTarget{options.output_path, options.force, options.resume, options.provenance}, config_keys,
                              present_keys, [&](h5::Store& store) {
                                const auto meta = store.meta();
                                const auto found = meta.find(kInFlightAttribute);
                                const std::string in_flight = found != meta.end() ? found->second : std::string();
                                const InFlightVerdict verdict = judge_in_flight(
                                    in_flight, read_interruption_journal(run.journal->path()), options.retry_failed);
                                if (verdict.kind == InFlightVerdict::Kind::failed) {
                                  run.in_flight = in_flight;  // recorded failed; the attribute stays until it is
                                  run.in_flight_reason = verdict.reason;
                                } else if (verdict.kind == InFlightVerdict::Kind::pending) {
                                  run.interrupted = in_flight;  // an ordinary pending configuration from now on
                                  run.interrupted_count = verdict.interruptions;
                                  store.set_meta(kInFlightAttribute, std::string());
                                }
                                stamp_recipe(store, resolve_attention_kernel(job.attention));
                                store.set_meta(store::meta_key::kGroundTruthJob, job.path);
                                store.set_meta(store::meta_key::kGroundTruthModel, job.model_path);
                                store.set_meta(store::meta_key::kGroundTruthNodeOfRank, node_of_rank);
                              });
  run.summary.configs_total = job.configs.size();
  run.summary.configs_present = run.plan.present_count();

  std::vector<ConfigProgress> progress = configurations_to_do(run, config_keys);
  std::vector<ConfigProgress*> measuring;
  for (ConfigProgress& p : progress) {
    if (p.skip_reason.empty()) measuring.push_back(&p);
  }
  if (run.world_rank == 0) print_start(run, measuring.size());
  measure_in_rounds(run, measuring);
  if (run.world_rank == 0 && !progress.empty()) {
    print_table_header(run);
    for (const ConfigProgress& p : progress) record_and_print(run, p);
    run.plan.store->set_meta(kInFlightAttribute, std::string());  // a failed one is now recorded
  }
  if (run.journal) run.journal->finish();  // the clean end: nothing is in flight

  GroundTruthSummary& summary = run.summary;
  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  if (run.world_rank == 0) {
    std::printf("#\n# %zu measured, %zu skipped, %zu failed, %zu already present; %.1f s; %zu stayed disturbed\n",
                summary.configs_ok, summary.configs_skipped, summary.configs_failed, summary.configs_present, summary.elapsed_s,
                summary.configs_disturbed);
    if (summary.configs_oom > 0) std::printf("# %zu ran out of memory (status oom)\n", summary.configs_oom);
  }
  return summary;
}

}  // namespace itertime::calibrate
