// comm_model.cpp: fitting and evaluating the comm model of comm_model.hpp.
// Invariants: every table has at least one point, ascending distinct sizes, time_us non-decreasing and
// us_per_byte > 0 (checked after fitting); predictions are finite and >= 0.
#include "predict/device/comm_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/calibration_records.hpp"
#include "common/errors.hpp"
#include "common/stats.hpp"

namespace itertime::predict {
namespace {

// Pool-adjacent-violators: the least-squares non-decreasing fit (unit weights).
std::vector<double> monotone_fit(const std::vector<double>& values) {
  std::vector<double> block_mean;
  std::vector<std::size_t> block_size;
  for (double v : values) {
    block_mean.push_back(v);
    block_size.push_back(1);
    while (block_mean.size() > 1 && block_mean[block_mean.size() - 2] > block_mean.back()) {
      const std::size_t n1 = block_size[block_size.size() - 2];
      const std::size_t n2 = block_size.back();
      const double merged =
          (block_mean[block_mean.size() - 2] * static_cast<double>(n1) + block_mean.back() * static_cast<double>(n2)) /
          static_cast<double>(n1 + n2);
      block_mean.pop_back();
      block_size.pop_back();
      block_mean.back() = merged;
      block_size.back() = n1 + n2;
    }
  }
  std::vector<double> out;
  out.reserve(values.size());
  for (std::size_t b = 0; b < block_mean.size(); ++b) out.insert(out.end(), block_size[b], block_mean[b]);
  return out;
}

// Least squares time = alpha + bytes * us_per_byte on the largest sizes of `table`, in relative terms
// (each residual divided by its measured time, weights 1/t^2), so that the smallest fitted size counts
// as much as the largest; exact on exact data.
void fit_alpha_beta(CommTable& table) {
  const std::size_t n = table.bytes.size();
  const std::size_t k = n <= 3 ? n : std::max<std::size_t>(3, (n + 1) / 2);
  const std::size_t first = n - k;
  double sw = 0.0, mean_x = 0.0, mean_t = 0.0;
  for (std::size_t i = first; i < n; ++i) {
    const double w = 1.0 / (table.measured_time_us[i] * table.measured_time_us[i]);
    sw += w;
    mean_x += w * static_cast<double>(table.bytes[i]);
    mean_t += w * table.measured_time_us[i];
  }
  mean_x /= sw;
  mean_t /= sw;
  double sxx = 0.0, sxt = 0.0;
  for (std::size_t i = first; i < n; ++i) {
    const double w = 1.0 / (table.measured_time_us[i] * table.measured_time_us[i]);
    const double dx = static_cast<double>(table.bytes[i]) - mean_x;
    sxx += w * dx * dx;
    sxt += w * dx * (table.measured_time_us[i] - mean_t);
  }
  double beta = sxx > 0.0 ? sxt / sxx : 0.0;
  double alpha = mean_t - beta * mean_x;
  if (!(beta > 0.0) || !std::isfinite(beta)) {
    // One size, or times that do not grow at the top: a pure bandwidth line through the largest point.
    beta = table.measured_time_us.back() / static_cast<double>(table.bytes.back());
    alpha = 0.0;
  }
  table.alpha_us = alpha;
  table.us_per_byte = beta;
  table.fit_points = static_cast<int64_t>(k);
  double ape_sum = 0.0;
  for (std::size_t i = first; i < n; ++i) {
    ape_sum += stats::ape_pct(alpha + beta * static_cast<double>(table.bytes[i]), table.measured_time_us[i]);
  }
  table.fit_mape_pct = ape_sum / static_cast<double>(k);
}

std::vector<DType> dtype_candidates(DType requested, std::vector<int>& tier) {
  // tier 0: requested; 1: same element size; 2: any other (nearest element size first).
  std::vector<std::pair<int, DType>> ranked;
  for (DType d : all_dtypes()) {
    if (d == requested) continue;
    const bool same = dtype_bytes(d) == dtype_bytes(requested);
    ranked.push_back({same ? 0
                           : 1 + static_cast<int>(std::llabs(static_cast<long long>(dtype_bytes(d)) -
                                                             static_cast<long long>(dtype_bytes(requested)))),
                      d});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<DType> candidates = {requested};
  tier = {0};
  for (const auto& [rank, d] : ranked) {
    candidates.push_back(d);
    tier.push_back(rank == 0 ? 1 : 2);
  }
  return candidates;
}

std::string format_us(double value_us) {
  std::ostringstream out;
  out << value_us;
  return out.str();
}

}  // namespace

bool CommKey::operator<(const CommKey& other) const {
  if (collective != other.collective) return itertime::to_string(collective) < itertime::to_string(other.collective);
  if (dtype != other.dtype) return itertime::to_string(dtype) < itertime::to_string(other.dtype);
  if (group_size != other.group_size) return group_size < other.group_size;
  return itertime::to_string(layout) < itertime::to_string(other.layout);
}

bool CommKey::operator==(const CommKey& other) const {
  return collective == other.collective && dtype == other.dtype && group_size == other.group_size && layout == other.layout;
}

std::string CommKey::to_string() const {
  return itertime::to_string(collective) + "/" + itertime::to_string(dtype) + "/g" + std::to_string(group_size) + "/" +
         itertime::to_string(layout);
}

double CommTable::max_measured_time_us() const {
  return measured_time_us.empty() ? 0.0 : *std::max_element(measured_time_us.begin(), measured_time_us.end());
}

CommModel::CommModel(const std::vector<store::CommRecord>& records) {
  std::map<CommKey, std::map<int64_t, std::vector<double>>> points;
  for (const store::CommRecord& row : records) {
    const double time_us = row.time_us_median;
    if (row.mode != TimingMode::kLatency || row.check_errors != 0 || row.bytes <= 0 || row.group_size < 1 ||
        !std::isfinite(time_us) || time_us <= 0.0) {
      ++rows_ignored_;
      continue;
    }
    const CommKey key{row.collective, row.dtype, row.group_size, row.layout};
    points[key][row.bytes].push_back(time_us);
    ++rows_used_;
  }
  for (const auto& [key, by_size] : points) {
    CommTable table;
    for (const auto& [bytes, times_us] : by_size) {
      table.bytes.push_back(bytes);
      table.measured_time_us.push_back(stats::median(times_us));
    }
    table.time_us = monotone_fit(table.measured_time_us);
    fit_alpha_beta(table);
    ITERTIME_CHECK(!table.bytes.empty() && table.us_per_byte > 0.0 && std::isfinite(table.alpha_us),
                   "comm fit of " + key.to_string() + " is degenerate");
    tables_.emplace(key, std::move(table));
  }
}

double evaluate_table_us(const CommTable& table, int64_t bytes, bool& extrapolated) {
  ITERTIME_CHECK(!table.bytes.empty() && table.bytes.size() == table.time_us.size(), "empty or ragged comm table");
  extrapolated = false;
  if (bytes < table.bytes.front()) {
    extrapolated = true;
    return table.time_us.front();
  }
  if (bytes > table.bytes.back()) {
    extrapolated = true;
    const double fitted_us = table.alpha_us + static_cast<double>(bytes) * table.us_per_byte;
    return std::max({fitted_us, table.time_us.back(), table.max_measured_time_us()});
  }
  const auto upper = std::lower_bound(table.bytes.begin(), table.bytes.end(), bytes);
  const auto i = static_cast<std::size_t>(upper - table.bytes.begin());
  if (*upper == bytes) return table.time_us[i];
  const double x0 = static_cast<double>(table.bytes[i - 1]);
  const double x1 = static_cast<double>(table.bytes[i]);
  const double w = (static_cast<double>(bytes) - x0) / (x1 - x0);
  return table.time_us[i - 1] + w * (table.time_us[i] - table.time_us[i - 1]);
}

std::optional<CommPrediction> CommModel::find_us(Collective collective, DType dtype, int64_t group_size, GroupLayout layout,
                                                 int64_t bytes) const {
  CommPrediction prediction;
  if (group_size <= 1 || bytes <= 0) {
    prediction.source = "no communication (group size " + std::to_string(group_size) + ", " + std::to_string(bytes) + " bytes)";
    return prediction;
  }
  std::vector<int> tier;
  const std::vector<DType> dtypes = dtype_candidates(dtype, tier);

  // Nearest measured group size >= 2 for (collective, dtype, layout); 0 when none.
  const auto nearest_group = [&](DType candidate) -> int64_t {
    int64_t best = 0;
    for (const auto& [key, table] : tables_) {
      if (key.collective != collective || key.dtype != candidate || key.layout != layout || key.group_size < 2) continue;
      const int64_t distance = std::llabs(key.group_size - group_size);
      const int64_t best_distance = std::llabs(best - group_size);
      if (best == 0 || distance < best_distance || (distance == best_distance && key.group_size > best)) {
        best = key.group_size;
      }
    }
    return best;
  };

  // Preference: (tier 0, exact), (tier 1, exact), (tier 0, scaled), (tier 1, scaled), (tier 2, exact),
  // (tier 2, scaled).
  const std::vector<std::pair<int, bool>> passes = {{0, false}, {1, false}, {0, true}, {1, true}, {2, false}, {2, true}};
  for (const auto& [wanted_tier, scaled] : passes) {
    for (std::size_t c = 0; c < dtypes.size(); ++c) {
      if (tier[c] != wanted_tier) continue;
      const DType candidate = dtypes[c];
      const int64_t source_group = scaled ? nearest_group(candidate) : group_size;
      if (source_group == 0) continue;
      const CommKey key{collective, candidate, source_group, layout};
      const auto found = tables_.find(key);
      if (found == tables_.end()) continue;
      const CommTable& table = found->second;

      bool outside = false;
      const double table_us = evaluate_table_us(table, bytes, outside);
      prediction.extrapolated = outside;
      prediction.source = key.to_string() + (outside ? (bytes < table.bytes.front() ? ": below the measured sizes "
                                                                                      "(smallest size's time)"
                                                                                    : ": above the measured sizes "
                                                                                      "(alpha-beta fit)")
                                                     : ": interpolated");
      prediction.time_us = table_us;
      if (source_group != group_size) {
        const double bandwidth_us = std::clamp(static_cast<double>(bytes) * table.us_per_byte, 0.0, table_us);
        const double latency_us = table_us - bandwidth_us;
        prediction.time_us = latency_us * latency_steps(collective, group_size) / latency_steps(collective, source_group) +
                             bandwidth_us * busbw_factor(collective, group_size) / busbw_factor(collective, source_group);
        prediction.extrapolated = true;
        prediction.source += "; scaled from group size " + std::to_string(source_group) + " to " + std::to_string(group_size) +
                             " (ring steps and bus factor)";
      }
      if (wanted_tier != 0) {
        prediction.dtype_fallback = true;
        prediction.source += "; dtype fallback " + to_string(dtype) + " -> " + to_string(candidate) +
                             (wanted_tier == 1 ? " (same element size)" : " (time as a function of bytes)");
      }
      ITERTIME_CHECK(std::isfinite(prediction.time_us) && prediction.time_us >= 0.0,
                     "comm prediction " + format_us(prediction.time_us) + " us from " + key.to_string());
      return prediction;
    }
  }
  return std::nullopt;
}

std::string CommModel::missing_reason(Collective collective, GroupLayout layout) const {
  std::string measured;
  for (const auto& [key, table] : tables_) {
    if (key.collective != collective) continue;
    measured += (measured.empty() ? "" : ", ") + key.to_string();
  }
  const std::string name = to_string(collective);
  return "no usable /comm measurements for " + name + " with layout '" + to_string(layout) + "' (" +
         (measured.empty() ? "none of " + name + " at all" : "measured: " + measured) +
         "); calibrate it with `itertime calibrate comm`, or ask for a measured layout";
}

CommPrediction CommModel::predict_us(Collective collective, DType dtype, int64_t group_size, GroupLayout layout,
                                     int64_t bytes) const {
  std::optional<CommPrediction> found = find_us(collective, dtype, group_size, layout, bytes);
  if (!found) throw UserError(missing_reason(collective, layout));
  return *found;
}

std::vector<CommFitResidual> CommModel::residuals() const {
  std::vector<CommFitResidual> out;
  out.reserve(tables_.size());
  for (const auto& [key, table] : tables_) {
    CommFitResidual r;
    r.key = key;
    r.alpha_us = table.alpha_us;
    r.bandwidth_GBps = 1.0 / table.us_per_byte * 1e6 / 1e9;
    r.mape_pct = table.fit_mape_pct;
    r.fit_points = table.fit_points;
    r.measured_points = static_cast<int64_t>(table.bytes.size());
    out.push_back(r);
  }
  return out;
}

}  // namespace itertime::predict
