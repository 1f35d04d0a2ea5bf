// sustained_throughput.cpp: see sustained_throughput.hpp.
#include "common/sustained_throughput.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/stats.hpp"

namespace itertime {
namespace {

constexpr double kWarmFrom_s = 30.0;  // the MAMF table's whole-GPU warm-up (docs/kernels.md)
constexpr double kWarmTo_s = 40.0;

// Total FLOPs over total seconds of the windows `pick` accepts; nullopt when it accepts none.
template <typename Pick>
std::optional<double> pooled_tflops(const std::vector<ThroughputWindow>& windows, Pick&& pick) {
  double tera_flop = 0, seconds = 0;
  for (const ThroughputWindow& w : windows) {
    if (!pick(w)) continue;
    tera_flop += w.tflops * w.seconds;
    seconds += w.seconds;
  }
  if (seconds <= 0) return std::nullopt;
  return tera_flop / seconds;
}

// The time-weighted mean of one telemetry field over the windows `pick` accepts that have it.
template <typename Field, typename Pick>
std::optional<double> weighted_mean(const std::vector<ThroughputWindow>& windows, Field field, Pick&& pick) {
  double sum = 0, seconds = 0;
  for (const ThroughputWindow& w : windows) {
    const std::optional<double>& value = w.*field;
    if (!pick(w) || !value) continue;
    sum += *value * w.seconds;
    seconds += w.seconds;
  }
  if (seconds <= 0) return std::nullopt;
  return sum / seconds;
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string format_double(double value, const char* format) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// What the probe was, in one line: the source text of the figures it supports.
std::string probe_source(const SustainedProbe& probe) {
  const std::string device = probe.ranks.empty() ? "no device" : probe.ranks.front().device;
  return "measured: itertime calibrate sustained, " + device + " x " + std::to_string(probe.ranks.size()) + " at once, " +
         probe.dtype + " GEMM " + std::to_string(probe.m) + "x" + std::to_string(probe.n) + "x" + std::to_string(probe.k) +
         " on random normal data back to back for " + format_double(probe.seconds, "%.0f") + " s, " + probe.date_utc;
}

// A data/training figure measured by the probe, or its absence with the reason.
nlohmann::json figure_json(const std::optional<double>& value, const std::string& source, const char* rule,
                           const char* why_absent) {
  if (!value) return {{"value", nullptr}, {"why", why_absent}};
  return {{"value", *value}, {"unit", "fraction"}, {"source", source}, {"derived", true}, {"rule", rule}};
}

nlohmann::json training_figures(const SustainedProbe& probe, const ProbeSummary& summary) {
  const std::string source = probe_source(probe);
  return {
      {"sustained_clock",
       figure_json(summary.sustained_over_warm, source,
                   "throughput of the run's last third over that of 30-40 s (the kernel figures' GEMM ceiling is the "
                   "MAMF table, measured after a 30 s warm-up), median over the ranks",
                   "the run is shorter than 40 s: no interval at the kernel figures' conditions (30-40 s) to "
                   "compare the last third with")},
      {"gpu_speed_sigma", figure_json(summary.rank_sigma, source,
                                      "sample standard deviation over mean of the ranks' sustained throughput (one GPU a rank)",
                                      "one rank: no spread between GPUs")}};
}

}  // namespace

SeriesSummary summarize_series(const std::vector<ThroughputWindow>& windows, double run_seconds) {
  if (windows.empty()) throw InternalError("a sustained-throughput series without windows", __FILE__, __LINE__);
  for (const ThroughputWindow& w : windows) {
    if (!(w.seconds > 0)) throw InternalError("a throughput window of no length", __FILE__, __LINE__);
  }
  const auto warm = [](const ThroughputWindow& w) { return w.start_s >= kWarmFrom_s && w.start_s < kWarmTo_s; };
  const double last_third_from_s = run_seconds * 2.0 / 3.0;
  const auto sustained = [&](const ThroughputWindow& w) { return w.start_s >= last_third_from_s; };

  SeriesSummary s;
  s.first_tflops = windows.front().tflops;
  s.warm_tflops = pooled_tflops(windows, warm);
  // A run cut short (its last window starting before the last third) keeps its last window as sustained.
  s.sustained_tflops = pooled_tflops(windows, sustained).value_or(windows.back().tflops);
  s.first_sm_clock_mhz = windows.front().sm_clock_mhz;
  const bool has_last_third = windows.back().start_s >= last_third_from_s;
  const auto sustained_or_last = [&](const ThroughputWindow& w) { return has_last_third ? sustained(w) : &w == &windows.back(); };
  s.sustained_sm_clock_mhz = weighted_mean(windows, &ThroughputWindow::sm_clock_mhz, sustained_or_last);
  s.sustained_power_w = weighted_mean(windows, &ThroughputWindow::power_w, sustained_or_last);
  for (const ThroughputWindow& w : windows) {
    if (w.temperature_c) s.max_temperature_c = std::max(s.max_temperature_c.value_or(*w.temperature_c), *w.temperature_c);
  }
  return s;
}

ProbeSummary summarize_probe(const SustainedProbe& probe) {
  ProbeSummary summary;
  std::vector<double> over_warm, over_first, sustained;
  for (const RankSeries& rank : probe.ranks) {
    const SeriesSummary s = summarize_series(rank.windows, probe.seconds);
    summary.ranks.push_back(s);
    if (s.warm_tflops) over_warm.push_back(s.sustained_tflops / *s.warm_tflops);
    over_first.push_back(s.sustained_tflops / s.first_tflops);
    sustained.push_back(s.sustained_tflops);
  }
  if (sustained.empty()) throw InternalError("a sustained-throughput probe without ranks", __FILE__, __LINE__);
  // Every rank ran as long, so either all have a warm interval or none does.
  if (over_warm.size() == probe.ranks.size()) summary.sustained_over_warm = stats::median(over_warm);
  summary.sustained_over_first = stats::median(over_first);
  if (sustained.size() >= 2) {
    summary.rank_sigma = stats::stddev(sustained) / stats::mean(sustained);
    summary.slowest_over_fastest = stats::min(sustained) / stats::max(sustained);
  }
  return summary;
}

std::string rank_series_json(const RankSeries& series) {
  nlohmann::json windows = nlohmann::json::array();
  for (const ThroughputWindow& w : series.windows) {
    windows.push_back({w.start_s, w.seconds, w.calls, w.tflops, optional_json(w.sm_clock_mhz), optional_json(w.power_w),
                       optional_json(w.temperature_c)});
  }
  return nlohmann::json{{"rank", series.rank},
                        {"device", series.device},
                        {"telemetry", series.telemetry},
                        {"power_limit_w", optional_json(series.power_limit_w)},
                        {"max_sm_clock_mhz", optional_json(series.max_sm_clock_mhz)},
                        {"windows", windows}}
      .dump();
}

RankSeries parse_rank_series_json(const std::string& text) {
  const auto optional_of = [](const nlohmann::json& value) {
    return value.is_null() ? std::optional<double>() : std::optional<double>(value.get<double>());
  };
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    RankSeries series;
    series.rank = j.at("rank").get<int>();
    series.device = j.at("device").get<std::string>();
    series.telemetry = j.at("telemetry").get<std::string>();
    series.power_limit_w = optional_of(j.at("power_limit_w"));
    series.max_sm_clock_mhz = optional_of(j.at("max_sm_clock_mhz"));
    for (const nlohmann::json& w : j.at("windows")) {
      series.windows.push_back({w.at(0).get<double>(), w.at(1).get<double>(), w.at(2).get<int64_t>(), w.at(3).get<double>(),
                                optional_of(w.at(4)), optional_of(w.at(5)), optional_of(w.at(6))});
    }
    return series;
  } catch (const nlohmann::json::exception& error) {
    throw InternalError(std::string("a rank's throughput series does not parse: ") + error.what(), __FILE__, __LINE__);
  }
}

std::string sustained_probe_json(const SustainedProbe& probe) {
  const ProbeSummary summary = summarize_probe(probe);
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json series = nlohmann::json::array();
  for (std::size_t i = 0; i < probe.ranks.size(); ++i) {
    const RankSeries& rank = probe.ranks[i];
    const SeriesSummary& s = summary.ranks[i];
    ranks.push_back({{"rank", rank.rank},
                     {"device", rank.device},
                     {"telemetry", rank.telemetry},
                     {"power_limit_w", optional_json(rank.power_limit_w)},
                     {"max_sm_clock_mhz", optional_json(rank.max_sm_clock_mhz)},
                     {"first_tflops", s.first_tflops},
                     {"warm_tflops", optional_json(s.warm_tflops)},
                     {"sustained_tflops", s.sustained_tflops},
                     {"first_sm_clock_mhz", optional_json(s.first_sm_clock_mhz)},
                     {"sustained_sm_clock_mhz", optional_json(s.sustained_sm_clock_mhz)},
                     {"sustained_power_w", optional_json(s.sustained_power_w)},
                     {"max_temperature_c", optional_json(s.max_temperature_c)}});
    nlohmann::json columns = {{"rank", rank.rank}};
    for (const ThroughputWindow& w : rank.windows) {
      columns["start_s"].push_back(w.start_s);
      columns["seconds"].push_back(w.seconds);
      columns["calls"].push_back(w.calls);
      columns["tflops"].push_back(w.tflops);
      columns["sm_clock_mhz"].push_back(optional_json(w.sm_clock_mhz));
      columns["power_w"].push_back(optional_json(w.power_w));
      columns["temperature_c"].push_back(optional_json(w.temperature_c));
    }
    series.push_back(std::move(columns));
  }
  nlohmann::json out = {{"probe", "sustained_gemm"},
                        {"what",
                         "back-to-back GEMMs on every rank's device at once: throughput per window beside the device's SM "
                         "clock, power and temperature"},
                        {"backend", probe.backend},
                        {"dtype", probe.dtype},
                        {"shape", {{"m", probe.m}, {"n", probe.n}, {"k", probe.k}}},
                        {"seconds", probe.seconds},
                        {"window_s", probe.window_s},
                        {"date_utc", probe.date_utc},
                        {"summary",
                         {{"ranks", ranks},
                          {"sustained_over_warm", optional_json(summary.sustained_over_warm)},
                          {"sustained_over_first", summary.sustained_over_first},
                          {"rank_sigma", optional_json(summary.rank_sigma)},
                          {"slowest_over_fastest", optional_json(summary.slowest_over_fastest)}}},
                        {"training_figures", training_figures(probe, summary)},
                        {"windows", series}};
  return out.dump(1) + "\n";
}

}  // namespace itertime
