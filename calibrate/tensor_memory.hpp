// tensor_memory.hpp: the peak of the bytes LibTorch's allocator hands out to tensors on this thread's
// work (forward, backward on the calling thread, optimizer), measured exactly, for checking the memory
// model (predict/memory/memory_model.hpp) against what training really holds. Torch-free interface (pimpl).
// Invariants:
//  - While a TensorMemoryProbe lives, every tensor allocation and free that LibTorch reports to its
//    profiler hook (c10::reportMemoryUsageToProfiler: the CPU allocator and the CUDA caching allocator)
//    moves current_bytes(); peak_bytes() is the largest current_bytes() seen. Tensors that existed before
//    the probe are not counted, nor are their frees.
//  - The probe installs itself as the thread's profiler state (c10::DebugInfoGuard): construct and
//    destroy it on one thread, never while the LibTorch profiler or a TraceSession's memory profiling
//    runs, and not nested.
//  - Allocator reservations (the CUDA cache), fragmentation and non-tensor memory are not counted: this
//    is the figure the memory model predicts, not the process's footprint. Beside it, the allocator's own
//    totals that come with each report are kept at their largest: allocated (CUDA: every live tensor of
//    the device, those from before the probe too; CPU: LibTorch's running total of what it handed out
//    while the probe listened) and reserved (CUDA: what the caching allocator holds from the driver, the
//    figure an out-of-memory is decided on; CPU: 0).
//  - low_bytes() is the smallest current_bytes() seen since construction or the last reset_low(): with
//    current_bytes() at two moments it brackets what was freed in between (tests/torch/test_memory_check.cpp
//    reads the gradients the trainer drops at the start of a step from it).
#pragma once

#include <cstdint>
#include <memory>

namespace itertime::calibrate {

class TensorMemoryProbe {
 public:
  TensorMemoryProbe();
  ~TensorMemoryProbe();
  TensorMemoryProbe(const TensorMemoryProbe&) = delete;
  TensorMemoryProbe& operator=(const TensorMemoryProbe&) = delete;

  int64_t current_bytes() const;
  int64_t peak_bytes() const;
  void reset_peak();  // peak := current
  int64_t low_bytes() const;
  void reset_low();                                // low := current
  int64_t allocator_peak_allocated_bytes() const;  // largest total_allocated reported (see the invariants)
  int64_t allocator_peak_reserved_bytes() const;   // largest total_reserved reported

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace itertime::calibrate
