// slurm_script.hpp: renders the Slurm batch script of `itertime slurm submit` (docs/slurm.md).
// Pure functions (no Slurm, no MPI), unit-tested in tests/slurm/.
// Invariants:
//  - Every user value that reaches the script is quoted for the parser that reads it: shell_quote()
//    for the bash body (one word, no expansion of $, `, \, ! or globs), sbatch_quote() for #SBATCH
//    directive lines (sbatch's own parser, not the shell's). Values that no quoting can carry (control
//    characters such as a newline; a backslash in a Slurm output-file pattern) are refused with a
//    UserError, never silently altered.
//  - Comments in the script carry only sanitized text ([A-Za-z0-9._-]).
//  - The rendered script is requeue-safe: every stage runs with --resume into the same HDF5 file, the
//    Slurm log is opened in append mode, and the job is marked requeueable.
//  - A stage's line is stage_arguments() (launcher/stage_command.hpp), the command `itertime run`
//    launches, each word shell-quoted; words equal to the job file or the output path are written as the
//    script's "$JOB" and "$OUTPUT".
#pragma once

#include <string>
#include <vector>

#include "common/job.hpp"
#include "launcher/stage_command.hpp"

namespace itertime::launcher::slurm {

// POSIX shell quoting: one single-quoted word ('\'' for each quote); the empty string gives ''.
// Words made only of [A-Za-z0-9_@%+=:,./-] are returned unchanged (nothing in them is special).
std::string shell_quote(const std::string& value);

// Quoting for the value of a #SBATCH directive: "..." with '\' and '"' escaped by a backslash. sbatch
// (22.05 and later) reads it back as the exact value; '#', spaces, quotes, $ and ; are literal inside.
// Throws UserError when `value` holds a control character (a directive is one line).
std::string sbatch_quote(const std::string& what, const std::string& value);

// Escapes '%' as "%%" so that Slurm's output-file patterns (%j, %x, ...) leave a literal path alone.
std::string escape_filename_pattern(const std::string& path);

// Slurm's --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (and UNLIMITED / INFINITE).
bool is_valid_time_limit(const std::string& value);

// A Slurm job name made of [A-Za-z0-9._-] (other characters become '_'), at most 64 characters.
std::string sanitize_name(const std::string& value);

// The job id in `sbatch --parsable` output ("42" or "42;cluster"); -1 when there is none.
long parse_sbatch_job_id(const std::string& stdout_text);

// The calibration stages and their command lines are launcher/stage_command.hpp's, shared with `run`.
using launcher::Stage;
using launcher::to_string;
// Names: comm, ops, groundtruth (a comma list is split by the caller). Unknown names: UserError.
// The result is in pipeline order, without duplicates.
std::vector<Stage> parse_stages(const std::vector<std::string>& names);

enum class LaunchMethod { kSrun, kMpirun };
LaunchMethod parse_launcher(const std::string& name);  // srun | mpirun; else UserError

// Everything the script needs, resolved: absolute paths, validated numbers.
struct ScriptSpec {
  std::string job_name;     // Slurm job name (sanitized)
  std::string job_label;    // the job's name, sanitized, for comments
  std::string job_file;     // absolute path of the job (.json)
  std::string output;       // absolute path of the HDF5 file
  std::string log_pattern;  // Slurm output-file pattern (may hold %j), absolute
  std::string itertime;     // absolute path of the itertime binary the job runs
  std::string itertime_version;
  std::string backend = "cpu";  // cpu | cuda (the job's)
  int nodes = 1;
  int ntasks_per_node = 1;
  int gpus_per_node = 0;  // 0: no GPU request
  int cpus_per_task = 0;  // 0: not requested
  std::string partition;  // empty: the cluster's default
  std::string account;
  std::string qos;
  std::string time_limit;  // empty: the partition's default
  bool exclusive = true;
  LaunchMethod launcher = LaunchMethod::kSrun;
  std::string srun_mpi = "pmix";  // srun --mpi=...
  std::vector<Stage> stages{Stage::kComm, Stage::kOps, Stage::kGroundTruth, Stage::kDrift};
  CommSweepSpec comm;  // the job's "comm" section, rendered as calibrate comm options
  RoundPolicy rounds;  // the job's outside-load limit and extra tries, which its comm stage applies (as `itertime run`)
  // For the user, not the script: what resolve() let through but the user should know (each one line),
  // e.g. an allocation smaller than the job under --allow-fewer-ranks.
  std::vector<std::string> warnings;

  int ranks() const { return nodes * ntasks_per_node; }
};

// What the user asked for on the command line (`itertime slurm submit`), before resolution.
struct SubmitRequest {
  std::string job_file;
  std::string output;
  std::string log;       // empty: OUTPUT.slurm-%j.log
  std::string itertime;  // empty: the running binary
  int nodes = 1;
  int gpus_per_node = 0;
  int ntasks_per_node = 0;  // 0: gpus_per_node, or the job's ranks spread over the nodes
  int cpus_per_task = -1;   // -1: the job's compute_threads when > 1
  std::string partition;
  std::string account;
  std::string qos;
  std::string time_limit;
  bool no_exclusive = false;
  std::string launcher = "srun";
  std::string srun_mpi = "pmix";
  std::vector<std::string> stages;  // empty: all
  bool allow_fewer_ranks = false;   // submit an allocation of fewer ranks than the job asks for (a warning)
};

// Loads the job and validates the request; every mistake is a UserError naming the option. An
// allocation of fewer ranks than the job asks for (its "ranks", else its largest configuration) is a
// mistake unless request.allow_fewer_ranks, which turns it into a line of spec.warnings.
// `running_binary` is the default for the itertime path; `version` goes into the script's header.
ScriptSpec resolve(const SubmitRequest& request, const std::string& running_binary, const std::string& version);

// The batch script (bash), ready for sbatch.
std::string render_script(const ScriptSpec& spec);

}  // namespace itertime::launcher::slurm
