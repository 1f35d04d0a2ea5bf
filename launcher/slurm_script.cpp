// slurm_script.cpp: the batch script of `itertime slurm submit` (slurm_script.hpp).
#include "launcher/slurm_script.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "common/errors.hpp"

namespace itertime::launcher::slurm {
namespace {

bool is_plain_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string("_@%+=:,./-").find(c) != std::string::npos;
}

bool has_control_char(const std::string& value) {
  return std::any_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

void refuse_control_chars(const std::string& what, const std::string& value) {
  if (has_control_char(value)) {
    throw UserError(what +
                    ": contains a control character (a newline, tab, ...), which a batch script cannot carry; "
                    "rename it");
  }
}

std::string absolute_path(const std::string& path) {
  return std::filesystem::absolute(std::filesystem::path(path)).lexically_normal().string();
}

// One word of a stage's command line in the script: the script's own variable where the word is the job
// file or the output path, else the word shell-quoted.
std::string script_word(const std::string& word, const ScriptSpec& spec) {
  if (word == spec.output) return "\"$OUTPUT\"";
  if (word == spec.job_file) return "\"$JOB\"";
  return shell_quote(word);
}

}  // namespace

std::string shell_quote(const std::string& value) {
  if (!value.empty() && std::all_of(value.begin(), value.end(), is_plain_char)) return value;
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string sbatch_quote(const std::string& what, const std::string& value) {
  refuse_control_chars(what, value);
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  out += "\"";
  return out;
}

std::string escape_filename_pattern(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%') out += '%';
    out += c;
  }
  return out;
}

bool is_valid_time_limit(const std::string& value) {
  if (value == "UNLIMITED" || value == "INFINITE" || value == "unlimited" || value == "infinite") return true;
  static const std::regex minutes(R"(^(\d{1,6})$)");
  static const std::regex minutes_seconds(R"(^(\d{1,6}):(\d{1,2})$)");
  static const std::regex hms(R"(^(\d{1,5}):(\d{1,2}):(\d{1,2})$)");
  static const std::regex days(R"(^(\d{1,4})-(\d{1,2})(?::(\d{1,2})(?::(\d{1,2}))?)?$)");
  std::smatch m;
  auto num = [&](std::size_t i) { return m[i].matched ? std::stol(m[i].str()) : 0L; };
  if (std::regex_match(value, m, minutes)) return true;
  if (std::regex_match(value, m, minutes_seconds)) return num(2) < 60;
  if (std::regex_match(value, m, hms)) return num(2) < 60 && num(3) < 60;
  if (std::regex_match(value, m, days)) return num(2) < 24 && num(3) < 60 && num(4) < 60;
  return false;
}

std::string sanitize_name(const std::string& value) {
  std::string out;
  for (char c : value) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
    if (out.size() >= 64) break;
  }
  return out.empty() ? "job" : out;
}

long parse_sbatch_job_id(const std::string& stdout_text) {
  // --parsable prints "jobid" or "jobid;cluster" on its last line; warnings go to stderr.
  std::istringstream lines(stdout_text);
  std::string line;
  long id = -1;
  while (std::getline(lines, line)) {
    const auto begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos) continue;
    std::string field =
        line.substr(begin, line.find(';', begin) == std::string::npos ? std::string::npos : line.find(';', begin) - begin);
    while (!field.empty() && std::isspace(static_cast<unsigned char>(field.back()))) field.pop_back();
    if (!field.empty() && field.size() < 18 &&
        std::all_of(field.begin(), field.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      id = std::stol(field);
    } else {
      id = -1;
    }
  }
  return id;
}

std::vector<Stage> parse_stages(const std::vector<std::string>& names) {
  std::set<Stage> chosen;
  for (const auto& name : names) {
    if (name == "comm") {
      chosen.insert(Stage::kComm);
    } else if (name == "ops") {
      chosen.insert(Stage::kOps);
    } else if (name == "groundtruth") {
      chosen.insert(Stage::kGroundTruth);
    } else if (name == "drift") {
      chosen.insert(Stage::kDrift);
    } else {
      throw UserError("--stages: unknown stage '" + name + "'; use comm, ops, groundtruth and/or drift");
    }
  }
  if (chosen.empty()) throw UserError("--stages: no stage given; use comm, ops, groundtruth and/or drift");
  return {chosen.begin(), chosen.end()};  // enum order is pipeline order
}

LaunchMethod parse_launcher(const std::string& name) {
  if (name == "srun") return LaunchMethod::kSrun;
  if (name == "mpirun") return LaunchMethod::kMpirun;
  throw UserError("--launcher: unknown launcher '" + name + "'; use srun or mpirun");
}

namespace {

// The options that need no job file, checked first so that a mistake exits before the job is read.
void resolve_options(const SubmitRequest& request, ScriptSpec& spec) {
  if (request.nodes < 1) throw UserError("--nodes must be at least 1, got " + std::to_string(request.nodes));
  if (request.gpus_per_node < 0) {
    throw UserError("--gpus-per-node must be 0 (a CPU job) or more, got " + std::to_string(request.gpus_per_node));
  }
  if (request.ntasks_per_node < 0) {
    throw UserError("--ntasks-per-node must be at least 1, got " + std::to_string(request.ntasks_per_node));
  }
  if (request.cpus_per_task < -1 || request.cpus_per_task == 0) {
    throw UserError("--cpus-per-task must be at least 1, got " + std::to_string(request.cpus_per_task));
  }
  if (!request.time_limit.empty() && !is_valid_time_limit(request.time_limit)) {
    refuse_control_chars("--time", request.time_limit);
    throw UserError("--time '" + request.time_limit +
                    "' is not a Slurm time limit; use MINUTES, HH:MM:SS or DAYS-HH:MM:SS (e.g. 12:00:00 or 1-00:00:00)");
  }
  if (request.output.empty()) throw UserError("--output: give the HDF5 file the job writes (e.g. -o cluster.h5)");
  refuse_control_chars("--output", request.output);
  refuse_control_chars("job file " + request.job_file, request.job_file);
  refuse_control_chars("--log", request.log);
  refuse_control_chars("--itertime", request.itertime);
  spec.partition = request.partition;
  spec.account = request.account;
  spec.qos = request.qos;
  spec.time_limit = request.time_limit;
  // Validated here so that a mistake exits before anything is written.
  sbatch_quote("--partition", spec.partition);
  sbatch_quote("--account", spec.account);
  sbatch_quote("--qos", spec.qos);
  spec.launcher = parse_launcher(request.launcher);
  static const std::regex mpi_name(R"(^[A-Za-z0-9_]+$)");
  if (!std::regex_match(request.srun_mpi, mpi_name)) {
    throw UserError("--mpi '" + request.srun_mpi +
                    "' is not an srun MPI plugin name; use pmix, pmi2 or what `srun --mpi=list` shows");
  }
  spec.srun_mpi = request.srun_mpi;
  spec.stages = request.stages.empty() ? std::vector<Stage>{Stage::kComm, Stage::kOps, Stage::kGroundTruth, Stage::kDrift}
                                       : parse_stages(request.stages);
}

// The job file, the output, the Slurm log pattern and the itertime binary, as absolute paths.
void resolve_paths(const SubmitRequest& request, const std::string& running_binary, ScriptSpec& spec) {
  std::error_code error;
  const auto canonical = std::filesystem::canonical(request.job_file, error);
  spec.job_file = error ? absolute_path(request.job_file) : canonical.string();
  spec.output = absolute_path(request.output);
  if (std::filesystem::is_directory(spec.output, error)) {
    throw UserError("--output " + request.output + ": is a directory; give the HDF5 file's path (e.g. " + request.output +
                    "/cluster.h5)");
  }
  if (request.log.empty()) {
    if (spec.output.find('\\') != std::string::npos) {
      throw UserError("--output " + request.output +
                      ": contains a backslash, which Slurm output-file patterns cannot carry; pass --log PATH without one");
    }
    spec.log_pattern = escape_filename_pattern(spec.output) + ".slurm-%j.log";
  } else {
    if (request.log.find('\\') != std::string::npos) {
      throw UserError("--log " + request.log +
                      ": contains a backslash, which turns off Slurm's %j patterns; choose another path");
    }
    spec.log_pattern = absolute_path(request.log);
  }
  spec.itertime = absolute_path(request.itertime.empty() ? running_binary : request.itertime);
}

// The allocation against the ranks the job asks for (its "ranks", else its largest configuration, as
// `itertime run` launches): fewer would leave the job's larger configurations to be recorded as skipped
// only after it queued and ran, so that is refused unless --allow-fewer-ranks, and then a warning.
// Configurations above the job's own "ranks" are skipped by the job's design (jobs/reduced-cpu.json):
// not refused.
void check_allocation(const SubmitRequest& request, const Job& job, ScriptSpec& spec) {
  const int wanted = job.ranks > 0 ? job.ranks : std::max(2, job.max_world_size());
  if (spec.ranks() >= wanted) return;
  int larger = 0;
  int largest = 0;
  for (const JobConfig& config : job.configs) {
    const int world = config.parallel.world_size();
    if (world > spec.ranks()) ++larger;
    largest = std::max(largest, world);
  }
  const std::string held = "the allocation holds " + std::to_string(spec.ranks()) + " ranks (" + std::to_string(spec.nodes) +
                           " node(s) x " + std::to_string(spec.ntasks_per_node) + "), the job " + request.job_file +
                           " asks for " + std::to_string(wanted) +
                           (job.ranks > 0 ? " (its \"ranks\")" : " (its largest configuration)") + ": " + std::to_string(larger) +
                           " of its " + std::to_string(job.configs.size()) + " configurations (up to " + std::to_string(largest) +
                           " ranks) would be recorded as skipped";
  if (!request.allow_fewer_ranks) {
    throw UserError(held + " after the job queued and ran; raise --nodes or " +
                    (spec.gpus_per_node > 0 ? std::string("--gpus-per-node") : std::string("--ntasks-per-node")) +
                    ", or pass --allow-fewer-ranks to calibrate only what fits");
  }
  spec.warnings.push_back(held + " (--allow-fewer-ranks)");
}

// Nodes, tasks per node, GPUs and CPUs per task.
void resolve_tasks(const SubmitRequest& request, const Job& job, ScriptSpec& spec) {
  spec.nodes = request.nodes;
  spec.gpus_per_node = request.gpus_per_node;
  if (job.backend == Backend::kCuda && spec.gpus_per_node == 0) {
    throw UserError(request.job_file + ": the job runs on cuda; give --gpus-per-node (one rank per GPU)");
  }
  if (request.ntasks_per_node > 0) {
    spec.ntasks_per_node = request.ntasks_per_node;
  } else if (spec.gpus_per_node > 0) {
    spec.ntasks_per_node = spec.gpus_per_node;
  } else {
    const int ranks = job.ranks > 0 ? job.ranks : std::max(2, job.max_world_size());
    spec.ntasks_per_node = (ranks + spec.nodes - 1) / spec.nodes;
  }
  if (spec.gpus_per_node > 0 && spec.ntasks_per_node > spec.gpus_per_node) {
    throw UserError("--ntasks-per-node " + std::to_string(spec.ntasks_per_node) + " exceeds --gpus-per-node " +
                    std::to_string(spec.gpus_per_node) + ": itertime runs one rank per GPU");
  }
  const bool has_comm = std::find(spec.stages.begin(), spec.stages.end(), Stage::kComm) != spec.stages.end();
  if (has_comm && spec.ranks() < 2) {
    throw UserError("the comm stage needs at least 2 ranks, the job would get " + std::to_string(spec.ranks()) +
                    "; raise --nodes or --ntasks-per-node, or leave comm out of --stages");
  }
  spec.cpus_per_task = request.cpus_per_task > 0 ? request.cpus_per_task : (job.compute_threads > 1 ? job.compute_threads : 0);
  spec.exclusive = !request.no_exclusive;
  check_allocation(request, job, spec);
}

}  // namespace

ScriptSpec resolve(const SubmitRequest& request, const std::string& running_binary, const std::string& version) {
  ScriptSpec spec;
  spec.itertime_version = version;
  resolve_options(request, spec);              // cheap checks of the options first,
  const Job job = load_job(request.job_file);  // then the job (UserError naming the file when missing or malformed)
  spec.job_label = sanitize_name(job.name);
  spec.job_name = "itertime-" + spec.job_label;
  spec.backend = to_string(job.backend);
  spec.comm = job.comm;
  spec.rounds = job.rounds;
  resolve_paths(request, running_binary, spec);
  resolve_tasks(request, job, spec);
  return spec;
}

std::string render_script(const ScriptSpec& spec) {
  std::ostringstream s;
  const int ranks = spec.ranks();
  s << "#!/bin/bash\n";
  s << "# itertime calibration of job " << spec.job_label << ", rendered by `itertime slurm submit` (itertime "
    << sanitize_name(spec.itertime_version) << "); see docs/slurm.md.\n";
  s << "# Requeue-safe: every stage runs with --resume into the same HDF5 file, so a requeued or resubmitted job\n";
  s << "# continues where it stopped; a killed stage loses at most the point it was measuring.\n";
  s << "#SBATCH --job-name=" << sbatch_quote("job name", spec.job_name) << "\n";
  s << "#SBATCH --nodes=" << spec.nodes << "\n";
  s << "#SBATCH --ntasks-per-node=" << spec.ntasks_per_node << "\n";
  if (spec.gpus_per_node > 0) s << "#SBATCH --gpus-per-node=" << spec.gpus_per_node << "\n";
  if (spec.cpus_per_task > 0) s << "#SBATCH --cpus-per-task=" << spec.cpus_per_task << "\n";
  if (spec.exclusive) s << "#SBATCH --exclusive\n";
  if (!spec.partition.empty()) s << "#SBATCH --partition=" << sbatch_quote("--partition", spec.partition) << "\n";
  if (!spec.account.empty()) s << "#SBATCH --account=" << sbatch_quote("--account", spec.account) << "\n";
  if (!spec.qos.empty()) s << "#SBATCH --qos=" << sbatch_quote("--qos", spec.qos) << "\n";
  if (!spec.time_limit.empty()) s << "#SBATCH --time=" << sbatch_quote("--time", spec.time_limit) << "\n";
  s << "#SBATCH --output=" << sbatch_quote("--log", spec.log_pattern) << "\n";
  s << "#SBATCH --open-mode=append\n";
  s << "#SBATCH --requeue\n";
  s << "\n";
  s << "set -euo pipefail\n";
  s << "\n";
  s << "ITERTIME=" << shell_quote(spec.itertime) << "\n";
  s << "JOB=" << shell_quote(spec.job_file) << "\n";
  s << "OUTPUT=" << shell_quote(spec.output) << "\n";
  s << "RANKS=" << ranks << "\n";
  s << "\n";
  s << "say() { printf 'itertime-slurm: %s job %s restart %s: %s\\n' \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" "
       "\"${SLURM_JOB_ID:-none}\" \"${SLURM_RESTART_COUNT:-0}\" \"$1\"; }\n";
  s << "if [ -z \"${SLURM_JOB_ID:-}\" ]; then\n";
  s << "  echo 'itertime-slurm: error: run this script with sbatch (or inside salloc)' >&2\n";
  s << "  exit 2\n";
  s << "fi\n";
  s << "if [ ! -x \"$ITERTIME\" ]; then\n";
  s << "  printf 'itertime-slurm: error: %s is not executable on %s; pass --itertime to itertime slurm submit\\n' "
       "\"$ITERTIME\" \"$(hostname)\" >&2\n";
  s << "  exit 2\n";
  s << "fi\n";
  s << "\n";
  if (spec.gpus_per_node > 0) {
    s << "# One rank per GPU; itertime binds each rank to GPU (node-local rank mod visible GPUs), docs/slurm.md.\n";
  } else {
    s << "# One rank per task slot.\n";
  }
  s << "launch() {\n";
  if (spec.launcher == LaunchMethod::kSrun) {
    s << "  srun --mpi=" << spec.srun_mpi << " --nodes=" << spec.nodes << " --ntasks=" << ranks
      << " --ntasks-per-node=" << spec.ntasks_per_node;
    if (spec.cpus_per_task > 0) s << " --cpus-per-task=" << spec.cpus_per_task;
    s << " --kill-on-bad-exit=1 \"$@\"\n";
  } else {
    s << "  mpirun -np " << ranks << " --map-by ppr:" << spec.ntasks_per_node << ":node";
    if (spec.cpus_per_task > 0) s << ":PE=" << spec.cpus_per_task;
    s << " \"$@\"\n";
  }
  s << "}\n";
  s << "\n";
  s << "say \"start on ${SLURM_JOB_NODELIST:-?}: ${RANKS} ranks, output ${OUTPUT}\"\n";
  s << "launch \"$ITERTIME\" info\n";
  const StageInputs inputs{spec.job_file, spec.output, parse_backend(spec.backend), spec.comm, spec.rounds};
  for (Stage stage : spec.stages) {
    s << "\n";
    s << "say 'calibrate " << to_string(stage) << "'\n";
    s << "launch \"$ITERTIME\"";
    for (const std::string& argument : stage_arguments(stage, inputs)) s << " " << script_word(argument, spec);
    s << "\n";
  }
  s << "\n";
  s << "say 'all stages complete'\n";
  s << "\"$ITERTIME\" inspect \"$OUTPUT\"\n";
  return s.str();
}

}  // namespace itertime::launcher::slurm
