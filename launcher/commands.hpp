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

// Each returns the action bound to its (sub)command; the action runs only if that command was chosen.
void register_info(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_model(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_calibrate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_predict(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_plan(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_run(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_inspect(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_slurm(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);

}  // namespace itertime::launcher
