// op_regression.hpp: the fallback time of an operator signature that was never profiled, from the
// profiled signatures of the same (operator, input dtypes) at the same occupancy, and a check of how far
// that fallback can be trusted beyond the shapes it saw.
// Invariants:
//  - time_us = intercept_us + us_per_flop * flops + us_per_byte * bytes with all three coefficients
//    >= 0 (non-negative least squares, exact for three unknowns: the best least-squares fit over every
//    support whose solution is non-negative). A time never decreases as an operator grows, and the fit
//    never goes negative beyond the measured shapes. Columns are scaled before solving, so FLOPs of 1e12
//    and bytes of 1e3 in one fit are fine.
//  - check_extrapolation() fits on the smaller signatures (by FLOPs, then bytes) and scores the fit on
//    the largest third it did not see: the error of extrapolating upwards, which is what predicting an
//    untraced, larger configuration does. Groups with fewer than kMinCheckPoints points are not checked.
//  - Pure functions, no state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace itertime::predict {

struct RegressionPoint {
  double flops = 0;
  double bytes = 0;
  double time_us = 0;
};

// time_us = max(0, intercept + per_flop * flops + per_byte * bytes); see the invariants.
struct OpRegression {
  double intercept_us = 0, us_per_flop = 0, us_per_byte = 0;
  int64_t points = 0;
  double time_us(double flops, double bytes) const;
};

OpRegression fit_op_regression(const std::vector<RegressionPoint>& points);

inline constexpr std::size_t kMinCheckPoints = 6;

// Upward extrapolation error of one (operator, dtypes, occupancy) group.
struct RegressionCheck {
  int64_t fit_points = 0;       // the smaller two thirds
  int64_t held_out_points = 0;  // the largest third
  double mape_pct = 0;          // mean |predicted - measured| / measured over the held-out points
  double held_out_time_us = 0;  // summed measured time of the held-out points (weight for pooling)
  double reach = 0;             // largest held-out FLOPs / largest fitted FLOPs (how far it extrapolated)
};

// Returns a check with held_out_points == 0 when the group has fewer than kMinCheckPoints points.
RegressionCheck check_extrapolation(std::vector<RegressionPoint> points);

// Checks of several groups pooled: MAPE over every held-out point, and weighted by measured time (the
// error on the time a prediction actually adds up).
struct PooledCheck {
  int64_t groups = 0;  // groups with held-out points
  int64_t held_out_points = 0;
  double mape_pct = 0;
  double time_weighted_mape_pct = 0;
};
PooledCheck pool_checks(const std::vector<RegressionCheck>& checks);

}  // namespace itertime::predict
