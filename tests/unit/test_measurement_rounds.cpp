// Tests of the interleaved rounds and the repeat-on-disturbance rule (common/measurement_rounds.hpp),
// with hand-computed expectations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/measurement_rounds.hpp"

namespace itertime {
namespace {

RoundPolicy policy(int rounds, int extra) {
  RoundPolicy p;
  p.rounds = rounds;
  p.max_extra_rounds = extra;
  p.disagreement_pct = 10;
  p.outside_load_cores = 0.3;
  return p;
}

RoundMeasurement quiet(double time_us) { return RoundMeasurement{time_us, 0.05, 0.0}; }
RoundMeasurement loaded(double time_us) { return RoundMeasurement{time_us, 0.9, 0.0}; }

TEST(RoundOrder, FirstKeepsTheJobOrderSecondReversesItLaterOnesArePermutations) {
  EXPECT_EQ(round_order(4, 0, 7), (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(round_order(4, 1, 7), (std::vector<std::size_t>{3, 2, 1, 0}));
  std::set<std::vector<std::size_t>> seen;
  for (int round = 2; round < 8; ++round) {
    std::vector<std::size_t> order = round_order(12, round, 7);
    EXPECT_EQ(order, round_order(12, round, 7)) << "the same on every call (every rank computes it)";
    seen.insert(order);
    std::sort(order.begin(), order.end());
    for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i) << "a permutation";
  }
  EXPECT_GT(seen.size(), 4u) << "later rounds vary the order";
  EXPECT_NE(round_order(12, 2, 7), round_order(12, 2, 8)) << "the seed changes the order";
  EXPECT_TRUE(round_order(0, 3, 7).empty());
  EXPECT_EQ(round_order(1, 5, 7), (std::vector<std::size_t>{0}));
}

TEST(AssessRounds, NothingMeasuredWantsARound) {
  const RoundsAssessment a = assess_rounds({}, policy(3, 2));
  EXPECT_TRUE(a.wants_another_round);
  EXPECT_FALSE(a.steady);
}

TEST(AssessRounds, QuietAgreeingRoundsAreSteadyWithTheirMedianAndSpread) {
  const RoundsAssessment a = assess_rounds({quiet(100), quiet(104), quiet(98)}, policy(3, 2));
  EXPECT_TRUE(a.steady);
  EXPECT_FALSE(a.wants_another_round);
  EXPECT_EQ(a.counted, 3);
  EXPECT_DOUBLE_EQ(a.time_us, 100);
  // |100-100| + |104-100| + |98-100| = 6 -> 6/3 = 2% of 100.
  EXPECT_NEAR(a.spread_pct, 2.0, 1e-12);
  EXPECT_EQ(a.disturbance, "");
}

TEST(AssessRounds, TooFewRoundsWantAnother) {
  const RoundsAssessment a = assess_rounds({quiet(100), quiet(101)}, policy(3, 2));
  EXPECT_FALSE(a.steady);
  EXPECT_TRUE(a.wants_another_round);
  EXPECT_EQ(a.disturbance, "") << "not disturbed, only not finished";
  const RoundsAssessment one = assess_rounds({quiet(100)}, policy(1, 0));
  EXPECT_TRUE(one.steady);
  EXPECT_TRUE(std::isnan(one.spread_pct)) << "no spread from one round";
}

TEST(AssessRounds, ALoadedRoundIsNotCountedAndIsMeasuredAgain) {
  const RoundsAssessment a = assess_rounds({quiet(100), loaded(180), quiet(102)}, policy(3, 2));
  EXPECT_EQ(a.verdicts[1], RoundVerdict::kLoad);
  EXPECT_EQ(a.counted, 2);
  EXPECT_TRUE(a.wants_another_round);
  EXPECT_DOUBLE_EQ(a.time_us, 101) << "median of the counted rounds, the loaded one left out";
  EXPECT_EQ(a.used, (std::vector<bool>{true, false, true}));
  const RoundsAssessment again = assess_rounds({quiet(100), loaded(180), quiet(102), quiet(99)}, policy(3, 2));
  EXPECT_TRUE(again.steady);
  EXPECT_DOUBLE_EQ(again.time_us, 100);
}

TEST(AssessRounds, StealCountsAsOutsideLoad) {
  const RoundsAssessment a = assess_rounds({RoundMeasurement{100, 0.1, 0.25}}, policy(1, 1));
  EXPECT_EQ(a.verdicts[0], RoundVerdict::kLoad) << "0.1 + 0.25 cores is above 0.3";
}

TEST(AssessRounds, ARoundFarFromTheOthersIsAnOutlier) {
  const RoundsAssessment a = assess_rounds({quiet(100), quiet(130), quiet(101)}, policy(3, 2));
  EXPECT_EQ(a.verdicts, (std::vector<RoundVerdict>{RoundVerdict::kCounted, RoundVerdict::kOutlier, RoundVerdict::kCounted}));
  EXPECT_TRUE(a.wants_another_round);
  EXPECT_DOUBLE_EQ(a.time_us, 100.5);
  EXPECT_NEAR(a.spread_pct, 100.0 * 0.5 / 100.5, 1e-12);
}

TEST(AssessRounds, WhatStaysDisturbedAfterTheLastAllowedRoundIsFlagged) {
  const RoundsAssessment a = assess_rounds({quiet(100), loaded(150), quiet(140), loaded(170), quiet(101)}, policy(3, 2));
  EXPECT_FALSE(a.wants_another_round) << "3 + 2 rounds run";
  EXPECT_FALSE(a.steady);
  EXPECT_EQ(a.counted, 2);
  EXPECT_EQ(a.disturbance, "2 of 5 rounds counted (2 outside load, 1 further than 10%)");
}

TEST(AssessRounds, EveryRoundLoadedStillGivesATime) {
  const RoundsAssessment a = assess_rounds({loaded(150), loaded(170), loaded(160)}, policy(3, 0));
  EXPECT_EQ(a.counted, 0);
  EXPECT_DOUBLE_EQ(a.time_us, 160) << "the median of all rounds";
  EXPECT_TRUE(std::isnan(a.spread_pct));
  EXPECT_EQ(a.used, (std::vector<bool>{true, true, true}));
  EXPECT_NE(a.disturbance, "");
}

TEST(AssessRounds, TwoFarApartRoundsAreBothOutliersAndTheLoadFreeMedianIsKept) {
  const RoundsAssessment a = assess_rounds({quiet(100), quiet(140)}, policy(2, 0));
  EXPECT_EQ(a.counted, 0) << "each is 16.7% from their median 120";
  EXPECT_DOUBLE_EQ(a.time_us, 120);
  EXPECT_EQ(a.used, (std::vector<bool>{true, true}));
  EXPECT_EQ(to_string(a.verdicts[0]), "outlier");
}

}  // namespace
}  // namespace itertime
