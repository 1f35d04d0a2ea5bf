// replay_timer.cpp: one replay's time, host clock or device events (replay_timer.hpp).
#include "calibrate/replay_timer.hpp"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "calibrate/torch_compat.hpp"

namespace itertime::calibrate {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int64_t kL2FlushBytes = int64_t{256} << 20;
}  // namespace

#if ITERTIME_TORCH_AT_LEAST(2, 6)
struct ReplayTimer::Events {
  explicit Events(torch::Device device)
      : guard(device.type()),
        stream(guard.getStream(device)),
        start(device.type(), c10::EventFlag::BACKEND_DEFAULT),
        end(device.type(), c10::EventFlag::BACKEND_DEFAULT),
        flush(torch::empty({kL2FlushBytes}, torch::TensorOptions().dtype(torch::kUInt8).device(device))) {}
  c10::impl::VirtualGuardImpl guard;
  c10::Stream stream;
  c10::Event start, end;
  torch::Tensor flush;
};
#else
struct ReplayTimer::Events {};
#endif

ReplayTimer::ReplayTimer(torch::Device device) : device_(device) {
#if ITERTIME_TORCH_AT_LEAST(2, 6)
  if (device_.is_cuda()) events_ = std::make_unique<Events>(device_);
#endif
}

ReplayTimer::~ReplayTimer() = default;

void ReplayTimer::synchronize() {
  if (device_.is_cuda()) torch::cuda::synchronize();
}

double ReplayTimer::time_us(const std::function<void()>& replay) {
#if ITERTIME_TORCH_AT_LEAST(2, 6)
  if (events_) {
    events_->flush.zero_();
    events_->start.record(events_->stream);
    replay();
    events_->end.record(events_->stream);
    events_->end.synchronize();
    return events_->start.elapsedTime(events_->end) * 1e3;  // elapsedTime is in milliseconds
  }
#endif
  const auto start = Clock::now();
  replay();
  synchronize();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

std::string ReplayTimer::kind() const {
  if (events_) return "device events, L2 flushed";
  return device_.is_cuda() ? "host clock + device synchronize" : "host clock";
}

}  // namespace itertime::calibrate
