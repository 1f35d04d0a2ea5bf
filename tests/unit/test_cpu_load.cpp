// Tests of the /proc/stat reading and the outside-load arithmetic (common/cpu_load.hpp).
#include <gtest/gtest.h>

#include "common/cpu_load.hpp"

namespace itertime {
namespace {

TEST(CpuLoad, ParsesTheCpuLineOfProcStat) {
  // user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s.
  const MachineCpuTimes t = parse_proc_stat("cpu  2681 19 1926 14141 564 7 106 50 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", 100);
  ASSERT_TRUE(t.available);
  EXPECT_DOUBLE_EQ(t.busy_s, (2681 + 19 + 1926 + 7 + 106) / 100.0) << "idle and iowait are not busy";
  EXPECT_DOUBLE_EQ(t.steal_s, 0.5);
}

TEST(CpuLoad, UnreadableTextIsUnavailable) {
  EXPECT_FALSE(parse_proc_stat("", 100).available);
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n", 100).available) << "not the machine line";
  EXPECT_FALSE(parse_proc_stat("cpu 1 2 3\n", 100).available) << "too few fields (kernels before 2.6.11)";
  EXPECT_FALSE(parse_proc_stat("cpu 1 2 3 4 5 6 7 8\n", 0).available);
}

TEST(CpuLoad, OutsideLoadIsTheMachinesBusyTimeLessOursPerSecond) {
  const MachineCpuTimes before{true, 100.0, 1.0};
  const MachineCpuTimes after{true, 104.0, 1.5};
  // 4 s busy in 2 s of wall time, 3 s of it ours: 0.5 cores of outside load; 0.5 s steal: 0.25 cores.
  const OutsideLoad load = outside_load(before, after, 3.0, 2.0);
  EXPECT_DOUBLE_EQ(load.outside_cores, 0.5);
  EXPECT_DOUBLE_EQ(load.steal_cores, 0.25);
  EXPECT_DOUBLE_EQ(outside_load(before, after, 5.0, 2.0).outside_cores, 0.0) << "tick rounding never goes negative";
  EXPECT_DOUBLE_EQ(outside_load(MachineCpuTimes{}, after, 3.0, 2.0).outside_cores, 0.0) << "unavailable: no load";
  EXPECT_DOUBLE_EQ(outside_load(before, after, 3.0, 0.0).outside_cores, 0.0);
}

TEST(CpuLoad, TheMachineSeesThisProcessSpin) {
  const MachineCpuTimes before = read_machine_cpu_times();
  if (!before.available) GTEST_SKIP() << "no /proc/stat here";
  // Spin until this process has used 0.2 s of CPU (however long that takes on a loaded machine).
  const double own_before = process_cpu_seconds();
  volatile double sink = 0;
  while (process_cpu_seconds() - own_before < 0.2) sink = sink + 1.0;
  const MachineCpuTimes after = read_machine_cpu_times();
  EXPECT_GE(after.busy_s - before.busy_s, 0.1) << "the machine's busy time includes ours (tick-sampled)";
}

}  // namespace
}  // namespace itertime
