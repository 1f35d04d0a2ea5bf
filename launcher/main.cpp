// main.cpp: the `itertime` command. One binary, one subcommand per task; see docs/cli.md.
// Invariants: exit status 0 on success, 2 on a user's mistake (one line on stderr naming the input and
// what to do), 1 on an internal failure (file and line on stderr; under MPI every rank is aborted).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "common/errors.hpp"
#include "runtime/mpi_session.hpp"
#include "launcher/commands.hpp"

static std::string one_line(const std::string& message);  // defined below, before main()

namespace {

int run(int argc, char** argv) {
  using namespace itertime;
  using namespace itertime::launcher;

  CLI::App app{"itertime: predicts the iteration time of distributed LLaMA training (see docs/cli.md)", "itertime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("itertime ") + ITERTIME_VERSION_STRING);

  std::vector<std::pair<CLI::App*, Action>> actions;
  register_info(app, actions);
  register_model(app, actions);
  register_calibrate(app, actions);
  register_predict(app, actions);
  register_plan(app, actions);
  register_run(app, actions);
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

}  // namespace

// A message on one line, as the error contract asks: line breaks that came with the input (a file's
// text quoted in a message) are shown escaped.
static std::string one_line(const std::string& message) {
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

int main(int argc, char** argv) {
  using namespace itertime;
  try {
    return run(argc, argv);
  } catch (const UserError& error) {
    std::cerr << "itertime: error: " << one_line(error.what()) << "\n";
    // Under MPI with several ranks, a user's mistake seen by one rank must not hang the others.
    int size = 1;
    if (MpiSession::initialized()) MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MpiSession::abort_all(kExitUserError);
    MpiSession::finalize_if_initialized();
    return kExitUserError;
  } catch (const InternalError& error) {
    std::cerr << "itertime: internal error: " << error.what() << "\n";
    MpiSession::abort_all(kExitInternal);
  } catch (const std::exception& error) {
    std::cerr << "itertime: internal error: " << error.what() << "\n";
    MpiSession::abort_all(kExitInternal);
  }
}
