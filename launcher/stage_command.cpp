// stage_command.cpp: renders a calibration stage's argument vector (launcher/stage_command.hpp).
#include "launcher/stage_command.hpp"

#include <cstdio>
#include <cstdlib>

namespace itertime::launcher {

std::string to_string(Stage stage) {
  switch (stage) {
    case Stage::kComm: return "comm";
    case Stage::kOps: return "ops";
    case Stage::kGroundTruth: return "groundtruth";
    case Stage::kDrift: return "drift";
  }
  return "?";
}

StageInputs stage_inputs(const Job& job, const std::string& job_file, const std::string& output) {
  StageInputs inputs;
  inputs.job_file = job_file;
  inputs.output = output;
  inputs.backend = job.backend;
  inputs.comm = job.comm;
  inputs.rounds = job.rounds;
  return inputs;
}

std::string format_round_trip(double value) {
  char text[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

std::vector<std::string> stage_arguments(Stage stage, const StageInputs& inputs) {
  std::vector<std::string> arguments{"calibrate", to_string(stage)};
  if (stage == Stage::kComm) {
    const CommSweepSpec& comm = inputs.comm;
    arguments.insert(
        arguments.end(),
        {"-o", inputs.output, "--resume", "--backend", to_string(inputs.backend), "--min-bytes", comm.min_bytes, "--max-bytes",
         comm.max_bytes, "--step-factor", format_round_trip(comm.step_factor), "--warmup", std::to_string(comm.warmup_iters),
         "--iters", std::to_string(comm.iters), "--outside-load-cores", format_round_trip(inputs.rounds.outside_load_cores),
         "--max-extra-tries", std::to_string(inputs.rounds.max_extra_rounds)});
  } else {
    arguments.insert(arguments.end(), {"--job", inputs.job_file, "-o", inputs.output, "--resume"});
  }
  return arguments;
}

}  // namespace itertime::launcher
