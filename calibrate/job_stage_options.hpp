// job_stage_options.hpp: what every stage that runs a job's configurations (`calibrate groundtruth`,
// `calibrate ops`, `calibrate drift`) is given: the job, the output file, how to treat an existing one,
// and the provenance written to /meta. Header-only, torch-free.
// Invariants: force and resume are never both set (the command refuses them together); provenance is
// written as given, the stage adds none of its own keys to it.
#pragma once

#include <map>
#include <string>

#include "common/job.hpp"

namespace itertime::calibrate {

struct JobStageOptions {
  Job job;
  std::string output_path;
  bool force = false;   // replace an existing output file
  bool resume = false;  // continue an existing output file: measure only what is missing
  std::map<std::string, std::string> provenance;
};

}  // namespace itertime::calibrate
