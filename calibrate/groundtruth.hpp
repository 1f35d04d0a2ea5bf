// groundtruth.hpp: `itertime calibrate groundtruth`: real training of every configuration of a job,
// timed, one /groundtruth row per configuration.
// Invariants:
//  - Collective over MPI_COMM_WORLD; a configuration of N ranks runs on world ranks 0..N-1 while the
//    other ranks wait without spinning (they sleep between polls, so they do not steal cores).
//  - Per configuration: warm-up steps, then timed steps; each sample is the wall time of one step from
//    a barrier to the end of the slowest rank. Only world rank 0 writes the file.
//  - A configuration that cannot run (illegal layout for the model, a policy the backend cannot run,
//    more ranks than the job has) is recorded as skipped with its reason, and the job goes on.
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
  std::size_t configs_total = 0, configs_present = 0, configs_ok = 0, configs_skipped = 0, configs_failed = 0;
  double elapsed_s = 0.0;
};

GroundTruthSummary calibrate_groundtruth(const GroundTruthOptions& options);

}  // namespace itertime::calibrate
