// comm_bench.hpp: `itertime calibrate comm`: measures every point of a sweep on real communicators and
// appends each to /comm as soon as it is measured.
// Invariants:
//  - Collective over MPI_COMM_WORLD: every rank builds the same point list; only world rank 0 opens
//    the HDF5 file, prints, and writes.
//  - Every point: one untimed call whose result is checked (errors summed over all ranks and recorded),
//    warm-up calls, then timed calls. latency mode: a world barrier before each call, the call, a
//    synchronize; the sample is the max over all ranks of that call's time (what a training step sees).
//    pipelined mode: each sample is the mean over all ranks of each rank's average over
//    pipelined_calls_per_sample(bytes) back-to-back calls (commbench/timing_loop.hpp; as osu_allreduce
//    combines ranks, and as nccl-tests times a loop of calls).
//  - All groups of a layout run at once, so every rank is busy as in the job being predicted.
//  - --resume measures only the points whose keys are missing from the file.
#pragma once

#include <map>
#include <string>

#include "commbench/comm_sweep.hpp"
#include "common/dtype.hpp"

namespace itertime::calibrate {

struct CommCalibrationOptions {
  SweepOptions sweep;
  Backend backend = Backend::kCpu;  // cpu: MPI on host buffers; cuda: NCCL on device buffers
  std::string output_path;
  bool force = false;
  bool resume = false;
  std::map<std::string, std::string> provenance;  // /meta attributes for a new file
};

struct CommCalibrationSummary {
  std::size_t points_total = 0;
  std::size_t points_present = 0;  // already in the file (--resume)
  std::size_t points_measured = 0;
  std::size_t points_failed_check = 0;
  double elapsed_s = 0.0;
};

CommCalibrationSummary calibrate_comm(const CommCalibrationOptions& options);

}  // namespace itertime::calibrate
