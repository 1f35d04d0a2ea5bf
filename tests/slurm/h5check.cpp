// h5check.cpp: prints, for the Slurm test (slurm_cluster.sh), the row count and the number of distinct
// keys of each calibration table of an itertime store, and whether /comm's samples are consistent.
//
//   itertime_slurm_h5check FILE
//
// Output, one line per table (absent tables show 0 rows):
//   /comm/points rows N unique K samples S referenced R consistent yes|no
//   /ops/stages rows N unique K
//   /groundtruth/configs rows N unique K
// "consistent" means: the rows' sample ranges do not overlap, lie inside /comm/samples_us, and cover it
// (no orphan samples). Exit status 0 when the file could be read, 1 otherwise.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/comm_store.hpp"
#include "common/groundtruth_store.hpp"
#include "common/h5store.hpp"
#include "common/ops_store.hpp"

using namespace itertime;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.h5\n", argv[0]);
    return 64;
  }
  try {
    h5::Store store = h5::Store::open(argv[1], /*writable=*/false);
    std::set<std::string> present;
    for (const auto& info : store.list_datasets()) present.insert(info.path);

    {
      std::size_t rows = 0;
      std::set<std::string> keys;
      std::size_t samples = 0;
      std::size_t referenced = 0;
      bool consistent = true;
      if (present.count(store::kCommTable)) {
        const auto all = store.table<store::CommRow>(store::kCommTable).read_all();
        rows = all.size();
        std::vector<std::pair<int64_t, int64_t>> ranges;
        for (const auto& row : all) {
          keys.insert(store::comm_row_key(row));
          ranges.emplace_back(row.samples_offset, row.samples_count);
          referenced += static_cast<std::size_t>(std::max<int64_t>(0, row.samples_count));
        }
        if (present.count(store::kCommSamples)) samples = store.samples(store::kCommSamples).size();
        std::sort(ranges.begin(), ranges.end());
        int64_t end = 0;
        for (const auto& [offset, count] : ranges) {
          if (offset < end || count < 0) consistent = false;
          end = offset + count;
        }
        if (end > static_cast<int64_t>(samples) || referenced != samples) consistent = false;
      }
      std::printf("%s rows %zu unique %zu samples %zu referenced %zu consistent %s\n", store::kCommTable, rows, keys.size(),
                  samples, referenced, consistent ? "yes" : "no");
    }
    {
      std::size_t rows = 0;
      std::set<std::string> keys;
      if (present.count(store::kOpStages)) {
        for (const auto& row : store.table<store::OpStageRow>(store::kOpStages).read_all()) {
          keys.insert(h5::get_string(row.stage_key));
          ++rows;
        }
      }
      std::printf("%s rows %zu unique %zu\n", store::kOpStages, rows, keys.size());
    }
    {
      std::size_t rows = 0;
      std::set<std::string> keys;
      if (present.count(store::kGroundTruthTable)) {
        for (const auto& row : store::read_every_groundtruth_row(store)) {  // any schema still read; duplicates included
          keys.insert(h5::get_string(row.key));
          ++rows;
        }
      }
      std::printf("%s rows %zu unique %zu\n", store::kGroundTruthTable, rows, keys.size());
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "itertime_slurm_h5check: %s: %s\n", argv[1], error.what());
    return 1;
  }
}
