// speed_reference.hpp: a short, fixed probe of how fast the machine runs right now (common/speed_drift.hpp):
// a 128 x 128 x 128 fp32 matrix product, an element-wise pass y = a*x + y over 1 Mi floats (12 MiB of
// traffic) and an all-reduce of 64 Ki int32 (256 KiB) over the probing ranks, each repeated kRepeats times.
// Invariants:
//  - measure() is collective over the communicator given: every rank of it runs the probe at once, as the
//    stage's work runs at that occupancy. Each repeat is timed on its own and a part's time is the median
//    of its repeats: a core's speed while the rank runs (frequency, a busy SMT sibling, memory bandwidth),
//    taken as the operator profiles take theirs; time other processes take from the rank is the
//    outside-load probe's (runtime/outside_load_probe.hpp). Rank 0 of the communicator gets the median
//    over ranks per part (the other ranks their own). At one rank the all-reduce is not run (NaN).
//  - Plain C++ on the host CPU (no LibTorch, no device): the same code in every stage (comm, ops,
//    groundtruth), so its timings compare across stages. On a GPU backend it probes the host, not the
//    device (docs/method.md, "Drift", says so).
//  - Its buffers are allocated once, by the constructor; a probe takes about 10-40 ms on a CPU core.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "common/h5store.hpp"
#include "common/speed_drift.hpp"
#include "runtime/mpi_session.hpp"

namespace itertime {

class SpeedReference {
 public:
  SpeedReference();
  // Collective over comm; see the invariants. stage, pass, occupancy (comm's size) and time are filled in.
  ReferenceSample measure(MPI_Comm comm, ReferenceStage stage, int pass);
  static constexpr int kRepeats = 8;
  static constexpr int kMatrixSize = 128;
  static constexpr int kElements = 1 << 20;
  static constexpr int kAllReduceElements = 1 << 16;

 private:
  std::vector<float> a_, b_, c_;  // the matrix product's operands
  std::vector<float> x_, y_;      // the element-wise pass's
  std::vector<int32_t> send_,
      receive_;  // int32, not float: the comm sweep's first float all-reduce stays its
                 // own (tests/e2e's corrupt_allreduce interposer damages exactly that one)  // the all-reduce's
};

// The reference at each occupancy a stage uses (collective over MPI_COMM_WORLD): for each occupancy k in
// turn, world ranks 0..k-1 run the probe at once while the others wait quietly (quiet_barrier); world
// rank 0 gets the samples (ascending occupancy), the others an empty list. Occupancies above the world's
// size are left out.
class OccupancyReference {
 public:
  explicit OccupancyReference(const std::vector<int>& occupancies);  // collective: one split per occupancy
  std::vector<ReferenceSample> measure_all(ReferenceStage stage, int pass);

 private:
  std::vector<std::pair<int, MpiComm>> comms_;  // per occupancy: ranks 0..k-1 (null on the others)
  SpeedReference probe_;
};

// Rank 0 of a stage: appends `samples` to /reference/probes (one commit, or the caller's transaction) and
// prints them on one line (none when `when` is empty), "# speed reference (WHEN): 1 rank 812/2210 us, 2 ranks ...; matrix product
// / element-wise pass [/ all-reduce]".
void record_reference(h5::Store& store, const std::vector<ReferenceSample>& samples, const std::string& when);

}  // namespace itertime
