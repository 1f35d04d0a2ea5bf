// mpi_session.hpp: RAII over MPI: the session (init/finalize), owned communicators, the DP/TP/PP/CP
// (and DP*CP) process groups of a RankLayout, and node detection.
// Invariants:
//  - MpiSession finalizes MPI only if it initialized it, and not while an exception unwinds (main()
//    then aborts all ranks); it never runs twice in a process.
//  - MpiComm owns its communicator (freed on destruction) unless it wraps MPI_COMM_WORLD/SELF or was
//    abandoned after a job abort (then it is never freed).
//  - ProcessGroups' communicators order ranks by their index along the group's dimension, so that
//    group rank i is the member with tp_idx (dp_idx, pp_idx, cp_idx) == i; dp_cp (the dp*cp ranks with
//    the same tp_idx and pp_idx: Megatron's data-parallel group with context parallelism) is in rank
//    order, group rank dp_idx * cp + cp_idx. With cp 1 it has the DP group's members.
//  - abort_all() never returns: it aborts every rank of the job with the given exit code.
//  - MPI_Init is watched by a Watchdog of its own (limit: ITERTIME_WATCHDOG_S or the default; rank from
//    the launcher's environment). start_watchdog() starts the session's Watchdog (watchdog.hpp) once; it
//    stops when the session ends, after MPI_Finalize, so that a finalize that waits on a stopped peer is
//    bounded too. Both watch the launcher too (launcher_to_watch()): a rank whose mpiexec or srun died
//    ends instead of running on alone.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/parallel_config.hpp"

namespace itertime {

class Watchdog;  // runtime/watchdog.hpp

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int world_rank() const;
  int world_size() const;
  static bool initialized();
  static std::string library_version();  // MPI_Get_library_version, first line
  [[noreturn]] static void abort_all(int exit_code);
  // Finalizes MPI if a session left it initialized (a single-rank run that stopped with an error).
  static void finalize_if_initialized();
  // Ends this process (and so the job, through mpirun) when one blocking MPI wait lasts `timeout_s`
  // (watchdog.hpp); 0 turns it off. Resolve the limit with watchdog_seconds(). Later calls do nothing.
  void start_watchdog(double timeout_s);

 private:
  bool owns_ = false;
  std::unique_ptr<Watchdog> watchdog_;
};

class MpiComm {
 public:
  MpiComm() = default;
  explicit MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {}
  ~MpiComm();
  MpiComm(MpiComm&& other) noexcept;
  MpiComm& operator=(MpiComm&& other) noexcept;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  static MpiComm world() { return MpiComm(MPI_COMM_WORLD, false); }
  // Collective over `parent`: ranks with equal color form a communicator, ordered by key.
  static MpiComm split(MPI_Comm parent, int color, int key);

  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;
  bool valid() const { return comm_ != MPI_COMM_NULL; }
  // After a job abort (job_abort.hpp): stops owning the communicator, which is then never freed, so that
  // its context id is never reused by a later communicator while an unmatched operation may remain.
  void abandon() { owned_ = false; }

 private:
  void release();
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
};

class ProcessGroups {
 public:
  // Collective over `parent` (by default MPI_COMM_WORLD); the layout's world size must equal its size,
  // and ranks are numbered by their rank in `parent`.
  explicit ProcessGroups(const RankLayout& layout, MPI_Comm parent = MPI_COMM_WORLD);
  const RankLayout& layout() const { return layout_; }
  const RankCoords& coords() const { return coords_; }
  const MpiComm& tp() const { return tp_; }
  const MpiComm& dp() const { return dp_; }
  const MpiComm& pp() const { return pp_; }
  const MpiComm& cp() const { return cp_; }
  const MpiComm& dp_cp() const { return dp_cp_; }
  // After a job abort: the five communicators are never freed (MpiComm::abandon).
  void abandon() {
    tp_.abandon();
    dp_.abandon();
    pp_.abandon();
    cp_.abandon();
    dp_cp_.abandon();
  }

 private:
  RankLayout layout_;
  RankCoords coords_;
  MpiComm tp_, dp_, pp_, cp_, dp_cp_;
};

struct NodeInfo {
  int node_index = 0;  // 0 .. num_nodes-1, ordered by the lowest world rank on each node
  int num_nodes = 1;
  int local_rank = 0;  // rank within the node
  int local_size = 1;
  std::string hostname;
  std::vector<int> node_of_rank;       // node index of every world rank
  std::vector<std::string> hostnames;  // one per node, in node order
};

// Collective over MPI_COMM_WORLD (MPI_Comm_split_type shared memory).
NodeInfo detect_nodes();
// This rank's index among the ranks of `comm` on the same node (collective over `comm`).
int node_local_rank(MPI_Comm comm);

// Rank 0's `text`, on every rank of `comm` (collective).
std::string broadcast_string(const std::string& text, MPI_Comm comm);

// A barrier over `comm` that sleeps between polls, so that a waiting rank leaves its core to the ranks
// still measuring (collective; watched as one operation, "quiet barrier").
void quiet_barrier(MPI_Comm comm);

// Runs `body` on rank 0 of MPI_COMM_WORLD only; a UserError it throws reaches every rank as a
// CollectiveUserError, so that all ranks stop cleanly with exit status 2 (collective).
template <typename Body>
void on_root_collectively(int world_rank, Body&& body) {
  std::string message;
  if (world_rank == 0) {
    try {
      body();
    } catch (const UserError& error) {
      message = error.what();
    }
  }
  message = broadcast_string(message, MPI_COMM_WORLD);
  if (!message.empty()) throw CollectiveUserError(message);
}

}  // namespace itertime
