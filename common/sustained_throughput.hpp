// sustained_throughput.hpp: the records of `itertime calibrate sustained` (back-to-back GEMMs for
// minutes on every rank's device at once, their throughput per window beside the device's clock, power
// and temperature) and the pure functions that summarize them into the figures a data/training file
// holds: the sustained clock fraction and the spread between GPUs.
// Invariants:
// - A window's tflops is its calls x 2 m n k / seconds / 1e12, seconds > 0, calls > 0.
// - "first" is the first window (a short benchmark's conditions); "warm" the windows that start in
//   [30 s, 40 s) (the MAMF table's 30 s whole-GPU warm-up, docs/kernels.md), absent for shorter runs;
//   "sustained" the windows that start in the run's last third. Each is total FLOPs over total seconds
//   of its windows; clocks, power and temperature are time-weighted means of the windows that have them.
// - The summary never invents a figure: what a series lacks (telemetry, a warm interval, a second
//   rank) stays absent, and the JSON says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace itertime {

struct ThroughputWindow {
  double start_s = 0;                  // since the rank's first timed call
  double seconds = 0;                  // the window's measured length
  int64_t calls = 0;                   // GEMMs completed in it
  double tflops = 0;                   // calls x 2 m n k / seconds / 1e12
  std::optional<double> sm_clock_mhz;  // sampled at the window's end (NVML), absent without telemetry
  std::optional<double> power_w;
  std::optional<double> temperature_c;
};

struct RankSeries {
  int rank = 0;
  std::string device;                      // e.g. "NVIDIA H100 80GB HBM3", "cpu"
  std::string telemetry;                   // "nvml", or why there is none
  std::optional<double> power_limit_w;     // the enforced limit, from NVML
  std::optional<double> max_sm_clock_mhz;  // the device's maximum SM clock, from NVML
  std::vector<ThroughputWindow> windows;
};

struct SustainedProbe {
  std::string backend;  // cpu or cuda
  std::string dtype;    // bf16, fp16, fp32
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0;   // the asked run length
  double window_s = 0;  // the asked window length
  std::string date_utc;
  std::vector<RankSeries> ranks;
};

struct SeriesSummary {
  double first_tflops = 0;
  std::optional<double> warm_tflops;  // windows starting in [30, 40) s
  double sustained_tflops = 0;        // windows starting in the last third
  std::optional<double> first_sm_clock_mhz, sustained_sm_clock_mhz, sustained_power_w, max_temperature_c;
};

// Throws InternalError on an empty series or a window with seconds <= 0.
SeriesSummary summarize_series(const std::vector<ThroughputWindow>& windows, double run_seconds);

struct ProbeSummary {
  std::vector<SeriesSummary> ranks;            // in the probe's rank order
  std::optional<double> sustained_over_warm;   // median over ranks (the training clock fraction)
  double sustained_over_first = 0;             // median over ranks
  std::optional<double> rank_sigma;            // sample sd / mean of the ranks' sustained tflops (>= 2 ranks)
  std::optional<double> slowest_over_fastest;  // min / max of the ranks' sustained tflops (>= 2 ranks)
};

ProbeSummary summarize_probe(const SustainedProbe& probe);

// One rank's series as JSON text and back (how the ranks' series reach rank 0); the round trip is exact
// for every field (nlohmann prints the shortest text of a double that reads back equal). The parser throws InternalError on a
// text this function did not write.
std::string rank_series_json(const RankSeries& series);
RankSeries parse_rank_series_json(const std::string& text);

// The probe, its summary and the data/training figures it supports, as JSON text (docs/framework.md,
// "Measuring the training conditions yourself").
std::string sustained_probe_json(const SustainedProbe& probe);

}  // namespace itertime
