// regularized_fit.hpp: a small bounded, regularized nonlinear least-squares fit (NLopt's BOBYQA):
// a handful of named parameters, each with a described (prior) value, how far it may plausibly move
// (prior_sigma) and hard bounds, fitted to residuals that a caller computes. Used by the framework
// model's fit on a cluster's logs (predict/framework/framework_fit.hpp); meant as the one fitting core
// for every fit of named terms (docs/method.md).
// Invariants:
//  - Minimizes S(x) = sum_i r_i(x)^2 + sum_j ((x_j - prior_j) / prior_sigma_j)^2 over lower <= x <= upper.
//    With no residuals the result is the prior (clamped into the bounds).
//  - S is minimized by NLopt's BOBYQA (Powell's derivative-free bounded method; COBYLA for a single
//    parameter), from the prior clamped into the bounds, to a relative change of S below `tolerance` or
//    max_iterations x (2p + 2) evaluations of the residuals; the result never leaves the bounds, and
//    S there is at most S at the start. converged: NLopt stopped on a tolerance, not on the limit.
//  - The Jacobian for sigma is by forward differences of step `step` (scaled by max(1, |x_j|)).
//  - sigma_j: the standard deviation of x_j from the curvature at the optimum, inv(J'J + diag(1/prior_sigma^2))
//    scaled by the residuals' variance (sum r^2 / max(1, n - p)); at a bound it is still reported. Pure:
//    no state, no output.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace itertime {

struct FitParameter {
  std::string name;
  double prior = 0.0;        // the described value: where the fit starts and what it is pulled toward
  double prior_sigma = 1.0;  // > 0: one standard deviation of the pull
  double lower = -1e300, upper = 1e300;
};

struct RegularizedFit {
  std::vector<double> values;  // per parameter
  std::vector<double> sigma;   // per parameter (see above)
  double objective = 0.0;      // S at the values
  double residual_sum_squares = 0.0;
  int iterations = 0;      // evaluations of the residuals the minimizer made
  bool converged = false;  // NLopt stopped on its tolerance (S or x barely changing), not on the limit
};

// `residuals(x)` returns the same number of residuals for every x within the bounds. Throws
// std::invalid_argument for a prior_sigma <= 0 or lower > upper.
RegularizedFit fit_regularized(const std::vector<FitParameter>& parameters,
                               const std::function<std::vector<double>(const std::vector<double>&)>& residuals,
                               int max_iterations = 50, double step = 1e-4, double tolerance = 1e-10);

// Solves A x = b for a symmetric positive definite A (n x n, row-major) by Cholesky; false when A is
// not positive definite. Pure; exposed for its own tests.
bool solve_symmetric_positive(std::vector<double> a, std::vector<double> b, std::vector<double>& x);

}  // namespace itertime
