// timing_loop.hpp: the timed loop of `calibrate comm --mode pipelined`, apart from MPI so that it can be
// tested with fake calls and a fake clock.
// Invariants:
//  - pipelined_calls_per_sample(bytes) is a pure function of the message size (so every rank of a sweep
//    gets the same count without talking): kPipelinedBytesPerSample / bytes, clamped to
//    [kPipelinedMinCalls, kPipelinedMaxCalls]; bytes == 0 counts as 1 byte. It is non-increasing in bytes.
//  - time_back_to_back_us(calls, call, finish, now_us) reads the clock exactly twice: once before the
//    first call and once after `finish` (the synchronize that waits for the last call); it runs `call`
//    exactly `calls` times back to back, then `finish` once, and returns (end - start) / calls in the
//    clock's unit (microseconds). calls must be >= 1 (a std::invalid_argument otherwise).
#pragma once

#include <cstddef>
#include <stdexcept>

namespace itertime::calibrate {

// Sized so that a sample of small messages is 1000 calls: 0.2-0.6 ms for the fastest calls seen (2 ranks,
// Open MPI shared memory: 0.2-0.6 µs each), milliseconds for NCCL or across nodes, so the two clock reads
// (tens of ns) and the barrier exit skew (under a µs) before a sample stay under 0.5% of it; a sample of
// large messages moves about 64 MiB per rank (16 calls at 4 MiB, 4 at 16 MiB), so a point stays short.
constexpr std::size_t kPipelinedBytesPerSample = std::size_t{64} << 20;
constexpr int kPipelinedMinCalls = 2;     // always at least one call issued behind another
constexpr int kPipelinedMaxCalls = 1000;  // the small-message iteration count of osu_allreduce

int pipelined_calls_per_sample(std::size_t bytes);

// steady_clock now, in microseconds since its epoch.
double steady_now_us();

template <typename Call, typename Finish, typename NowUs>
double time_back_to_back_us(int calls, Call&& call, Finish&& finish, NowUs&& now_us) {
  if (calls < 1) throw std::invalid_argument("time_back_to_back_us: calls must be >= 1");
  const double start_us = now_us();
  for (int i = 0; i < calls; ++i) call();
  finish();
  const double end_us = now_us();
  return (end_us - start_us) / calls;
}

template <typename Call, typename Finish>
double time_back_to_back_us(int calls, Call&& call, Finish&& finish) {
  return time_back_to_back_us(calls, call, finish, steady_now_us);
}

}  // namespace itertime::calibrate
