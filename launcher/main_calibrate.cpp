// main_calibrate.cpp: `itertime-calibrate`, the heavy half of the `itertime` command: the calibration
// verbs (info, calibrate comm|ops|groundtruth, run), which need MPI and LibTorch. The light front
// `itertime` (main.cpp) execs it, with the user's argument vector unchanged, for those verbs; `run`
// launches its stages with this binary (/proc/self/exe). It also serves every other verb, as the front
// does, so any `itertime` command line means the same here. See docs/cli.md and docs/layout.md.
// Invariants: exit status 0 on success, 2 on a user's mistake (one line on stderr naming the input and
// what to do), 1 on an internal failure (file and line on stderr; under MPI every rank is aborted).
#include <iostream>

#include "common/errors.hpp"
#include "launcher/cli_app.hpp"
#include "runtime/mpi_session.hpp"

int main(int argc, char** argv) {
  using namespace itertime;
  using namespace itertime::launcher;
  try {
    return run_command_line(argc, argv, CalibrationVerbs{register_info, register_calibrate, register_run});
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
