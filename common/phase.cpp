// phase.cpp: names and parsing of the training phases (phase.hpp).
#include "common/phase.hpp"

#include <iterator>

#include "common/enum_names.hpp"
#include "common/errors.hpp"

namespace itertime {

constexpr EnumName<Phase> kPhaseNames[] = {{Phase::kForward, "forward"},
                                           {Phase::kBackward, "backward"},
                                           {Phase::kSpGradients, "sp_grads"},
                                           {Phase::kDpBuffer, "dp_buffer"},
                                           {Phase::kOptimizer, "optimizer"}};
static_assert(enum_names_one_to_one(kPhaseNames));
static_assert(std::size(kPhaseNames) == kAllPhases.size(), "every phase has a name");

std::string to_string(Phase phase) { return name_of(kPhaseNames, phase, "phase"); }

Phase parse_phase(std::string_view text) { return parse_named(kPhaseNames, text, "phase"); }

}  // namespace itertime
