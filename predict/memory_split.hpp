// memory_split.hpp: a rank's peak memory split as Megatron-LM's memory estimator splits it (weights,
// gradients, optimizer state, activations, the rest), for both memory models: itertime's own trainer
// (memory/memory_model.hpp) and Megatron-Core + Transformer Engine (framework/megatron_memory.hpp).
// Invariants:
//  - Every part >= 0 and weights + gradients + optimizer + activations + other == total_bytes, which is
//    the model's peak itself (peak_memory_bytes / megatron_te_peak_memory_bytes): the split changes no figure.
//  - itertime's trainer: weights = weights_bytes; gradients = gradients_bytes; optimizer = AdamW's
//    moments (optimizer_bytes); activations = the saved activations at the rank's peak; other = the
//    buffers (rotary tables, the DP flat gradient buffer, the distributed optimizer's padded parameters,
//    shard and its gradient) + what the AdamW step's workspace holds beyond the activations (the peak
//    holds the larger of the two: they never coexist).
//  - Megatron-Core + TE: weights = bf16/fp16 parameters; gradients = the fp32 main gradients;
//    optimizer = fp32 main parameters and Adam's moments; activations; other = TE's fp8 weight caches
//    and scaling state + the largest backward transient.
#pragma once

#include <cstdint>
#include <string>

#include "predict/framework/megatron_memory.hpp"
#include "predict/memory/memory_model.hpp"

namespace itertime::predict {

struct MemorySplit {
  int pipeline_rank = 0;  // the rank holding the peak
  int64_t weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0, activations_bytes = 0, other_bytes = 0;
  int64_t total_bytes = 0;
  std::string other_holds;  // what `other` is, in words
};

MemorySplit memory_split(const MemoryBreakdown& m);
MemorySplit memory_split(const framework::FrameworkMemory& m);

}  // namespace itertime::predict
