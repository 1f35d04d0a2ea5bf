// phase.hpp: the phases of one training iteration that operators and communications are recorded in
// (the tracer), stored under (/ops/sequences, /ops/comms) and predicted by (the predictor).
// Invariants:
//  - Declared in execution order: forward and backward (once per micro-batch), then, once per
//    iteration, the TP sum of the sequence-parallel norms' gradients (sp_grads: only with sequence
//    parallelism and tp > 1, whatever dp), the DP gradient-buffer work and the optimizer step;
//    kPhaseCount counts them and a Phase converts to an index below it (indices are not stored: names are).
//  - One canonical name each ("forward", "backward", "sp_grads", "dp_buffer", "optimizer"); parse_phase
//    of any other text is a UserError naming it.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace itertime {

enum class Phase { kForward, kBackward, kSpGradients, kDpBuffer, kOptimizer };
inline constexpr std::size_t kPhaseCount = 5;
inline constexpr std::array<Phase, kPhaseCount> kAllPhases = {Phase::kForward, Phase::kBackward, Phase::kSpGradients,
                                                              Phase::kDpBuffer, Phase::kOptimizer};

std::string to_string(Phase phase);
Phase parse_phase(std::string_view text);
inline std::size_t phase_index(Phase phase) { return static_cast<std::size_t>(phase); }
// Forward and backward run once per micro-batch; the others once per iteration.
inline bool runs_per_micro_batch(Phase phase) { return phase == Phase::kForward || phase == Phase::kBackward; }

}  // namespace itertime
