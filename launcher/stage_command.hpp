// stage_command.hpp: the command line of one calibration stage of a job (`itertime calibrate
// comm|ops|groundtruth ...` with the job's arguments), as an argument vector, defined once for `itertime
// run` (which launches it, or parses it in process under MPI) and for the Slurm batch script (which
// shell-quotes it word by word). Pure: no MPI, no Slurm.
// Invariants:
//  - Every stage runs with --resume (never --force) into `output`, so that a rerun, a requeue or a
//    resubmission continues where the last run stopped.
//  - The comm stage carries the job's backend, "comm" section and outside-load policy (its
//    outside_load_cores and max_extra_rounds); ops and groundtruth read the job file.
//  - The vector starts with "calibrate": the launcher and the itertime binary go in front of it.
//  - Numbers are rendered so that the stage parses back exactly the job's value.
#pragma once

#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/job.hpp"

namespace itertime::launcher {

// The calibration stages, in pipeline order.
enum class Stage { kComm, kOps, kGroundTruth, kDrift };
std::string to_string(Stage stage);  // comm | ops | groundtruth | drift: the `itertime calibrate` subcommand

// What a stage's command line carries from the job.
struct StageInputs {
  std::string job_file;  // the job (.json), as the stage should open it
  std::string output;    // the HDF5 file every stage writes
  Backend backend = Backend::kCpu;
  CommSweepSpec comm;  // the job's "comm" section
  RoundPolicy rounds;  // the job's outside-load limit and extra tries, which the comm stage applies too
};

StageInputs stage_inputs(const Job& job, const std::string& job_file, const std::string& output);

// e.g. {"calibrate", "ops", "--job", JOB, "-o", OUTPUT, "--resume"}.
std::vector<std::string> stage_arguments(Stage stage, const StageInputs& inputs);

// The shortest decimal text that parses back to `value` ("8", "1.5", "1.4142135623730951").
std::string format_round_trip(double value);

}  // namespace itertime::launcher
