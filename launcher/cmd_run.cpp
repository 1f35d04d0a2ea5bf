// cmd_run.cpp: `itertime run JOB.json`: the whole pipeline for one job into one HDF5 file: calibrate comm,
// calibrate ops, calibrate groundtruth (each resumable), then fit and validate, ending with the MAPE table.
// Invariants:
//  - Started outside MPI, it launches each calibration stage itself with N ranks: srun inside a Slurm
//    allocation (SLURM_JOB_ID set), mpirun otherwise; started under mpirun/srun it runs the stages in
//    process over the existing world.
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

#include "calibrate/comm_bench.hpp"
#ifdef ITERTIME_HAVE_TORCH
#include "calibrate/groundtruth.hpp"
#include "calibrate/ops_calibration.hpp"
#endif
#include "common/errors.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/job.hpp"
#include "common/mpi_session.hpp"
#include "launcher/commands.hpp"
#include "launcher/provenance.hpp"
#include "predict/fitted_model.hpp"
#include "validate/validation.hpp"
#include "validate/validation_store.hpp"

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

std::string format_factor(double factor) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", factor);
  return text;
}

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

void fit_and_validate(const std::string& output, const LlamaSpec& model_spec) {
  const predict::FittedModel model = predict::fit_model(output);
  std::vector<store::GroundTruthRow> rows;
  {
    h5::Store store = h5::Store::open(output, false);
    rows = store.table<store::GroundTruthRow>(store::kGroundTruthTable).read_all();
    const auto ranks = store.table<store::GroundTruthRankRow>(store::kGroundTruthRanks).read_all();
    validate::print_compute_report(validate::compute_report(model, rows, ranks));
    validate::print_memory_report(validate::memory_report(model_spec, parse_attention(model.attention), rows, ranks));
  }
  const validate::ValidationReport report = validate::validate(model, rows);
  const std::filesystem::path dir =
      std::filesystem::path(output).parent_path() / (std::filesystem::path(output).stem().string() + "-validation");
  std::filesystem::create_directories(dir);
  validate::write_csv(report, (dir / "validation.csv").string());
  validate::write_json(report, (dir / "validation.json").string());
  validate::write_svg(report, (dir / "validation.svg").string());
  {
    h5::Store store = h5::Store::open(output, true);
    validate::write_validation(store, report);
  }
  predict::save_model(model, (dir / "model.itertime").string(), /*force=*/true);
  std::printf("\n");
  validate::print_report(report);
  std::printf("# reports in %s (validation.csv, validation.json, validation.svg, model.itertime)\n", dir.string().c_str());
}

int run_pipeline(Context& context, const RunArgs& args) {
  const Job job = load_job(args.job);
  const std::string output = args.output.empty() ? job.name + ".h5" : args.output;
  const int ranks = args.ranks > 0 ? args.ranks : (job.ranks > 0 ? job.ranks : std::max(2, job.max_world_size()));
  std::vector<std::string> stages = args.stages.empty() ? std::vector<std::string>{"comm", "ops", "groundtruth", "validate"} : args.stages;
  for (const auto& s : stages) {
    if (s != "comm" && s != "ops" && s != "groundtruth" && s != "validate") {
      throw UserError("--stages: unknown stage '" + s + "'; use comm, ops, groundtruth, validate");
    }
  }
  auto wants = [&](const char* name) { return std::find(stages.begin(), stages.end(), name) != stages.end(); };

  if (under_mpi()) {
    // In process, over the world we were started in.
    MpiSession mpi(&context.argc, &context.argv);
    try {
      const auto provenance = collect_provenance(context.command_line, to_string(job.backend));
      if (wants("comm")) {
        calibrate::CommCalibrationOptions options;
        options.sweep.min_bytes = calibrate::parse_bytes(job.comm.min_bytes);
        options.sweep.max_bytes = calibrate::parse_bytes(job.comm.max_bytes);
        options.sweep.step_factor = job.comm.step_factor;
        options.sweep.warmup_iters = job.comm.warmup_iters;
        options.sweep.iters = job.comm.iters;
        options.backend = job.backend;
        options.output_path = output;
        options.resume = true;
        options.provenance = provenance;
        if (calibrate::calibrate_comm(options).points_failed_check > 0) {
          throw InternalError("communication points failed their correctness check (rows with check_errors > 0); the pipeline stops",
                              __FILE__, __LINE__);
        }
      }
#ifdef ITERTIME_HAVE_TORCH
      if (wants("ops")) {
        calibrate::OpsCalibrationOptions options;
        options.job = job;
        options.output_path = output;
        options.resume = true;
        options.provenance = provenance;
        calibrate::calibrate_ops(options);
      }
      if (wants("groundtruth")) {
        calibrate::GroundTruthOptions options;
        options.job = job;
        options.output_path = output;
        options.resume = true;
        options.provenance = provenance;
        calibrate::calibrate_groundtruth(options);
      }
#else
      if (wants("ops") || wants("groundtruth")) throw CollectiveUserError("this itertime was built without LibTorch; ops and ground truth need it");
#endif
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
  auto stage = [&](const std::string& name, std::vector<std::string> command) {
    std::vector<std::string> argv(prefix);
    argv.push_back(exe);
    argv.insert(argv.end(), command.begin(), command.end());
    const int status = spawn_and_wait(argv);
    if (status == kExitUserError) throw UserError("stage " + name + " refused its input (see above)");
    if (status != 0) {
      throw InternalError("stage " + name + " failed with exit status " + std::to_string(status) +
                              "; fix the cause and rerun the same command to resume",
                          __FILE__, __LINE__);
    }
  };
  if (wants("comm")) {
    stage("comm", {"calibrate", "comm", "-o", output, "--resume", "--backend", to_string(job.backend), "--min-bytes",
                   job.comm.min_bytes, "--max-bytes", job.comm.max_bytes, "--step-factor", format_factor(job.comm.step_factor),
                   "--warmup", std::to_string(job.comm.warmup_iters), "--iters", std::to_string(job.comm.iters)});
  }
  if (wants("ops")) stage("ops", {"calibrate", "ops", "--job", args.job, "-o", output, "--resume"});
  if (wants("groundtruth")) stage("groundtruth", {"calibrate", "groundtruth", "--job", args.job, "-o", output, "--resume"});
  if (wants("validate")) fit_and_validate(output, job.model);
  return kExitSuccess;
}

}  // namespace

void register_run(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* run = app.add_subcommand(
      "run", "Whole pipeline for a job: calibrate comm, ops and ground truth, fit, validate (resumable; launches its own ranks)");
  auto args = std::make_shared<RunArgs>();
  run->add_option("JOB", args->job, "Job file (JSON; see jobs/ and docs/jobs.md)")->required();
  run->add_option("-o,--output", args->output, "HDF5 file for every stage (default: <job name>.h5); reused, never overwritten");
  run->add_option("--ranks", args->ranks, "Ranks to launch (default: the job's \"ranks\", or its largest configuration)");
  run->add_option("--launcher", args->launcher, "auto (srun inside a Slurm allocation, else mpirun), mpirun or srun")->capture_default_str();
  run->add_option("--launcher-args", args->launcher_args, "Extra arguments for mpirun/srun, e.g. \"--mca btl self,vader\"");
  run->add_option("--stages", args->stages, "Subset of comm, ops, groundtruth, validate (default: all)")->delimiter(',');
  actions.emplace_back(run, [args](Context& context) { return run_pipeline(context, *args); });
}

}  // namespace itertime::launcher
