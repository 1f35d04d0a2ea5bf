// regularized_fit.cpp: Levenberg-Marquardt with a Gaussian prior and box bounds (regularized_fit.hpp).
#include "common/regularized_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

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
  Evaluated current = evaluate(parameters, residuals, x);
  RegularizedFit fit;
  double lambda = 1e-3;
  std::vector<double> jac;
  for (fit.iterations = 0; fit.iterations < max_iterations; ++fit.iterations) {
    const size_t n = current.r.size();
    jac = jacobian(parameters, residuals, x, current.r, step);
    // Normal equations of the augmented system: (J'J + P + lambda diag) dx = -(J'r + P (x - prior)).
    std::vector<double> a(p * p, 0.0), g(p, 0.0);
    for (size_t k = 0; k < p; ++k) {
      for (size_t l = 0; l < p; ++l) {
        double v = 0;
        for (size_t i = 0; i < n; ++i) v += jac[i * p + k] * jac[i * p + l];
        a[k * p + l] = v;
      }
      for (size_t i = 0; i < n; ++i) g[k] += jac[i * p + k] * current.r[i];
      const double prec = 1.0 / (parameters[k].prior_sigma * parameters[k].prior_sigma);
      a[k * p + k] += prec;
      g[k] += prec * (x[k] - parameters[k].prior);
    }
    bool improved = false;
    for (int attempt = 0; attempt < 12 && !improved; ++attempt) {
      std::vector<double> damped = a, rhs(p), dx;
      for (size_t k = 0; k < p; ++k) damped[k * p + k] *= 1.0 + lambda, rhs[k] = -g[k];
      if (solve_symmetric_positive(damped, rhs, dx)) {
        std::vector<double> trial(p);
        for (size_t k = 0; k < p; ++k) trial[k] = clamp_to(parameters[k], x[k] + dx[k]);
        const Evaluated next = evaluate(parameters, residuals, trial);
        if (next.objective < current.objective) {
          const double gain = current.objective - next.objective;
          x = trial, current = next, improved = true;
          lambda = std::max(1e-9, lambda / 3.0);
          if (gain < tolerance * std::max(1.0, current.objective)) fit.converged = true;
          break;
        }
      }
      lambda *= 10.0;
    }
    if (!improved) fit.converged = true;  // no step lowers S: at a (bounded) minimum
    if (fit.converged) break;
  }
  // Uncertainty at the optimum.
  const size_t n = current.r.size();
  jac = jacobian(parameters, residuals, x, current.r, step);
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
