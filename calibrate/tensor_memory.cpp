// tensor_memory.cpp: see tensor_memory.hpp.
#include "calibrate/tensor_memory.hpp"

#include "calibrate/torch_compat.hpp"

#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>

namespace itertime::calibrate {
namespace {

// Receives LibTorch's allocation reports while installed as the profiler state.
class Reporter final : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, AllocatorTotalBytes /*total_allocated*/,
                         AllocatorTotalBytes /*total_reserved*/,
                         c10::Device /*device*/) override {
    const int64_t now = current_.fetch_add(alloc_size) + alloc_size;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  void reportOutOfMemory(int64_t, AllocatorTotalBytes, AllocatorTotalBytes, c10::Device) override {}
  bool memoryProfilingEnabled() const override { return true; }

  int64_t current() const { return current_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(current_.load()); }

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace

struct TensorMemoryProbe::Impl {
  std::shared_ptr<Reporter> reporter = std::make_shared<Reporter>();
  c10::DebugInfoGuard guard{c10::DebugInfoKind::PROFILER_STATE, reporter};
};

TensorMemoryProbe::TensorMemoryProbe() : impl_(std::make_unique<Impl>()) {}
TensorMemoryProbe::~TensorMemoryProbe() = default;

int64_t TensorMemoryProbe::current_bytes() const { return impl_->reporter->current(); }
int64_t TensorMemoryProbe::peak_bytes() const { return impl_->reporter->peak(); }
void TensorMemoryProbe::reset_peak() { impl_->reporter->reset_peak(); }

}  // namespace itertime::calibrate
