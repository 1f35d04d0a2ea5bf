// groundtruth.hpp: `itertime calibrate groundtruth`: real training of every configuration of a job,
// timed, one /groundtruth row per configuration.
// Invariants:
//  - Collective over MPI_COMM_WORLD; a configuration of N ranks runs on world ranks 0..N-1 while the
//    other ranks wait without spinning (they sleep between polls, so they do not steal cores).
//  - Configurations are measured in interleaved rounds (common/measurement_rounds.hpp): each round
//    trains every configuration that still wants a round, in that round's order, from a fresh model:
//    warm-up steps, then timed steps; each sample is the wall time of one step from a barrier to the
//    end of the slowest rank. The outside load during the timed steps is probed
//    (runtime/outside_load_probe.hpp); a configuration whose rounds saw load or disagree gets more
//    rounds, up to the job's limit, and is flagged when it stays disturbed.
//  - Rows are written once every round is done (rank 0 only); a run stopped before that leaves no
//    row of the configurations it was measuring, and --resume measures them again from round 0.
//  - Every configuration trains with its job techniques (JobConfig::techniques; its row's `recipe` is
//    their recipe_text). A configuration that cannot run (illegal layout for the model, a policy the
//    backend cannot run, more ranks than the job has, techniques the trainer cannot combine with it:
//    all decided by the trainer's check_trainable) is recorded as skipped with its reason, and the job
//    goes on.
//  - A configuration that kills the job (out of memory, a crash) is recorded as failed by the next
//    --resume, which finds it marked in flight in /meta, and the job goes on after it.
#pragma once

#include <map>
#include <string>

#include "common/job.hpp"

namespace itertime::calibrate {

struct GroundTruthOptions {
  Job job;
  std::string output_path;
  bool force = false;
  bool resume = false;
  std::map<std::string, std::string> provenance;
};

struct GroundTruthSummary {
  std::size_t configs_total = 0, configs_present = 0, configs_ok = 0, configs_skipped = 0, configs_failed = 0,
              configs_oom = 0;
  std::size_t configs_disturbed = 0;  // ok, but stayed disturbed after every round it was allowed
  double elapsed_s = 0.0;
};

GroundTruthSummary calibrate_groundtruth(const GroundTruthOptions& options);

}  // namespace itertime::calibrate
