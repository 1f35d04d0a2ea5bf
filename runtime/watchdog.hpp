// watchdog.hpp: ends a job whose ranks wait on a stopped, dead or deadlocked peer, instead of letting
// them wait forever: a per-process watchdog thread and a cheap guard around every blocking wait.
// Invariants:
//  - One process-wide operation slot (the only global mutable state besides the registry below): the
//    thread that calls MPI (MPI_THREAD_FUNNELED: the main thread) marks the blocking operation it is in
//    through WatchedOperation; the watchdog thread only reads it. The guard takes no lock, allocates
//    nothing and reads no clock: it writes the operation's description (relaxed atomics) and bumps a
//    sequence number, odd while an operation runs (a seqlock with one writer). A guard opened inside
//    another one leaves the outer operation's description in place.
//  - Every blocking MPI call this program makes goes through a guard without edits at the call sites:
//    watchdog.cpp defines MPI_Barrier, MPI_Allreduce, MPI_Recv, MPI_Wait, MPI_Finalize, ... (the MPI
//    profiling interface), which mark the operation and call the next definition (dlsym RTLD_NEXT, so
//    that an LD_PRELOAD interposer still sees the call; PMPI_ when there is none). Polled waits (MPI_Test
//    loops, CUDA stream polls) take an explicit guard (quiet_barrier, MpiCommunicator's abortable waits,
//    NcclCommunicator::synchronize); a polled wait without one is not watched.
//  - Watchdog (RAII) runs one thread while it lives, when its timeout is > 0. The thread polls the slot
//    every poll period (timeout / 10, within 10 ms .. 1 s); an operation seen running (same sequence
//    number) for at least the timeout is reported once: the handler gets one line naming the world
//    rank, the operation, its size and group, how long it waited. The default handler writes the line
//    to stderr (write(2): no stdio lock) and ends the process with status 1 (std::_Exit: MPI_Abort is
//    not allowed from a second thread at MPI_THREAD_FUNNELED), which makes mpirun (or srun
//    --kill-on-bad-exit) end every other rank of the job; mpirun kills a stopped rank too (SIGCONT,
//    SIGTERM, SIGKILL to its process group).
//  - The reported wait is measured by the watchdog thread from the first poll that saw the operation:
//    at least the timeout, and at most one poll period short of the true wait.
//  - Sizes are looked up only when a report is written (PMPI_Type_size / PMPI_Comm_size: local queries,
//    from the watchdog thread, with MPI initialized and not finalized).
//  - Watched resources (an NCCL communicator) register for the life of the resource (registry under a
//    mutex, never touched by the guard). The thread polls their asynchronous error; an error that stays
//    for the grace (5 s by default: the main thread's own check, where it polls, comes first) is
//    reported like a stall. Before the default handler ends the process it aborts them (ncclCommAbort),
//    waiting at most kAbortWait_s for that.
//  - A rank started by a launcher (mpiexec, srun) watches that launcher too: given its pid (the parent's
//    at start, launcher_to_watch()), the thread checks at every poll that it is still the parent; a rank
//    reparented because its launcher was killed (Open MPI 5's prterun leaves its ranks running when it is
//    SIGKILLed) is reported like a stall and ends, instead of running on alone and holding the output
//    file's writer lock. A process started without a launcher (a singleton) watches nothing: `nohup`
//    runs outlive their shell on purpose.
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace itertime {

// The default limit of a single blocking wait, in seconds (pipeline waits on real clusters can be long).
inline constexpr double kDefaultWatchdogSeconds = 300.0;
// The environment variable that sets the limit when the command line does not; 0 turns the watchdog off.
inline constexpr const char* kWatchdogEnvironment = "ITERTIME_WATCHDOG_S";

// The limit to use: `option_s` (the text of --watchdog-s) when not empty, else ITERTIME_WATCHDOG_S when
// set, else the default. Throws UserError for a negative or malformed value, naming where it came from.
double watchdog_seconds(const std::string& option_s = "");

// The pid the watchdog should see as this process's parent while the job lives: the parent's now when a
// launcher's environment names this process a rank of a job (OMPI_COMM_WORLD_SIZE: mpiexec of Open MPI;
// PMI_RANK: MPICH's hydra and Slurm's PMI; SLURM_PROCID: srun), else 0 (nothing to watch).
pid_t launcher_to_watch();

namespace watchdog_detail {
// What the guard writes and the watchdog thread reads (see the invariants above).
struct OperationSlot {
  std::atomic<std::uint64_t> sequence{0};  // odd while an operation runs
  std::atomic<const char*> name{nullptr};  // a string literal
  std::atomic<long long> bytes{-1};        // -1: unknown, or `count` elements of `datatype`
  std::atomic<long long> count{-1};
  std::atomic<MPI_Datatype> datatype{MPI_DATATYPE_NULL};
  std::atomic<int> group_size{0};  // 0: unknown, or the size of `comm`
  std::atomic<MPI_Comm> comm{MPI_COMM_NULL};
};
extern OperationSlot operation_slot;
}  // namespace watchdog_detail

// Marks a blocking operation for the life of the guard (RAII). `name` must be a string literal.
class WatchedOperation {
 public:
  // Sizes known to the caller (bytes < 0, group_size 0: unknown).
  WatchedOperation(const char* name, long long bytes, int group_size) noexcept {
    open(name, bytes, -1, MPI_DATATYPE_NULL, group_size, MPI_COMM_NULL);
  }
  // Sizes looked up only if the operation is reported: `count` elements of `datatype` over `comm`.
  WatchedOperation(const char* name, long long count, MPI_Datatype datatype, MPI_Comm comm) noexcept {
    open(name, -1, count, datatype, 0, comm);
  }
  ~WatchedOperation() {
    if (armed_) watchdog_detail::operation_slot.sequence.store(sequence_ + 2, std::memory_order_release);
  }
  WatchedOperation(const WatchedOperation&) = delete;
  WatchedOperation& operator=(const WatchedOperation&) = delete;

 private:
  void open(const char* name, long long bytes, long long count, MPI_Datatype datatype, int group_size, MPI_Comm comm) noexcept {
    auto& slot = watchdog_detail::operation_slot;
    sequence_ = slot.sequence.load(std::memory_order_relaxed);
    armed_ = (sequence_ & 1U) == 0;
    if (!armed_) return;  // inside another watched operation
    // The previous operation's end (an even sequence) is ordered before the new description.
    std::atomic_thread_fence(std::memory_order_release);
    slot.name.store(name, std::memory_order_relaxed);
    slot.bytes.store(bytes, std::memory_order_relaxed);
    slot.count.store(count, std::memory_order_relaxed);
    slot.datatype.store(datatype, std::memory_order_relaxed);
    slot.group_size.store(group_size, std::memory_order_relaxed);
    slot.comm.store(comm, std::memory_order_relaxed);
    slot.sequence.store(sequence_ + 1, std::memory_order_release);
  }
  std::uint64_t sequence_ = 0;
  bool armed_ = false;
};

// The watchdog's timing rule, apart from threads and clocks: fed the slot's sequence number at each
// poll, returns how long the current operation has been seen running (0 when none runs).
class StallTimer {
 public:
  double observe(std::uint64_t sequence, double now_s) {
    if ((sequence & 1U) == 0 || sequence != sequence_) {
      sequence_ = sequence;
      since_s_ = now_s;
      return 0.0;
    }
    return now_s - since_s_;
  }

 private:
  std::uint64_t sequence_ = 0;
  double since_s_ = 0.0;
};

// Something the watchdog polls for an asynchronous error and aborts before it ends the process (an
// NCCL communicator). Both are called from the watchdog thread, under the registry's mutex.
class WatchedResource {
 public:
  virtual ~WatchedResource() = default;
  virtual std::string async_error() = 0;  // "" while healthy
  virtual void abort() noexcept = 0;
};

// Registers a resource with the watchdog for the life of this object (RAII; the registry is
// process-wide, so that the resource need not know which Watchdog runs).
class WatchedResourceRegistration {
 public:
  explicit WatchedResourceRegistration(WatchedResource* resource);
  ~WatchedResourceRegistration();
  WatchedResourceRegistration(const WatchedResourceRegistration&) = delete;
  WatchedResourceRegistration& operator=(const WatchedResourceRegistration&) = delete;

 private:
  WatchedResource* resource_;
};

class Watchdog {
 public:
  // Gets the report line (no newline); the default prints it and ends the process (status 1).
  using Handler = std::function<void(const std::string& line)>;
  static constexpr double kAsyncErrorGrace_s = 5.0;
  static constexpr double kAbortWait_s = 3.0;

  // timeout_s <= 0: no thread, nothing watched. world_rank / world_size < 0: unknown (before MPI_Init).
  // async_error_grace_s: how long a watched resource's asynchronous error must stay to be reported.
  // launcher_pid > 0: the parent this process must keep (launcher_to_watch()); 0: none watched.
  Watchdog(double timeout_s, int world_rank, int world_size, Handler on_stall = {},
           double async_error_grace_s = kAsyncErrorGrace_s, pid_t launcher_pid = 0);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const { return timeout_s_; }
  bool running() const { return thread_.joinable(); }

 private:
  void watch();
  std::string describe_current() const;  // "MPI_Allreduce (1.0 MiB, group of 4)"
  [[noreturn]] static void end_process(const std::string& line);

  double timeout_s_;
  double async_error_grace_s_;
  int world_rank_;
  int world_size_;
  pid_t launcher_pid_;
  Handler on_stall_;
  std::mutex mutex_;  // guards stop_
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace itertime
