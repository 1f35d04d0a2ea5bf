// training_recipe.hpp: the optimizer settings of the training itertime measures and predicts: AdamW as
// calibrate/ops_calibration traces it, as calibrate/trainer runs the ground truth, and as
// predict/op_builder predicts its step (the step's scalar arguments show in the traced signatures).
// Invariants: the one definition of these numbers; AdamW's eps depends on the optimizer dtype and is
// adamw_eps(policy) in common/precision.hpp.
#pragma once

namespace itertime {

struct AdamWRecipe {
  double learning_rate;
  double beta1;  // first-moment decay
  double beta2;  // second-moment decay
  double weight_decay;
};

inline constexpr AdamWRecipe kAdamW{1e-3, 0.9, 0.999, 0.01};

}  // namespace itertime
