// reference_samples.hpp: one timing of the speed reference (common/speed_drift.hpp) from its figures, for the
// tests of the drift, the pass choice and the drift beside a validation (tests/unit/test_speed_drift.cpp,
// tests/predict/test_validation_drift*.cpp).
// Invariants: the sample's unix_time_s is 0; its all-reduce is NaN unless given (none at occupancy 1).
#pragma once

#include <limits>

#include "common/speed_drift.hpp"

namespace itertime::testing {

inline ReferenceSample reference_sample(ReferenceStage stage, int pass, int occupancy, double matmul_us, double elementwise_us,
                                        double allreduce_us = std::numeric_limits<double>::quiet_NaN()) {
  return ReferenceSample{stage, pass, occupancy, 0.0, matmul_us, elementwise_us, allreduce_us};
}

}  // namespace itertime::testing
