// stats.cpp: statistics: summaries, percentiles, APE (stats.hpp).
#include "common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/errors.hpp"

namespace itertime::stats {
namespace {

void require_samples(const std::vector<double>& samples) {
  ITERTIME_CHECK(!samples.empty(), "statistics of an empty sample set");
}

}  // namespace

double min(const std::vector<double>& samples) {
  require_samples(samples);
  return *std::min_element(samples.begin(), samples.end());
}

double max(const std::vector<double>& samples) {
  require_samples(samples);
  return *std::max_element(samples.begin(), samples.end());
}

double mean(const std::vector<double>& samples) {
  require_samples(samples);
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double percentile(const std::vector<double>& samples, double pct) {
  require_samples(samples);
  ITERTIME_CHECK(pct >= 0.0 && pct <= 100.0, "percentile outside [0, 100]");
  std::vector<double> sorted(samples);
  std::sort(sorted.begin(), sorted.end());
  const double position = pct / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(position));
  const auto upper = static_cast<std::size_t>(std::ceil(position));
  const double fraction = position - static_cast<double>(lower);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction;
}

double median(const std::vector<double>& samples) { return percentile(samples, 50.0); }

double stddev(const std::vector<double>& samples) {
  require_samples(samples);
  if (samples.size() < 2) return 0.0;
  const double m = mean(samples);
  double sum_sq = 0.0;
  for (double x : samples) sum_sq += (x - m) * (x - m);
  return std::sqrt(sum_sq / static_cast<double>(samples.size() - 1));
}

double cv(const std::vector<double>& samples) {
  const double m = mean(samples);
  if (m == 0.0) return 0.0;
  return stddev(samples) / std::fabs(m);
}

double ape_pct(double predicted, double measured) {
  ITERTIME_CHECK(measured != 0.0, "percentage error against a zero measurement");
  return 100.0 * std::fabs(predicted - measured) / std::fabs(measured);
}

double mape_pct(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ITERTIME_CHECK(predicted.size() == measured.size(), "MAPE over vectors of different lengths");
  require_samples(measured);
  double sum = 0.0;
  for (std::size_t i = 0; i < measured.size(); ++i) sum += ape_pct(predicted[i], measured[i]);
  return sum / static_cast<double>(measured.size());
}

Summary summarize(const std::vector<double>& samples) {
  Summary s;
  s.min = min(samples);
  s.max = max(samples);
  s.median = median(samples);
  s.mean = mean(samples);
  s.p90 = percentile(samples, 90.0);
  s.cv = cv(samples);
  s.count = static_cast<long>(samples.size());
  return s;
}

}  // namespace itertime::stats
