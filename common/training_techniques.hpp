// training_techniques.hpp: the options of Megatron-LM's training techniques that change what a step runs
// (issue 16), what each does in calibrate/trainer.hpp and docs/method.md.
// Invariants: torch-free; all off by default (plain TP, PP and DP as before); the trainer runs every
// combination except overlap with the distributed optimizer; the memory model (predict/memory_model.hpp)
// knows them all; job files, the tracer, the stage builder, the schedule and the predictor do not yet.
#pragma once

#include <cstdint>

namespace itertime {

// Activation recompute: kSelective recomputes each attention core (the scores, softmax and product with V:
// what holds [batch, heads, seq, seq]) in the backward instead of keeping its activations; kFull keeps
// only each decoder layer's input and recomputes the whole layer, its TP communication included.
enum class Recompute { kNone, kSelective, kFull };

struct TrainingTechniques {
  bool sequence_parallel = false;      // Megatron SP: sequence shards outside the TP regions
  bool vocab_parallel = false;         // vocabulary-parallel embedding, LM head and cross-entropy
  bool distributed_optimizer = false;  // ZeRO-1: optimizer state and update sharded over DP
  Recompute recompute = Recompute::kNone;
  bool overlap_gradient_reduction = false;  // DP all-reduce in buckets started during the backward
  int64_t gradient_bucket_bytes = int64_t{25} << 20;
};

}  // namespace itertime
