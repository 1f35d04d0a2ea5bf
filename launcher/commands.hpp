// commands.hpp: each `itertime` subcommand registers itself on the CLI11 app and returns the action
// to run after parsing. Invariants: an action returns an exit code (0 or 2) or throws UserError /
// InternalError; it prints its results on stdout and nothing but errors on stderr.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace itertime::launcher {

struct Context {
  int argc = 0;
  char** argv = nullptr;
  std::string command_line;  // argv joined, recorded in /meta
};

using Action = std::function<int(Context&)>;

// What `itertime --help` says of the calibration verbs, written once for the binary that runs them
// (itertime-calibrate) and for the front that hands them over (calibration_verbs.hpp).
inline constexpr const char* kInfoSummary = "Print the build configuration, library versions, devices and MPI world";
inline constexpr const char* kCalibrateSummary =
    "Measure a cluster: communication (comm), operators (ops), ground truth (groundtruth), operators again where the machine "
    "drifted (drift), GEMM throughput and clocks sustained for minutes (sustained); run under mpirun or srun";
inline constexpr const char* kRunSummary =
    "Whole pipeline for a job: calibrate comm, ops, ground truth and drift, fit, validate (resumable; launches its own ranks)";

using Registrar = void (*)(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);

// Each returns the action bound to its (sub)command; the action runs only if that command was chosen.
// register_info, register_calibrate and register_run live in itertime-calibrate only (they need MPI).
void register_info(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_model(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_calibrate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_predict(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_validate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_import(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_plan(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_run(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_inspect(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_slurm(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_published(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
// `itertime fit --framework megatron-te FILE... -o TERMS.json` (cmd_framework_fit.cpp).
int run_framework_fit(const std::vector<std::string>& files, const std::string& hardware, const std::string& output, bool force);

}  // namespace itertime::launcher
