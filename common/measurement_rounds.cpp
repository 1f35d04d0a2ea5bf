// measurement_rounds.cpp: round orders and the repeat-on-disturbance rule (measurement_rounds.hpp).
#include "common/measurement_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>

#include "common/enum_names.hpp"
#include "common/stats.hpp"

namespace itertime {

constexpr EnumName<RoundVerdict> kRoundVerdictNames[] = {
    {RoundVerdict::kCounted, "counted"}, {RoundVerdict::kLoad, "load"}, {RoundVerdict::kOutlier, "outlier"}};
static_assert(enum_names_one_to_one(kRoundVerdictNames));

std::string to_string(RoundVerdict verdict) { return name_of(kRoundVerdictNames, verdict, "round verdict"); }

namespace {

std::vector<double> medians_where(const std::vector<RoundMeasurement>& rounds, const std::vector<RoundVerdict>& verdicts,
                                  RoundVerdict wanted) {
  std::vector<double> out;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    if (verdicts[i] == wanted) out.push_back(rounds[i].time_us_median);
  }
  return out;
}

double percent_off(double value, double centre) { return 100.0 * std::fabs(value - centre) / centre; }

std::string disturbance_text(const RoundsAssessment& a, const RoundPolicy& policy) {
  const auto count = [&](RoundVerdict v) { return std::to_string(std::count(a.verdicts.begin(), a.verdicts.end(), v)); };
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%.0f%%", policy.disagreement_pct);
  return std::to_string(a.counted) + " of " + std::to_string(a.verdicts.size()) + " rounds counted (" +
         count(RoundVerdict::kLoad) + " outside load, " + count(RoundVerdict::kOutlier) + " further than " + limit + ")";
}

}  // namespace

RoundsAssessment assess_rounds(const std::vector<RoundMeasurement>& rounds, const RoundPolicy& policy) {
  RoundsAssessment a;
  if (rounds.empty()) {
    a.wants_another_round = policy.rounds > 0;
    a.spread_pct = std::numeric_limits<double>::quiet_NaN();
    return a;
  }
  a.verdicts.assign(rounds.size(), RoundVerdict::kCounted);
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    if (rounds[i].outside_load_cores + rounds[i].steal_cores > policy.outside_load_cores) a.verdicts[i] = RoundVerdict::kLoad;
  }
  const std::vector<double> load_free = medians_where(rounds, a.verdicts, RoundVerdict::kCounted);
  if (!load_free.empty()) {
    const double centre = stats::median(load_free);
    for (std::size_t i = 0; i < rounds.size(); ++i) {
      if (a.verdicts[i] == RoundVerdict::kCounted && percent_off(rounds[i].time_us_median, centre) > policy.disagreement_pct) {
        a.verdicts[i] = RoundVerdict::kOutlier;
      }
    }
  }
  const std::vector<double> counted = medians_where(rounds, a.verdicts, RoundVerdict::kCounted);
  a.counted = static_cast<int>(counted.size());
  // The rounds the time comes from: the counted ones; else the load-free ones; else all.
  for (const RoundVerdict verdict : a.verdicts) {
    a.used.push_back(!counted.empty()     ? verdict == RoundVerdict::kCounted
                     : !load_free.empty() ? verdict != RoundVerdict::kLoad
                                          : true);
  }
  std::vector<double> used_medians;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    if (a.used[i]) used_medians.push_back(rounds[i].time_us_median);
  }
  a.time_us = stats::median(used_medians);
  if (counted.size() >= 2 && a.time_us > 0) {
    double sum = 0;
    for (double m : counted) sum += percent_off(m, a.time_us);
    a.spread_pct = sum / static_cast<double>(counted.size());
  } else {
    a.spread_pct = std::numeric_limits<double>::quiet_NaN();
  }
  a.steady = a.counted >= policy.rounds;
  const int allowed = policy.rounds + policy.max_extra_rounds;
  a.wants_another_round = !a.steady && static_cast<int>(rounds.size()) < allowed;
  if (!a.steady && !a.wants_another_round) a.disturbance = disturbance_text(a, policy);
  return a;
}

std::vector<std::size_t> round_order(std::size_t count, int round_index, uint64_t seed) {
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (round_index == 0) return order;
  if (round_index == 1) {
    std::reverse(order.begin(), order.end());
    return order;
  }
  // Fisher-Yates with the engine's raw output (std::shuffle's use of it is implementation-defined); the
  // modulo bias is below 2^-50 for any job size.
  std::mt19937_64 engine(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(round_index)));
  for (std::size_t i = count; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(engine() % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

}  // namespace itertime
