// watchdog.cpp: the watchdog thread, the resource registry and the guarded MPI entry points
// (watchdog.hpp).
#include "runtime/watchdog.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/errors.hpp"

namespace itertime {
namespace watchdog_detail {
OperationSlot operation_slot;
}  // namespace watchdog_detail

namespace {

// The watched resources (process-wide; see the invariants in watchdog.hpp).
struct ResourceRegistry {
  std::mutex mutex;
  std::vector<WatchedResource*> resources;
};
ResourceRegistry& registry() {
  static ResourceRegistry instance;
  return instance;
}

double parse_seconds(const char* text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !std::isfinite(value) || value < 0) {
    throw UserError(what + " must be a number of seconds, 0 (no watchdog) or more; got '" + text + "'");
  }
  return value;
}

std::string format_bytes(long long bytes) {
  char text[48];
  if (bytes < 1024) {
    std::snprintf(text, sizeof(text), "%lld B", bytes);
  } else if (bytes < 1024LL * 1024) {
    std::snprintf(text, sizeof(text), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  } else if (bytes < 1024LL * 1024 * 1024) {
    std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  } else {
    std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  }
  return text;
}

bool mpi_usable() {
  int initialized = 0, finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

}  // namespace

double watchdog_seconds(const std::string& option_s) {
  if (!option_s.empty()) return parse_seconds(option_s.c_str(), "--watchdog-s");
  const char* text = std::getenv(kWatchdogEnvironment);
  if (text == nullptr || *text == '\0') return kDefaultWatchdogSeconds;
  return parse_seconds(text, kWatchdogEnvironment);
}

pid_t launcher_to_watch() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "SLURM_PROCID"}) {
    const char* text = std::getenv(name);
    if (text != nullptr && *text != '\0') return ::getppid();
  }
  return 0;
}

WatchedResourceRegistration::WatchedResourceRegistration(WatchedResource* resource) : resource_(resource) {
  ResourceRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.resources.push_back(resource_);
}

WatchedResourceRegistration::~WatchedResourceRegistration() {
  ResourceRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.resources.begin(); it != r.resources.end(); ++it) {
    if (*it == resource_) {
      r.resources.erase(it);
      break;
    }
  }
}

Watchdog::Watchdog(double timeout_s, int world_rank, int world_size, Handler on_stall, double async_error_grace_s,
                   pid_t launcher_pid)
    : timeout_s_(timeout_s),
      async_error_grace_s_(async_error_grace_s),
      world_rank_(world_rank),
      world_size_(world_size),
      launcher_pid_(launcher_pid),
      on_stall_(std::move(on_stall)) {
  if (!on_stall_) on_stall_ = [](const std::string& line) { end_process(line); };
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string Watchdog::describe_current() const {
  // Seqlock read: the caller checks afterwards that the sequence did not move meanwhile.
  const auto& slot = watchdog_detail::operation_slot;
  const char* name = slot.name.load(std::memory_order_relaxed);
  long long bytes = slot.bytes.load(std::memory_order_relaxed);
  const long long count = slot.count.load(std::memory_order_relaxed);
  const MPI_Datatype datatype = slot.datatype.load(std::memory_order_relaxed);
  int group_size = slot.group_size.load(std::memory_order_relaxed);
  const MPI_Comm comm = slot.comm.load(std::memory_order_relaxed);
  if (mpi_usable()) {
    if (bytes < 0 && count >= 0 && datatype != MPI_DATATYPE_NULL) {
      int type_bytes = 0;
      if (PMPI_Type_size(datatype, &type_bytes) == MPI_SUCCESS) bytes = count * type_bytes;
    }
    if (group_size <= 0 && comm != MPI_COMM_NULL) {
      if (PMPI_Comm_size(comm, &group_size) != MPI_SUCCESS) group_size = 0;
    }
  }
  std::string details;
  if (bytes >= 0) details = format_bytes(bytes);
  if (group_size > 0) details += (details.empty() ? "" : ", ") + std::string("group of ") + std::to_string(group_size);
  return std::string(name != nullptr ? name : "an MPI call") + (details.empty() ? "" : " (" + details + ")");
}

void Watchdog::watch() {
  using Clock = std::chrono::steady_clock;
  const auto origin = Clock::now();
  const double poll_s = std::min(1.0, std::max(0.01, timeout_s_ / 10.0));
  const auto poll = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(poll_s));
  const std::string who =
      world_rank_ < 0 ? std::string("a rank")
                      : "rank " + std::to_string(world_rank_) + (world_size_ > 0 ? " of " + std::to_string(world_size_) : "");
  const auto& slot = watchdog_detail::operation_slot;
  // A report written to the pipe of a launcher that is gone must not kill this thread by SIGPIPE before
  // the watched communicators are aborted (the write fails with EPIPE instead).
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  StallTimer timer;
  double async_error_since_s = -1.0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, poll, [this] { return stop_; })) {
    if (launcher_pid_ > 0 && ::getppid() != launcher_pid_) {
      lock.unlock();
      on_stall_("itertime: error: " + who + " lost the launcher that started it (pid " + std::to_string(launcher_pid_) +
                ", killed?); ending this rank so that it does not run on alone without its job");
      return;
    }
    const double now_s = std::chrono::duration<double>(Clock::now() - origin).count();
    const std::uint64_t sequence = slot.sequence.load(std::memory_order_acquire);
    const double waited_s = timer.observe(sequence, now_s);
    const bool running = (sequence & 1U) != 0;
    std::string operation;
    if (running && (waited_s >= timeout_s_ || async_error_since_s >= 0)) {
      operation = describe_current();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.sequence.load(std::memory_order_relaxed) != sequence) continue;  // it just finished
    }
    char waited[32];
    std::snprintf(waited, sizeof(waited), "%.1f", waited_s);
    std::string report;
    if (running && waited_s >= timeout_s_) {
      report = "waited " + std::string(waited) + " s in " + operation +
               " for its peers: a rank stopped, died or deadlocked; ending the job (--watchdog-s or " + kWatchdogEnvironment +
               " to change the limit)";
    } else {
      std::string error;
      {
        ResourceRegistry& r = registry();
        std::lock_guard<std::mutex> registry_lock(r.mutex);
        for (WatchedResource* resource : r.resources) {
          error = resource->async_error();
          if (!error.empty()) break;
        }
      }
      if (error.empty()) {
        async_error_since_s = -1.0;
        continue;
      }
      if (async_error_since_s < 0) async_error_since_s = now_s;
      if (now_s - async_error_since_s < async_error_grace_s_) continue;
      report = "communicator failed (" + error + ")" + (operation.empty() ? "" : " while in " + operation) + "; ending the job";
    }
    lock.unlock();
    on_stall_("itertime: error: " + who + " " + report);
    return;  // one report per watchdog
  }
}

void Watchdog::end_process(const std::string& line) {
  // Straight to the file descriptor: the main thread may hold stderr's lock, blocked in a write.
  const std::string text = line + "\n";
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t written = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (written <= 0) break;
    done += static_cast<std::size_t>(written);
  }
  if (ftrylockfile(stdout) == 0) {  // what the rank printed so far, unless the main thread is printing
    fflush_unlocked(stdout);
    funlockfile(stdout);
  }
  // Abort the watched communicators (their kernels in flight), but never wait on that for long: an abort
  // that hangs must not keep the process, and with it the job, alive.
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::thread([finished] {
    ResourceRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (WatchedResource* resource : r.resources) resource->abort();
    finished->store(true);
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kAbortWait_s);
  while (!finished->load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::_Exit(kExitInternal);
}

}  // namespace itertime

// The MPI profiling interface: every blocking MPI call of the program marks its operation for the
// watchdog, then calls the next definition of the function (an LD_PRELOAD interposer, else the library).
namespace {

template <typename Function>
Function next_definition(const char* name, Function own, Function fallback) {
  void* next = dlsym(RTLD_NEXT, name);
  if (next == nullptr || next == reinterpret_cast<void*>(own)) return fallback;
  return reinterpret_cast<Function>(next);
}

}  // namespace

#define ITERTIME_NEXT(function) static const auto next = next_definition(#function, &function, &P##function)

using itertime::WatchedOperation;

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Barrier);
  WatchedOperation watched("MPI_Barrier", -1, MPI_DATATYPE_NULL, comm);
  return next(comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Bcast);
  WatchedOperation watched("MPI_Bcast", count, datatype, comm);
  return next(buffer, count, datatype, root, comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Allreduce);
  WatchedOperation watched("MPI_Allreduce", count, datatype, comm);
  return next(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Reduce);
  WatchedOperation watched("MPI_Reduce", count, datatype, comm);
  return next(sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Allgather);
  WatchedOperation watched("MPI_Allgather", sendcount, sendtype, comm);
  return next(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
               int root, MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Gather);
  WatchedOperation watched("MPI_Gather", sendcount, sendtype, comm);
  return next(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Reduce_scatter_block);
  WatchedOperation watched("MPI_Reduce_scatter_block", recvcount, datatype, comm);
  return next(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Alltoall);
  WatchedOperation watched("MPI_Alltoall", sendcount, sendtype, comm);
  return next(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  ITERTIME_NEXT(MPI_Send);
  WatchedOperation watched("MPI_Send", count, datatype, comm);
  return next(buf, count, datatype, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  ITERTIME_NEXT(MPI_Recv);
  WatchedOperation watched("MPI_Recv", count, datatype, comm);
  return next(buf, count, datatype, source, tag, comm, status);
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  ITERTIME_NEXT(MPI_Sendrecv);
  WatchedOperation watched("MPI_Sendrecv", sendcount, sendtype, comm);
  return next(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  ITERTIME_NEXT(MPI_Probe);
  WatchedOperation watched("MPI_Probe", -1, MPI_DATATYPE_NULL, comm);
  return next(source, tag, comm, status);
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  ITERTIME_NEXT(MPI_Wait);
  WatchedOperation watched("MPI_Wait", -1, 0);
  return next(request, status);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  ITERTIME_NEXT(MPI_Waitall);
  WatchedOperation watched("MPI_Waitall", -1, 0);
  return next(count, requests, statuses);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  ITERTIME_NEXT(MPI_Comm_split);
  WatchedOperation watched("MPI_Comm_split", -1, MPI_DATATYPE_NULL, comm);
  return next(comm, color, key, newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  ITERTIME_NEXT(MPI_Comm_split_type);
  WatchedOperation watched("MPI_Comm_split_type", -1, MPI_DATATYPE_NULL, comm);
  return next(comm, split_type, key, info, newcomm);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  ITERTIME_NEXT(MPI_Comm_dup);
  WatchedOperation watched("MPI_Comm_dup", -1, MPI_DATATYPE_NULL, comm);
  return next(comm, newcomm);
}

int MPI_Finalize() {
  ITERTIME_NEXT(MPI_Finalize);
  WatchedOperation watched("MPI_Finalize", -1, 0);
  return next();
}

}  // extern "C"
