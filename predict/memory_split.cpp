// memory_split.cpp: the peak memory's split (memory_split.hpp).
#include "predict/memory_split.hpp"

#include <algorithm>

namespace itertime::predict {

MemorySplit memory_split(const MemoryBreakdown& m) {
  MemorySplit out;
  out.pipeline_rank = m.stage;
  out.weights_bytes = m.weights_bytes;
  out.gradients_bytes = m.gradients_bytes;
  out.optimizer_bytes = m.optimizer_bytes;
  out.activations_bytes = m.activations_bytes;
  const int64_t workspace_beyond = std::max<int64_t>(0, m.optimizer_workspace_bytes - m.activations_bytes);
  out.other_bytes = m.buffers_bytes + workspace_beyond;
  out.total_bytes = m.total_bytes;
  out.other_holds = "rotary tables, DP gradient buffer, distributed optimizer's buffers";
  if (workspace_beyond > 0) out.other_holds += ", the AdamW step's workspace beyond the activations";
  return out;
}

MemorySplit memory_split(const framework::FrameworkMemory& m) {
  MemorySplit out;
  out.pipeline_rank = m.pipeline_rank;
  out.weights_bytes = m.weights_bytes;
  out.gradients_bytes = m.main_grad_bytes;
  out.optimizer_bytes = m.optimizer_bytes;
  out.activations_bytes = m.activations_bytes;
  out.other_bytes = m.fp8_bytes + m.other_bytes;
  out.total_bytes = m.total_bytes;
  out.other_holds = m.fp8_bytes > 0 ? "fp8 weight caches and scaling state; the largest backward transient"
                                    : "the largest backward transient: a recomputed layer or the logits";
  return out;
}

}  // namespace itertime::predict
