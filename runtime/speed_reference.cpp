// speed_reference.cpp: the speed reference probe (speed_reference.hpp).
#include "runtime/speed_reference.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <cmath>
#include <limits>
#include <set>

#include "common/reference_store.hpp"
#include "common/stats.hpp"
#include "runtime/mpi_check.hpp"

namespace itertime {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_us(Clock::time_point start) { return std::chrono::duration<double, std::micro>(Clock::now() - start).count(); }

// c = a * b (n x n, row-major), i-k-j order so the inner loop streams rows.
void matrix_product(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c, int n) {
  std::fill(c.begin(), c.end(), 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < n; ++k) {
      const float aik = a[static_cast<std::size_t>(i) * n + k];
      const float* brow = &b[static_cast<std::size_t>(k) * n];
      float* crow = &c[static_cast<std::size_t>(i) * n];
      for (int j = 0; j < n; ++j) crow[j] += aik * brow[j];
    }
  }
}

}  // namespace

SpeedReference::SpeedReference()
    : a_(static_cast<std::size_t>(kMatrixSize) * kMatrixSize, 0.5f),
      b_(static_cast<std::size_t>(kMatrixSize) * kMatrixSize, 0.25f),
      c_(static_cast<std::size_t>(kMatrixSize) * kMatrixSize, 0.0f),
      x_(kElements, 1.0f),
      y_(kElements, 0.0f),
      send_(kAllReduceElements, 1),
      receive_(kAllReduceElements, 0) {}

ReferenceSample SpeedReference::measure(MPI_Comm comm, ReferenceStage stage, int pass) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Each repeat timed on its own, the median kept: the speed of a core while the rank runs, as operator
  // profiles take it (a median of repeats); time taken by other processes is the outside-load probe's.
  std::vector<double> matmul, elementwise, allreduce;
  ITERTIME_MPI_CHECK(MPI_Barrier(comm));
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    auto start = Clock::now();
    matrix_product(a_, b_, c_, kMatrixSize);
    matmul.push_back(elapsed_us(start));
    start = Clock::now();
    const float scale = 1.0f / static_cast<float>(repeat + 2);
    for (int i = 0; i < kElements; ++i) y_[static_cast<std::size_t>(i)] += scale * x_[static_cast<std::size_t>(i)];
    elementwise.push_back(elapsed_us(start));
    if (size > 1) {
      start = Clock::now();
      ITERTIME_MPI_CHECK(MPI_Allreduce(send_.data(), receive_.data(), kAllReduceElements, MPI_INT32_T, MPI_SUM, comm));
      allreduce.push_back(elapsed_us(start));
    }
  }
  const double matmul_us = stats::median(matmul);
  const double elementwise_us = stats::median(elementwise);
  const double allreduce_us = size > 1 ? stats::median(allreduce) : std::numeric_limits<double>::quiet_NaN();
  // Keep the results observable, so the compiler cannot drop the work.
  volatile float sink = c_[0] + y_[0] + static_cast<float>(receive_[0]);
  (void)sink;
  double mine[3] = {matmul_us, elementwise_us, allreduce_us};
  std::vector<double> all(static_cast<std::size_t>(3 * size));
  ITERTIME_MPI_CHECK(MPI_Gather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, comm));
  if (rank == 0 && size > 1) {  // the median over ranks per part (at one rank: its own, NaN all-reduce kept)
    for (int p = 0; p < 3; ++p) {
      std::vector<double> part;
      for (int r = 0; r < size; ++r) part.push_back(all[static_cast<std::size_t>(3 * r + p)]);
      mine[p] = stats::median(part);
    }
  }
  ReferenceSample sample;
  sample.stage = stage;
  sample.pass = pass;
  sample.occupancy = size;
  sample.unix_time_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  sample.matmul_us = mine[0];
  sample.elementwise_us = mine[1];
  sample.allreduce_us = mine[2];
  return sample;
}

OccupancyReference::OccupancyReference(const std::vector<int>& occupancies) {
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  for (int occupancy : std::set<int>(occupancies.begin(), occupancies.end())) {
    if (occupancy < 1 || occupancy > world_size) continue;
    comms_.emplace_back(occupancy, MpiComm::split(MPI_COMM_WORLD, world_rank < occupancy ? 0 : MPI_UNDEFINED, world_rank));
  }
}

std::vector<ReferenceSample> OccupancyReference::measure_all(ReferenceStage stage, int pass) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::vector<ReferenceSample> samples;
  for (auto& [occupancy, comm] : comms_) {
    if (comm.get() != MPI_COMM_NULL) {
      const ReferenceSample sample = probe_.measure(comm.get(), stage, pass);
      if (world_rank == 0) samples.push_back(sample);
    }
    quiet_barrier(MPI_COMM_WORLD);
  }
  return samples;
}

void record_reference(h5::Store& store, const std::vector<ReferenceSample>& samples, const std::string& when) {
  {
    const h5::Store::Transaction together(store);
    for (const ReferenceSample& sample : samples) store::append_reference_sample(store, sample);
  }
  if (when.empty()) return;
  std::string line = "# speed reference (" + when + "):";
  char part[96];
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const ReferenceSample& s = samples[i];
    std::snprintf(part, sizeof(part), "%s %d rank%s %.0f/%.0f", i ? ";" : "", s.occupancy, s.occupancy == 1 ? "" : "s",
                  s.matmul_us, s.elementwise_us);
    line += part;
    if (std::isfinite(s.allreduce_us)) {
      std::snprintf(part, sizeof(part), "/%.0f", s.allreduce_us);
      line += part;
    }
  }
  std::printf("%s us (matrix product/element-wise pass[/all-reduce])\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace itertime
