// timing_row.hpp: the timing statistics every measured row carries (/comm rows, /groundtruth rows:
// time_us_min, _median, _mean, _p90, _max and time_cv, docs/schema.md), filled from one stats::Summary.
// Invariant: a Row type used here has those six double fields, in microseconds (cv: a ratio).
#pragma once

#include "common/stats.hpp"

namespace itertime::store {

template <class Row>
void set_time_summary(Row& row, const stats::Summary& summary) {
  row.time_us_min = summary.min;
  row.time_us_median = summary.median;
  row.time_us_mean = summary.mean;
  row.time_us_p90 = summary.p90;
  row.time_us_max = summary.max;
  row.time_cv = summary.cv;
}

}  // namespace itertime::store
