// replay_timer.hpp: how `calibrate ops` times one replay of an operator, per device (private to
// calibrate/; includes torch).
// Invariants:
//  - CPU: the host's steady clock around the replay.
//  - CUDA, with a LibTorch of 2.6 or later (c10::Event::elapsedTime): the device time between two
//    timing events recorded on the current stream around the replay, read after the end event
//    completed, so launch latency and the host's synchronization are not counted (what a training
//    step, which queues its kernels ahead, pays). Before each timed replay the L2 cache is flushed by
//    zeroing a 256 MiB buffer (larger than any GPU's L2: 50 MB on H100, 60 MB on H200), outside the
//    events, as Triton's benchmarking does: every replay starts cold, none is flattered by the inputs
//    the previous replay left in L2. Older LibTorch: the host clock around the replay and a device
//    synchronize, as before (kind() says which).
//  - One ReplayTimer per device; it holds the flush buffer and the events for its lifetime.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace itertime::calibrate {

class ReplayTimer {
 public:
  explicit ReplayTimer(torch::Device device);
  ~ReplayTimer();
  ReplayTimer(const ReplayTimer&) = delete;
  ReplayTimer& operator=(const ReplayTimer&) = delete;

  // The time of one call of `replay`, in microseconds (see the invariants).
  double time_us(const std::function<void()>& replay);
  // Waits for the device's queued work (a no-op on CPU).
  void synchronize();
  // "host clock" | "device events, L2 flushed" | "host clock + device synchronize"
  std::string kind() const;

 private:
  struct Events;
  torch::Device device_;
  std::unique_ptr<Events> events_;  // CUDA with timing events only
};

}  // namespace itertime::calibrate
