// precision.hpp: the precision policies of docs/method.md (DESIGN.md §4).
// Invariants: a policy is identified by its canonical name (fp32, tf32, bf16, fp16, amp-bf16, amp-fp16, fp8);
// parse_precision(to_string(p)) == p; the table below is the only place that says which dtype each part
// of training uses and which backend may run it. A policy a backend cannot run is refused with a
// UserError (require_supported), never silently replaced.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"

namespace itertime {

// What the LibTorch at hand can run beyond the table below; calibrate/ fills it in by probing
// (torch_compat.hpp), everything else assumes the least (a default-constructed value).
struct BackendCapabilities {
  bool cpu_fp16_matmul = false;  // LibTorch 1.13's CPU kernels have no fp16 matrix product; 2.x's do
};

enum class PrecisionName { kFp32, kTf32, kBf16, kFp16, kAmpBf16, kAmpFp16, kFp8 };

struct PrecisionPolicy {
  PrecisionName name;
  DType param_dtype;          // parameters as stored (master weights under AMP)
  DType compute_dtype;        // matrix products (tf32 runs fp32 tensors on TF32 tensor cores)
  DType grad_dtype;           // gradients, and the DP all-reduce
  DType optimizer_dtype;      // AdamW moments
  DType activation_dtype;     // residual stream between layers, and pipeline P2P payloads
  bool autocast = false;      // compute dtype reached through autocast (casts inserted by the framework)
  bool tf32_math = false;     // fp32 tensors, TF32 tensor-core math
  bool loss_scaling = false;  // dynamic loss scaling (fp16 gradients underflow without it)
  bool supports_cpu = false;
  bool supports_cuda = false;
  bool needs_fp16_matmul = false;  // fp16 matrix products: every CUDA LibTorch, on CPU LibTorch >= 2.x only
  // Transformer Engine style FP8 (fp8): amp-bf16 with every matrix product in fp8 (e4m3 forward, e5m2
  // gradients) behind scaling casts. Predicted on a hardware description with an fp8 peak only: no
  // backend runs it (supports() is false everywhere), so no calibration measures it.
  bool fp8_matmul = false;

  bool supports(Backend backend, const BackendCapabilities& capabilities = {}) const {
    if (backend == Backend::kCuda) return supports_cuda;
    return supports_cpu && (!needs_fp16_matmul || capabilities.cpu_fp16_matmul);
  }
};

// AdamW's epsilon under `policy`: LibTorch's default 1e-8, except where the optimizer state is fp16.
// There 1e-8 rounds to zero and the second moment (1 - beta2) * g^2 of any gradient below ~8e-3
// underflows, so the first update divides by zero (inf, or NaN where g = 0) and the model is lost after
// one step (measured: tests/torch/test_layout_equivalence.cpp's fp16 case). 1e-4, the usual advice for
// half-precision Adam, bounds the update by lr * |m| / 1e-4 instead.
double adamw_eps(const PrecisionPolicy& policy);

std::string to_string(PrecisionName name);
const PrecisionPolicy& precision_policy(PrecisionName name);
// Throws UserError naming the text and the known policies.
const PrecisionPolicy& parse_precision(std::string_view text);
const std::vector<PrecisionName>& all_precisions();
// parse_precision() for what a trainer runs (job files, stored ground truth): a predicted-only policy
// (fp8) is a UserError saying so.
const PrecisionPolicy& parse_trainable_precision(std::string_view text);
// Throws UserError when `backend` (with `capabilities`) cannot run `policy`, saying why and what can.
void require_supported(const PrecisionPolicy& policy, Backend backend, const BackendCapabilities& capabilities = {});

}  // namespace itertime
