// Unit tests of launcher/stage_command.{hpp,cpp}: the argument vector of each calibration stage (what
// `itertime run` launches or parses in process, and what the Slurm script runs), and the lossless
// rendering of the job's numbers; the rendered script's stage lines are the same words, shell-quoted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/slurm_script.hpp"
#include "launcher/stage_command.hpp"

namespace itertime::launcher {
namespace {

StageInputs sample_inputs() {
  StageInputs inputs;
  inputs.job_file = "/jobs/my job's.json";
  inputs.output = "/data/out $(x).h5";
  inputs.backend = Backend::kCuda;
  inputs.comm.min_bytes = "8";
  inputs.comm.max_bytes = "64K";
  inputs.comm.step_factor = 8;
  inputs.comm.warmup_iters = 1;
  inputs.comm.iters = 3;
  inputs.rounds.outside_load_cores = 0.25;
  inputs.rounds.max_extra_rounds = 2;
  return inputs;
}

TEST(StageCommand, CommCarriesTheJobsSweepBackendAndLoadPolicy) {
  EXPECT_EQ(stage_arguments(Stage::kComm, sample_inputs()), (std::vector<std::string>{"calibrate", "comm",
                                                                                      "-o",        "/data/out $(x).h5",
                                                                                      "--resume",  "--backend",
                                                                                      "cuda",      "--min-bytes",
                                                                                      "8",         "--max-bytes",
                                                                                      "64K",       "--step-factor",
                                                                                      "8",         "--warmup",
                                                                                      "1",         "--iters",
                                                                                      "3",         "--outside-load-cores",
                                                                                      "0.25",      "--max-extra-tries",
                                                                                      "2"}));
}

TEST(StageCommand, OpsGroundTruthAndDriftReadTheJobFile) {
  EXPECT_EQ(
      stage_arguments(Stage::kOps, sample_inputs()),
      (std::vector<std::string>{"calibrate", "ops", "--job", "/jobs/my job's.json", "-o", "/data/out $(x).h5", "--resume"}));
  EXPECT_EQ(stage_arguments(Stage::kGroundTruth, sample_inputs()),
            (std::vector<std::string>{"calibrate", "groundtruth", "--job", "/jobs/my job's.json", "-o", "/data/out $(x).h5",
                                      "--resume"}));
  EXPECT_EQ(
      stage_arguments(Stage::kDrift, sample_inputs()),
      (std::vector<std::string>{"calibrate", "drift", "--job", "/jobs/my job's.json", "-o", "/data/out $(x).h5", "--resume"}));
}

TEST(StageCommand, EveryStageResumesAndNoneForces) {
  for (Stage stage : {Stage::kComm, Stage::kOps, Stage::kGroundTruth, Stage::kDrift}) {
    const auto arguments = stage_arguments(stage, sample_inputs());
    EXPECT_EQ(arguments.at(1), to_string(stage));
    EXPECT_NE(std::find(arguments.begin(), arguments.end(), "--resume"), arguments.end()) << to_string(stage);
    EXPECT_EQ(std::find(arguments.begin(), arguments.end(), "--force"), arguments.end()) << to_string(stage);
  }
}

TEST(StageCommand, StepFactorParsesBackExactly) {
  EXPECT_EQ(format_round_trip(8.0), "8");
  EXPECT_EQ(format_round_trip(4.0), "4");
  EXPECT_EQ(format_round_trip(1.5), "1.5");
  EXPECT_EQ(format_round_trip(0.1), "0.1");
  for (double value : {std::sqrt(2.0), 1.0 / 3.0, 1.2345678901234567, 1e-300}) {
    const std::string text = format_round_trip(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
  }
  StageInputs inputs = sample_inputs();
  inputs.comm.step_factor = std::sqrt(2.0);
  const auto arguments = stage_arguments(Stage::kComm, inputs);
  const auto flag = std::find(arguments.begin(), arguments.end(), "--step-factor");
  ASSERT_NE(flag, arguments.end());
  EXPECT_EQ(std::strtod((flag + 1)->c_str(), nullptr), std::sqrt(2.0));
}

// The Slurm script's stage lines are these words: "$JOB" and "$OUTPUT" for the job and output, every
// other word shell-quoted.
TEST(StageCommand, TheSlurmScriptRunsTheSameWords) {
  slurm::ScriptSpec spec;
  spec.job_file = "/jobs/j.json";
  spec.output = "/data/o.h5";
  spec.backend = "cpu";
  spec.comm.max_bytes = "1 M";  // needs quoting
  spec.comm.step_factor = std::sqrt(2.0);
  const std::string script = slurm::render_script(spec);
  const StageInputs inputs{spec.job_file, spec.output, Backend::kCpu, spec.comm};
  for (Stage stage : spec.stages) {
    std::string line = "launch \"$ITERTIME\"";
    for (const std::string& word : stage_arguments(stage, inputs)) {
      line += " " + (word == spec.output ? "\"$OUTPUT\"" : word == spec.job_file ? "\"$JOB\"" : slurm::shell_quote(word));
    }
    EXPECT_NE(script.find("\n" + line + "\n"), std::string::npos) << line << "\n" << script;
  }
  EXPECT_NE(script.find("--max-bytes '1 M'"), std::string::npos) << script;
  EXPECT_NE(script.find("--step-factor " + format_round_trip(std::sqrt(2.0))), std::string::npos) << script;
}

}  // namespace
}  // namespace itertime::launcher
