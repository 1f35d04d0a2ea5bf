// throughput.cpp: tokens per second and MFU of a predicted iteration (throughput.hpp).
#include "predict/throughput.hpp"

#include "common/errors.hpp"

namespace itertime::predict {

ComputeDType compute_dtype_of(PrecisionName precision) {
  switch (precision) {
    case PrecisionName::kFp32: return ComputeDType::kFp32;
    case PrecisionName::kTf32: return ComputeDType::kTf32;
    case PrecisionName::kBf16:
    case PrecisionName::kAmpBf16: return ComputeDType::kBf16;
    case PrecisionName::kFp16:
    case PrecisionName::kAmpFp16: return ComputeDType::kFp16;
    case PrecisionName::kFp8: return ComputeDType::kFp8;
  }
  throw InternalError("unknown precision", __FILE__, __LINE__);
}

Throughput throughput(const LlamaSpec& model, const ParallelConfig& config, PrecisionName precision, double iteration_us,
                      const HardwareSpec* hardware) {
  ITERTIME_CHECK(iteration_us > 0, "throughput of a predicted iteration needs a positive time");
  const double seconds = iteration_us * 1e-6;
  const double tokens = static_cast<double>(config.global_batch) * static_cast<double>(config.seq_len);
  const double ranks = static_cast<double>(config.world_size());
  Throughput out;
  out.tokens_per_s_per_rank = tokens / seconds / ranks;
  out.model_flops_per_iteration = tokens * model.training_flops_per_token(config.seq_len);
  if (hardware != nullptr) {
    const std::optional<double> peak = hardware->peak(compute_dtype_of(precision));
    if (peak) {
      const double devices = hardware->kind == DeviceKind::kGpu ? ranks : 1.0;
      out.peak_flops_per_s = *peak * devices;
      out.mfu = out.model_flops_per_iteration / seconds / *out.peak_flops_per_s;
    }
  }
  return out;
}

}  // namespace itertime::predict
