// torch_compat.hpp: the one place where LibTorch version differences live (Debian 12's 1.13, Debian 13's
// 2.6, pip/conda wheels 2.x), plus dtype conversions between torch and itertime.
// Invariants:
//  - Every version test in calibrate/ is ITERTIME_TORCH_AT_LEAST(major, minor), written here; no other
//    file reads TORCH_VERSION_MAJOR / _MINOR.
//  - AutocastGuard restores the previous autocast state and dtype of its device on destruction and clears
//    the autocast cache when it leaves the outermost autocast region (as torch.autocast does).
#pragma once

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/Allocator.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// True when the LibTorch compiled against is at least major.minor (2.4 <= 2.6 <= 3.0).
#define ITERTIME_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#include "common/attention.hpp"
#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "common/precision.hpp"

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

// The type of the allocator totals c10::MemoryReportingInfoBase::reportMemoryUsage receives: int64_t in
// 1.13, size_t in 2.x. Read off the base class's own signature, so no version has to be guessed.
namespace detail {
template <typename>
struct ReportMemoryUsageArgs;
template <typename Class, typename Result, typename Pointer, typename Size, typename Total, typename Device>
struct ReportMemoryUsageArgs<Result (Class::*)(Pointer, Size, Total, Total, Device)> {
  using total_type = Total;
};
}  // namespace detail
using AllocatorTotalBytes = detail::ReportMemoryUsageArgs<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::total_type;

// ---- what this LibTorch can run ----------------------------------------------------------------------

// Whether the CPU kernels multiply fp16 matrices (1.13: "addmm_impl_cpu_" not implemented for 'Half').
// Probed with one 2x2 product, so a build that differs from its version number is still told the truth.
inline bool cpu_fp16_matmul() {
  try {
    const torch::Tensor a = torch::ones({2, 2}, torch::TensorOptions().dtype(torch::kFloat16));
    return torch::mm(a, a).defined();
  } catch (const c10::Error&) {
    return false;
  }
}

inline BackendCapabilities backend_capabilities() { return BackendCapabilities{cpu_fp16_matmul()}; }

// scaled_dot_product_attention exists from LibTorch 2.0 on.
inline constexpr bool kHasSdpa = ITERTIME_TORCH_AT_LEAST(2, 0);

namespace detail {
// at::Context::userEnabledCuDNNSDP() appeared within 2.x: detected as a member, not guessed by release.
template <typename Context, typename = void>
struct HasCuDnnSdp : std::false_type {};
template <typename Context>
struct HasCuDnnSdp<Context, std::void_t<decltype(std::declval<const Context&>().userEnabledCuDNNSDP())>> : std::true_type {};
}  // namespace detail

// The attention kernels a job can name ("eager"; "sdpa" from 2.0 on) and, for a CUDA LibTorch, the SDPA
// CUDA kernels enabled in at::globalContext() ("sdpa:flash", "sdpa:mem-efficient", "sdpa:math",
// "sdpa:cudnn").
inline std::vector<std::string> attention_backends([[maybe_unused]] bool cuda_build) {
  std::vector<std::string> backends{"eager"};
#if ITERTIME_TORCH_AT_LEAST(2, 0)
  backends.emplace_back("sdpa");
  if (cuda_build) {
    const at::Context& context = at::globalContext();
    if (context.userEnabledFlashSDP()) backends.emplace_back("sdpa:flash");
    if (context.userEnabledMemEfficientSDP()) backends.emplace_back("sdpa:mem-efficient");
    if (context.userEnabledMathSDP()) backends.emplace_back("sdpa:math");
    if constexpr (detail::HasCuDnnSdp<at::Context>::value) {
      if (context.userEnabledCuDNNSDP()) backends.emplace_back("sdpa:cudnn");
    }
  }
#endif
  return backends;
}

// The attention kernel a job asked for, made concrete for this LibTorch: auto is sdpa where it exists,
// else eager; sdpa on a LibTorch without it is a UserError.
inline AttentionKernel resolve_attention(AttentionKernel requested) {
  if (requested == AttentionKernel::kAuto) return kHasSdpa ? AttentionKernel::kSdpa : AttentionKernel::kEager;
  if (requested == AttentionKernel::kSdpa && !kHasSdpa) {
    throw UserError(std::string("attention 'sdpa' needs LibTorch 2.0 or later; this build has LibTorch ") + TORCH_VERSION +
                    ": use \"attention\": \"eager\" or build against LibTorch 2.x");
  }
  return requested;
}

// Causal attention through the fused kernel: q [b, heads, s, d], k and v with as many heads as q.
inline torch::Tensor causal_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
#if ITERTIME_TORCH_AT_LEAST(2, 0)
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
#else
  (void)q, (void)k, (void)v;
  throw InternalError("causal_sdpa called on LibTorch < 2.0 (resolve_attention refuses it)", __FILE__, __LINE__);
#endif
}

// Whether autocast is on for `device`, and to which dtype: what a recomputation must run under again.
struct AutocastState {
  bool enabled = false;
  torch::Dtype dtype = torch::kBFloat16;
};

inline AutocastState autocast_state(torch::DeviceType device) {
#if ITERTIME_TORCH_AT_LEAST(2, 4)
  return {at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
#else
  if (device == torch::kCPU) return {at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
  return {at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
#endif
}

// Enables autocast to `dtype` on `device` for the guard's lifetime.
class AutocastGuard {
 public:
  AutocastGuard(torch::DeviceType device, torch::Dtype dtype, bool enabled) : device_(device), enabled_(enabled) {
    if (!enabled_) return;
#if ITERTIME_TORCH_AT_LEAST(2, 4)
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
#if ITERTIME_TORCH_AT_LEAST(2, 4)
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
