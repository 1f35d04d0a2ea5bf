// Hand-derived checks of the sustained-throughput summary (common/sustained_throughput.hpp): which
// windows are "first", "warm" and "sustained", time weighting, the rank spread, the JSON figures and
// the rank series' round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/sustained_throughput.hpp"

namespace itertime {
namespace {

// A 60 s run in windows of 10 s (the last cut to 5 s): throughput falls from 100 to 70 TFLOP/s, the SM
// clock from 1980 to 1600 MHz. `scale` multiplies every throughput (another rank, slower).
std::vector<ThroughputWindow> falling_series(double scale) {
  const double starts[] = {0, 10, 20, 30, 40, 50};
  const double seconds[] = {10, 10, 10, 10, 10, 5};
  const double tflops[] = {100, 95, 90, 88, 80, 70};
  const double clocks[] = {1980, 1900, 1850, 1800, 1700, 1600};
  const double power[] = {500, 600, 650, 680, 700, 700};
  std::vector<ThroughputWindow> windows;
  for (int i = 0; i < 6; ++i) {
    windows.push_back({starts[i], seconds[i], 100, tflops[i] * scale, clocks[i], power[i], 40.0 + 5 * i});
  }
  return windows;
}

TEST(SustainedThroughput, SeriesFiguresByHand) {
  const SeriesSummary s = summarize_series(falling_series(1.0), 60);
  EXPECT_DOUBLE_EQ(s.first_tflops, 100);
  ASSERT_TRUE(s.warm_tflops.has_value());
  EXPECT_DOUBLE_EQ(*s.warm_tflops, 88);  // the one window starting in [30, 40)
  // The last third starts at 40 s: (80 x 10 + 70 x 5) / 15.
  EXPECT_NEAR(s.sustained_tflops, 1150.0 / 15, 1e-12);
  EXPECT_NEAR(*s.sustained_sm_clock_mhz, (1700.0 * 10 + 1600 * 5) / 15, 1e-9);
  EXPECT_NEAR(*s.sustained_power_w, 700, 1e-9);
  EXPECT_DOUBLE_EQ(*s.first_sm_clock_mhz, 1980);
  EXPECT_DOUBLE_EQ(*s.max_temperature_c, 65);
}

TEST(SustainedThroughput, ShortOrCutRunsSayWhatTheyLack) {
  std::vector<ThroughputWindow> windows = falling_series(1.0);
  windows.resize(3);  // 0-30 s of a run asked for 60: no warm window, none in the last third
  const SeriesSummary s = summarize_series(windows, 60);
  EXPECT_FALSE(s.warm_tflops.has_value());
  EXPECT_DOUBLE_EQ(s.sustained_tflops, 90);  // the last window stands in for the last third
  EXPECT_DOUBLE_EQ(*s.sustained_sm_clock_mhz, 1850);
  for (ThroughputWindow& w : windows) w.sm_clock_mhz.reset();
  EXPECT_FALSE(summarize_series(windows, 60).sustained_sm_clock_mhz.has_value());
}

TEST(SustainedThroughput, BrokenSeriesAreInternalErrors) {
  EXPECT_THROW(summarize_series({}, 10), InternalError);
  std::vector<ThroughputWindow> windows = falling_series(1.0);
  windows[2].seconds = 0;
  EXPECT_THROW(summarize_series(windows, 60), InternalError);
}

SustainedProbe two_rank_probe() {
  SustainedProbe probe;
  probe.backend = "cuda";
  probe.dtype = "bf16";
  probe.m = probe.n = probe.k = 8192;
  probe.seconds = 60;
  probe.window_s = 10;
  probe.date_utc = "2026-12-07T12:00:00Z";
  probe.ranks.push_back({0, "NVIDIA H100 80GB HBM3", "nvml", 700.0, 1980.0, falling_series(1.0)});
  probe.ranks.push_back({1, "NVIDIA H100 80GB HBM3", "nvml", 700.0, 1980.0, falling_series(0.5)});
  return probe;
}

TEST(SustainedThroughput, ProbeSpreadAndRatiosByHand) {
  const ProbeSummary summary = summarize_probe(two_rank_probe());
  // Both ranks: (1150 / 15) / 88 of their own warm throughput.
  EXPECT_NEAR(*summary.sustained_over_warm, (1150.0 / 15) / 88, 1e-12);
  EXPECT_NEAR(summary.sustained_over_first, (1150.0 / 15) / 100, 1e-12);
  // Sustained 76.67 and 38.33: sd = difference / sqrt 2, mean = 1.5 x the smaller: sigma = sqrt(2) / 3.
  EXPECT_NEAR(*summary.rank_sigma, std::sqrt(2.0) / 3, 1e-12);
  EXPECT_NEAR(*summary.slowest_over_fastest, 0.5, 1e-12);
}

TEST(SustainedThroughput, JsonGivesTheTrainingFiguresWithTheirSource) {
  const nlohmann::json j = nlohmann::json::parse(sustained_probe_json(two_rank_probe()));
  EXPECT_EQ(j.at("probe"), "sustained_gemm");
  const nlohmann::json& clock = j.at("training_figures").at("sustained_clock");
  EXPECT_NEAR(clock.at("value").get<double>(), (1150.0 / 15) / 88, 1e-12);
  EXPECT_EQ(clock.at("unit"), "fraction");
  const std::string source = clock.at("source");
  EXPECT_NE(source.find("NVIDIA H100 80GB HBM3 x 2 at once"), std::string::npos) << source;
  EXPECT_NE(source.find("bf16 GEMM 8192x8192x8192"), std::string::npos) << source;
  EXPECT_NEAR(j.at("training_figures").at("gpu_speed_sigma").at("value").get<double>(), std::sqrt(2.0) / 3, 1e-12);
  EXPECT_EQ(j.at("windows").at(1).at("tflops").size(), 6u);
  EXPECT_EQ(j.at("summary").at("ranks").at(0).at("power_limit_w"), 700.0);

  // One rank of 20 s: neither figure, each saying why.
  SustainedProbe short_probe = two_rank_probe();
  short_probe.ranks.resize(1);
  short_probe.seconds = 20;
  short_probe.ranks[0].windows.resize(2);
  const nlohmann::json s = nlohmann::json::parse(sustained_probe_json(short_probe));
  EXPECT_TRUE(s.at("training_figures").at("sustained_clock").at("value").is_null());
  EXPECT_NE(s.at("training_figures").at("sustained_clock").at("why").get<std::string>().find("shorter than 40 s"),
            std::string::npos);
  EXPECT_TRUE(s.at("training_figures").at("gpu_speed_sigma").at("value").is_null());
  EXPECT_TRUE(s.at("summary").at("rank_sigma").is_null());
}

TEST(SustainedThroughput, RankSeriesRoundTripIsExact) {
  RankSeries series = two_rank_probe().ranks[1];
  series.windows[3].power_w.reset();
  series.windows[4].tflops = 1.0 / 3;
  series.power_limit_w.reset();
  const RankSeries back = parse_rank_series_json(rank_series_json(series));
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.device, series.device);
  EXPECT_EQ(back.telemetry, "nvml");
  EXPECT_FALSE(back.power_limit_w.has_value());
  EXPECT_EQ(back.max_sm_clock_mhz, 1980.0);
  ASSERT_EQ(back.windows.size(), series.windows.size());
  for (std::size_t i = 0; i < series.windows.size(); ++i) {
    EXPECT_EQ(back.windows[i].start_s, series.windows[i].start_s);
    EXPECT_EQ(back.windows[i].seconds, series.windows[i].seconds);
    EXPECT_EQ(back.windows[i].calls, series.windows[i].calls);
    EXPECT_EQ(back.windows[i].tflops, series.windows[i].tflops);  // exact, 1/3 included
    EXPECT_EQ(back.windows[i].sm_clock_mhz, series.windows[i].sm_clock_mhz);
    EXPECT_EQ(back.windows[i].power_w, series.windows[i].power_w);
    EXPECT_EQ(back.windows[i].temperature_c, series.windows[i].temperature_c);
  }
  EXPECT_THROW(parse_rank_series_json("{\"rank\": 0}"), InternalError);
}

}  // namespace
}  // namespace itertime
