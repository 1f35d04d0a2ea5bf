// torch_compat.hpp: the one place where LibTorch version differences live (Debian's 1.13 vs 2.x wheels),
// plus dtype conversions between torch and itertime.
// Invariants: AutocastGuard restores the previous autocast state and dtype of its device on destruction
// and clears the autocast cache when it leaves the outermost autocast region (as torch.autocast does).
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "common/dtype.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {

inline torch::Dtype to_torch(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return torch::kFloat32;
    case DType::kFloat16: return torch::kFloat16;
    case DType::kBFloat16: return torch::kBFloat16;
    case DType::kFloat64: return torch::kFloat64;
    case DType::kInt8: return torch::kInt8;
    case DType::kInt32: return torch::kInt32;
    case DType::kInt64: return torch::kInt64;
    case DType::kBool: return torch::kBool;
  }
  throw InternalError("unknown DType", __FILE__, __LINE__);
}

inline DType from_torch(c10::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return DType::kFloat32;
    case torch::kFloat16: return DType::kFloat16;
    case torch::kBFloat16: return DType::kBFloat16;
    case torch::kFloat64: return DType::kFloat64;
    case torch::kInt8: return DType::kInt8;
    case torch::kInt32: return DType::kInt32;
    case torch::kInt64: return DType::kInt64;
    case torch::kBool: return DType::kBool;
    default: break;
  }
  throw InternalError(std::string("no itertime dtype for torch type ") + c10::toString(type), __FILE__, __LINE__);
}

// Enables autocast to `dtype` on `device` for the guard's lifetime.
class AutocastGuard {
 public:
  AutocastGuard(torch::DeviceType device, torch::Dtype dtype, bool enabled) : device_(device), enabled_(enabled) {
    if (!enabled_) return;
#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 4
    previous_enabled_ = at::autocast::is_autocast_enabled(device_);
    previous_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_dtype(device_, dtype);
    at::autocast::set_autocast_enabled(device_, true);
#else
    if (device_ == torch::kCPU) {
      previous_enabled_ = at::autocast::is_cpu_enabled();
      previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(true);
    } else {
      previous_enabled_ = at::autocast::is_enabled();
      previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(true);
    }
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 4
    at::autocast::set_autocast_enabled(device_, previous_enabled_);
    at::autocast::set_autocast_dtype(device_, previous_dtype_);
#else
    if (device_ == torch::kCPU) {
      at::autocast::set_cpu_enabled(previous_enabled_);
      at::autocast::set_autocast_cpu_dtype(previous_dtype_);
    } else {
      at::autocast::set_enabled(previous_enabled_);
      at::autocast::set_autocast_gpu_dtype(previous_dtype_);
    }
#endif
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  torch::DeviceType device_;
  bool enabled_;
  bool previous_enabled_ = false;
  torch::Dtype previous_dtype_ = torch::kBFloat16;
};

}  // namespace itertime::calibrate
