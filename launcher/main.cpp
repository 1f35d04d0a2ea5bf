// main.cpp: the `itertime` command, its light front: one binary, one subcommand per task (docs/cli.md).
// It links no MPI and no LibTorch (tests/layering checks it): the prediction, validation and reading
// verbs run here and start in milliseconds; the calibration verbs (info, calibrate, run) are handed to
// itertime-calibrate beside it, or refused in a prediction-only build (calibration_verbs.hpp).
// Invariants: exit status 0 on success, 2 on a user's mistake (one line on stderr naming the input and
// what to do), 1 on an internal failure (file and line on stderr).
#include <iostream>

#include "common/errors.hpp"
#include "launcher/calibration_verbs.hpp"
#include "launcher/cli_app.hpp"

int main(int argc, char** argv) {
  using namespace itertime;
  using namespace itertime::launcher;
  try {
#ifdef ITERTIME_HAVE_CALIBRATION
    // The top level takes no option with a value, so a calibration verb can only come first.
    if (argc > 1 && is_calibration_verb(argv[1])) exec_calibration_binary(argv);
#endif
    return run_command_line(argc, argv, front_calibration_verbs());
  } catch (const UserError& error) {
    std::cerr << "itertime: error: " << one_line(error.what()) << "\n";
    return kExitUserError;
  } catch (const std::exception& error) {  // InternalError included
    std::cerr << "itertime: internal error: " << error.what() << "\n";
    return kExitInternal;
  }
}
