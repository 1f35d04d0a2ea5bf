// cpu_load.hpp: how busy the machine was with work that is not ours (Linux /proc/stat), for telling a
// disturbed measurement from a clean one (common/measurement_rounds.hpp).
// Invariants:
//  - MachineCpuTimes are cumulative seconds since boot over all of the machine's CPUs, read from the
//    first (`cpu`) line of /proc/stat: busy = user + nice + system + irq + softirq (guest time is
//    already inside user and nice); steal is the hypervisor's. Where /proc/stat cannot be read or
//    parsed, `available` is false and every derived load is 0 (the rule then never fires).
//  - outside_load() is pure: (machine busy time - our processes' CPU time) / wall time, never below 0,
//    and steal / wall time, both in cores.
//  - /proc/stat counts in clock ticks (usually 10 ms), so a window shorter than a few hundred
//    milliseconds reads as noise or as no load at all; judge only windows that long.
#pragma once

#include <string_view>

namespace itertime {

struct MachineCpuTimes {
  bool available = false;
  double busy_s = 0;
  double steal_s = 0;
};

struct OutsideLoad {
  double outside_cores = 0;  // other processes' CPU time per second of wall time
  double steal_cores = 0;    // steal time per second of wall time
};

// Parses the text of /proc/stat; `ticks_per_second` is sysconf(_SC_CLK_TCK).
MachineCpuTimes parse_proc_stat(std::string_view text, double ticks_per_second);
MachineCpuTimes read_machine_cpu_times();  // /proc/stat now
double process_cpu_seconds();              // this process's CPU time, all its threads

OutsideLoad outside_load(const MachineCpuTimes& before, const MachineCpuTimes& after, double own_cpu_s, double wall_s);

}  // namespace itertime
