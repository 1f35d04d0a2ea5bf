// signal_deferral.hpp: a scope in which SIGTERM, SIGINT and SIGHUP (a Slurm preemption or time limit, a
// Ctrl-C, a lost terminal) are held back, so that an HDF5 append is never cut in half and a killed job's
// file stays readable for --resume; a signal that arrived inside is delivered when the outermost scope
// ends, to whatever handler was installed before (by default: the process ends).
// Invariants:
//  - Process-wide: the scope installs a signal handler (not a thread mask), so an OpenMP, OpenBLAS or MPI
//    thread cannot take the signal in the main thread's place. This is the one piece of process-global
//    state in itertime; signals are process-global.
//  - Scopes nest (a counter); the previous handlers are restored and the held signal raised when the
//    outermost one closes. Only the first signal held is kept (they all end the process by default).
//  - The handler only stores the signal number (async-signal-safe).
//  - Use it on the thread that writes; scopes are meant to be short (one write and flush).
#pragma once

namespace itertime {

class SignalDeferral {
 public:
  SignalDeferral();
  ~SignalDeferral();
  SignalDeferral(const SignalDeferral&) = delete;
  SignalDeferral& operator=(const SignalDeferral&) = delete;
};

}  // namespace itertime
