// timing_loop.cpp: calls per pipelined sample and the steady clock in microseconds (timing_loop.hpp).
#include "commbench/timing_loop.hpp"

#include <algorithm>
#include <chrono>

namespace itertime::calibrate {

int pipelined_calls_per_sample(std::size_t bytes) {
  const std::size_t calls = kPipelinedBytesPerSample / std::max<std::size_t>(bytes, 1);
  return static_cast<int>(std::clamp<std::size_t>(calls, kPipelinedMinCalls, kPipelinedMaxCalls));
}

double steady_now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace itertime::calibrate
