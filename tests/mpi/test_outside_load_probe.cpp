// MPI tests of OutsideLoadProbe (runtime/outside_load_probe.hpp): a process outside the communicator
// that spins during the probed stretch shows as outside load, the same on every rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <thread>

#include "common/cpu_load.hpp"
#include "runtime/outside_load_probe.hpp"

extern char** environ;

namespace itertime {
namespace {

// A child process that spins until killed (RAII: killed and reaped on destruction).
class SpinningProcess {
 public:
  SpinningProcess() {
    char sh[] = "/bin/sh", c[] = "-c", loop[] = "while :; do :; done";
    char* argv[] = {sh, c, loop, nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, argv, environ) != 0) pid_ = -1;
  }
  ~SpinningProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  SpinningProcess(const SpinningProcess&) = delete;
  SpinningProcess& operator=(const SpinningProcess&) = delete;
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

TEST(OutsideLoadProbe, AnotherProcessSpinningIsOutsideLoad) {
  if (!read_machine_cpu_times().available) GTEST_SKIP() << "no /proc/stat here";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  OutsideLoadProbe probe(MPI_COMM_WORLD);
  OutsideLoad load;
  {
    std::unique_ptr<SpinningProcess> spinner;
    if (rank == 0) {
      spinner = std::make_unique<SpinningProcess>();
      EXPECT_TRUE(spinner->running()) << "posix_spawn /bin/sh";  // not ASSERT: the other ranks go on
    }
    probe.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the ranks leave the cores to it
    load = probe.stop();
  }
  // The spinner gets most of a core while the ranks sleep; anything else running only adds to it.
  EXPECT_GE(load.outside_cores, 0.4);
  double lowest = 0, highest = 0;
  MPI_Allreduce(&load.outside_cores, &lowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&load.outside_cores, &highest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lowest, highest) << "every rank gets the same figure";
}

}  // namespace
}  // namespace itertime
