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
//  - The speed reference (runtime/speed_reference.hpp) is timed at every occupancy the configurations use
//    before each round and after the last, and by a configuration's ranks right after each of its rounds;
//    /reference/probes keeps them (stage groundtruth, pass = round), written at each round's start.
//  - Rows are written once every round is done (rank 0 only); a run stopped before that leaves no
//    row of the configurations it was measuring, and --resume measures them again from round 0.
//  - Every configuration trains with its job techniques (JobConfig::techniques; its row's `recipe` is
//    their recipe_text). A configuration that cannot run (illegal layout for the model, a policy the
//    backend cannot run, more ranks than the job has, techniques the trainer cannot combine with it:
//    all decided by the trainer's check_trainable) is recorded as skipped with its reason, and the job
//    goes on.
//  - A configuration that kills the job (out of memory, a crash) is recorded as failed by the next
//    --resume, which finds it marked in flight in /meta, and the job goes on after it. One whose run was
//    ended by SIGTERM, SIGINT or SIGHUP (a preemption, a requeue, a Ctrl-C) stays pending and is measured
//    again, unless that happened twice in a row while it was in flight: rank 0 journals interruptions
//    (common/interruption_journal.hpp, `OUTPUT.inflight`), since mpirun also sends SIGTERM to every rank
//    when one crashes. --retry-failed (with --resume) measures the failed ones again; their new row
//    supersedes the old (the newest row of a key wins, common/groundtruth_store.hpp).
//  - Test hook: ITERTIME_TEST_HOLD_IN_FLIGHT_S=S makes rank 0 hold the first round it measures in flight
//    for S seconds (after marking it), saying so on stderr with its pid, so that a test can signal the
//    job while a configuration is in flight (tests/e2e/groundtruth_preempt.sh).
#pragma once

#include <map>
#include <string>

#include "calibrate/job_stage_options.hpp"
#include "common/job.hpp"

namespace itertime::calibrate {

struct GroundTruthOptions : JobStageOptions {
  bool retry_failed = false;  // with resume: measure the configurations recorded failed again
};

struct GroundTruthSummary {
  std::size_t configs_total = 0, configs_present = 0, configs_ok = 0, configs_skipped = 0, configs_failed = 0, configs_oom = 0;
  std::size_t configs_disturbed = 0;  // ok, but stayed disturbed after every round it was allowed
  double elapsed_s = 0.0;
};

GroundTruthSummary calibrate_groundtruth(const GroundTruthOptions& options);

}  // namespace itertime::calibrate
