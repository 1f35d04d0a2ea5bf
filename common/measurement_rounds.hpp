// measurement_rounds.hpp: interleaved measurement rounds and the repeat-on-disturbance rule (pure
// functions; `calibrate groundtruth` drives them, docs/method.md "Ground truth").
// Invariants:
//  - Every configuration is measured once per round; round r's order is a permutation of 0..n-1 that
//    depends only on (n, r, seed): round 0 keeps the job's order, round 1 reverses it, later rounds
//    shuffle it (Fisher-Yates on std::mt19937_64, so every rank and every platform computes the same).
//  - A round is `load` when the outside load (other processes' CPU time plus steal time, in cores)
//    during its timed steps exceeded the policy's limit; `outlier` when its median lies more than
//    disagreement_pct from the median of the configuration's load-free rounds; `counted` otherwise.
//  - A configuration is steady once `rounds` rounds are counted. Until then, and while it has had fewer
//    than rounds + max_extra_rounds rounds, it is measured again in the next round; after that it is
//    kept as it is, with the reason it stayed disturbed.
//  - The configuration's time is the median of the counted rounds' medians (of the load-free rounds'
//    when none is counted, of all rounds' when every round saw outside load).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace itertime {

struct RoundPolicy {
  int rounds = 3;                   // counted rounds wanted per configuration
  int max_extra_rounds = 3;         // more rounds a disturbed configuration may get
  double disagreement_pct = 10.0;   // a round further than this from the others' median is an outlier
  double outside_load_cores = 0.3;  // a round with more outside load (+ steal) than this is disturbed
  double drift_pct = 3.0;           // calibrate drift profiles an occupancy again when its speed reference
                                    // moved more than this between the profiles and the ground truth
};

// What one round of one configuration measured.
struct RoundMeasurement {
  double time_us_median = 0;      // median of the round's timed steps
  double outside_load_cores = 0;  // other processes' CPU time during them, in cores
  double steal_cores = 0;         // hypervisor steal during them, in cores
};

enum class RoundVerdict { kCounted, kLoad, kOutlier };
std::string to_string(RoundVerdict verdict);  // "counted" | "load" | "outlier"

struct RoundsAssessment {
  std::vector<RoundVerdict> verdicts;  // per round, in the order measured
  std::vector<bool> used;              // per round: the time is taken from it (see the invariants)
  int counted = 0;
  double time_us = 0;     // the configuration's time (see the invariants)
  double spread_pct = 0;  // mean |counted median - time_us| / time_us in %; NaN below 2 counted rounds
  bool steady = false;    // `rounds` rounds counted
  bool wants_another_round = false;
  std::string disturbance;  // "" while steady or still being measured; else why it stayed disturbed
};

RoundsAssessment assess_rounds(const std::vector<RoundMeasurement>& rounds, const RoundPolicy& policy);

// The order configurations 0..count-1 are measured in, in round `round_index`.
std::vector<std::size_t> round_order(std::size_t count, int round_index, uint64_t seed);

}  // namespace itertime
