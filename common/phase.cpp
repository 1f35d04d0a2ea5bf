// phase.cpp: names and parsing of the training phases (phase.hpp).
#include "common/phase.hpp"

#include "common/errors.hpp"

namespace itertime {

std::string to_string(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kSpGradients: return "sp_grads";
    case Phase::kDpBuffer: return "dp_buffer";
    case Phase::kOptimizer: return "optimizer";
  }
  throw InternalError("unknown phase", __FILE__, __LINE__);
}

Phase parse_phase(std::string_view text) {
  for (Phase phase : kAllPhases) {
    if (to_string(phase) == text) return phase;
  }
  throw UserError("unknown phase '" + std::string(text) + "': use forward, backward, sp_grads, dp_buffer or optimizer");
}

}  // namespace itertime
