// read_rows: prints the rows of an itertime store's /comm or /groundtruth tables, one tab-separated line
// per row, for the end-to-end tests (tests/e2e/calibrate.sh). Read-only.
//   read_rows comm FILE         key, check_errors, warmup_iters, iters, samples_offset, samples_count,
//                               time_us_min, time_us_median, time_us_max, min and max of the row's own
//                               samples in /comm/samples_us, span, backend, mode, bytes, count,
//                               algbw_GBps, busbw_GBps, measured_utc
//   read_rows comm-samples FILE the number of values in /comm/samples_us
//   read_rows groundtruth-recipes FILE
//                               per /groundtruth/configs row: key, status, the stored recipe text, the
//                               recipe_label of the techniques its record parsed (calibration_records),
//                               reason
//   read_rows groundtruth FILE  key, status, reason, dp, tp, pp, timed_iters, samples_count,
//                               ranks_count, time_us_median, time_us_min, min and max of the row's
//                               samples, rank rows carrying the row's key, measured_utc, rounds_run,
//                               rounds_counted, rounds_count, round rows carrying the row's key, the
//                               round rows' samples summed, round_spread_pct, samples of its counted
//                               rounds
//   read_rows passes FILE       the speed reference and the profiling passes: "probes STAGE PASS OCCUPANCY N"
//                               per (stage, pass, occupancy) of /reference/probes, "timings PASS OCCUPANCY
//                               N" per (pass, occupancy) of /ops/timings and /ops/retimings, and "chosen
//                               OCCUPANCY PASS" per occupancy (common/speed_drift.hpp's choice)
// Doubles print with 17 significant digits, so equal text means equal bits. A row whose offsets point
// past its samples (or rank rows) prints "BAD-OFFSETS" in place of the sample range; exit status 1.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/calibration_records.hpp"
#include "common/comm_store.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/speed_drift.hpp"
#include "common/training_techniques.hpp"

namespace {

using namespace itertime;

std::string number(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

// "min\tmax" of values[offset, offset + count), or BAD-OFFSETS.
std::string range_of(const std::vector<double>& values, int64_t offset, int64_t count, bool& bad) {
  if (offset < 0 || count < 0 || static_cast<std::size_t>(offset + count) > values.size()) {
    bad = true;
    return "BAD-OFFSETS\tBAD-OFFSETS";
  }
  if (count == 0) return "-\t-";
  const auto first = values.begin() + offset;
  const auto [lo, hi] = std::minmax_element(first, first + count);
  return number(*lo) + "\t" + number(*hi);
}

int print_comm(const std::string& path) {
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store.table<store::CommRow>(store::kCommTable).read_all();
  const auto samples = store.exists(store::kCommSamples) ? store.samples(store::kCommSamples).read_all() : std::vector<double>{};
  bool bad = false;
  for (const auto& row : rows) {
    std::printf("%s\t%lld\t%lld\t%lld\t%lld\t%lld\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%lld\t%lld\t%s\t%s\t%s\n",
                store::comm_row_key(row).c_str(), static_cast<long long>(row.check_errors),
                static_cast<long long>(row.warmup_iters), static_cast<long long>(row.iters),
                static_cast<long long>(row.samples_offset), static_cast<long long>(row.samples_count),
                number(row.time_us_min).c_str(), number(row.time_us_median).c_str(), number(row.time_us_max).c_str(),
                range_of(samples, row.samples_offset, row.samples_count, bad).c_str(), h5::get_string(row.span).c_str(),
                h5::get_string(row.backend).c_str(), h5::get_string(row.mode).c_str(), static_cast<long long>(row.bytes),
                static_cast<long long>(row.count), number(row.algbw_GBps).c_str(), number(row.busbw_GBps).c_str(),
                h5::get_string(row.measured_utc).c_str());
  }
  return bad ? 1 : 0;
}

int print_groundtruth(const std::string& path) {
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store.table<store::GroundTruthRow>(store::kGroundTruthTable).read_all();
  const auto samples =
      store.exists(store::kGroundTruthSamples) ? store.samples(store::kGroundTruthSamples).read_all() : std::vector<double>{};
  const auto ranks = store.exists(store::kGroundTruthRanks)
                         ? store.table<store::GroundTruthRankRow>(store::kGroundTruthRanks).read_all()
                         : std::vector<store::GroundTruthRankRow>{};
  const auto rounds = store.exists(store::kGroundTruthRounds)
                          ? store.table<store::GroundTruthRoundRow>(store::kGroundTruthRounds).read_all()
                          : std::vector<store::GroundTruthRoundRow>{};
  bool bad = false;
  for (const auto& row : rows) {
    const std::string key = h5::get_string(row.key);
    long long round_rows = 0, round_samples = 0, counted_samples = 0;
    if (row.rounds_offset < 0 || static_cast<std::size_t>(row.rounds_offset + row.rounds_count) > rounds.size()) {
      bad = true;
      round_rows = -1;
    } else {
      for (int64_t i = row.rounds_offset; i < row.rounds_offset + row.rounds_count; ++i) {
        const store::GroundTruthRoundRow& round = rounds[static_cast<std::size_t>(i)];
        round_rows += h5::get_string(round.key) == key;
        round_samples += round.samples;
        if (h5::get_string(round.verdict) == "counted") counted_samples += round.samples;
      }
    }
    long long rank_rows = 0;
    if (row.ranks_offset < 0 || static_cast<std::size_t>(row.ranks_offset + row.ranks_count) > ranks.size()) {
      bad = true;
      rank_rows = -1;
    } else {
      for (int64_t i = row.ranks_offset; i < row.ranks_offset + row.ranks_count; ++i) {
        rank_rows += h5::get_string(ranks[static_cast<std::size_t>(i)].key) == key;
      }
    }
    std::printf("%s\t%s\t%s\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%s\t%s\t%s\t%lld\t%s\t%lld\t%lld\t%lld\t%lld\t%lld\t%s\t%lld\n",
                key.c_str(), h5::get_string(row.status).c_str(), h5::get_string(row.reason).c_str(),
                static_cast<long long>(row.dp), static_cast<long long>(row.tp), static_cast<long long>(row.pp),
                static_cast<long long>(row.timed_iters), static_cast<long long>(row.samples_count),
                static_cast<long long>(row.ranks_count), number(row.time_us_median).c_str(), number(row.time_us_min).c_str(),
                range_of(samples, row.samples_offset, row.samples_count, bad).c_str(), rank_rows,
                h5::get_string(row.measured_utc).c_str(), static_cast<long long>(row.rounds_run),
                static_cast<long long>(row.rounds_counted), static_cast<long long>(row.rounds_count), round_rows, round_samples,
                number(row.round_spread_pct).c_str(), counted_samples);
  }
  return bad ? 1 : 0;
}

int print_groundtruth_recipes(const std::string& path) {
  h5::Store store = h5::Store::open(path, false);
  const auto rows = store::read_groundtruth_rows(store);
  const auto records = store::read_groundtruth_records(store);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::printf("%s\t%s\t%s\t%s\t%s\n", h5::get_string(rows[i].key).c_str(), h5::get_string(rows[i].status).c_str(),
                h5::get_string(rows[i].recipe).c_str(), recipe_label(records.at(i).techniques).c_str(),
                h5::get_string(rows[i].reason).c_str());
  }
  return 0;
}

int print_passes(const std::string& path) {
  h5::Store store = h5::Store::open(path, false);
  const store::OpsRecords ops = store::read_ops_records(store);
  std::map<std::tuple<std::string, int, int>, int> probes;
  for (const ReferenceSample& s : ops.reference) ++probes[{to_string(s.stage), s.pass, s.occupancy}];
  for (const auto& [key, n] : probes)
    std::printf("probes %s %d %d %d\n", std::get<0>(key).c_str(), std::get<1>(key), std::get<2>(key), n);
  std::map<std::pair<int, int64_t>, int> timings;
  for (const store::OpTimingRecord& t : ops.timings) ++timings[{t.pass, t.active_ranks}];
  for (const auto& [key, n] : timings) std::printf("timings %d %lld %d\n", key.first, static_cast<long long>(key.second), n);
  for (const auto& [occupancy, pass] : choose_ops_passes(ops.reference)) std::printf("chosen %d %d\n", occupancy, pass);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  try {
    if (mode == "comm") return print_comm(argv[2]);
    if (mode == "groundtruth") return print_groundtruth(argv[2]);
    if (mode == "groundtruth-recipes") return print_groundtruth_recipes(argv[2]);
    if (mode == "passes") return print_passes(argv[2]);
    if (mode == "comm-samples") {
      itertime::h5::Store store = itertime::h5::Store::open(argv[2], false);
      std::printf("%zu\n", store.samples(itertime::store::kCommSamples).size());
      return 0;
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "read_rows: %s\n", error.what());
    return 2;
  }
  std::fprintf(stderr, "usage: read_rows comm|comm-samples|groundtruth|groundtruth-recipes|passes FILE\n");
  return 64;
}
