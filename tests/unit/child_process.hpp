// child_process.hpp: runs a test body in a fork()ed child that a signal may end, and reports how far it
// got. Used by the signal tests (test_signal_deferral, test_interruption_journal).
// Invariants: the child writes its progress to a pipe (say()); the parent reads it all, then waits for
// the child, so `reached` holds everything written before the child ended; a body that returns exits 0.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <string>

namespace itertime::testing {

struct ChildResult {
  std::string reached;  // what the child wrote before it ended
  int signal = 0;       // the signal that ended it, 0 when it exited
  int exit_code = -1;
};

// Runs body(fd) in a child, fd the write end of the pipe the parent reads.
template <typename Body>
ChildResult run_in_child(Body body) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    body(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;
  char buffer[64];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) result.reached.append(buffer, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

// In the child: reports `text` to the parent (exit status 3 when the pipe cannot be written).
inline void say(int fd, const char* text) {
  const std::string s(text);
  if (write(fd, s.data(), s.size()) < 0) _exit(3);
}

}  // namespace itertime::testing
