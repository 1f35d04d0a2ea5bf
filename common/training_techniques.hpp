// training_techniques.hpp: the options of Megatron-LM's training techniques that change what a step runs
// (issue 16). Invariants: torch-free; the trainer (calibrate/trainer.hpp) is the only user so far: job
// files, the tracer and the predictor do not know these options yet.
#pragma once

namespace itertime {

// Activation recompute: kSelective recomputes each attention core (the scores, softmax and product with V:
// what holds [batch, heads, seq, seq]) in the backward instead of keeping its activations; kFull keeps
// only each decoder layer's input and recomputes the whole layer, its TP communication included.
enum class Recompute { kNone, kSelective, kFull };

}  // namespace itertime
