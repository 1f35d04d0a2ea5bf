// tensor_memory.cpp: see tensor_memory.hpp.
#include "calibrate/tensor_memory.hpp"

#include "calibrate/torch_compat.hpp"

#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>

namespace itertime::calibrate {
// A named namespace, not an anonymous one: TensorMemoryProbe::Impl holds a Reporter, and in the unity
// build (calibrate/CMakeLists.txt) a class defined in an included file may not hold a type of an anonymous
// namespace (-Wsubobject-linkage).
namespace tensor_memory_detail {

// Receives LibTorch's allocation reports while installed as the profiler state.
class Reporter final : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, AllocatorTotalBytes total_allocated,
                         AllocatorTotalBytes total_reserved, c10::Device /*device*/) override {
    const int64_t now = current_.fetch_add(alloc_size) + alloc_size;
    raise_to(peak_, now);
    lower_to(low_, now);
    raise_to(allocator_allocated_, static_cast<int64_t>(total_allocated));
    raise_to(allocator_reserved_, static_cast<int64_t>(total_reserved));
  }
  void reportOutOfMemory(int64_t, AllocatorTotalBytes, AllocatorTotalBytes, c10::Device) override {}
  bool memoryProfilingEnabled() const override { return true; }

  int64_t current() const { return current_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(current_.load()); }
  int64_t low() const { return low_.load(); }
  void reset_low() { low_.store(current_.load()); }
  int64_t allocator_allocated() const { return allocator_allocated_.load(); }
  int64_t allocator_reserved() const { return allocator_reserved_.load(); }

 private:
  static void raise_to(std::atomic<int64_t>& peak, int64_t value) {
    int64_t seen = peak.load();
    while (value > seen && !peak.compare_exchange_weak(seen, value)) {
    }
  }
  static void lower_to(std::atomic<int64_t>& low, int64_t value) {
    int64_t seen = low.load();
    while (value < seen && !low.compare_exchange_weak(seen, value)) {
    }
  }
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> low_{0};
  std::atomic<int64_t> allocator_allocated_{0};
  std::atomic<int64_t> allocator_reserved_{0};
};

}  // namespace tensor_memory_detail

struct TensorMemoryProbe::Impl {
  using Reporter = tensor_memory_detail::Reporter;
  std::shared_ptr<Reporter> reporter = std::make_shared<Reporter>();
  c10::DebugInfoGuard guard{c10::DebugInfoKind::PROFILER_STATE, reporter};
};

TensorMemoryProbe::TensorMemoryProbe() : impl_(std::make_unique<Impl>()) {}
TensorMemoryProbe::~TensorMemoryProbe() = default;

int64_t TensorMemoryProbe::current_bytes() const { return impl_->reporter->current(); }
int64_t TensorMemoryProbe::peak_bytes() const { return impl_->reporter->peak(); }
void TensorMemoryProbe::reset_peak() { impl_->reporter->reset_peak(); }
int64_t TensorMemoryProbe::low_bytes() const { return impl_->reporter->low(); }
void TensorMemoryProbe::reset_low() { impl_->reporter->reset_low(); }
int64_t TensorMemoryProbe::allocator_peak_allocated_bytes() const { return impl_->reporter->allocator_allocated(); }
int64_t TensorMemoryProbe::allocator_peak_reserved_bytes() const { return impl_->reporter->allocator_reserved(); }

}  // namespace itertime::calibrate
