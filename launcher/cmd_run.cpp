// cmd_run.cpp: `itertime run JOB.json`: the whole pipeline for one job into one HDF5 file: calibrate comm,
// calibrate ops, calibrate groundtruth, calibrate drift (each resumable), then fit and validate, ending with the MAPE table.
// Invariants:
//  - Started outside MPI, it launches each calibration stage itself with N ranks: srun inside a Slurm
//    allocation (SLURM_JOB_ID set), mpirun otherwise; started under mpirun/srun it runs the stages in
//    process over the existing world, through `itertime calibrate`'s own parser and actions. Either way a
//    stage is the command line launcher/stage_command.hpp renders (the one the Slurm script runs too).
//  - Every stage runs with --resume semantics, so rerunning the same command after a crash or a
//    requeue continues where it stopped; a stage that fails stops the pipeline with its exit status.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/job.hpp"
#include "runtime/mpi_session.hpp"
#include "launcher/commands.hpp"
#include "launcher/provenance.hpp"
#include "launcher/stage_command.hpp"
#include "validate/validation_run.hpp"

extern char** environ;

namespace itertime::launcher {
namespace {

struct RunArgs {
  std::string job;
  std::string output;
  int ranks = 0;
  std::string launcher = "auto";
  std::string launcher_args;
  std::vector<std::string> stages;
};

bool under_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

std::string self_executable() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("itertime") : path.string();
}

int spawn_and_wait(const std::vector<std::string>& argv) {
  std::string shown;
  for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + a;
  std::printf("[run] $ %s\n", shown.c_str());
  std::fflush(stdout);
  std::vector<char*> raw;
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  pid_t pid = 0;
  const int status = posix_spawnp(&pid, raw[0], nullptr, nullptr, raw.data(), environ);
  if (status != 0) throw UserError("cannot start " + argv[0] + " (" + std::strerror(status) + "); is it installed and on PATH?");
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return 1;
}

std::vector<std::string> launch_prefix(const RunArgs& args, int ranks) {
  std::string launcher = args.launcher;
  if (launcher == "auto") launcher = std::getenv("SLURM_JOB_ID") ? "srun" : "mpirun";
  std::vector<std::string> prefix;
  if (launcher == "srun") {
    prefix = {"srun", "-n", std::to_string(ranks)};
  } else if (launcher == "mpirun") {
    prefix = {"mpirun", "-np", std::to_string(ranks)};
    if (ranks > static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))) prefix.push_back("--oversubscribe");
  } else {
    throw UserError("--launcher " + args.launcher + ": use auto, mpirun or srun");
  }
  std::istringstream extra(args.launcher_args);
  for (std::string word; extra >> word;) prefix.push_back(word);
  return prefix;
}

// pipeline order; drift profiles again the operators whose speed reference moved by the ground truth
constexpr Stage kCalibrationStages[] = {Stage::kComm, Stage::kOps, Stage::kGroundTruth, Stage::kDrift};

// A stage that did not succeed (other than by refusing its input) stops the pipeline.
void check_stage_status(const std::string& name, int status) {
  if (status != 0) {
    throw InternalError("stage " + name + " failed with exit status " + std::to_string(status) +
                            "; fix the cause and rerun the same command to resume",
                        __FILE__, __LINE__);
  }
}

// Under mpirun/srun: runs a stage's command line in this process, over the world already started,
// through the same parser and action as `itertime calibrate` (collective over MPI_COMM_WORLD).
int run_stage_in_process(Context& context, const std::vector<std::string>& arguments) {
  CLI::App app{"itertime", "itertime"};
  std::vector<std::pair<CLI::App*, Action>> actions;
  register_calibrate(app, actions);
  try {
    app.parse(std::vector<std::string>(arguments.rbegin(), arguments.rend()));  // CLI11 reads them reversed
  } catch (const CLI::ParseError& error) {
    throw InternalError(std::string("a stage's command line does not parse: ") + error.what(), __FILE__, __LINE__);
  }
  for (auto& [command, action] : actions) {
    if (command->parsed()) return action(context);
  }
  throw InternalError("a stage's command line names no calibrate subcommand", __FILE__, __LINE__);
}

void fit_and_validate(const std::string& output, const LlamaSpec& model_spec) {
  validate::ValidationRunOptions options;
  options.calibration_file = output;
  options.compute_report = true;
  options.memory_report = true;
  options.model = model_spec;
  options.save_fitted_model = true;
  options.store_in_calibration = true;  // the run's own output file keeps its /validation
  options.holdouts = {validate::Holdout::kTuple, validate::Holdout::kPrecision};
  validate::run_validation(options);
}

int run_pipeline(Context& context, const RunArgs& args) {
  const Job job = load_job(args.job);
  const std::string output = args.output.empty() ? job.name + ".h5" : args.output;
  const int ranks = args.ranks > 0 ? args.ranks : (job.ranks > 0 ? job.ranks : std::max(2, job.max_world_size()));
  std::vector<std::string> stages =
      args.stages.empty() ? std::vector<std::string>{"comm", "ops", "groundtruth", "drift", "validate"} : args.stages;
  for (const auto& s : stages) {
    if (s != "comm" && s != "ops" && s != "groundtruth" && s != "drift" && s != "validate") {
      throw UserError("--stages: unknown stage '" + s + "'; use comm, ops, groundtruth, drift, validate");
    }
  }
  auto wants = [&](const std::string& name) { return std::find(stages.begin(), stages.end(), name) != stages.end(); };

  const StageInputs inputs = stage_inputs(job, args.job, output);
  if (under_mpi()) {
    // In process, over the world we were started in.
    MpiSession mpi(&context.argc, &context.argv);
    try {
      for (const Stage stage : kCalibrationStages) {
        if (!wants(to_string(stage))) continue;
#ifndef ITERTIME_HAVE_TORCH
        if (stage != Stage::kComm)
          throw CollectiveUserError("this itertime was built without LibTorch; ops and ground truth need it");
#endif
        const int status = run_stage_in_process(context, stage_arguments(stage, inputs));
        if (status == kExitUserError) return kExitUserError;  // the stage reported it on rank 0
        check_stage_status(to_string(stage), status);
      }
      if (wants("validate") && mpi.world_rank() == 0) fit_and_validate(output, job.model);
      return kExitSuccess;
    } catch (const CollectiveUserError& error) {
      if (mpi.world_rank() == 0) std::fprintf(stderr, "itertime: error: %s\n", error.what());
      return kExitUserError;
    }
  }

  // Outside MPI: one launch per stage.
  const std::string exe = self_executable();
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  std::printf("[run] job %s: model %s, %zu configurations, %d ranks, output %s\n", job.name.c_str(), job.model.name.c_str(),
              job.configs.size(), ranks, output.c_str());
  const std::vector<std::string> prefix = launch_prefix(args, ranks);
  for (const Stage stage : kCalibrationStages) {
    if (!wants(to_string(stage))) continue;
    std::vector<std::string> argv(prefix);
    argv.push_back(exe);
    for (std::string& argument : stage_arguments(stage, inputs)) argv.push_back(std::move(argument));
    const int status = spawn_and_wait(argv);
    if (status == kExitUserError) throw UserError("stage " + to_string(stage) + " refused its input (see above)");
    check_stage_status(to_string(stage), status);
  }
  if (wants("validate")) fit_and_validate(output, job.model);
  return kExitSuccess;
}

}  // namespace

void register_run(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* run = app.add_subcommand("run", kRunSummary);
  auto args = std::make_shared<RunArgs>();
  run->add_option("JOB", args->job, "Job file (JSON; see jobs/ and docs/jobs.md)")->required();
  run->add_option("-o,--output", args->output, "HDF5 file for every stage (default: <job name>.h5); reused, never overwritten");
  run->add_option("--ranks", args->ranks, "Ranks to launch (default: the job's \"ranks\", or its largest configuration)");
  run->add_option("--launcher", args->launcher, "auto (srun inside a Slurm allocation, else mpirun), mpirun or srun")
      ->capture_default_str();
  run->add_option("--launcher-args", args->launcher_args, "Extra arguments for mpirun/srun, e.g. \"--mca btl self,vader\"");
  run->add_option("--stages", args->stages, "Subset of comm, ops, groundtruth, drift, validate (default: all)")->delimiter(',');
  actions.emplace_back(run, [args](Context& context) { return run_pipeline(context, *args); });
}

}  // namespace itertime::launcher
