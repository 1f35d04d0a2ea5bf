// stats.hpp: small pure statistics over samples, used by every measurement and by validation.
// Invariants: no function mutates its input; an empty input throws InternalError (a measurement with
// no samples is a bug); percentile uses linear interpolation between closest ranks (NumPy's default),
// so percentile(x, 50) == median(x).
#pragma once

#include <vector>

namespace itertime::stats {

double min(const std::vector<double>& samples);
double max(const std::vector<double>& samples);
double mean(const std::vector<double>& samples);
double median(const std::vector<double>& samples);
double percentile(const std::vector<double>& samples, double pct);  // pct in [0, 100]
double stddev(const std::vector<double>& samples);                  // sample standard deviation (n-1)
double cv(const std::vector<double>& samples);                      // stddev / mean; 0 for one sample
// Absolute percentage error of one prediction, in percent: 100 * |predicted - measured| / measured.
double ape_pct(double predicted, double measured);
// Mean absolute percentage error, in percent; the vectors have equal, non-zero length.
double mape_pct(const std::vector<double>& predicted, const std::vector<double>& measured);

struct Summary {
  double min = 0, median = 0, mean = 0, p90 = 0, max = 0, cv = 0;
  long count = 0;
};
Summary summarize(const std::vector<double>& samples);

}  // namespace itertime::stats
