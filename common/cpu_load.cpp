// cpu_load.cpp: /proc/stat and process CPU time (cpu_load.hpp).
#include "common/cpu_load.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace itertime {

MachineCpuTimes parse_proc_stat(std::string_view text, double ticks_per_second) {
  MachineCpuTimes times;
  const std::size_t end = text.find('\n');
  std::istringstream line(std::string(text.substr(0, end)));
  std::string label;
  line >> label;
  if (label != "cpu" || ticks_per_second <= 0) return times;
  // user nice system idle iowait irq softirq steal (guest, guest_nice follow; inside user and nice).
  double field[8] = {};
  for (double& value : field) {
    if (!(line >> value)) return times;
  }
  const double user = field[0], nice = field[1], system = field[2], irq = field[5], softirq = field[6], steal = field[7];
  times.available = true;
  times.busy_s = (user + nice + system + irq + softirq) / ticks_per_second;
  times.steal_s = steal / ticks_per_second;
  return times;
}

MachineCpuTimes read_machine_cpu_times() {
  std::ifstream in("/proc/stat");
  std::string first_line;
  if (!in || !std::getline(in, first_line)) return {};
  return parse_proc_stat(first_line, static_cast<double>(sysconf(_SC_CLK_TCK)));
}

double process_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

OutsideLoad outside_load(const MachineCpuTimes& before, const MachineCpuTimes& after, double own_cpu_s, double wall_s) {
  OutsideLoad load;
  if (!before.available || !after.available || wall_s <= 0) return load;
  load.outside_cores = std::max(0.0, (after.busy_s - before.busy_s - own_cpu_s) / wall_s);
  load.steal_cores = std::max(0.0, (after.steal_s - before.steal_s) / wall_s);
  return load;
}

}  // namespace itertime
