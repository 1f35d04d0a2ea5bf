// test_op_regression.cpp: the fallback regression of unprofiled operators and its extrapolation check.
// Invariants checked: known non-negative coefficients are recovered exactly from noiseless data, even
// with FLOPs of 1e12 beside bytes of 1e3; no coefficient ever comes out negative (a fit that would want
// a negative slope gets the best non-negative one); the upward check is ~0 on linear data and reports
// the error when efficiency changes with size; small groups are not checked; pooling weights by points
// and by time.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "predict/device/op_regression.hpp"

namespace itertime::predict {
namespace {

std::vector<RegressionPoint> linear_points(double intercept, double per_flop, double per_byte, int n, double flops0,
                                           double bytes0) {
  std::vector<RegressionPoint> points;
  for (int i = 0; i < n; ++i) {
    // FLOPs and bytes grow at different rates so that the two columns are not collinear.
    const double flops = flops0 * std::pow(2.0, i);
    const double bytes = bytes0 * (1.0 + 3.0 * i + (i % 3));
    points.push_back({flops, bytes, intercept + per_flop * flops + per_byte * bytes});
  }
  return points;
}

TEST(OpRegression, RecoversKnownCoefficients) {
  const OpRegression r = fit_op_regression(linear_points(4.0, 2e-3, 5e-4, 10, 1e3, 1e3));
  EXPECT_NEAR(r.intercept_us, 4.0, 1e-6);
  EXPECT_NEAR(r.us_per_flop, 2e-3, 1e-9);
  EXPECT_NEAR(r.us_per_byte, 5e-4, 1e-9);
  EXPECT_EQ(r.points, 10);
}

TEST(OpRegression, BadlyScaledColumnsStillSolve) {
  // GEMM-like FLOPs (up to 1e14) next to small byte counts: the unscaled normal equations are singular
  // in double precision.
  const OpRegression r = fit_op_regression(linear_points(1.0, 1e-9, 2e-3, 12, 1e11, 1e3));
  EXPECT_NEAR(r.us_per_flop, 1e-9, 1e-15);
  EXPECT_NEAR(r.us_per_byte, 2e-3, 1e-8);
  EXPECT_NEAR(r.intercept_us, 1.0, 1e-3);
}

TEST(OpRegression, CoefficientsAreNeverNegative) {
  // Time falls with bytes in this data: unconstrained least squares would give a negative per-byte cost
  // and, far enough out, negative times.
  std::vector<RegressionPoint> points = linear_points(50.0, 1e-3, -1e-3, 8, 1e3, 1e3);
  const OpRegression r = fit_op_regression(points);
  EXPECT_GE(r.intercept_us, 0.0);
  EXPECT_GE(r.us_per_flop, 0.0);
  EXPECT_GE(r.us_per_byte, 0.0);
  EXPECT_GT(r.time_us(1e9, 1e9), r.time_us(1e3, 1e3));  // grows, never goes below zero
  // Among non-negative fits it is the best one: no single-term fit does better.
  auto sse = [&](const OpRegression& f) {
    double total = 0;
    for (const auto& p : points)
      total += std::pow(f.intercept_us + f.us_per_flop * p.flops + f.us_per_byte * p.bytes - p.time_us, 2);
    return total;
  };
  double mean = 0;
  for (const auto& p : points) mean += p.time_us / static_cast<double>(points.size());
  EXPECT_LE(sse(r), sse(OpRegression{mean, 0, 0, 0}) + 1e-9);
}

TEST(OpRegression, EmptyAndConstantInputs) {
  EXPECT_EQ(fit_op_regression({}).time_us(1e6, 1e6), 0.0);
  const OpRegression constant = fit_op_regression({{0, 0, 3.0}, {0, 0, 5.0}});
  EXPECT_DOUBLE_EQ(constant.intercept_us, 4.0);
}

TEST(OpRegressionCheck, LinearDataExtrapolatesExactly) {
  const RegressionCheck check = check_extrapolation(linear_points(4.0, 2e-3, 5e-4, 9, 1e3, 1e3));
  EXPECT_EQ(check.fit_points, 6);
  EXPECT_EQ(check.held_out_points, 3);
  EXPECT_NEAR(check.mape_pct, 0.0, 1e-6);
  EXPECT_DOUBLE_EQ(check.reach, 8.0);  // 2^8 / 2^5
}

TEST(OpRegressionCheck, ReportsTheErrorWhenLargeShapesRunMoreEfficiently) {
  // Throughput doubles between the fitted sizes and the held-out ones: the linear fit overestimates.
  std::vector<RegressionPoint> points;
  for (int i = 0; i < 9; ++i) {
    const double flops = 1e6 * std::pow(2.0, i);
    const double efficiency = i < 6 ? 1.0 : 2.0;
    points.push_back({flops, flops / 10, flops * 1e-3 / efficiency});
  }
  const RegressionCheck check = check_extrapolation(points);
  EXPECT_EQ(check.held_out_points, 3);
  EXPECT_NEAR(check.mape_pct, 100.0, 1e-6);  // predicted twice the measured time
}

TEST(OpRegressionCheck, SmallGroupsAreNotChecked) {
  EXPECT_EQ(check_extrapolation(linear_points(1, 1, 1, static_cast<int>(kMinCheckPoints) - 1, 1, 1)).held_out_points, 0);
}

TEST(OpRegressionCheck, PoolingWeighsByPointsAndByTime) {
  RegressionCheck small{6, 2, 10.0, 1.0, 2.0};
  RegressionCheck large{6, 6, 50.0, 99.0, 2.0};
  RegressionCheck unchecked{};
  const PooledCheck pooled = pool_checks({small, large, unchecked});
  EXPECT_EQ(pooled.groups, 2);
  EXPECT_EQ(pooled.held_out_points, 8);
  EXPECT_DOUBLE_EQ(pooled.mape_pct, (10.0 * 2 + 50.0 * 6) / 8);
  EXPECT_DOUBLE_EQ(pooled.time_weighted_mape_pct, (10.0 * 1 + 50.0 * 99) / 100);
}

}  // namespace
}  // namespace itertime::predict
