// calibration_verbs.hpp: the calibration verbs (info, calibrate, run) as the light front `itertime`
// (main.cpp) sees them. They live in itertime-calibrate, which links MPI and LibTorch; the front links
// neither, so that predict, plan and --help start in milliseconds and a prediction-only build
// (ITERTIME_WITH_MPI=OFF, or no MPI found) exists at all.
// Invariants:
//  - In a build with calibration (ITERTIME_HAVE_CALIBRATION), `itertime VERB ARGS...` for a calibration
//    verb execs itertime-calibrate from the front's own folder (/proc/self/exe) before anything is
//    parsed, with argv and the environment unchanged: the same process (mpirun and srun keep the rank they
//    started), the same command line (recorded in /meta). The front still registers the verbs, by
//    their summaries (commands.hpp), so that its --help lists every subcommand.
//  - In a prediction-only build, calibrate and run refuse in one line (exit status 2) that says how to
//    get a build that calibrates; info prints what this build is (no MPI, no LibTorch, no devices).
#pragma once

#include "launcher/cli_app.hpp"

namespace itertime::launcher {

// info, calibrate or run.
bool is_calibration_verb(const char* word);

// Replaces this process by itertime-calibrate with the same argv; throws UserError when it cannot.
[[noreturn]] void exec_calibration_binary(char** argv);

// The stand-ins the front registers for the calibration verbs.
CalibrationVerbs front_calibration_verbs();

}  // namespace itertime::launcher
