// cmd_slurm.cpp: `itertime slurm submit JOB.json`: renders the requeue-safe batch script of a job
// (launcher/slurm_script.hpp) and prints it (--dry-run) or submits it with sbatch. See docs/slurm.md.
// Invariants: sbatch is run directly (posix_spawnp, no shell), with the script's path as its only
// operand; a user's mistake (bad option, missing job, an allocation smaller than the job, a missing
// output folder, sbatch refusing the job) exits 2 with one line; --dry-run runs every check a submission
// runs before it prints the script.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "launcher/commands.hpp"
#include "launcher/slurm_script.hpp"

extern char** environ;

namespace itertime::launcher {
namespace {

struct SubmitArgs {
  slurm::SubmitRequest request;
  std::string script;  // where the script is written (default OUTPUT.sbatch)
  std::string sbatch = "sbatch";
  bool dry_run = false;
  bool parsable = false;
};

struct ProcessResult {
  int status = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};

// Runs argv[0] (searched in PATH when it has no '/') without a shell and collects stdout and stderr.
ProcessResult run_process(const std::vector<std::string>& args) {
  int out_pipe[2];
  int err_pipe[2];
  ITERTIME_CHECK(pipe(out_pipe) == 0 && pipe(err_pipe) == 0, std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[1]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[1]);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);

  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw UserError("--sbatch " + args[0] + ": cannot run it (" + std::strerror(spawned) +
                    "); install the Slurm client tools or pass --sbatch PATH");
  }

  ProcessResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return result;
}

std::string one_line(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
    start = end + 1;
  }
  return out.empty() ? "(no message)" : out;
}

std::string running_binary(const Context& context) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) return self.string();
  return context.argc > 0 ? std::string(context.argv[0]) : std::string("itertime");
}

int run_submit(Context& context, const SubmitArgs& args) {
  // Every check of a submission runs before anything is printed or written, --dry-run included, so that
  // a dry run that passes is a submission that passes (up to sbatch itself).
  const slurm::ScriptSpec spec = slurm::resolve(args.request, running_binary(context), ITERTIME_VERSION_STRING);
  const std::filesystem::path output(spec.output);
  std::error_code error;
  if (!std::filesystem::is_directory(output.parent_path(), error)) {
    throw UserError("--output " + args.request.output + ": folder " + output.parent_path().string() +
                    " does not exist; create it first (the job writes its HDF5 file, script and log there)");
  }
  const std::string script_path =
      args.script.empty() ? spec.output + ".sbatch" : std::filesystem::absolute(args.script).lexically_normal().string();
  if (!std::filesystem::is_directory(std::filesystem::path(script_path).parent_path(), error)) {
    throw UserError("--script " + args.script + ": folder " + std::filesystem::path(script_path).parent_path().string() +
                    " does not exist; create it first");
  }
  const std::string script = slurm::render_script(spec);
  for (const std::string& warning : spec.warnings) std::fprintf(stderr, "itertime: warning: %s\n", warning.c_str());
  if (args.dry_run) {
    std::fwrite(script.data(), 1, script.size(), stdout);
    return kExitSuccess;
  }
  {
    std::ofstream out(script_path, std::ios::binary | std::ios::trunc);
    out << script;
    out.close();
    if (!out) throw UserError("--script " + script_path + ": cannot be written; check the folder and permissions");
  }

  const ProcessResult result = run_process({args.sbatch, "--parsable", script_path});
  if (result.status != 0) {
    throw UserError("sbatch refused the job (status " + std::to_string(result.status) + "): " + one_line(result.err) +
                    " (script kept in " + script_path + ")");
  }
  const long job_id = slurm::parse_sbatch_job_id(result.out);
  ITERTIME_CHECK(job_id >= 0, "sbatch --parsable printed no job id: '" + one_line(result.out) + "'");
  if (args.parsable) {
    std::printf("%ld\n", job_id);
    return kExitSuccess;
  }
  // The log's path as Slurm expands it: %% is a literal %, %j the job id; other patterns stay.
  std::string log;
  bool other_patterns = false;
  for (std::size_t i = 0; i < spec.log_pattern.size(); ++i) {
    const char c = spec.log_pattern[i];
    if (c == '%' && i + 1 < spec.log_pattern.size()) {
      const char next = spec.log_pattern[i + 1];
      if (next == '%' || next == 'j') {
        log += next == '%' ? std::string("%") : std::to_string(job_id);
        ++i;
        continue;
      }
      other_patterns = true;
    }
    log += c;
  }
  std::printf("submitted batch job %ld\n", job_id);
  std::printf("  script   %s\n", script_path.c_str());
  std::printf("  output   %s\n", spec.output.c_str());
  std::printf("  log      %s%s\n", log.c_str(), other_patterns ? " (a Slurm pattern)" : "");
  std::printf("  ranks    %d (%d node(s) x %d)\n", spec.ranks(), spec.nodes, spec.ntasks_per_node);
  std::printf("  stages  ");
  for (auto stage : spec.stages) std::printf(" %s", slurm::to_string(stage).c_str());
  std::printf("\n  follow   squeue -j %ld; itertime inspect %s\n", job_id, slurm::shell_quote(spec.output).c_str());
  return kExitSuccess;
}

}  // namespace

void register_slurm(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* slurm_cmd = app.add_subcommand("slurm", "Run a job's calibration as a Slurm batch job (see docs/slurm.md)");
  slurm_cmd->require_subcommand(1);

  CLI::App* submit = slurm_cmd->add_subcommand(
      "submit", "Render the requeue-safe batch script of a job (calibrate comm, ops, groundtruth with --resume) and sbatch it");
  auto args = std::make_shared<SubmitArgs>();
  auto& r = args->request;
  submit->add_option("JOB", r.job_file, "Job file (JSON; see jobs/ and docs/jobs.md)")->required();
  submit->add_option("-o,--output", r.output, "HDF5 file the job writes and resumes (its folder must exist)")->required();
  submit->add_option("-N,--nodes", r.nodes, "Nodes")->capture_default_str();
  submit->add_option("--gpus-per-node", r.gpus_per_node, "GPUs per node; one rank per GPU (0: a CPU job)")->capture_default_str();
  submit->add_option("--ntasks-per-node", r.ntasks_per_node,
                     "Ranks per node (default: --gpus-per-node, or the job's ranks spread over the nodes)");
  submit->add_option("--cpus-per-task", r.cpus_per_task, "CPUs per rank (default: the job's compute_threads when > 1)");
  submit->add_option("-p,--partition", r.partition, "Slurm partition (default: the cluster's)");
  submit->add_option("-A,--account", r.account, "Slurm account");
  submit->add_option("-q,--qos", r.qos, "Slurm quality of service");
  submit->add_option("-t,--time", r.time_limit, "Time limit: MINUTES, HH:MM:SS or DAYS-HH:MM:SS");
  submit->add_option("--log", r.log, "Slurm log file, a Slurm pattern (default: OUTPUT.slurm-%j.log)");
  submit->add_flag("--no-exclusive", r.no_exclusive, "Share the nodes with other jobs (default: exclusive nodes)");
  submit->add_option("--launcher", r.launcher, "How the script starts the ranks: srun or mpirun (inside the allocation)")
      ->capture_default_str();
  submit->add_option("--mpi", r.srun_mpi, "srun's MPI plugin (--mpi=...): pmix, pmi2, ...")->capture_default_str();
  submit->add_option("--stages", r.stages, "Subset of comm, ops, groundtruth (default: all, in that order)")->delimiter(',');
  submit->add_option("--itertime", r.itertime, "itertime binary the job runs (default: this one)");
  submit->add_option("--script", args->script, "Where to write the batch script (default: OUTPUT.sbatch)");
  submit->add_option("--sbatch", args->sbatch, "sbatch to run (default: sbatch from PATH)")->capture_default_str();
  submit->add_flag("--allow-fewer-ranks", r.allow_fewer_ranks,
                   "Submit even when the allocation holds fewer ranks than the job asks for (its larger configurations "
                   "are then recorded as skipped; a warning)");
  submit->add_flag("--dry-run", args->dry_run,
                   "Check everything a submission checks, print the batch script, write and submit nothing");
  submit->add_flag("--parsable", args->parsable, "Print only the job id");
  actions.emplace_back(submit, [args](Context& context) { return run_submit(context, *args); });
}

}  // namespace itertime::launcher
