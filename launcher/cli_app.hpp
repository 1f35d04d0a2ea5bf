// cli_app.hpp: the `itertime` command line, built, parsed and dispatched the same way by both binaries:
// the light front `itertime` (main.cpp) and `itertime-calibrate` (main_calibrate.cpp). They differ only
// in who serves the calibration verbs (info, calibrate, run): the front registers stand-ins that hand
// the command line over to itertime-calibrate (calibration_verbs.hpp); itertime-calibrate registers the
// real ones (cmd_info.cpp, cmd_calibrate.cpp, cmd_run.cpp).
// Invariants:
//  - The subcommands are registered in one order, with one summary each, so `--help` reads the same
//    from either binary.
//  - A usage mistake is one line on stderr ("itertime: error: ...") and exit status 2; an action's exit
//    status is returned as it is; UserError and InternalError pass through to main, which alone knows
//    whether MPI ranks must be aborted.
#pragma once

#include <string>

#include "launcher/commands.hpp"

namespace itertime::launcher {

struct CalibrationVerbs {
  Registrar info = nullptr;
  Registrar calibrate = nullptr;
  Registrar run = nullptr;
};

// Parses argv and runs the chosen subcommand's action; returns the exit status.
int run_command_line(int argc, char** argv, const CalibrationVerbs& verbs);

// A message on one line, as the error contract asks: line breaks that came with the input (a file's
// text quoted in a message) are shown escaped.
std::string one_line(const std::string& message);

}  // namespace itertime::launcher
