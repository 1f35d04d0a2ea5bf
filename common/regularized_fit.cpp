// regularized_fit.cpp: a Gaussian prior and box bounds, minimized by NLopt (regularized_fit.hpp).
#include "common/regularized_fit.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlopt.h>
#include <stdexcept>
#include <type_traits>

namespace itertime {
namespace {

double clamp_to(const FitParameter& p, double x) { return std::min(p.upper, std::max(p.lower, x)); }

struct Evaluated {
  std::vector<double> r;
  double rss = 0, objective = 0;
};

Evaluated evaluate(const std::vector<FitParameter>& parameters,
                   const std::function<std::vector<double>(const std::vector<double>&)>& residuals,
                   const std::vector<double>& x) {
  Evaluated e;
  e.r = residuals(x);
  for (double r : e.r) e.rss += r * r;
  e.objective = e.rss;
  for (size_t j = 0; j < parameters.size(); ++j) {
    const double z = (x[j] - parameters[j].prior) / parameters[j].prior_sigma;
    e.objective += z * z;
  }
  return e;
}

// J (n x p, row-major) by forward differences, stepping inward at an upper bound.
std::vector<double> jacobian(const std::vector<FitParameter>& parameters,
                             const std::function<std::vector<double>(const std::vector<double>&)>& residuals,
                             const std::vector<double>& x, const std::vector<double>& r0, double step) {
  const size_t n = r0.size(), p = parameters.size();
  std::vector<double> j(n * p, 0.0);
  for (size_t k = 0; k < p; ++k) {
    std::vector<double> moved = x;
    double h = step * std::max(1.0, std::fabs(x[k]));
    if (x[k] + h > parameters[k].upper) h = -h;
    moved[k] = x[k] + h;
    const std::vector<double> r = residuals(moved);
    for (size_t i = 0; i < n; ++i) j[i * p + k] = (r[i] - r0[i]) / h;
  }
  return j;
}

}  // namespace

bool solve_symmetric_positive(std::vector<double> a, std::vector<double> b, std::vector<double>& x) {
  const size_t n = b.size();
  if (a.size() != n * n) return false;
  // In place: a's lower triangle becomes L with A = L L'.
  for (size_t c = 0; c < n; ++c) {
    double d = a[c * n + c];
    for (size_t k = 0; k < c; ++k) d -= a[c * n + k] * a[c * n + k];
    if (!(d > 0) || !std::isfinite(d)) return false;
    const double l = std::sqrt(d);
    a[c * n + c] = l;
    for (size_t r = c + 1; r < n; ++r) {
      double v = a[r * n + c];
      for (size_t k = 0; k < c; ++k) v -= a[r * n + k] * a[c * n + k];
      a[r * n + c] = v / l;
    }
  }
  for (size_t r = 0; r < n; ++r) {  // L y = b
    for (size_t k = 0; k < r; ++k) b[r] -= a[r * n + k] * b[k];
    b[r] /= a[r * n + r];
  }
  for (size_t r = n; r-- > 0;) {  // L' x = y
    for (size_t k = r + 1; k < n; ++k) b[r] -= a[k * n + r] * b[k];
    b[r] /= a[r * n + r];
  }
  x = std::move(b);
  return true;
}

namespace {

struct Objective {
  const std::vector<FitParameter>& parameters;
  const std::function<std::vector<double>(const std::vector<double>&)>& residuals;
  int evaluations = 0;
};

// S(x) for NLopt (no gradient: a derivative-free method); a non-finite S counts as +infinity.
double objective_for_nlopt(unsigned n, const double* x, double* gradient, void* data) {
  (void)gradient;  // null: the methods used are derivative-free
  Objective& o = *static_cast<Objective*>(data);
  ++o.evaluations;
  const double s = evaluate(o.parameters, o.residuals, std::vector<double>(x, x + n)).objective;
  return std::isfinite(s) ? s : HUGE_VAL;
}

using NloptHandle = std::unique_ptr<std::remove_pointer_t<nlopt_opt>, decltype(&nlopt_destroy)>;

}  // namespace

RegularizedFit fit_regularized(const std::vector<FitParameter>& parameters,
                               const std::function<std::vector<double>(const std::vector<double>&)>& residuals,
                               int max_iterations, double step, double tolerance) {
  const size_t p = parameters.size();
  for (const FitParameter& q : parameters) {
    if (!(q.prior_sigma > 0)) throw std::invalid_argument("fit_regularized: " + q.name + ": prior_sigma must be > 0");
    if (q.lower > q.upper) throw std::invalid_argument("fit_regularized: " + q.name + ": lower > upper");
  }
  std::vector<double> x(p);
  for (size_t k = 0; k < p; ++k) x[k] = clamp_to(parameters[k], parameters[k].prior);
  RegularizedFit fit;
  // NLopt's BOBYQA (Powell's bounded quadratic-model method; COBYLA for one parameter, which BOBYQA does
  // not take): bounds kept exactly; first steps of a prior sigma at most, a quarter of the box, and a tenth of
  // the start's size (at least 0.1): BOBYQA then widens or narrows its trust region itself.
  std::vector<double> lower(p), upper(p), first_step(p);
  bool movable = false;
  for (size_t k = 0; k < p; ++k) {
    lower[k] = parameters[k].lower, upper[k] = parameters[k].upper;
    first_step[k] = std::min({parameters[k].prior_sigma, 0.25 * (upper[k] - lower[k]), std::max(0.1, 0.1 * std::fabs(x[k]))});
    movable = movable || first_step[k] > 0;
    if (!(first_step[k] > 0)) first_step[k] = std::max(1e-12, std::fabs(x[k]) * 1e-6);
  }
  Objective objective{parameters, residuals};
  if (p > 0 && movable) {
    NloptHandle opt(nlopt_create(p >= 2 ? NLOPT_LN_BOBYQA : NLOPT_LN_COBYLA, static_cast<unsigned>(p)), &nlopt_destroy);
    if (!opt) throw std::runtime_error("fit_regularized: NLopt could not create its optimizer");
    nlopt_set_lower_bounds(opt.get(), lower.data());
    nlopt_set_upper_bounds(opt.get(), upper.data());
    nlopt_set_initial_step(opt.get(), first_step.data());
    nlopt_set_min_objective(opt.get(), objective_for_nlopt, &objective);
    nlopt_set_ftol_rel(opt.get(), tolerance);
    nlopt_set_xtol_rel(opt.get(), std::max(tolerance, step * 1e-2));
    nlopt_set_maxeval(opt.get(), std::max(1, max_iterations) * static_cast<int>(2 * p + 2));
    double minimum = 0.0;
    const nlopt_result result = nlopt_optimize(opt.get(), x.data(), &minimum);
    fit.converged = result == NLOPT_FTOL_REACHED || result == NLOPT_XTOL_REACHED || result == NLOPT_SUCCESS;
    if (result < 0) {  // NLopt failed (not a limit): start again from the prior, report not converged
      for (size_t k = 0; k < p; ++k) x[k] = clamp_to(parameters[k], parameters[k].prior);
      fit.converged = false;
    }
  } else {
    fit.converged = true;  // nothing to move: the prior (clamped) is the answer
  }
  fit.iterations = objective.evaluations;
  const Evaluated current = evaluate(parameters, residuals, x);
  // Uncertainty at the optimum.
  const size_t n = current.r.size();
  const std::vector<double> jac = jacobian(parameters, residuals, x, current.r, step);
  std::vector<double> a(p * p, 0.0);
  for (size_t k = 0; k < p; ++k) {
    for (size_t l = 0; l < p; ++l)
      for (size_t i = 0; i < n; ++i) a[k * p + l] += jac[i * p + k] * jac[i * p + l];
    a[k * p + k] += 1.0 / (parameters[k].prior_sigma * parameters[k].prior_sigma);
  }
  const double variance = n > p ? current.rss / static_cast<double>(n - p) : 1.0;
  fit.sigma.assign(p, 0.0);
  for (size_t k = 0; k < p; ++k) {
    std::vector<double> unit(p, 0.0), column;
    unit[k] = 1.0;
    if (solve_symmetric_positive(a, unit, column)) fit.sigma[k] = std::sqrt(std::max(0.0, column[k] * variance));
  }
  fit.values = x;
  fit.objective = current.objective;
  fit.residual_sum_squares = current.rss;
  return fit;
}

}  // namespace itertime
