// cmd_calibrate.cpp: `itertime calibrate comm|ops|groundtruth|drift|sustained`. Run under mpirun/srun.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "commbench/comm_bench.hpp"
#ifdef ITERTIME_HAVE_TORCH
#include "calibrate/groundtruth.hpp"
#include "calibrate/ops_calibration.hpp"
#include "calibrate/sustained_gemm.hpp"
#include "calibrate/torch_info.hpp"
#endif
#include "common/job.hpp"
#include "common/errors.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/nccl_communicator.hpp"
#include "runtime/watchdog.hpp"
#include "launcher/commands.hpp"
#include "launcher/provenance.hpp"
#include "query/query_options.hpp"

namespace itertime::launcher {
namespace {

struct CommArgs {
  std::string output;
  bool force = false;
  bool resume = false;
  std::string backend = "cpu";
  std::string min_bytes = "8";
  std::string max_bytes = "16M";
  double step_factor = 4.0;
  std::vector<std::string> collectives;
  std::vector<std::string> dtypes;
  std::vector<int> group_sizes;
  std::vector<std::string> layouts;
  int warmup = 5;
  int iters = 20;
  std::string mode = "latency";
  double outside_load_cores = calibrate::CommCalibrationOptions().outside_load_cores;
  int max_extra_tries = calibrate::CommCalibrationOptions().max_extra_tries;
  bool no_node_links = false;
  std::string watchdog_s;  // empty: $ITERTIME_WATCHDOG_S, else the default (runtime/watchdog.hpp)
};

int run_comm(Context& context, const CommArgs& args) {
  MpiSession mpi(&context.argc, &context.argv);
  try {
    calibrate::CommCalibrationOptions options;
    try {
      options.backend = parse_backend(args.backend);
      options.sweep.min_bytes = calibrate::parse_bytes(args.min_bytes);
      options.sweep.max_bytes = calibrate::parse_bytes(args.max_bytes);
      options.sweep.step_factor = args.step_factor;
      if (!args.collectives.empty()) {
        options.sweep.collectives.clear();
        for (const auto& name : args.collectives) options.sweep.collectives.push_back(calibrate::parse_collective(name));
      }
      if (!args.dtypes.empty()) {
        options.sweep.dtypes.clear();
        for (const auto& name : args.dtypes) options.sweep.dtypes.push_back(parse_dtype(name));
      }
      if (!args.layouts.empty()) {
        options.sweep.layouts.clear();
        for (const auto& name : args.layouts) options.sweep.layouts.push_back(calibrate::parse_group_layout(name));
      }
      options.sweep.group_sizes = args.group_sizes;
      options.sweep.warmup_iters = args.warmup;
      options.sweep.iters = args.iters;
      options.sweep.mode = calibrate::parse_timing_mode(args.mode);
      if (args.force && args.resume) throw UserError("--force and --resume exclude each other: pick one");
      mpi.start_watchdog(watchdog_seconds(args.watchdog_s));
      if (!(args.outside_load_cores >= 0)) throw UserError("--outside-load-cores must not be negative");
      if (args.max_extra_tries < 0) throw UserError("--max-extra-tries must not be negative");
      options.outside_load_cores = args.outside_load_cores;
      options.max_extra_tries = args.max_extra_tries;
      options.node_links = !args.no_node_links;
    } catch (const CollectiveUserError&) {
      throw;
    } catch (const UserError& error) {
      throw CollectiveUserError(error.what());  // every rank parsed the same arguments
    }
    options.output_path = args.output;
    options.force = args.force;
    options.resume = args.resume;
    options.provenance = collect_provenance(context.command_line, options.backend == Backend::kCuda ? "cuda" : "cpu");
    const calibrate::CommCalibrationSummary summary = calibrate::calibrate_comm(options);
    if (summary.points_failed_check > 0) {
      if (mpi.world_rank() == 0) {
        std::fprintf(stderr, "itertime: %zu point(s) failed their correctness check; their rows carry check_errors > 0\n",
                     summary.points_failed_check);
      }
      return kExitInternal;
    }
    return kExitSuccess;
  } catch (const CollectiveUserError& error) {
    // Every rank raised it: rank 0 reports, all finalize and exit 2.
    if (mpi.world_rank() == 0) std::fprintf(stderr, "itertime: error: %s\n", error.what());
    return kExitUserError;
  }
}

struct GroundTruthArgs {
  std::string job;
  std::string output;
  bool force = false;
  bool resume = false;
  bool retry_failed = false;  // groundtruth only
  std::string watchdog_s;     // empty: $ITERTIME_WATCHDOG_S, else the default (runtime/watchdog.hpp)
};

// A job-driven LibTorch stage (ops, groundtruth): loads the job on every rank, fills the options that
// both stages share, and hands them to `run`. Every rank parses the same arguments, so a mistake is a
// CollectiveUserError: rank 0 reports it and all ranks exit 2.
template <typename Options, typename Run>
int run_job_stage(Context& context, const GroundTruthArgs& args, const char* what, Run&& run) {
  MpiSession mpi(&context.argc, &context.argv);
  try {
#ifdef ITERTIME_HAVE_TORCH
    (void)what;
    Options options;
    try {
      if (args.force && args.resume) throw UserError("--force and --resume exclude each other: pick one");
      mpi.start_watchdog(watchdog_seconds(args.watchdog_s));
      options.job = load_job(args.job);
    } catch (const CollectiveUserError&) {
      throw;
    } catch (const UserError& error) {
      throw CollectiveUserError(error.what());
    }
    options.output_path = args.output;
    options.force = args.force;
    options.resume = args.resume;
    options.provenance = collect_provenance(context.command_line, to_string(options.job.backend));
    run(options);
    return kExitSuccess;
#else
    (void)args;
    (void)run;
    throw CollectiveUserError(std::string("this itertime was built without LibTorch (ITERTIME_WITH_TORCH=OFF); ") + what +
                              " needs it");
#endif
  } catch (const CollectiveUserError& error) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "itertime: error: %s\n", error.what());
    return kExitUserError;
  }
}

#ifdef ITERTIME_HAVE_TORCH
using GroundTruthOptions = calibrate::GroundTruthOptions;
using OpsOptions = calibrate::OpsCalibrationOptions;
#else
struct GroundTruthOptions {};
using OpsOptions = GroundTruthOptions;
#endif

int run_groundtruth(Context& context, const GroundTruthArgs& args) {
  return run_job_stage<GroundTruthOptions>(context, args, "ground truth", [&args](auto options) {
#ifdef ITERTIME_HAVE_TORCH
    options.retry_failed = args.retry_failed;
    calibrate::calibrate_groundtruth(options);
#else
    (void)args;
    (void)options;
#endif
  });
}

int run_drift(Context& context, const GroundTruthArgs& args) {
  return run_job_stage<OpsOptions>(context, args, "operator profiling", [](auto options) {
#ifdef ITERTIME_HAVE_TORCH
    options.remeasure_drifted = true;
    calibrate::calibrate_ops(options);
#else
    (void)options;
#endif
  });
}

int run_ops(Context& context, const GroundTruthArgs& args) {
  return run_job_stage<OpsOptions>(context, args, "operator profiling", [](const auto& options) {
#ifdef ITERTIME_HAVE_TORCH
    calibrate::calibrate_ops(options);
#else
    (void)options;
#endif
  });
}

struct SustainedArgs {
  std::string output;
  bool force = false;
  std::string backend = "cpu";
  std::string dtype;           // empty: bf16 on cuda, fp32 on cpu
  std::vector<int64_t> shape;  // empty: 8192^3 on cuda, 1024^3 on cpu
  double seconds = 180;
  double window_s = 1;
  int threads = 1;
  std::string watchdog_s;
};

#ifdef ITERTIME_HAVE_TORCH
// The probe's options from the arguments; throws UserError naming the option at fault.
calibrate::SustainedGemmOptions sustained_options(const SustainedArgs& args) {
  calibrate::SustainedGemmOptions options;
  options.backend = parse_backend(args.backend);
  const bool cuda = options.backend == Backend::kCuda;
  options.dtype = args.dtype.empty() ? (cuda ? DType::kBFloat16 : DType::kFloat32) : parse_dtype(args.dtype);
  if (options.dtype != DType::kBFloat16 && options.dtype != DType::kFloat16 && options.dtype != DType::kFloat32)
    throw UserError("--dtype " + args.dtype + ": the probe multiplies bf16, fp16 or fp32 matrices; pick one of them");
  const std::vector<int64_t> shape = args.shape.empty() ? std::vector<int64_t>(3, cuda ? 8192 : 1024) : args.shape;
  if (shape.size() != 3 || *std::min_element(shape.begin(), shape.end()) < 1)
    throw UserError("--shape: give three positive sizes M,N,K (e.g. 8192,8192,8192)");
  options.m = shape[0];
  options.n = shape[1];
  options.k = shape[2];
  if (!(args.seconds > 0 && args.seconds <= 86400)) throw UserError("--seconds must be above 0 and at most 86400");
  if (!(args.window_s > 0 && args.window_s <= args.seconds)) throw UserError("--window-s must be above 0 and at most --seconds");
  if (args.threads < 1) throw UserError("--threads must be at least 1");
  if (!cuda && options.dtype == DType::kFloat16 && !calibrate::query_torch().cpu_fp16_matmul)
    throw UserError("--dtype fp16 with --backend cpu: this LibTorch cannot multiply fp16 matrices on a CPU; use fp32 or bf16");
  if (cuda && !cuda_device_available())
    throw UserError("--backend cuda: no CUDA device here (or a build without CUDA); use --backend cpu");
  options.seconds = args.seconds;
  options.window_s = args.window_s;
  options.cpu_threads = args.threads;
  return options;
}

int run_sustained(Context& context, const SustainedArgs& args) {
  MpiSession mpi(&context.argc, &context.argv);
  try {
    calibrate::SustainedGemmOptions options;
    try {
      options = sustained_options(args);
      mpi.start_watchdog(watchdog_seconds(args.watchdog_s));
    } catch (const CollectiveUserError&) {
      throw;
    } catch (const UserError& error) {
      throw CollectiveUserError(error.what());  // every rank parsed the same arguments
    }
    // Checked before minutes of measuring: the output's folder exists and the file is new (or --force).
    on_root_collectively(mpi.world_rank(), [&] {
      query::refuse_existing(args.output, args.force, "-o");
      const std::filesystem::path parent = std::filesystem::absolute(args.output).parent_path();
      if (!std::filesystem::is_directory(parent))
        throw UserError("-o " + args.output + ": its folder does not exist; create it or pick another path");
    });
    const std::optional<SustainedProbe> probe = calibrate::run_sustained_gemm(options);
    on_root_collectively(mpi.world_rank(), [&] { query::write_text_file(args.output, sustained_probe_json(*probe)); });
    return kExitSuccess;
  } catch (const CollectiveUserError& error) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "itertime: error: %s\n", error.what());
    return kExitUserError;
  }
}

#endif

// The output file and how an existing one is treated: the same three options on every calibrate verb.
void add_output_options(CLI::App* verb, std::string& output, bool& force, bool& resume, const std::string& resume_help) {
  verb->add_option("-o,--output", output, "HDF5 file to write (refused if it exists, unless --force or --resume)")->required();
  verb->add_flag("--force", force, "Overwrite an existing output file");
  verb->add_flag("--resume", resume, resume_help);
}

void add_watchdog_option(CLI::App* verb, std::string& watchdog_s) {
  verb->add_option("--watchdog-s", watchdog_s,
                   "End the job when a rank waits this many seconds in one MPI operation (a peer stopped or hung); "
                   "0: never (default: $ITERTIME_WATCHDOG_S, else 300)");
}

// A job-driven stage's verb (groundtruth, ops) with the options both take first: the job and the output.
CLI::App* add_job_stage(CLI::App* calibrate, const std::string& name, const std::string& summary, GroundTruthArgs& args,
                        const std::string& resume_help) {
  CLI::App* verb = calibrate->add_subcommand(name, summary);
  verb->add_option("--job", args.job, "Job file (JSON; see jobs/ and docs/jobs.md)")->required();
  add_output_options(verb, args.output, args.force, args.resume, resume_help);
  return verb;
}

// `calibrate sustained`: its options and action (run_sustained; refused in a build without LibTorch).
void add_sustained_verb(CLI::App* calibrate, std::vector<std::pair<CLI::App*, Action>>& actions) {
  auto sustained_args = std::make_shared<SustainedArgs>();
  CLI::App* sustained = calibrate->add_subcommand(
      "sustained",
      "Multiply matrices back to back on every rank's device at once for minutes: throughput per window beside the "
      "GPU's SM clock, power and temperature, and the training-condition figures they give (JSON; LibTorch)");
  sustained->add_option("-o,--output", sustained_args->output, "JSON file to write (refused if it exists, unless --force)")
      ->required();
  sustained->add_flag("--force", sustained_args->force, "Overwrite an existing output file");
  sustained->add_option("--backend", sustained_args->backend, "cpu (a core a rank) or cuda (a GPU a rank)")
      ->capture_default_str();
  sustained->add_option("--dtype", sustained_args->dtype, "bf16, fp16 or fp32 (default: bf16 on cuda, fp32 on cpu)");
  sustained
      ->add_option("--shape", sustained_args->shape,
                   "M,N,K of the product (default: 8192,8192,8192 on cuda, "
                   "1024,1024,1024 on cpu)")
      ->delimiter(',');
  sustained
      ->add_option("--seconds", sustained_args->seconds,
                   "How long every rank multiplies; 40 or more gives the sustained clock fraction (the last third "
                   "against 30-40 s)")
      ->capture_default_str();
  sustained->add_option("--window-s", sustained_args->window_s, "Length of one throughput window")->capture_default_str();
  sustained->add_option("--threads", sustained_args->threads, "CPU ranks: threads each rank's products use")
      ->capture_default_str();
  add_watchdog_option(sustained, sustained_args->watchdog_s);
  actions.emplace_back(sustained, [sustained_args](Context& context) {
#ifdef ITERTIME_HAVE_TORCH
    return run_sustained(context, *sustained_args);
#else
    (void)context;
    std::fprintf(stderr, "itertime: error: this itertime was built without LibTorch (ITERTIME_WITH_TORCH=OFF); the "
                         "sustained probe needs it\n");
    return kExitUserError;
#endif
  });
}

}  // namespace

void register_calibrate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* calibrate = app.add_subcommand("calibrate", kCalibrateSummary);
  calibrate->require_subcommand(1);

  CLI::App* comm = calibrate->add_subcommand(
      "comm", "Sweep collectives and point-to-point transfers over sizes, dtypes, group sizes and rank layouts");
  auto args = std::make_shared<CommArgs>();
  add_output_options(comm, args->output, args->force, args->resume,
                     "Continue an existing output file: measure only the missing points");
  comm->add_option("--backend", args->backend, "cpu (MPI on host buffers) or cuda (NCCL on device buffers)")
      ->capture_default_str();
  comm->add_option("-b,--min-bytes", args->min_bytes, "Smallest message size (K/M/G suffixes, powers of 1024)")
      ->capture_default_str();
  comm->add_option("-e,--max-bytes", args->max_bytes, "Largest message size")->capture_default_str();
  comm->add_option("-f,--step-factor", args->step_factor, "Multiply the size by this factor between points")
      ->capture_default_str();
  comm->add_option("--collectives", args->collectives,
                   "Subset of all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send, sendrecv (default: all)")
      ->delimiter(',');
  comm->add_option("--dtypes", args->dtypes, "Element types (default: fp32,fp16,bf16,int8)")->delimiter(',');
  comm->add_option("--group-sizes", args->group_sizes, "Group sizes (default: 2, 4, 8, ... and the world size)")->delimiter(',');
  comm->add_option("--layouts", args->layouts, "consecutive and/or strided (default: both)")->delimiter(',');
  comm->add_option("-w,--warmup", args->warmup, "Untimed warm-up calls per point")->capture_default_str();
  comm->add_option("-n,--iters", args->iters,
                   "Timed samples per point (latency: one call each; pipelined: a loop of back-to-back calls each)")
      ->capture_default_str();
  comm->add_option("--mode", args->mode,
                   "latency: barrier before every call (what a training step sees); pipelined: back-to-back calls, as nccl-tests")
      ->capture_default_str();
  comm->add_option("--outside-load-cores", args->outside_load_cores,
                   "Measure a stretch of points again when other processes used more cores than this (plus steal) meanwhile")
      ->capture_default_str();
  comm->add_option("--max-extra-tries", args->max_extra_tries,
                   "Times a loaded stretch is measured again before it is kept as it is")
      ->capture_default_str();
  comm->add_flag("--no-node-links", args->no_node_links,
                 "Across nodes, do not measure each pair of nodes' latency and bandwidth first (/comm/node_links)");
  add_watchdog_option(comm, args->watchdog_s);
  actions.emplace_back(comm, [args](Context& context) { return run_comm(context, *args); });

  auto gt_args = std::make_shared<GroundTruthArgs>();
  CLI::App* groundtruth = add_job_stage(calibrate, "groundtruth",
                                        "Train every configuration of a job for real and record its iteration times (LibTorch)",
                                        *gt_args, "Continue an existing output file: measure only the missing configurations");
  groundtruth->add_flag("--retry-failed", gt_args->retry_failed,
                        "With --resume: measure again the configurations recorded failed (their new row supersedes the old)");
  add_watchdog_option(groundtruth, gt_args->watchdog_s);
  actions.emplace_back(groundtruth, [gt_args](Context& context) { return run_groundtruth(context, *gt_args); });

  auto ops_args = std::make_shared<GroundTruthArgs>();
  CLI::App* ops =
      add_job_stage(calibrate, "ops",
                    "Trace every pipeline stage of a job's configurations at its precision and profile each operator (LibTorch)",
                    *ops_args, "Continue an existing output file: trace and time only what is missing");
  add_watchdog_option(ops, ops_args->watchdog_s);
  actions.emplace_back(ops, [ops_args](Context& context) { return run_ops(context, *ops_args); });

  auto drift_args = std::make_shared<GroundTruthArgs>();
  CLI::App* drift = add_job_stage(
      calibrate, "drift",
      "After the ground truth: profile the operators again at each occupancy whose speed reference moved more than the "
      "job's drift_pct since they were profiled (LibTorch)",
      *drift_args, "Continue an existing output file (the only way this stage is useful: it needs ops and ground truth)");
  add_watchdog_option(drift, drift_args->watchdog_s);
  actions.emplace_back(drift, [drift_args](Context& context) { return run_drift(context, *drift_args); });
  add_sustained_verb(calibrate, actions);
}

}  // namespace itertime::launcher
