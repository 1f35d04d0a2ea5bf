// errors.hpp: the two kinds of failure itertime knows, and the exit codes they map to.
// Invariants:
//  - UserError is a user's mistake (bad config, impossible layout, wrong file): one clear line naming
//    the input and what to do; the command exits with status 2 and creates or damages no output file.
//  - InternalError is a bug or a broken environment: it carries file and line; exit status 1, and under
//    MPI every rank is aborted (no hangs).
//  - 0 is success. Nothing else is ever returned by `itertime`.
#pragma once

#include <stdexcept>
#include <string>

namespace itertime {

enum ExitCode : int { kExitSuccess = 0, kExitInternal = 1, kExitUserError = 2 };

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// A user's mistake that every MPI rank detects identically (same inputs, same check): every rank throws
// it, so the command can finalize MPI and exit with status 2 on all ranks instead of aborting.
class CollectiveUserError : public UserError {
 public:
  explicit CollectiveUserError(const std::string& message) : UserError(message) {}
};

class InternalError : public std::runtime_error {
 public:
  InternalError(const std::string& message, const char* file, int line)
      : std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + message) {}
};

}  // namespace itertime

// Internal invariant check: throws InternalError naming file, line, the condition and a hint.
#define ITERTIME_CHECK(cond, hint)                                                                                      \
  do {                                                                                                                  \
    if (!(cond)) {                                                                                                      \
      throw ::itertime::InternalError(std::string("check failed: ") + #cond + " (" + (hint) + ")", __FILE__, __LINE__); \
    }                                                                                                                   \
  } while (0)
