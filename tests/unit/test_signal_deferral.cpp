// test_signal_deferral.cpp: SIGTERM inside a SignalDeferral scope waits for the scope's end; the handler
// in place before comes back. Each case runs in a forked child (the signal ends it), which reports
// through a pipe how far it got.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <unistd.h>

#include "common/signal_deferral.hpp"
#include "child_process.hpp"

namespace itertime {
namespace {

using testing::ChildResult;
using testing::run_in_child;
using testing::say;

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
