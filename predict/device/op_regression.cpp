// op_regression.cpp: see op_regression.hpp.
#include "predict/device/op_regression.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace itertime::predict {
namespace {

constexpr int kTerms = 3;  // intercept, flops, bytes

// Least squares restricted to the terms in `support` (bit i: term i), on scaled columns. Returns false
// when the restricted normal equations are singular.
bool solve_support(const std::vector<std::array<double, kTerms>>& rows, const std::vector<double>& times, unsigned support,
                   std::array<double, kTerms>& solution) {
  std::array<int, kTerms> terms{};
  int k = 0;
  for (int t = 0; t < kTerms; ++t) {
    if (support & (1u << t)) terms[static_cast<std::size_t>(k++)] = t;
  }
  double a[kTerms][kTerms + 1] = {};
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (int i = 0; i < k; ++i) {
      const double xi = rows[r][static_cast<std::size_t>(terms[static_cast<std::size_t>(i)])];
      a[i][k] += xi * times[r];
      for (int j = 0; j < k; ++j) a[i][j] += xi * rows[r][static_cast<std::size_t>(terms[static_cast<std::size_t>(j)])];
    }
  }
  double scale = 0;
  for (int i = 0; i < k; ++i) scale = std::max(scale, std::fabs(a[i][i]));
  if (scale <= 0) return false;
  for (int col = 0; col < k; ++col) {  // Gaussian elimination with partial pivoting
    int pivot = col;
    for (int r = col + 1; r < k; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    if (std::fabs(a[pivot][col]) <= 1e-12 * scale) return false;
    if (pivot != col) {
      for (int j = 0; j <= k; ++j) std::swap(a[col][j], a[pivot][j]);
    }
    for (int r = 0; r < k; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int j = col; j <= k; ++j) a[r][j] -= f * a[col][j];
    }
  }
  solution = {0.0, 0.0, 0.0};
  for (int i = 0; i < k; ++i) solution[static_cast<std::size_t>(terms[static_cast<std::size_t>(i)])] = a[i][k] / a[i][i];
  return true;
}

}  // namespace

double OpRegression::time_us(double flops, double bytes) const {
  return std::max(0.0, intercept_us + us_per_flop * flops + us_per_byte * bytes);
}

OpRegression fit_op_regression(const std::vector<RegressionPoint>& points) {
  OpRegression best;
  best.points = static_cast<int64_t>(points.size());
  if (points.empty()) return best;
  double flops_scale = 0, bytes_scale = 0;
  for (const RegressionPoint& p : points) {
    flops_scale = std::max(flops_scale, std::fabs(p.flops));
    bytes_scale = std::max(bytes_scale, std::fabs(p.bytes));
  }
  if (flops_scale <= 0) flops_scale = 1;
  if (bytes_scale <= 0) bytes_scale = 1;
  std::vector<std::array<double, kTerms>> rows;
  std::vector<double> times;
  rows.reserve(points.size());
  times.reserve(points.size());
  for (const RegressionPoint& p : points) {
    rows.push_back({1.0, p.flops / flops_scale, p.bytes / bytes_scale});
    times.push_back(p.time_us);
  }
  double best_sse = std::numeric_limits<double>::infinity();
  for (unsigned support = 1; support < (1u << kTerms); ++support) {
    std::array<double, kTerms> c{};
    if (!solve_support(rows, times, support, c)) continue;
    // A coefficient a hair below zero is rounding of a zero one.
    bool feasible = true;
    for (double& value : c) {
      if (value < 0) {
        if (value > -1e-12 * (1.0 + std::fabs(c[0]) + std::fabs(c[1]) + std::fabs(c[2]))) {
          value = 0;
        } else {
          feasible = false;
        }
      }
    }
    if (!feasible) continue;
    double sse = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const double residual = c[0] + c[1] * rows[r][1] + c[2] * rows[r][2] - times[r];
      sse += residual * residual;
    }
    if (sse < best_sse) {
      best_sse = sse;
      best.intercept_us = c[0];
      best.us_per_flop = c[1] / flops_scale;
      best.us_per_byte = c[2] / bytes_scale;
    }
  }
  return best;
}

RegressionCheck check_extrapolation(std::vector<RegressionPoint> points) {
  RegressionCheck check;
  if (points.size() < kMinCheckPoints) return check;
  std::sort(points.begin(), points.end(), [](const RegressionPoint& a, const RegressionPoint& b) {
    return a.flops != b.flops ? a.flops < b.flops : a.bytes < b.bytes;
  });
  const std::size_t held_out = points.size() / 3;
  const std::vector<RegressionPoint> fit_part(points.begin(), points.end() - static_cast<std::ptrdiff_t>(held_out));
  const OpRegression regression = fit_op_regression(fit_part);
  double error_sum = 0;
  int64_t scored = 0;
  for (std::size_t i = fit_part.size(); i < points.size(); ++i) {
    const RegressionPoint& p = points[i];
    if (p.time_us <= 0) continue;
    error_sum += std::fabs(regression.time_us(p.flops, p.bytes) - p.time_us) / p.time_us;
    check.held_out_time_us += p.time_us;
    ++scored;
  }
  check.fit_points = static_cast<int64_t>(fit_part.size());
  check.held_out_points = scored;
  check.mape_pct = scored > 0 ? 100.0 * error_sum / static_cast<double>(scored) : 0.0;
  const double fit_max_flops = fit_part.back().flops;
  check.reach = fit_max_flops > 0 ? points.back().flops / fit_max_flops : 0.0;
  return check;
}

PooledCheck pool_checks(const std::vector<RegressionCheck>& checks) {
  PooledCheck pooled;
  double point_error = 0, time_error = 0, time_total = 0;
  for (const RegressionCheck& check : checks) {
    if (check.held_out_points == 0) continue;
    ++pooled.groups;
    pooled.held_out_points += check.held_out_points;
    point_error += check.mape_pct * static_cast<double>(check.held_out_points);
    time_error += check.mape_pct * check.held_out_time_us;
    time_total += check.held_out_time_us;
  }
  if (pooled.held_out_points > 0) pooled.mape_pct = point_error / static_cast<double>(pooled.held_out_points);
  if (time_total > 0) pooled.time_weighted_mape_pct = time_error / time_total;
  return pooled;
}

}  // namespace itertime::predict
