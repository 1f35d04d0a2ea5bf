// fuzz_runner.hpp: runs a target's inputs in a forked worker so that a crash or a hang is caught,
// attributed to its input and reported instead of killing the test.
// Invariants:
//  - Inputs run in index order first..first+count-1, one worker process at a time; the worker publishes the
//    index it is running and when it started in shared memory, so a worker that dies by a signal, or
//    spends longer than the hang limit on one input, is attributed to that index; the parent then
//    restarts a worker at the next index. Every input is thus run once, and counted once.
//  - Each input ends in exactly one of: accepted, user_error (UserError), excluded (a known bug class
//    the target names, see Result), other (any other exception or a broken invariant: a failure),
//    crash or hang (failures). Failures keep the first few indexes and messages for the report.
//  - The worker runs with its working folder set to `work_dir` (a TempDir the caller checks stays empty)
//    and stdout sent to /dev/null; it ends with _exit, never returning into GoogleTest.
#pragma once

#include <dlfcn.h>
#include <execinfo.h>
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

enum class Result { kAccepted, kUserError, kExcluded, kOther };

struct Verdict {
  Result result = Result::kAccepted;
  std::string message;  // for kOther and kExcluded: what happened
};

struct Failure {
  int64_t index = 0;
  std::string kind;     // "other", "crash", "hang", "excluded"
  std::string message;
};

struct Tally {
  int64_t inputs = 0, accepted = 0, user_error = 0, excluded = 0, other = 0, crash = 0, hang = 0;
  double seconds = 0;
  int64_t slowest_index = -1;
  double slowest_seconds = 0;
  std::vector<Failure> failures;  // the first few of each failing kind
  std::vector<Failure> excluded_examples;
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
  std::atomic<int> library_crash;   // 1 when the worker's fatal signal hit inside the excluded library
  int64_t accepted, user_error, excluded, other;
  int64_t slowest_index;
  int64_t slowest_ns;
  int kept_other, kept_excluded;
  int64_t other_index[kKeptPerKind], excluded_index[kKeptPerKind];
  char other_message[kKeptPerKind][kMessageBytes];
  char excluded_message[kKeptPerKind][kMessageBytes];
};

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void keep(char (&slot)[kMessageBytes], const std::string& message) {
  std::strncpy(slot, message.c_str(), kMessageBytes - 1);
  slot[kMessageBytes - 1] = '\0';
}

// The worker's fatal-signal handler needs somewhere to write: set in the worker only, before it runs.
inline std::atomic<int>* g_library_crash = nullptr;
inline const char* g_library = nullptr;

// Finds the first frame past the signal trampoline (in libc) that is not in libc: when it lies in
// g_library, the crash happened inside that library. Then dies of the same signal.
inline void crash_handler(int signal_number) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  bool past_trampoline = false;
  for (int i = 0; i < n; ++i) {
    Dl_info info{};
    if (dladdr(frames[i], &info) == 0 || info.dli_fname == nullptr) continue;
    const bool in_libc = std::strstr(info.dli_fname, "libc.so") != nullptr;
    if (!past_trampoline) {
      past_trampoline = in_libc;
      continue;
    }
    if (in_libc) continue;
    if (std::strstr(info.dli_fname, g_library) != nullptr) g_library_crash->store(1);
    break;
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

inline void install_crash_probe(std::atomic<int>* flag, const char* library) {
  g_library_crash = flag;
  g_library = library;
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder now, not inside the handler
  static char alternate_stack[1 << 16];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = crash_handler;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  for (int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(signal_number, &action, nullptr);
}

}  // namespace detail

// Runs run_one(i) for i in [first, first + count) in forked workers; hang_limit_s bounds one input.
// With `excluded_library` (e.g. "libhdf5"), a crash whose faulting frame lies in that library is counted
// as excluded (a known bug class the caller names) instead of as a crash.
inline Tally run_isolated(int64_t first, int64_t count, double hang_limit_s, const std::string& work_dir,
                          const std::function<Verdict(int64_t)>& run_one, const char* excluded_library = nullptr) {
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
    shared->library_crash = 0;
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) std::abort();
    if (pid == 0) {
      if (chdir(work_dir.c_str()) != 0) _exit(99);
      const int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
      if (excluded_library != nullptr) install_crash_probe(&shared->library_crash, excluded_library);
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
          case Result::kExcluded:
            ++shared->excluded;
            if (shared->kept_excluded < kKeptPerKind) {  // one example per kind (the message's first 24 bytes)
              bool seen = false;
              for (int k = 0; k < shared->kept_excluded; ++k) {
                seen = seen || std::strncmp(shared->excluded_message[k], verdict.message.c_str(), 24) == 0;
              }
              if (!seen) {
                shared->excluded_index[shared->kept_excluded] = i;
                keep(shared->excluded_message[shared->kept_excluded++], verdict.message);
              }
            }
            break;
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
    } else if (excluded_library != nullptr && shared->library_crash.load() == 1) {
      ++tally.excluded;
      if (static_cast<int>(tally.excluded_examples.size()) < kKeptPerKind) {
        tally.excluded_examples.push_back({culprit, "excluded", std::string("crash (signal ") +
                                           std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0) + ") inside " + excluded_library});
      }
      next = culprit + 1;
      continue;
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
  tally.excluded += shared->excluded;
  tally.other = shared->other;
  tally.slowest_index = shared->slowest_index;
  tally.slowest_seconds = static_cast<double>(shared->slowest_ns) * 1e-9;
  for (int k = 0; k < shared->kept_other; ++k) {
    tally.failures.push_back({shared->other_index[k], "other", shared->other_message[k]});
  }
  for (int k = 0; k < shared->kept_excluded; ++k) {
    tally.excluded_examples.push_back({shared->excluded_index[k], "excluded", shared->excluded_message[k]});
  }
  munmap(memory, sizeof(Shared));
  return tally;
}

}  // namespace itertime::fuzz
