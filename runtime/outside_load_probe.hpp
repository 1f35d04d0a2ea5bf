// outside_load_probe.hpp: the outside load on the nodes of a communicator during a stretch of work
// (common/cpu_load.hpp per node, combined over the communicator's ranks).
// Invariants:
//  - start() and stop() are collective over the communicator given at construction; between them every
//    rank does its share of the work being judged.
//  - Per node (the ranks that share memory, MPI_COMM_TYPE_SHARED): outside load = the node's busy CPU
//    time less the CPU time of this communicator's processes on it, per second of wall time. The result
//    is the largest over nodes, known to every rank.
//  - Processes of the job that are not in the communicator (ranks waiting in a quiet barrier) count as
//    outside load; they sleep between polls, so they add little.
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>

#include "common/cpu_load.hpp"
#include "runtime/mpi_session.hpp"

namespace itertime {

// What OutsideLoadProbe::repeat_while_loaded did.
struct LoadedTries {
  int extra_tries = 0;         // tries after the first (each after a quiet moment)
  bool stayed_loaded = false;  // the last try saw outside load too: its result is kept as it is
};

class OutsideLoadProbe {
 public:
  explicit OutsideLoadProbe(MPI_Comm comm);  // collective over comm
  void start();                              // collective
  OutsideLoad stop();                        // collective; the largest over the nodes
  // Waits, idle, in windows of kQuietWindow until one shows no more outside load (+ steal) than
  // `limit_cores`, or about `max_wait` passed (collective: every rank sees the same figures, so all
  // stop waiting together).
  void wait_for_quiet(double limit_cores, std::chrono::milliseconds max_wait);
  static constexpr std::chrono::milliseconds kQuietWindow{250};
  static constexpr std::chrono::milliseconds kMaxQuietWait{10000};

  // Runs `measure(attempt)` under the probe (collective: every rank of the communicator does its share)
  // and runs it again, after wait_for_quiet(limit_cores, kMaxQuietWait), while the try saw more outside
  // load (+ steal) than `limit_cores`, at most `max_extra_tries` more times. `on_loaded(load_cores,
  // again)` hears of every loaded try, with the same figures on every rank (for printing).
  LoadedTries repeat_while_loaded(double limit_cores, int max_extra_tries, const std::function<void(int attempt)>& measure,
                                  const std::function<void(double load_cores, bool again)>& on_loaded);

 private:
  MPI_Comm comm_;
  MpiComm node_;  // the ranks of comm on this node
  int node_rank_ = 0;
  MachineCpuTimes machine_before_;
  double own_cpu_before_s_ = 0;
  std::chrono::steady_clock::time_point wall_before_;
};

}  // namespace itertime
