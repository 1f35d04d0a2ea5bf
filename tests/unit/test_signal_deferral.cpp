// test_signal_deferral.cpp: SIGTERM inside a SignalDeferral scope waits for the scope's end; the handler
// in place before comes back. Each case runs in a forked child (the signal ends it), which reports
// through a pipe how far it got.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "common/signal_deferral.hpp"

namespace itertime {
namespace {

struct ChildResult {
  std::string reached;  // what the child wrote before it ended
  int signal = 0;       // the signal that ended it, 0 when it exited
  int exit_code = -1;
};

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

void say(int fd, const char* text) {
  const std::string s(text);
  if (write(fd, s.data(), s.size()) < 0) _exit(3);
}

TEST(SignalDeferral, SigtermInsideTheScopeEndsTheProcessOnlyAtItsEnd) {
  const ChildResult r = run_in_child([](int fd) {
    {
      const SignalDeferral scope;
      std::raise(SIGTERM);
      say(fd, "inside;");  // still running: the signal is held
    }
    say(fd, "after;");  // never: the held signal was delivered when the scope closed
  });
  EXPECT_EQ(r.reached, "inside;");
  EXPECT_EQ(r.signal, SIGTERM);
}

TEST(SignalDeferral, NestedScopesDeliverAtTheOutermostEnd) {
  const ChildResult r = run_in_child([](int fd) {
    {
      const SignalDeferral outer;
      {
        const SignalDeferral inner;
        std::raise(SIGINT);
      }
      say(fd, "between;");
    }
    say(fd, "after;");
  });
  EXPECT_EQ(r.reached, "between;");
  EXPECT_EQ(r.signal, SIGINT);
}

TEST(SignalDeferral, WithoutASignalNothingHappensAndThePreviousHandlerIsBack) {
  const ChildResult r = run_in_child([](int fd) {
    { const SignalDeferral scope; }
    struct sigaction current {};
    sigaction(SIGTERM, nullptr, &current);
    say(fd, current.sa_handler == SIG_DFL ? "default;" : "changed;");
    std::raise(SIGTERM);  // outside any scope: immediate
    say(fd, "after;");
  });
  EXPECT_EQ(r.reached, "default;");
  EXPECT_EQ(r.signal, SIGTERM);
}

}  // namespace
}  // namespace itertime
