// speed_drift.hpp: the machine's state as data. A speed reference (runtime/speed_reference.hpp: a fixed
// matrix product, element-wise pass and all-reduce) is timed between the operator profiles' chunks and
// between the ground truth's rounds, at each occupancy (ranks busy at once) the stage uses; these pure
// functions compare the two stages' references, choose which operator-profiling pass to predict with,
// and decide which occupancies to profile again (docs/method.md, "Drift").
// Invariants:
//  - Drift at an occupancy = 100 * (mean of the ground truth's samples / mean of one profiling pass's
//    samples - 1), per part; positive: the machine was slower during the ground truth. Means, not
//    medians: a shared machine flips between speeds within a second (a 2x bimodal matrix product was
//    measured here), and a step time, like a mean, sums its operators over whichever states it met. A part either side
//    lacks (the all-reduce at occupancy 1) is NaN. The compute drift is the mean of the matrix product's
//    and the element-wise pass's (the operators are a mix of both kinds; one of them where the other is NaN).
//  - Pass 0 is the operator profiling of `calibrate ops`; passes 1.. are profiles measured again by
//    `calibrate drift`. The pass chosen at an occupancy is the one whose compute drift against the ground
//    truth is smallest in magnitude (the lowest pass on a tie); without ground-truth samples, pass 0.
//  - Nothing here looks at ground-truth step times: the choice and the rule read the reference alone.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace itertime {

enum class ReferenceStage { kComm, kOps, kGroundTruth };
std::string to_string(ReferenceStage stage);                    // comm | ops | groundtruth
ReferenceStage parse_reference_stage(const std::string& text);  // InternalError on anything else

// One timing of the speed reference: medians over its repeats, median over the ranks that ran it.
struct ReferenceSample {
  ReferenceStage stage = ReferenceStage::kOps;
  int pass = 0;       // ops: profiling pass (0 first); groundtruth: round; comm: 0
  int occupancy = 1;  // ranks running the reference (and the stage's work) at once
  double unix_time_s = 0;
  double matmul_us = 0;
  double elementwise_us = 0;
  double allreduce_us = 0;  // NaN at occupancy 1
};

// The reference at one occupancy: one profiling pass against the ground truth.
struct OccupancyDrift {
  int occupancy = 1;
  int ops_pass = 0;
  std::size_t ops_samples = 0, groundtruth_samples = 0;
  double matmul_pct = 0, elementwise_pct = 0, allreduce_pct = 0;  // NaN where a side has no sample
  double compute_pct() const;                                     // the mean of matmul_pct and elementwise_pct
};

// The profiling passes with samples at `occupancy`, ascending.
std::vector<int> ops_passes(const std::vector<ReferenceSample>& samples, int occupancy);

// Per occupancy that has samples of the chosen ops pass and of the ground truth (ascending occupancy):
// the drift of the ground truth against pass `ops_pass_of_occupancy[occupancy]` (pass 0 where absent).
std::vector<OccupancyDrift> drift_by_occupancy(const std::vector<ReferenceSample>& samples,
                                               const std::map<int, int>& ops_pass_of_occupancy = {});

// The pass to predict with per occupancy that has ops samples (see the invariants).
std::map<int, int> choose_ops_passes(const std::vector<ReferenceSample>& samples);

// The re-measurement rule: the occupancies whose chosen pass drifts by more than `threshold_pct` (compute
// drift, in magnitude) while fewer than 1 + max_extra_passes passes were profiled there. Ascending.
std::vector<int> occupancies_to_remeasure(const std::vector<ReferenceSample>& samples, double threshold_pct,
                                          int max_extra_passes);

// The largest compute drift in magnitude over `drifts` (0 when empty), with its sign.
double largest_compute_drift_pct(const std::vector<OccupancyDrift>& drifts);

}  // namespace itertime
