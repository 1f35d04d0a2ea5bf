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
//  - Buffers (point_buffers.hpp): the pipelined points of a block share one send and one receive buffer,
//    allocated once through the block's communicator, sized for its largest point and page-aligned, as
//    osu_allreduce and nccl-tests reuse one pair; latency points get exact-size buffers of their own.
//  - All groups of a layout run at once, so every rank is busy as in the job being predicted.
//  - Outside load: a point lasts milliseconds, below what /proc/stat's clock ticks can judge, so points
//    are judged in stretches: consecutive points of one group layout measured until kLoadStretch has
//    passed on world rank 0's clock (it tells the others), the probe window held open, idle, to
//    kLoadStretch when the layout's points end first. Short stretches, so that a load that starts or
//    stops within one is not diluted below the limit by the rest of it. A stretch during which other processes used more than
//    `outside_load_cores` (plus steal) on any node is measured again after a quiet moment, up to
//    `max_extra_tries` times; what stays loaded is kept and counted (points_disturbed). Rows are
//    appended once their stretch is judged.
//  - --resume measures only the points whose keys are missing from the file.
//  - The speed reference (runtime/speed_reference.hpp) is timed with every rank busy before the first
//    block of points measured and after each, into /reference/probes (stage comm).
//  - Across nodes (and unless node_links is off), every pair of nodes is measured first, alone
//    (commbench/node_links.hpp), into /comm/node_links, and judged for a slow link or node.
#pragma once

#include <chrono>
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
  double outside_load_cores = 0.3;                // a stretch of points with more outside load (+ steal) is measured again
  int max_extra_tries = 3;                        // ... at most this many times
  bool node_links = true;                         // measure every node pair first (node_links.hpp) when >1 node
};

// The wall time of a stretch of points judged for outside load (cpu_load.hpp: /proc/stat counts 10 ms
// ticks, so much shorter windows read as noise).
inline constexpr std::chrono::milliseconds kLoadStretch{400};

struct CommCalibrationSummary {
  std::size_t points_total = 0;
  std::size_t points_present = 0;  // already in the file (--resume)
  std::size_t points_measured = 0;
  std::size_t points_failed_check = 0;
  std::size_t points_remeasured = 0;  // measured again because their stretch saw outside load
  std::size_t points_disturbed = 0;   // still loaded after max_extra_tries: kept as they are
  double elapsed_s = 0.0;
};

CommCalibrationSummary calibrate_comm(const CommCalibrationOptions& options);

}  // namespace itertime::calibrate
