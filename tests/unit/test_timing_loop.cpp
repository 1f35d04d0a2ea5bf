// Unit tests of commbench/timing_loop: how many back-to-back calls a pipelined sample of each size makes,
// and the loop itself, driven by fake calls and a fake clock (no MPI).
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "commbench/timing_loop.hpp"

namespace itertime::calibrate {
namespace {

TEST(PipelinedCallsPerSample, SmallMessagesGetTheMaximum) {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{1024}, std::size_t{64} << 10}) {
    EXPECT_EQ(pipelined_calls_per_sample(bytes), kPipelinedMaxCalls) << bytes;
  }
  EXPECT_EQ(kPipelinedMaxCalls, 1000);
}

TEST(PipelinedCallsPerSample, LargeMessagesMoveAboutSixtyFourMiBPerSample) {
  EXPECT_EQ(kPipelinedBytesPerSample, std::size_t{64} << 20);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{128} << 10), 512);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{1} << 20), 64);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{4} << 20), 16);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{16} << 20), 4);
  EXPECT_EQ(pipelined_calls_per_sample(3u << 20), 21);  // rounded down
}

TEST(PipelinedCallsPerSample, HugeMessagesKeepTheMinimum) {
  EXPECT_EQ(kPipelinedMinCalls, 2);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{32} << 20), 2);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{64} << 20), 2);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{1} << 30), 2);
  EXPECT_EQ(pipelined_calls_per_sample(std::size_t{16} << 30), 2);
}

TEST(PipelinedCallsPerSample, NonIncreasingAndWithinBounds) {
  int previous = pipelined_calls_per_sample(1);
  for (std::size_t bytes = 1; bytes <= (std::size_t{1} << 32); bytes = bytes * 3 / 2 + 1) {
    const int calls = pipelined_calls_per_sample(bytes);
    EXPECT_GE(calls, kPipelinedMinCalls) << bytes;
    EXPECT_LE(calls, kPipelinedMaxCalls) << bytes;
    EXPECT_LE(calls, previous) << bytes;
    previous = calls;
  }
}

// A clock that only moves when a fake call advances it.
struct FakeClock {
  double now_us = 1000.0;
  int reads = 0;
  double read() {
    ++reads;
    return now_us;
  }
};

TEST(TimeBackToBack, DividesTheElapsedTimeByTheNumberOfCalls) {
  FakeClock clock;
  int calls = 0;
  const double per_call_us = time_back_to_back_us(
      40,
      [&] {
        ++calls;
        clock.now_us += 2.5;
      },
      [&] { clock.now_us += 10.0; }, [&] { return clock.read(); });
  EXPECT_EQ(calls, 40);
  EXPECT_DOUBLE_EQ(per_call_us, (40 * 2.5 + 10.0) / 40);  // the finish (synchronize) is inside the timed span
}

TEST(TimeBackToBack, ReadsTheClockTwiceAndFinishesOnceAfterTheLastCall) {
  FakeClock clock;
  std::vector<std::string> events;
  time_back_to_back_us(
      3, [&] { events.push_back("call"); }, [&] { events.push_back("finish"); },
      [&] {
        events.push_back("clock");
        return clock.read();
      });
  const std::vector<std::string> expected = {"clock", "call", "call", "call", "finish", "clock"};
  EXPECT_EQ(events, expected);
  EXPECT_EQ(clock.reads, 2);
}

TEST(TimeBackToBack, UsesTheCountPerSizeExactly) {
  for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{1} << 30}) {
    FakeClock clock;
    int calls = 0;
    const int expected = pipelined_calls_per_sample(bytes);
    const double per_call_us = time_back_to_back_us(
        expected,
        [&] {
          ++calls;
          clock.now_us += 7.0;
        },
        [] {}, [&] { return clock.read(); });
    EXPECT_EQ(calls, expected) << bytes;
    EXPECT_DOUBLE_EQ(per_call_us, 7.0) << bytes;
  }
}

TEST(TimeBackToBack, RefusesZeroCalls) {
  FakeClock clock;
  int calls = 0;
  EXPECT_THROW(time_back_to_back_us(
                   0, [&] { ++calls; }, [] {}, [&] { return clock.read(); }),
               std::invalid_argument);
  EXPECT_THROW(time_back_to_back_us(
                   -3, [&] { ++calls; }, [] {}, [&] { return clock.read(); }),
               std::invalid_argument);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(clock.reads, 0);
}

// With the real steady clock: a call that spins for at least 5 µs averages at least 5 µs (the clock is
// monotonic, so this bound holds however loaded the machine is), and the figure is per call, not the sum
// over the sample (at least 1000 µs; the bound below only fails if the 200 calls take over 200 ms).
TEST(TimeBackToBack, SteadyClockMeasuresABusyCallPerCall) {
  const auto spin = [] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(5);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  const double per_call_us = time_back_to_back_us(200, spin, [] {});
  EXPECT_GE(per_call_us, 5.0);
  EXPECT_LT(per_call_us, 200 * 5.0);
}

}  // namespace
}  // namespace itertime::calibrate
