// outside_load_probe.cpp: per-node outside load over a communicator (outside_load_probe.hpp).
#include "runtime/outside_load_probe.hpp"

#include <thread>

namespace itertime {

OutsideLoadProbe::OutsideLoadProbe(MPI_Comm comm) : comm_(comm) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  node_ = MpiComm(node, true);
  MPI_Comm_rank(node, &node_rank_);
}

void OutsideLoadProbe::start() {
  MPI_Barrier(comm_);
  if (node_rank_ == 0) machine_before_ = read_machine_cpu_times();
  own_cpu_before_s_ = process_cpu_seconds();
  wall_before_ = std::chrono::steady_clock::now();
}

OutsideLoad OutsideLoadProbe::stop() {
  MPI_Barrier(comm_);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before_).count();
  const MachineCpuTimes machine_after = node_rank_ == 0 ? read_machine_cpu_times() : MachineCpuTimes{};
  const double own_cpu_s = process_cpu_seconds() - own_cpu_before_s_;
  double node_own_cpu_s = 0;
  MPI_Reduce(&own_cpu_s, &node_own_cpu_s, 1, MPI_DOUBLE, MPI_SUM, 0, node_.get());
  double load[2] = {0, 0};
  if (node_rank_ == 0) {
    const OutsideLoad node_load = outside_load(machine_before_, machine_after, node_own_cpu_s, wall_s);
    load[0] = node_load.outside_cores;
    load[1] = node_load.steal_cores;
  }
  MPI_Allreduce(MPI_IN_PLACE, load, 2, MPI_DOUBLE, MPI_MAX, comm_);
  return OutsideLoad{load[0], load[1]};
}

void OutsideLoadProbe::wait_for_quiet(double limit_cores, std::chrono::milliseconds max_wait) {
  for (auto waited = std::chrono::milliseconds(0); waited < max_wait; waited += kQuietWindow) {
    start();
    std::this_thread::sleep_for(kQuietWindow);
    const OutsideLoad load = stop();
    if (load.outside_cores + load.steal_cores <= limit_cores) return;
  }
}

LoadedTries OutsideLoadProbe::repeat_while_loaded(double limit_cores, int max_extra_tries,
                                                  const std::function<void(int attempt)>& measure,
                                                  const std::function<void(double load_cores, bool again)>& on_loaded) {
  LoadedTries tries;
  for (int attempt = 0;; ++attempt) {
    start();
    measure(attempt);
    const OutsideLoad load = stop();  // the same on every rank, so all decide alike
    const double load_cores = load.outside_cores + load.steal_cores;
    if (load_cores <= limit_cores) return tries;
    const bool again = attempt < max_extra_tries;
    on_loaded(load_cores, again);
    if (!again) {
      tries.stayed_loaded = true;
      return tries;
    }
    ++tries.extra_tries;
    wait_for_quiet(limit_cores, kMaxQuietWait);
  }
}

}  // namespace itertime
