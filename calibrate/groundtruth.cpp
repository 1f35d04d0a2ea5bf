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
#include "common/h5store.hpp"
#include "common/mpi_session.hpp"
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

constexpr int kPhaseCount = 7;

}  // namespace

GroundTruthSummary calibrate_groundtruth(const GroundTruthOptions& options) {
  const auto started = Clock::now();
  const Job& job = options.job;
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  std::unique_ptr<h5::Store> store;
  std::vector<uint8_t> present(job.configs.size(), 0);
  std::string in_flight;
  on_root_collectively(world_rank, [&] {
    store = std::make_unique<h5::Store>(
        h5::Store::create_or_resume(options.output_path, options.force, options.resume, options.provenance));
    const auto keys = existing_groundtruth_keys(*store);
    for (std::size_t i = 0; i < job.configs.size(); ++i) present[i] = keys.count(job.configs[i].key(job.model.name)) ? 1 : 0;
    const auto meta = store->meta();
    const auto found = meta.find(kInFlightAttribute);
    if (found != meta.end()) in_flight = found->second;
    stamp_recipe(*store, resolve_attention_kernel(job.attention));
    store->set_meta("groundtruth_job", job.path);
    store->set_meta("groundtruth_model", job.model_path);
  });
  MPI_Bcast(present.data(), static_cast<int>(present.size()), MPI_UINT8_T, 0, MPI_COMM_WORLD);

  GroundTruthSummary summary;
  summary.configs_total = job.configs.size();
  summary.configs_present = static_cast<std::size_t>(std::count(present.begin(), present.end(), 1));
  if (world_rank == 0) {
    std::printf("# itertime calibrate groundtruth: job %s, model %s, %zu configurations on up to %d ranks (backend %s)\n",
                job.name.c_str(), job.model.name.c_str(), job.configs.size(), world_size, to_string(job.backend).c_str());
    std::printf("# %d warm-up + %d timed iterations each; iteration time = barrier to the end of the slowest rank\n",
                job.warmup_iters, job.timed_iters);
    if (summary.configs_present) std::printf("# %zu configurations already in %s (resuming)\n", summary.configs_present, options.output_path.c_str());
    std::printf("#\n# %-7s %-34s %-9s %8s %14s %14s %7s %10s %10s  %s\n", "config", "key", "status", "ranks", "time_us(med)",
                "time_us(min)", "cv", "tokens/s", "loss", "reason");
    std::fflush(stdout);
  }

  for (std::size_t index = 0; index < job.configs.size(); ++index) {
    if (present[index]) continue;
    const JobConfig& config = job.configs[index];
    const std::string key = config.key(job.model.name);
    GroundTruthRow row = base_row(job, config);
    const int needed = config.parallel.world_size();

    // Decide, identically on every rank, whether the configuration can run.
    std::string skip_reason;
    if (world_rank == 0 && !in_flight.empty() && in_flight == key) {
      skip_reason = "failed: the previous run died while measuring this configuration (out of memory or a crash); see its log";
    }
    skip_reason = broadcast_string(skip_reason, MPI_COMM_WORLD);
    bool failed = !skip_reason.empty();
    if (!failed) {
      if (needed > world_size) {
        skip_reason = "needs " + std::to_string(needed) + " ranks, the job runs on " + std::to_string(world_size);
      } else {
        TrainerOptions trainer_options;
        trainer_options.model = job.model;
        trainer_options.config = config.parallel;
        trainer_options.precision = config.precision;
        trainer_options.attention = job.attention;
        trainer_options.backend = job.backend;
        try {
          check_trainable(trainer_options, needed);
        } catch (const UserError& error) {
          skip_reason = error.what();
        }
      }
    }

    std::vector<double> samples_us;
    std::vector<GroundTruthRankRow> rank_rows;
    if (skip_reason.empty()) {
      if (world_rank == 0) store->set_meta(kInFlightAttribute, key);
      MPI_Comm job_comm = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, world_rank < needed ? 0 : MPI_UNDEFINED, world_rank, &job_comm);
      if (job_comm != MPI_COMM_NULL) {
        MpiComm owned(job_comm, true);
        TrainerOptions trainer_options;
        trainer_options.model = job.model;
        trainer_options.config = config.parallel;
        trainer_options.precision = config.precision;
        trainer_options.attention = job.attention;
        trainer_options.backend = job.backend;
        trainer_options.seed = job.seed;
        trainer_options.compute_threads = job.compute_threads;
        reset_peak_rss();
        std::vector<std::vector<double>> phase_samples(kPhaseCount);
        double loss_first = 0.0;
        double loss_last = 0.0;
        int64_t local_params = 0;
        int64_t peak_tensor_bytes = 0;
        {
          TensorMemoryProbe tensor_memory;  // from before the weights exist to after the last step
          Trainer trainer(trainer_options, owned.get());
          local_params = trainer.local_parameter_count();
          // Timed steps: at least timed_iters, then more until min_timed_seconds were timed. Every rank
          // takes the same decision: a step's time_us is the max over ranks, known to all of them.
          double timed_us = 0;
          for (int step = 0;; ++step) {
            const int timed = step - job.warmup_iters;
            const bool enough = timed >= job.timed_iters && (timed_us >= job.min_timed_seconds * 1e6 || timed >= kMaxTimedIters);
            if (enough) break;
            const StepResult result = trainer.step(step);
            if (step == 0) loss_first = result.loss;
            loss_last = result.loss;
            if (step < job.warmup_iters) continue;
            samples_us.push_back(result.time_us);
            timed_us += result.time_us;
            const PhaseTimes& ph = result.phases;
            const double values[kPhaseCount] = {ph.forward_us, ph.backward_us, ph.tp_comm_us, ph.pp_comm_us,
                                                ph.dp_comm_us, ph.optimizer_us, ph.total_us};
            for (int k = 0; k < kPhaseCount; ++k) phase_samples[static_cast<std::size_t>(k)].push_back(values[k]);
          }
          peak_tensor_bytes = tensor_memory.peak_bytes();
        }
        // Per-rank breakdown (medians) gathered to rank 0.
        const RankLayout layout(config.parallel.dp, config.parallel.tp, config.parallel.pp);
        const RankCoords coords = layout.coords(world_rank);
        constexpr int kValues = kPhaseCount + 3;  // phases, peak RSS, local parameters, peak tensor bytes
        double local[kValues];
        for (int k = 0; k < kPhaseCount; ++k) local[k] = stats::median(phase_samples[static_cast<std::size_t>(k)]);
        local[kPhaseCount] = static_cast<double>(peak_rss_bytes());
        local[kPhaseCount + 1] = static_cast<double>(local_params);
        local[kPhaseCount + 2] = static_cast<double>(peak_tensor_bytes);
        std::vector<double> all(static_cast<std::size_t>(needed) * kValues);
        MPI_Gather(local, kValues, MPI_DOUBLE, all.data(), kValues, MPI_DOUBLE, 0, owned.get());
        if (world_rank == 0) {
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
            rank_rows.push_back(rank_row);
          }
          const stats::Summary s = stats::summarize(samples_us);
          h5::set_string(row.status, "ok");
          row.timed_iters = static_cast<int64_t>(samples_us.size());  // as many as were timed
          row.time_us_min = s.min;
          row.time_us_median = s.median;
          row.time_us_mean = s.mean;
          row.time_us_p90 = s.p90;
          row.time_us_max = s.max;
          row.time_cv = s.cv;
          row.tokens_per_s = static_cast<double>(config.parallel.global_batch) * config.parallel.seq_len / (s.median * 1e-6);
          row.loss_first = loss_first;
          row.loss_last = loss_last;
        }
        (void)coords;
      }
      quiet_barrier(MPI_COMM_WORLD);
    } else {
      h5::set_string(row.status, failed ? "failed" : "skipped");
      h5::set_string(row.reason, skip_reason);
    }

    if (world_rank == 0) {
      append_groundtruth(*store, row, samples_us, rank_rows);
      store->set_meta(kInFlightAttribute, std::string());
      const std::string status = h5::get_string(row.status);
      if (status == "ok") {
        ++summary.configs_ok;
        std::printf("  %3zu/%-3zu %-34s %-9s %8d %14.0f %14.0f %7.3f %10.0f %10.4f\n", index + 1, job.configs.size(),
                    key.c_str(), status.c_str(), needed, row.time_us_median, row.time_us_min, row.time_cv,
                    row.tokens_per_s, row.loss_last);
      } else {
        (status == "failed" ? summary.configs_failed : summary.configs_skipped) += 1;
        std::printf("  %3zu/%-3zu %-34s %-9s %8d %14s %14s %7s %10s %10s  %s\n", index + 1, job.configs.size(), key.c_str(),
                    status.c_str(), needed, "-", "-", "-", "-", "-", skip_reason.c_str());
      }
      std::fflush(stdout);
    }
  }

  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  if (world_rank == 0) {
    std::printf("#\n# %zu measured, %zu skipped, %zu failed, %zu already present; %.1f s\n", summary.configs_ok,
                summary.configs_skipped, summary.configs_failed, summary.configs_present, summary.elapsed_s);
  }
  return summary;
}

}  // namespace itertime::calibrate
