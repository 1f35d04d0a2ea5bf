// fuzz_runner.hpp: runs a target's inputs in a forked worker so that a crash or a hang is caught,
// attributed to its input and reported instead of killing the test.
// Invariants:
//  - Inputs run in index order first..first+count-1, one worker process at a time; the worker publishes the
//    index it is running and when it started in shared memory, so a worker that dies by a signal, or
//    spends longer than the hang limit on one input, is attributed to that index; the parent then
//    restarts a worker at the next index. Every input is thus run once, and counted once.
//  - Each input ends in exactly one of: accepted, user_error (UserError), other (any other exception or
//    a broken invariant), crash or hang; the last three are failures, whose first few indexes and
//    messages are kept for the report. There is no "excluded" outcome: a bug class once found and
//    fixed is checked like any other input, so its regression fails the test.
//  - The worker runs with its working folder set to `work_dir` (a TempDir the caller checks stays empty)
//    and stdout sent to /dev/null; it ends with _exit, never returning into GoogleTest.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace itertime::fuzz {

enum class Result { kAccepted, kUserError, kOther };

struct Verdict {
  Result result = Result::kAccepted;
  std::string message;  // for kOther: what happened
};

struct Failure {
  int64_t index = 0;
  std::string kind;  // "other", "crash", "hang"
  std::string message;
};

struct Tally {
  int64_t inputs = 0, accepted = 0, user_error = 0, other = 0, crash = 0, hang = 0;
  double seconds = 0;
  int64_t slowest_index = -1;
  double slowest_seconds = 0;
  std::vector<Failure> failures;  // the first few of each failing kind
  int64_t failed() const { return other + crash + hang; }
};

inline int64_t env_int(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  return std::strtoll(text, nullptr, 10);
}

// Inputs per in-memory target (ITERTIME_FUZZ_INPUTS), first index (ITERTIME_FUZZ_FIRST), seed
// (ITERTIME_FUZZ_SEED).
inline int64_t fuzz_inputs(int64_t fallback) { return env_int("ITERTIME_FUZZ_INPUTS", fallback); }
inline int64_t fuzz_first() { return env_int("ITERTIME_FUZZ_FIRST", 0); }
inline uint64_t fuzz_seed() { return static_cast<uint64_t>(env_int("ITERTIME_FUZZ_SEED", 20261201)); }

namespace detail {

constexpr std::size_t kMessageBytes = 1024;
constexpr int kKeptPerKind = 5;

struct Shared {
  std::atomic<int64_t> current;     // index being run
  std::atomic<int64_t> started_ns;  // steady clock when it started
  std::atomic<int64_t> finished;    // 1 when the worker ran its last input
  int64_t accepted, user_error, other;
  int64_t slowest_index;
  int64_t slowest_ns;
  int kept_other;
  int64_t other_index[kKeptPerKind];
  char other_message[kKeptPerKind][kMessageBytes];
};

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void keep(char (&slot)[kMessageBytes], const std::string& message) {
  std::strncpy(slot, message.c_str(), kMessageBytes - 1);
  slot[kMessageBytes - 1] = '\0';
}

}  // namespace detail

// Runs run_one(i) for i in [first, first + count) in forked workers; hang_limit_s bounds one input.
inline Tally run_isolated(int64_t first, int64_t count, double hang_limit_s, const std::string& work_dir,
                          const std::function<Verdict(int64_t)>& run_one) {
  using namespace detail;
  void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) std::abort();
  auto* shared = new (memory) Shared{};
  shared->slowest_index = -1;

  Tally tally;
  tally.inputs = count;
  const int64_t end = first + count;
  const int64_t t0 = now_ns();
  int64_t next = first;
  while (next < end) {
    shared->current = next;
    shared->started_ns = now_ns();
    shared->finished = 0;
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) std::abort();
    if (pid == 0) {
      if (chdir(work_dir.c_str()) != 0) _exit(99);
      const int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
      for (int64_t i = next; i < end; ++i) {
        const int64_t start = now_ns();
        shared->started_ns = start;
        shared->current = i;
        const Verdict verdict = run_one(i);
        const int64_t took = now_ns() - start;
        if (took > shared->slowest_ns) {
          shared->slowest_ns = took;
          shared->slowest_index = i;
        }
        switch (verdict.result) {
          case Result::kAccepted: ++shared->accepted; break;
          case Result::kUserError: ++shared->user_error; break;
          case Result::kOther:
            ++shared->other;
            if (shared->kept_other < kKeptPerKind) {
              shared->other_index[shared->kept_other] = i;
              keep(shared->other_message[shared->kept_other++], verdict.message);
            }
            break;
        }
      }
      shared->finished = 1;
      _exit(0);
    }
    // Parent: wait for the worker, killing it when one input runs past the limit.
    bool hung = false;
    int status = 0;
    for (;;) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      const double running_s = static_cast<double>(now_ns() - shared->started_ns.load()) * 1e-9;
      if (running_s > hang_limit_s) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        hung = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!hung && shared->finished.load() == 1) break;  // ran to the end
    const int64_t culprit = shared->current.load();
    Failure failure;
    failure.index = culprit;
    if (hung) {
      failure.kind = "hang";
      failure.message = "no result after " + std::to_string(hang_limit_s) + " s";
      ++tally.hang;
    } else {
      failure.kind = "crash";
      failure.message = WIFSIGNALED(status) ? std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                                  strsignal(WTERMSIG(status)) + ")"
                                            : "worker exited with status " + std::to_string(WEXITSTATUS(status));
      ++tally.crash;
    }
    if (static_cast<int>(tally.failures.size()) < 2 * kKeptPerKind) tally.failures.push_back(failure);
    next = culprit + 1;
    if (tally.crash + tally.hang > 50) {  // something is badly wrong: stop rather than fork forever
      tally.inputs = next - first;
      break;
    }
  }
  tally.seconds = static_cast<double>(now_ns() - t0) * 1e-9;
  tally.accepted = shared->accepted;
  tally.user_error = shared->user_error;
  tally.other = shared->other;
  tally.slowest_index = shared->slowest_index;
  tally.slowest_seconds = static_cast<double>(shared->slowest_ns) * 1e-9;
  for (int k = 0; k < shared->kept_other; ++k) {
    tally.failures.push_back({shared->other_index[k], "other", shared->other_message[k]});
  }
  munmap(memory, sizeof(Shared));
  return tally;
}

}  // namespace itertime::fuzz
