// test_regularized_fit.cpp: the bounded, regularized least-squares core (common/regularized_fit.hpp) on
// problems whose optimum is known by hand: a linear system, a prior against one residual, bounds, and a
// nonlinear model with known coefficients.
#include <gtest/gtest.h>

#include <cmath>

#include "common/regularized_fit.hpp"

namespace itertime {
namespace {

TEST(RegularizedFit, CholeskySolvesASymmetricPositiveSystem) {
  // [[4, 2], [2, 3]] x = [10, 8]: x = (1.75, 1.5) (4*1.75 + 2*1.5 = 10, 2*1.75 + 3*1.5 = 8).
  std::vector<double> x;
  ASSERT_TRUE(solve_symmetric_positive({4, 2, 2, 3}, {10, 8}, x));
  EXPECT_NEAR(x[0], 1.75, 1e-12);
  EXPECT_NEAR(x[1], 1.5, 1e-12);
  EXPECT_FALSE(solve_symmetric_positive({1, 2, 2, 1}, {1, 1}, x));  // indefinite
}

TEST(RegularizedFit, NoResidualsGivesThePriorClampedIntoItsBounds) {
  const auto none = [](const std::vector<double>&) { return std::vector<double>{}; };
  const RegularizedFit fit = fit_regularized({{"a", 0.3, 1.0, 0.0, 1.0}, {"b", 5.0, 1.0, 0.0, 2.0}}, none);
  EXPECT_DOUBLE_EQ(fit.values[0], 0.3);
  EXPECT_DOUBLE_EQ(fit.values[1], 2.0);  // the prior 5 lies above the bound
  EXPECT_TRUE(fit.converged);            // started from the clamped prior, where S is least
}

TEST(RegularizedFit, OneResidualAgainstThePriorMeetsHalfway) {
  // S = (x - 1)^2 + (x / 1)^2 is least at x = 0.5; with prior_sigma 0.5, S = (x - 1)^2 + 4 x^2: x = 0.2.
  const auto r = [](const std::vector<double>& x) { return std::vector<double>{x[0] - 1.0}; };
  EXPECT_NEAR(fit_regularized({{"x", 0.0, 1.0}}, r).values[0], 0.5, 1e-6);
  EXPECT_NEAR(fit_regularized({{"x", 0.0, 0.5}}, r).values[0], 0.2, 1e-6);
}

TEST(RegularizedFit, TheOptimumStaysWithinTheBounds) {
  const auto r = [](const std::vector<double>& x) { return std::vector<double>{10.0 * (x[0] - 3.0)}; };
  const RegularizedFit fit = fit_regularized({{"x", 0.0, 10.0, -1.0, 1.0}}, r);
  EXPECT_NEAR(fit.values[0], 1.0, 1e-12);
  EXPECT_TRUE(fit.converged);
  // The same below: the lower bound holds too.
  const auto low = [](const std::vector<double>& x) { return std::vector<double>{10.0 * (x[0] + 3.0)}; };
  EXPECT_NEAR(fit_regularized({{"x", 0.0, 10.0, -1.0, 1.0}}, low).values[0], -1.0, 1e-12);
}

TEST(RegularizedFit, RecoversKnownCoefficientsOfANonlinearModel) {
  // y = a exp(b t) on 8 exact points, a = 2, b = -0.3; weak priors (sigma 100) barely pull.
  std::vector<double> t, y;
  for (int i = 0; i < 8; ++i) t.push_back(i * 0.5), y.push_back(2.0 * std::exp(-0.3 * i * 0.5));
  const auto r = [&](const std::vector<double>& x) {
    std::vector<double> out;
    for (size_t i = 0; i < t.size(); ++i) out.push_back(x[0] * std::exp(x[1] * t[i]) - y[i]);
    return out;
  };
  const RegularizedFit fit = fit_regularized({{"a", 1.0, 100.0}, {"b", 0.0, 100.0}}, r, 100, 1e-7);
  EXPECT_NEAR(fit.values[0], 2.0, 1e-3);
  EXPECT_NEAR(fit.values[1], -0.3, 1e-3);
  EXPECT_LT(fit.residual_sum_squares, 1e-8);
}

TEST(RegularizedFit, TheEvaluationLimitStopsItUnconvergedAndNoWorseThanThePrior) {
  // Rosenbrock's valley as residuals (10 (b - a^2), 1 - a): one iteration's evaluations (2p + 2 = 6) cannot
  // reach (1, 1) from (-1.2, 1); the result is still within the bounds and no worse than the start.
  const auto r = [](const std::vector<double>& x) { return std::vector<double>{10.0 * (x[1] - x[0] * x[0]), 1.0 - x[0]}; };
  const std::vector<FitParameter> parameters = {{"a", -1.2, 1e3, -2.0, 2.0}, {"b", 1.0, 1e3, -2.0, 2.0}};
  const double start_objective = 4.4 * 4.4 + 2.2 * 2.2;  // S at the prior: residuals -4.4 and 2.2
  const RegularizedFit stopped = fit_regularized(parameters, r, 1);
  EXPECT_FALSE(stopped.converged);
  EXPECT_LE(stopped.iterations, 6);
  EXPECT_LE(stopped.objective, start_objective + 1e-12);
  const RegularizedFit full = fit_regularized(parameters, r, 500);
  EXPECT_TRUE(full.converged);
  EXPECT_NEAR(full.values[0], 1.0, 1e-3);
  EXPECT_NEAR(full.values[1], 1.0, 1e-3);
}

TEST(RegularizedFit, RefusesABadParameter) {
  const auto none = [](const std::vector<double>&) { return std::vector<double>{}; };
  EXPECT_THROW(fit_regularized({{"x", 0.0, 0.0}}, none), std::invalid_argument);
  EXPECT_THROW(fit_regularized({{"x", 0.0, 1.0, 2.0, 1.0}}, none), std::invalid_argument);
}

TEST(RegularizedFit, APriorAwayFromZeroPullsTowardItself) {
  // S = (x - 1)^2 + ((x + 1) / 1)^2 is least at x = 0, where S = 1 + 1 = 2 (prior -1, sigma 1).
  const auto r = [](const std::vector<double>& x) { return std::vector<double>{x[0] - 1.0}; };
  const RegularizedFit fit = fit_regularized({{"x", -1.0, 1.0}}, r);
  EXPECT_NEAR(fit.values[0], 0.0, 1e-6);
  EXPECT_NEAR(fit.objective, 2.0, 1e-9);
  EXPECT_NEAR(fit.residual_sum_squares, 1.0, 1e-6);
  // With prior_sigma 0.5 the prior term is ((x - 0) / 0.5)^2: S = (x - 1)^2 + 4 x^2, least at x = 0.2,
  // S = 0.64 + 0.16 = 0.8.
  EXPECT_NEAR(fit_regularized({{"x", 0.0, 0.5}}, r).objective, 0.8, 1e-9);
}

TEST(RegularizedFit, SigmaOfAMeanByHand) {
  // Residuals x - 1 and x - 3, prior 2 (sigma 0.5): x = 2, rss = 2, n - p = 1 degree of freedom: variance
  // 2 / 1 = 2; J'J + 1 / 0.5^2 = 2 + 4 = 6; sigma = sqrt(2 / 6) = 0.57735.
  const auto r = [](const std::vector<double>& x) { return std::vector<double>{x[0] - 1.0, x[0] - 3.0}; };
  const RegularizedFit fit = fit_regularized({{"x", 2.0, 0.5}}, r);
  EXPECT_NEAR(fit.values[0], 2.0, 1e-9);
  EXPECT_NEAR(fit.residual_sum_squares, 2.0, 1e-9);
  ASSERT_EQ(fit.sigma.size(), 1u);
  EXPECT_NEAR(fit.sigma[0], std::sqrt(2.0 / 6.0), 1e-6);
}

}  // namespace
}  // namespace itertime
