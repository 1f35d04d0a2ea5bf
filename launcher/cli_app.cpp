// cli_app.cpp: the `itertime` command line shared by both binaries (cli_app.hpp).
#include "launcher/cli_app.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <utility>
#include <vector>

#include "common/errors.hpp"

namespace itertime::launcher {

int run_command_line(int argc, char** argv, const CalibrationVerbs& verbs) {
  CLI::App app{"itertime: predicts the iteration time of distributed LLaMA training (see docs/cli.md)", "itertime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("itertime ") + ITERTIME_VERSION_STRING);

  std::vector<std::pair<CLI::App*, Action>> actions;
  verbs.info(app, actions);
  register_model(app, actions);
  verbs.calibrate(app, actions);
  register_predict(app, actions);
  register_validate(app, actions);
  register_plan(app, actions);
  register_published(app, actions);
  verbs.run(app, actions);
  register_inspect(app, actions);
  register_slurm(app, actions);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, exit status 2: a usage mistake is a user's mistake.
    std::string message = e.what();
    // CLI11 checks "a subcommand is required" before it reports arguments it did not understand, so
    // `itertime frobnicate` would not name the word: name it.
    const std::vector<std::string> unknown = app.remaining(/*recurse=*/true);
    if (e.get_name() == "RequiredError" && !unknown.empty()) {
      message = "unknown subcommand or argument '" + unknown.front() + "'";
    }
    std::cerr << "itertime: error: " << one_line(message) << " (run with --help for usage)\n";
    return kExitUserError;
  }

  Context context;
  context.argc = argc;
  context.argv = argv;
  for (int i = 0; i < argc; ++i) context.command_line += (i ? " " : "") + std::string(argv[i]);

  for (auto& [command, action] : actions) {
    if (command->parsed()) return action(context);
  }
  std::cerr << "itertime: error: no subcommand chosen (run with --help)\n";
  return kExitUserError;
}

std::string one_line(const std::string& message) {
  std::string out;
  for (char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace itertime::launcher
