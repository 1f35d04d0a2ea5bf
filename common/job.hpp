// job.hpp: a job file (JSON): which model, backend and configurations to calibrate, measure and predict.
// Format in docs/jobs.md. Invariants:
//  - Relative paths in a job (the model) are resolved against the job file's folder.
//  - configs() lists the explicit "configs" first, then the "sweep" expansion (for each world size, each
//    cp of the sweep's "cp" list that divides it, every (dp,tp,pp) factorization of world / cp, each vp of
//    its "vp" list (vp > 1 only where pp > 1), for each precision, for each recipe), without duplicates
//    (by key);
//    illegal configurations are kept (ground truth records them as skipped, with the reason), and so
//    are techniques the trainer cannot run with a configuration: the parser never judges them.
//  - Every configuration's techniques start from the job's top-level "techniques" (all off when absent);
//    a configuration's own "techniques", or a sweep recipe, replaces the fields it gives.
//  - JobConfig::key of a plain configuration (every technique off) is MODEL/layout/batch/seq/PRECISION
//    (layout: ParallelConfig::layout_text, "dp2-tp1-pp2" or with cp or vp > 1 "dp2-tp1-pp2-cp1-vp2");
//    with any technique on it is followed by "/" + recipe_text(techniques)
//    (common/training_techniques.hpp), the one text form.
//  - A malformed job is a UserError naming the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/attention.hpp"
#include "common/dtype.hpp"
#include "common/measurement_rounds.hpp"
#include "common/model_spec.hpp"
#include "common/parallel_config.hpp"
#include "common/precision.hpp"
#include "common/training_techniques.hpp"

namespace itertime {

struct JobConfig {
  ParallelConfig parallel;
  PrecisionName precision = PrecisionName::kFp32;
  TrainingTechniques techniques;  // Megatron-LM techniques the configuration trains with (all off: plain)
  // "tiny-llama/dp2-tp1-pp2/mbs1/gbs8/seq64/bf16", plus "/sp+dopt" (recipe_text) unless plain
  std::string key(const std::string& model_name) const;
};

struct CommSweepSpec {
  std::string min_bytes = "8";
  std::string max_bytes = "16M";
  double step_factor = 4.0;
  int warmup_iters = 5;
  int iters = 20;
};

// Ground truth never times more steps than this per configuration, whatever min_timed_seconds asks.
inline constexpr int kMaxTimedIters = 100;

struct Job {
  std::string name;
  std::string path;        // the job file
  std::string model_path;  // resolved
  LlamaSpec model;
  Backend backend = Backend::kCpu;
  AttentionKernel attention = AttentionKernel::kAuto;  // "attention": eager | sdpa | auto (default)
  uint64_t seed = 1234;
  // Ground truth, per configuration and round: warm-up steps, then at least timed_iters timed steps, and
  // more (up to kMaxTimedIters) until min_timed_seconds were timed; `rounds` says how many rounds.
  int warmup_iters = 2;
  int timed_iters = 5;
  double min_timed_seconds = 0;
  RoundPolicy rounds;
  int compute_threads = 1;
  int ranks = 0;  // MPI ranks `itertime run` launches; 0 = the largest configuration
  CommSweepSpec comm;
  std::vector<JobConfig> configs;

  int max_world_size() const;
};

Job load_job(const std::string& path);
Job parse_job(const std::string& json_text, const std::string& path);

// All (dp, tp, pp) with dp*tp*pp == world_size, ordered by pp, then tp, then dp.
std::vector<RankLayout> factorizations(int world_size);
// For each cp of `cps` (in order) that is positive and divides world_size, every factorization of
// world_size / cp: the layouts of world_size ranks with those context-parallel degrees.
std::vector<std::pair<int, RankLayout>> factorizations(int world_size, const std::vector<int>& cps);

}  // namespace itertime
