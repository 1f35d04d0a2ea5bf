// torch_features.hpp: what the LibTorch under test can run on cpu, for the torch tests that skip
// without it (sdpa, fp16 matrix products: LibTorch 2.x has both, Debian 12's 1.13 neither).
// Invariant: read from calibrate::query_torch(), which probes, never from the version number.
#pragma once

#include <algorithm>
#include <string>

#include "calibrate/torch_info.hpp"
#include "common/attention.hpp"
#include "common/precision.hpp"

namespace itertime::calibrate {

inline bool has_sdpa() {
  const TorchInfo info = query_torch();
  return std::find(info.attention_backends.begin(), info.attention_backends.end(), "sdpa") != info.attention_backends.end();
}

inline bool has_cpu_fp16_matmul() { return query_torch().cpu_fp16_matmul; }

// Why this LibTorch cannot train or trace `precision` with `attention` on cpu; "" when it can.
inline std::string lacks_on_cpu(PrecisionName precision, AttentionKernel attention) {
  std::string missing;
  if (attention == AttentionKernel::kSdpa && !has_sdpa()) missing += " no sdpa";
  if (precision_policy(precision).needs_fp16_matmul && !has_cpu_fp16_matmul()) missing += " no fp16 products on cpu";
  return missing.empty() ? missing : "LibTorch " + query_torch().version + ":" + missing;
}

}  // namespace itertime::calibrate
