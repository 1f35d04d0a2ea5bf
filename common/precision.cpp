// precision.cpp: the precision policies (precision.hpp).
#include "common/precision.hpp"

#include <array>

#include "common/errors.hpp"

namespace itertime {
namespace {

constexpr DType f32 = DType::kFloat32;
constexpr DType f16 = DType::kFloat16;
constexpr DType b16 = DType::kBFloat16;

// name, params, compute, grads, optimizer, activations, autocast, tf32, loss scaling, cpu, cuda,
// fp16 matrix products (CPU LibTorch 1.13 has none: the fp16 policies run on CPU from LibTorch 2.x on),
// fp8 matrix products (predicted only)
const std::array<PrecisionPolicy, 7> kPolicies = {{
    {PrecisionName::kFp32, f32, f32, f32, f32, f32, false, false, false, true, true, false},
    {PrecisionName::kTf32, f32, f32, f32, f32, f32, false, true, false, false, true, false},
    {PrecisionName::kBf16, b16, b16, b16, b16, b16, false, false, false, true, true, false},
    {PrecisionName::kFp16, f16, f16, f16, f16, f16, false, false, true, true, true, true},
    {PrecisionName::kAmpBf16, f32, b16, f32, f32, f32, true, false, false, true, true, false},
    {PrecisionName::kAmpFp16, f32, f16, f32, f32, f32, true, false, true, true, true, true},
    {PrecisionName::kFp8, f32, b16, f32, f32, f32, true, false, false, false, false, false, true},
}};

}  // namespace

std::string to_string(PrecisionName name) {
  switch (name) {
    case PrecisionName::kFp32: return "fp32";
    case PrecisionName::kTf32: return "tf32";
    case PrecisionName::kBf16: return "bf16";
    case PrecisionName::kFp16: return "fp16";
    case PrecisionName::kAmpBf16: return "amp-bf16";
    case PrecisionName::kAmpFp16: return "amp-fp16";
    case PrecisionName::kFp8: return "fp8";
  }
  throw InternalError("unknown PrecisionName", __FILE__, __LINE__);
}

double adamw_eps(const PrecisionPolicy& policy) { return policy.optimizer_dtype == DType::kFloat16 ? 1e-4 : 1e-8; }

const std::vector<PrecisionName>& all_precisions() {
  static const std::vector<PrecisionName> kAll = {PrecisionName::kFp32, PrecisionName::kTf32,    PrecisionName::kBf16,
                                                  PrecisionName::kFp16, PrecisionName::kAmpBf16, PrecisionName::kAmpFp16,
                                                  PrecisionName::kFp8};
  return kAll;
}

const PrecisionPolicy& precision_policy(PrecisionName name) {
  for (const auto& policy : kPolicies) {
    if (policy.name == name) return policy;
  }
  throw InternalError("no policy for " + to_string(name), __FILE__, __LINE__);
}

const PrecisionPolicy& parse_precision(std::string_view text) {
  for (PrecisionName name : all_precisions()) {
    if (to_string(name) == text) return precision_policy(name);
  }
  // Accept the underscore spelling too (amp_bf16), a common habit in job files.
  std::string dashed(text);
  for (char& c : dashed) c = (c == '_') ? '-' : c;
  for (PrecisionName name : all_precisions()) {
    if (to_string(name) == dashed) return precision_policy(name);
  }
  throw UserError("unknown precision policy '" + std::string(text) +
                  "': use one of fp32, tf32, bf16, fp16, amp-bf16, amp-fp16, fp8");
}

const PrecisionPolicy& parse_trainable_precision(std::string_view text) {
  const PrecisionPolicy& policy = parse_precision(text);
  if (policy.fp8_matmul) {
    throw UserError("precision policy '" + to_string(policy.name) +
                    "' is predicted only (itertime predict --hardware NAME --precision fp8): no itertime trainer runs it, "
                    "so a job cannot calibrate it; use bf16 or amp-bf16");
  }
  return policy;
}

void require_supported(const PrecisionPolicy& policy, Backend backend, const BackendCapabilities& capabilities) {
  if (policy.supports(backend, capabilities)) return;
  std::string hint = policy.supports_cuda ? "it runs on cuda only" : "it runs on cpu only";
  if (policy.fp8_matmul) {
    hint =
        "fp8 is predicted only, on a hardware description with an fp8 peak (itertime predict --hardware NAME "
        "--precision fp8); no itertime backend trains it";
  } else if (policy.needs_fp16_matmul && backend == Backend::kCpu) {
    hint =
        "this LibTorch has no fp16 matrix product on cpu (LibTorch 1.x; 2.x has one); use bf16 or amp-bf16 "
        "on cpu, or build against LibTorch 2.x";
  } else if (policy.name == PrecisionName::kTf32) {
    hint += " (TF32 is a tensor-core mode); use fp32 on cpu";
  }
  throw UserError("precision policy '" + to_string(policy.name) + "' cannot run on backend '" + to_string(backend) +
                  "': " + hint);
}

}  // namespace itertime
