// MPI tests of the watchdog (runtime/watchdog.hpp), with a recording handler instead of the one that ends
// the process: its timing rule on a fake clock; a guarded wait longer than a short timeout is reported
// once, naming the rank, the operation, its size and group; operations that each end in time are never
// reported however long they run together; a nested guard keeps the outer description; a real blocking
// MPI_Recv, guarded by nothing but the profiling-interface entry point, is reported with its size and
// group; a watched resource's lasting asynchronous error (NCCL's) is reported; a process whose launcher
// dies (its parent, in a fork()ed pair) is reported, one whose launcher lives is not, and which
// environments name a launcher; the limit's resolution
// (option, ITERTIME_WATCHDOG_S, default) and its refusals.
// Every rank runs the same sequence of tests (each rank watches its own waits).
#include <gtest/gtest.h>
#include <mpi.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.hpp"
#include "runtime/watchdog.hpp"
#include "tests/mpi/world.hpp"

namespace itertime {
namespace {

using mpi_test::world_rank;
using mpi_test::world_size;

// Collects the reports of a Watchdog (called from its thread).
struct Reports {
  std::mutex mutex;
  std::vector<std::string> lines;
  Watchdog::Handler handler() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
};

void sleep_s(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

TEST(Watchdog, StallTimerOnAFakeClock) {
  StallTimer timer;
  EXPECT_DOUBLE_EQ(timer.observe(0, 0.0), 0.0);  // idle
  EXPECT_DOUBLE_EQ(timer.observe(1, 1.0), 0.0);  // operation 1 first seen
  EXPECT_DOUBLE_EQ(timer.observe(1, 3.5), 2.5);
  EXPECT_DOUBLE_EQ(timer.observe(1, 10.0), 9.0);
  EXPECT_DOUBLE_EQ(timer.observe(3, 11.0), 0.0);  // another operation: counted afresh
  EXPECT_DOUBLE_EQ(timer.observe(3, 12.0), 1.0);
  EXPECT_DOUBLE_EQ(timer.observe(4, 13.0), 0.0);  // idle again
  EXPECT_DOUBLE_EQ(timer.observe(4, 20.0), 0.0);
}

TEST(Watchdog, ReportsAWaitLongerThanTheTimeoutOnce) {
  Reports reports;
  {
    Watchdog watchdog(0.2, world_rank(), world_size(), reports.handler());
    ASSERT_TRUE(watchdog.running());
    WatchedOperation watched("test wait", 1024 * 1024, 4);
    sleep_s(0.8);
  }
  const std::vector<std::string> lines = reports.get();
  ASSERT_EQ(lines.size(), 1U);
  const std::string who = "itertime: error: rank " + std::to_string(world_rank()) + " of " + std::to_string(world_size());
  EXPECT_EQ(lines[0].rfind(who + " waited ", 0), 0U) << lines[0];
  EXPECT_NE(lines[0].find(" s in test wait (1.0 MiB, group of 4) for its peers"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("--watchdog-s"), std::string::npos) << lines[0];
}

TEST(Watchdog, OperationsThatEachEndInTimeAreNotReported) {
  Reports reports;
  {
    // Each wait lasts 20 ms, far below the limit even on a loaded machine; all of them, 1.2 s.
    Watchdog watchdog(0.5, world_rank(), world_size(), reports.handler());
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
    while (std::chrono::steady_clock::now() < end) {
      WatchedOperation watched("short wait", 8, 2);
      sleep_s(0.02);
    }
    sleep_s(0.7);  // idle, longer than the limit
  }
  EXPECT_TRUE(reports.get().empty());
}

TEST(Watchdog, ANestedGuardKeepsTheOuterOperation) {
  Reports reports;
  {
    Watchdog watchdog(0.2, world_rank(), world_size(), reports.handler());
    WatchedOperation outer("outer wait", -1, 3);
    { WatchedOperation inner("inner wait", 8, 2); }
    sleep_s(0.8);  // the inner guard's end did not end the outer operation
  }
  const std::vector<std::string> lines = reports.get();
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find(" s in outer wait (group of 3) for its peers"), std::string::npos) << lines[0];
}

TEST(Watchdog, NoThreadWhenOff) {
  Reports reports;
  Watchdog watchdog(0.0, world_rank(), world_size(), reports.handler());
  EXPECT_FALSE(watchdog.running());
}

// Rank 0 waits in a plain MPI_Recv (no guard of ours) for a message the last rank sends late.
TEST(Watchdog, ABlockingMpiCallIsWatchedThroughTheProfilingInterface) {
  Reports reports;
  const int last = world_size() - 1;
  {
    Watchdog watchdog(0.2, world_rank(), world_size(), reports.handler());
    int value = 0;
    if (world_rank() == 0) {
      MPI_Recv(&value, 1, MPI_INT, last, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      EXPECT_EQ(value, 7);
    } else if (world_rank() == last) {
      sleep_s(0.8);
      value = 7;
      MPI_Send(&value, 1, MPI_INT, 0, 41, MPI_COMM_WORLD);
    }
  }
  const std::vector<std::string> lines = reports.get();
  if (world_rank() == 0) {
    ASSERT_EQ(lines.size(), 1U);
    EXPECT_NE(lines[0].find(" s in MPI_Recv (4 B, group of " + std::to_string(world_size()) + ") for its peers"),
              std::string::npos)
        << lines[0];
  } else {
    EXPECT_TRUE(lines.empty()) << lines[0];
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A stand-in for an NCCL communicator: healthy until told otherwise; counts its aborts.
class FakeResource final : public WatchedResource {
 public:
  std::string async_error() override { return failed_ ? "NCCL: remote process exited or there was a network error" : ""; }
  void abort() noexcept override { ++aborts_; }
  std::atomic<bool> failed_{false};
  std::atomic<int> aborts_{0};
};

TEST(Watchdog, ALastingAsynchronousErrorIsReported) {
  Reports reports;
  FakeResource resource;
  {
    WatchedResourceRegistration registration(&resource);
    Watchdog watchdog(2.0, world_rank(), world_size(), reports.handler(), /*async_error_grace_s=*/0.2);
    sleep_s(0.3);
    EXPECT_TRUE(reports.get().empty());  // healthy
    WatchedOperation watched("synchronize (NCCL stream)", -1, 2);
    resource.failed_ = true;
    sleep_s(1.0);  // polls every 0.2 s; the wait itself stays below the 2 s limit
  }
  const std::vector<std::string> lines = reports.get();
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("communicator failed (NCCL: remote process exited or there was a network error) while in "
                          "synchronize (NCCL stream) (group of 2)"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(resource.aborts_, 0);  // only the default handler, which ends the process, aborts
}

TEST(Watchdog, LimitFromOptionEnvironmentOrDefault) {
  unsetenv(kWatchdogEnvironment);
  EXPECT_DOUBLE_EQ(watchdog_seconds(""), kDefaultWatchdogSeconds);
  EXPECT_DOUBLE_EQ(watchdog_seconds("12.5"), 12.5);
  EXPECT_DOUBLE_EQ(watchdog_seconds("0"), 0.0);
  setenv(kWatchdogEnvironment, "5", 1);
  EXPECT_DOUBLE_EQ(watchdog_seconds(""), 5.0);
  EXPECT_DOUBLE_EQ(watchdog_seconds("7"), 7.0);  // the option wins
  setenv(kWatchdogEnvironment, "soon", 1);
  try {
    watchdog_seconds("");
    ADD_FAILURE() << "a malformed ITERTIME_WATCHDOG_S was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("ITERTIME_WATCHDOG_S"), std::string::npos) << error.what();
  }
  unsetenv(kWatchdogEnvironment);
  EXPECT_THROW(watchdog_seconds("-1"), UserError);
  EXPECT_THROW(watchdog_seconds("1s"), UserError);
  EXPECT_THROW(watchdog_seconds("inf"), UserError);
}

// A fork()ed "launcher" starts a "rank" that watches it, then dies as a SIGKILLed mpiexec would: the
// rank's watchdog must report it (through a pipe, the rank being no child of this process any more).
TEST(Watchdog, ARankWhoseLauncherDiesIsReported) {
  int report_pipe[2];
  ASSERT_EQ(pipe(report_pipe), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    close(report_pipe[0]);
    const pid_t launcher_self = getpid();  // not the rank's getppid(): the launcher may be gone by then
    const pid_t rank = fork();
    if (rank == 0) {
      const int out = report_pipe[1];
      Watchdog watchdog(
          0.2, 3, 4,
          [out](const std::string& line) {
            const std::string text = line + "\n";
            if (write(out, text.data(), text.size()) < 0) _exit(4);
            _exit(0);
          },
          Watchdog::kAsyncErrorGrace_s, launcher_self);
      sleep_s(20.0);
      _exit(3);  // never reported
    }
    _exit(rank > 0 ? 0 : 5);  // the launcher dies at once, its rank still running
  }
  close(report_pipe[1]);
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string report;
  pollfd readable{report_pipe[0], POLLIN, 0};
  char buffer[512];
  while (poll(&readable, 1, 15000) > 0) {  // the report comes within one poll period (20 ms here)
    const ssize_t got = read(report_pipe[0], buffer, sizeof(buffer));
    if (got <= 0) break;
    report.append(buffer, static_cast<std::size_t>(got));
  }
  close(report_pipe[0]);
  EXPECT_EQ(
      report.rfind(
          "itertime: error: rank 3 of 4 lost the launcher that started it (pid " + std::to_string(launcher) + ", killed?)", 0),
      0U)
      << report;
}

TEST(Watchdog, ARankWhoseLauncherLivesIsNotReported) {
  Reports reports;
  {
    Watchdog watchdog(0.1, world_rank(), world_size(), reports.handler(), Watchdog::kAsyncErrorGrace_s, getppid());
    sleep_s(0.3);  // 30 polls
  }
  EXPECT_TRUE(reports.get().empty());
}

TEST(Watchdog, TheLauncherIsWatchedOnlyWhenTheEnvironmentNamesOne) {
  const char* names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "SLURM_PROCID"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) saved.emplace_back(name, value);
    unsetenv(name);
  }
  EXPECT_EQ(launcher_to_watch(), 0);  // a singleton (or nohup) run: nothing to watch
  for (const char* name : names) {
    setenv(name, "1", 1);
    EXPECT_EQ(launcher_to_watch(), getppid()) << name;
    unsetenv(name);
  }
  for (const auto& [name, value] : saved) setenv(name.c_str(), value.c_str(), 1);
}

}  // namespace
}  // namespace itertime
