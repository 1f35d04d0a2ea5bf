// test_schedule.cpp: the 1F1B simulation against hand-computed timelines.
// Invariants: every expected figure below is derived by hand in the comment next to it, never by
// running the code under test; times are small binary fractions, so comparisons are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "common/pipeline_order.hpp"
#include "predict/schedule/schedule.hpp"
#include "tests/predict/fixtures.hpp"

namespace itertime::predict {
namespace {

using Kind = PassKind;
using fixtures::user_error_of;

void expect_entry(const TimelineEntry& e, Kind kind, int micro_batch, double start_us, double end_us) {
  EXPECT_EQ(e.kind, kind) << to_string(e.kind) << e.micro_batch;
  EXPECT_EQ(e.micro_batch, micro_batch);
  EXPECT_DOUBLE_EQ(e.start_us, start_us);
  EXPECT_DOUBLE_EQ(e.end_us, end_us);
}

// A stage's whole timeline, pass by pass, written as the hand timelines are: "F0 [0,1] send-F0 [1,1.5] B0 [4,6]"
// (kind F, B, send-F or send-B with the micro-batch, then [start,end]); the chunk is not compared.
void expect_timeline(const std::vector<TimelineEntry>& stage, const std::string& expected) {
  const std::map<std::string, Kind> kinds = {
      {"F", Kind::kForward}, {"B", Kind::kBackward}, {"send-F", Kind::kSendForward}, {"send-B", Kind::kSendBackward}};
  std::istringstream in(expected);
  std::string pass, span;
  std::size_t i = 0;
  while (in >> pass >> span) {
    SCOPED_TRACE(pass + " " + span);
    ASSERT_LT(i, stage.size());
    const std::size_t digits = pass.find_first_of("0123456789");
    double start_us = 0, end_us = 0;
    ASSERT_TRUE(digits != std::string::npos && kinds.count(pass.substr(0, digits)) != 0 &&
                std::sscanf(span.c_str(), "[%lf,%lf]", &start_us, &end_us) == 2)
        << "not a pass of the expected timeline";
    expect_entry(stage[i++], kinds.at(pass.substr(0, digits)), std::stoi(pass.substr(digits)), start_us, end_us);
  }
  EXPECT_EQ(i, stage.size());
}

// Each stage's busy and idle time, and the bubble.
void expect_load(const ScheduleResult& r, const std::vector<double>& busy_us, const std::vector<double>& idle_us,
                 double bubble_us) {
  for (std::size_t s = 0; s < busy_us.size(); ++s) EXPECT_DOUBLE_EQ(r.busy_us[s], busy_us[s]) << "stage " << s;
  for (std::size_t s = 0; s < idle_us.size(); ++s) EXPECT_DOUBLE_EQ(r.idle_us[s], idle_us[s]) << "stage " << s;
  EXPECT_DOUBLE_EQ(r.bubble_us, bubble_us);
}

// Stage s's [start, end] of one pass, from a result's per-stage starts and ends.
void expect_span(const std::vector<double>& starts_us, const std::vector<double>& ends_us, std::size_t s, double start_us,
                 double end_us) {
  ASSERT_LT(s, starts_us.size());
  ASSERT_LT(s, ends_us.size());
  EXPECT_DOUBLE_EQ(starts_us[s], start_us) << "stage " << s;
  EXPECT_DOUBLE_EQ(ends_us[s], end_us) << "stage " << s;
}

std::vector<StageTimes> uniform(int pp, double f, double b) {
  return std::vector<StageTimes>(static_cast<std::size_t>(pp), {f, b});
}

// `stages` (pp * v virtual stages) with free transfers, m micro-batches, v chunks per rank.
ScheduleInput free_transfers(std::vector<StageTimes> stages, int m, int v = 1) {
  ScheduleInput input;
  const std::size_t boundaries = stages.size() - 1;
  input.stages = std::move(stages);
  input.p2p_forward_us.assign(boundaries, 0.0);
  input.p2p_backward_us.assign(boundaries, 0.0);
  input.num_micro_batches = m;
  input.virtual_stages = v;
  return input;
}

TEST(Schedule, OrderIsMegatronNonInterleaved1F1B) {
  // pp=4, stage 1, m=5: warm-up min(4-1-1, 5) = 2 forwards, then (F,B) x 3, then 2 backwards.
  const auto order = one_f_one_b_order(4, 1, 5);
  const std::vector<std::pair<Kind, int>> expected = {
      {Kind::kForward, 0},  {Kind::kForward, 1}, {Kind::kForward, 2},  {Kind::kBackward, 0}, {Kind::kForward, 3},
      {Kind::kBackward, 1}, {Kind::kForward, 4}, {Kind::kBackward, 2}, {Kind::kBackward, 3}, {Kind::kBackward, 4}};
  ASSERT_EQ(order.size(), expected.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i].kind, expected[i].first) << i;
    EXPECT_EQ(order[i].micro_batch, expected[i].second) << i;
  }
  // Last stage: no warm-up, strict alternation.
  const auto last = one_f_one_b_order(4, 3, 2);
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[0].kind, Kind::kForward);
  EXPECT_EQ(last[1].kind, Kind::kBackward);
  // m < pp: stage 0 of pp=4 with m=2 runs both forwards first (warm-up = min(3, 2) = 2).
  const auto short_first = one_f_one_b_order(4, 0, 2);
  ASSERT_EQ(short_first.size(), 4u);
  EXPECT_EQ(short_first[0].kind, Kind::kForward);
  EXPECT_EQ(short_first[1].kind, Kind::kForward);
  EXPECT_EQ(short_first[2].kind, Kind::kBackward);
  EXPECT_EQ(short_first[3].kind, Kind::kBackward);
}

TEST(PipelineOrder, CursorWalksTheSameOrderAsTheRule) {
  // PipelineCursor (counters, no division) and PipelineOrder::at (the closed rule the hand-written orders
  // above pin) are two implementations of one order: they must agree pass by pass.
  for (int pp = 1; pp <= 5; ++pp) {
    for (int v = 1; v <= 3; ++v) {
      for (int m : {1, 2, 3, 4, 5, 8, 10, 15, 20}) {
        if (v > 1 && m % pp != 0) continue;
        for (int rank = 0; rank < pp; ++rank) {
          SCOPED_TRACE("pp " + std::to_string(pp) + " v " + std::to_string(v) + " m " + std::to_string(m) + " rank " +
                       std::to_string(rank));
          const PipelineOrder order(pp, rank, m, v);
          PipelineCursor cursor(pp, rank, m, v);
          ASSERT_EQ(order.size(), 2 * m * v);
          for (int p = 0; p < order.size(); ++p, cursor.advance()) {
            ASSERT_FALSE(cursor.done());
            ASSERT_EQ(cursor.position(), p);
            const PipelinePass expected = order.at(p);
            ASSERT_EQ(cursor.pass().kind, expected.kind) << "position " << p;
            ASSERT_EQ(cursor.pass().micro_batch, expected.micro_batch) << "position " << p;
            ASSERT_EQ(cursor.pass().chunk, expected.chunk) << "position " << p;
          }
          EXPECT_TRUE(cursor.done());
        }
      }
    }
  }
}

// The dependency rule of schedule.hpp written from its invariants alone, as slowly as it reads: sweep
// every rank's whole order (common/pipeline_order's lists) again and again, running a rank's next pass
// once the pass it waits for has ended, until every pass has run. Per rank, (start, end) of each pass and
// the makespan (blocking sends hold the sender).
struct ReferenceSchedule {
  std::vector<std::vector<std::pair<double, double>>> passes_us;
  double makespan_us = 0.0;
};

ReferenceSchedule reference_schedule(const ScheduleInput& in) {
  const int v = in.virtual_stages;
  const int pp = static_cast<int>(in.stages.size()) / v;
  const int last = pp * v - 1;
  const int m = in.num_micro_batches;
  std::map<std::tuple<int, int, int>, double> ended_us;  // (kind 0 forward / 1 backward, virtual stage, micro-batch)
  std::vector<std::vector<PipelinePass>> orders;
  for (int r = 0; r < pp; ++r) orders.push_back(interleaved_passes(pp, r, m, v));
  std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
  std::vector<double> free_us(static_cast<std::size_t>(pp), 0.0);
  ReferenceSchedule out;
  out.passes_us.resize(static_cast<std::size_t>(pp));
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < pp; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      if (next[ru] == orders[ru].size()) continue;
      const PipelinePass& pass = orders[ru][next[ru]];
      const int vs = pass.chunk * pp + r;
      const bool forward = pass.kind == PipelinePassKind::kForward;
      // What it waits for: the previous virtual stage's forward, the next one's backward (the last
      // virtual stage's backward: its own forward), plus the transfer between them.
      std::tuple<int, int, int> needs{0, vs - 1, pass.micro_batch};
      double transfer_us = 0.0;
      if (forward && vs > 0) transfer_us = in.p2p_forward_us[static_cast<std::size_t>(vs - 1)];
      if (!forward) needs = vs == last ? std::make_tuple(0, vs, pass.micro_batch) : std::make_tuple(1, vs + 1, pass.micro_batch);
      if (!forward && vs < last) transfer_us = in.p2p_backward_us[static_cast<std::size_t>(vs)];
      double ready_us = 0.0;
      if (!(forward && vs == 0)) {
        const auto it = ended_us.find(needs);
        if (it == ended_us.end()) continue;
        ready_us = it->second + transfer_us;
      }
      const StageTimes& t = in.stages[static_cast<std::size_t>(vs)];
      const double start_us = std::max(free_us[ru], ready_us);
      const double end_us = start_us + (forward ? t.forward_us : t.backward_us);
      ended_us[{forward ? 0 : 1, vs, pass.micro_batch}] = end_us;
      out.passes_us[ru].emplace_back(start_us, end_us);
      free_us[ru] = end_us;
      const bool sends = forward ? vs < last : vs > 0;
      if (in.blocking_send && sends) {
        free_us[ru] +=
            forward ? in.p2p_forward_us[static_cast<std::size_t>(vs)] : in.p2p_backward_us[static_cast<std::size_t>(vs - 1)];
      }
      out.makespan_us = std::max(out.makespan_us, free_us[ru]);
      ++next[ru];
      moved = true;
    }
  }
  for (int r = 0; r < pp; ++r)
    EXPECT_EQ(next[static_cast<std::size_t>(r)], orders[static_cast<std::size_t>(r)].size()) << "reference deadlocked";
  return out;
}

TEST(Schedule, ListSchedulingEqualsTheSlowReferenceOnRandomPipelines) {
  // Random unbalanced stages and transfers (multiples of 1/8 us, so every sum is exact), interleaved or
  // not, blocking or not: every pass's start and end, and the makespan, as the reference finds them.
  std::mt19937 rng(20261207);
  std::uniform_int_distribution<int> eighths(1, 64), transfer_eighths(0, 16);
  for (int trial = 0; trial < 200; ++trial) {
    const int pp = 1 + trial % 4;
    const int v = 1 + (trial / 4) % 3;
    const int m = v > 1 ? pp * (1 + (trial / 12) % 3) : 1 + (trial / 12) % 9;
    std::vector<StageTimes> stages;
    for (int s = 0; s < pp * v; ++s) stages.push_back({eighths(rng) / 8.0, eighths(rng) / 8.0});
    ScheduleInput input = free_transfers(stages, m, v);
    for (double& t : input.p2p_forward_us) t = transfer_eighths(rng) / 8.0;
    for (double& t : input.p2p_backward_us) t = transfer_eighths(rng) / 8.0;
    input.blocking_send = trial % 2 == 1;
    input.record_timeline = true;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": pp " + std::to_string(pp) + " v " + std::to_string(v) + " m " +
                 std::to_string(m) + (input.blocking_send ? " blocking" : ""));
    const ReferenceSchedule expected = reference_schedule(input);
    const ScheduleResult got = simulate_1f1b(input);
    EXPECT_EQ(got.makespan_us, expected.makespan_us);
    for (int r = 0; r < pp; ++r) {
      std::vector<std::pair<double, double>> passes_us;
      for (const TimelineEntry& e : got.timeline[static_cast<std::size_t>(r)]) {
        if (e.kind == Kind::kForward || e.kind == Kind::kBackward) passes_us.emplace_back(e.start_us, e.end_us);
      }
      EXPECT_EQ(passes_us, expected.passes_us[static_cast<std::size_t>(r)]) << "rank " << r;
    }
  }
}

// Every figure of two results, field by field.
void expect_same_result(const ScheduleResult& a, const ScheduleResult& b) {
  EXPECT_EQ(a.makespan_us, b.makespan_us);
  EXPECT_EQ(a.busy_us, b.busy_us);
  EXPECT_EQ(a.send_us, b.send_us);
  EXPECT_EQ(a.idle_us, b.idle_us);
  EXPECT_EQ(a.bubble_us, b.bubble_us);
  EXPECT_EQ(a.end_us, b.end_us);
  EXPECT_EQ(a.last_backward_start_us, b.last_backward_start_us);
  EXPECT_EQ(a.last_backward_end_us, b.last_backward_end_us);
  EXPECT_EQ(a.first_forward_start_us, b.first_forward_start_us);
  EXPECT_EQ(a.first_forward_end_us, b.first_forward_end_us);
  EXPECT_EQ(a.chunk_last_backward_start_us, b.chunk_last_backward_start_us);
  EXPECT_EQ(a.chunk_last_backward_end_us, b.chunk_last_backward_end_us);
  EXPECT_EQ(a.chunk_first_forward_start_us, b.chunk_first_forward_start_us);
  EXPECT_EQ(a.chunk_first_forward_end_us, b.chunk_first_forward_end_us);
}

TEST(Schedule, CacheSimulatesEachDistinctInputOnce) {
  ScheduleInput input = free_transfers({{3.0, 5.0}, {2.0, 4.0}, {3.5, 6.0}, {1.0, 2.0}}, 8, 2);
  input.p2p_forward_us = {0.5, 0.25, 0.75};
  input.p2p_backward_us = {0.25, 0.5, 0.125};
  ScheduleCache cache;
  expect_same_result(cache.simulate(input), simulate_1f1b(input));
  expect_same_result(cache.simulate(input), simulate_1f1b(input));  // from the cache
  EXPECT_EQ(cache.simulations(), 1);
  EXPECT_EQ(cache.lookups(), 2);
  // Any field that differs is another input: one stage time, one transfer, m, v, blocking, the slots.
  std::vector<ScheduleInput> others(7, input);
  others[0].stages[2].backward_us = std::nextafter(6.0, 7.0);
  others[1].p2p_backward_us[1] = 0.625;
  others[2].num_micro_batches = 4;
  others[3] = free_transfers(input.stages, 8, 1);
  others[4].blocking_send = true;
  others[5].rank_slots = 1;
  others[6].stages[0].forward_fixed_us = 1.0;
  for (std::size_t k = 0; k < others.size(); ++k) {
    SCOPED_TRACE("variant " + std::to_string(k));
    expect_same_result(cache.simulate(others[k]), simulate_1f1b(others[k]));
    EXPECT_EQ(cache.simulations(), static_cast<int64_t>(2 + k));
  }
  // A refused input throws as simulate_1f1b does and is not kept.
  ScheduleInput bad = input;
  bad.stages[1].forward_us = -1.0;
  EXPECT_THROW(cache.simulate(bad), UserError);
  EXPECT_THROW(cache.simulate(bad), UserError);
  EXPECT_EQ(cache.simulations(), 8);
}

// Relative closeness of two times (the closed-form steady state adds a period's time K times at once).
void expect_close(double got, double expected, const std::string& what) {
  EXPECT_NEAR(got, expected, 1e-9 * std::max(1.0, std::abs(expected))) << what;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) expect_close(got[i], expected[i], what + "[" + std::to_string(i) + "]");
}

TEST(Schedule, PeriodicSteadyStateEqualsThePassByPassSimulation) {
  // Random unbalanced stages and transfers over many micro-batches: every figure of the result (the
  // timeline forces the pass-by-pass simulation) agrees, and most trials were shortened.
  std::mt19937 rng(20261208);
  std::uniform_real_distribution<double> pass_us(0.5, 8.0), transfer_us(0.0, 2.0);
  int shortened = 0;
  const int trials = 120;
  for (int trial = 0; trial < trials; ++trial) {
    const int v = 1 + trial % 3;
    const int pp = v == 1 ? 1 + (trial / 3) % 6 : 2 + (trial / 3) % 4;
    const int m = v == 1 ? 20 + static_cast<int>(rng() % 200) : pp * (6 + static_cast<int>(rng() % 24));
    std::vector<StageTimes> stages;
    for (int s = 0; s < pp * v; ++s) stages.push_back({pass_us(rng), pass_us(rng)});
    if (trial % 5 == 0) stages.back().backward_us *= 3.0;  // a slow last stage (the loss)
    ScheduleInput input = free_transfers(stages, m, v);
    for (double& t : input.p2p_forward_us) t = transfer_us(rng);
    for (double& t : input.p2p_backward_us) t = transfer_us(rng);
    input.blocking_send = trial % 2 == 1;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": pp " + std::to_string(pp) + " v " + std::to_string(v) + " m " +
                 std::to_string(m) + (input.blocking_send ? " blocking" : ""));
    const ScheduleResult got = simulate_1f1b(input);
    ScheduleInput whole = input;
    whole.record_timeline = true;
    const ScheduleResult expected = simulate_1f1b(whole);
    EXPECT_EQ(expected.simulated_micro_batches, m);
    shortened += got.simulated_micro_batches < m ? 1 : 0;
    expect_close(got.makespan_us, expected.makespan_us, "makespan");
    expect_close(got.bubble_us, expected.bubble_us, "bubble");
    expect_close(got.busy_us, expected.busy_us, "busy");
    expect_close(got.send_us, expected.send_us, "send");
    expect_close(got.idle_us, expected.idle_us, "idle");
    expect_close(got.end_us, expected.end_us, "end");
    expect_close(got.last_backward_start_us, expected.last_backward_start_us, "last backward start");
    expect_close(got.last_backward_end_us, expected.last_backward_end_us, "last backward end");
    expect_close(got.first_forward_start_us, expected.first_forward_start_us, "first forward start");
    expect_close(got.first_forward_end_us, expected.first_forward_end_us, "first forward end");
    for (int r = 0; r < pp; ++r) {
      const auto i = static_cast<std::size_t>(r);
      expect_close(got.chunk_last_backward_start_us[i], expected.chunk_last_backward_start_us[i], "chunk last backward start");
      expect_close(got.chunk_last_backward_end_us[i], expected.chunk_last_backward_end_us[i], "chunk last backward end");
      expect_close(got.chunk_first_forward_start_us[i], expected.chunk_first_forward_start_us[i], "chunk first forward start");
      expect_close(got.chunk_first_forward_end_us[i], expected.chunk_first_forward_end_us[i], "chunk first forward end");
    }
  }
  EXPECT_GT(shortened, trials / 2) << "the closed form should take over on most long schedules";
}

TEST(Schedule, SingleStageIsSumOfPasses) {
  // pp=1: m * (f + b) = 4 * (3 + 5) = 32, no bubble.
  const ScheduleResult r = simulate_1f1b(uniform(1, 3.0, 5.0), 0.0, 0.0, 4, false);
  EXPECT_DOUBLE_EQ(r.makespan_us, 32.0);
  EXPECT_DOUBLE_EQ(r.busy_us[0], 32.0);
  EXPECT_DOUBLE_EQ(r.idle_us[0], 0.0);
  EXPECT_DOUBLE_EQ(r.bubble_us, 0.0);
}

TEST(Schedule, BalancedTwoStagesHandTimeline) {
  // pp=2, m=2, f=1, b=2, no transfer.
  // stage 0 order F0 F1 B0 B1; stage 1 order F0 B0 F1 B1.
  //   s0 F0 [0,1]; s1 F0 [1,2] (after s0 F0); s1 B0 [2,4];
  //   s0 F1 [1,2]; s0 B0 [4,6] (after s1 B0); s1 F1 [4,5] (stage busy until 4); s1 B1 [5,7];
  //   s0 B1 [7,9]. Makespan 9 = (m + pp - 1)(f + b) = 3 * 3.
  const ScheduleResult r = simulate_1f1b(uniform(2, 1.0, 2.0), 0.0, 0.0, 2, false, true);
  EXPECT_DOUBLE_EQ(r.makespan_us, 9.0);
  ASSERT_EQ(r.timeline.size(), 2u);
  expect_timeline(r.timeline[0], "F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]");
  expect_timeline(r.timeline[1], "F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]");
  // busy 2*(1+2) = 6 per stage; idle = 9 - 6; bubble = 9 - 6.
  expect_load(r, {6.0, 6.0}, {3.0, 3.0}, 3.0);
}

TEST(Schedule, BalancedMakespanIsMPlusPpMinusOneTimesPass) {
  // Equal f, b, zero transfer: (m + pp - 1)(f + b) for every m, also m < pp; bubble (pp-1)(f+b).
  for (int pp : {2, 4}) {
    for (int m : {1, 2, 3, 4, 8, 16}) {
      for (const auto& [f, b] : std::vector<std::pair<double, double>>{{1.0, 2.0}, {2.0, 4.0}, {1.5, 1.0}}) {
        const ScheduleResult r = simulate_1f1b(uniform(pp, f, b), 0.0, 0.0, m, false);
        EXPECT_DOUBLE_EQ(r.makespan_us, (m + pp - 1) * (f + b)) << "pp=" << pp << " m=" << m << " f=" << f;
        EXPECT_DOUBLE_EQ(r.bubble_us, (pp - 1) * (f + b)) << "pp=" << pp << " m=" << m;
        for (int s = 0; s < pp; ++s) EXPECT_DOUBLE_EQ(r.busy_us[static_cast<std::size_t>(s)], m * (f + b));
      }
    }
  }
}

TEST(Schedule, FourStagesHandTimelineOfStageZero) {
  // pp=4, m=4, f=1, b=1, no transfer. Forwards ripple down: s0 F0..F2 at [0,1],[1,2],[2,3] (warm-up 3);
  // s3 F0 [3,4], B0 [4,5]; B0 climbs: s2 [5,6], s1 [6,7], s0 [7,8] -- but s0's steady F3 comes first at
  // [3,4]. Makespan (4+3)*2 = 14; s0's last pass B3 ends at 14.
  const ScheduleResult r = simulate_1f1b(uniform(4, 1.0, 1.0), 0.0, 0.0, 4, false, true);
  EXPECT_DOUBLE_EQ(r.makespan_us, 14.0);
  const auto& s0 = r.timeline[0];
  ASSERT_EQ(s0.size(), 8u);
  expect_entry(s0[0], Kind::kForward, 0, 0, 1);
  expect_entry(s0[1], Kind::kForward, 1, 1, 2);
  expect_entry(s0[2], Kind::kForward, 2, 2, 3);
  expect_entry(s0[3], Kind::kForward, 3, 3, 4);
  expect_entry(s0[4], Kind::kBackward, 0, 7, 8);
  expect_entry(s0.back(), Kind::kBackward, 3, 13, 14);
}

TEST(Schedule, UnbalancedSlowLastStage) {
  // pp=2, m=3; stage 0 f=1 b=2, stage 1 (slow) f=2 b=4, no transfer.
  //   s0: F0 [0,1]
  //   s1: F0 [1,3], B0 [3,7]
  //   s0: F1 [1,2], B0 [7,9] (waits for s1 B0)
  //   s1: F1 [7,9] (free at 7; s0 F1 ended at 2), B1 [9,13]
  //   s0: F2 [9,10], B1 [13,15]
  //   s1: F2 [13,15], B2 [15,19]
  //   s0: B2 [19,21]
  // Makespan 21 = m*(f1+b1) + (f0+b0) = 18 + 3. busy: s0 9, s1 18; bubble 21 - 18 = 3.
  std::vector<StageTimes> stages = {{1.0, 2.0}, {2.0, 4.0}};
  const ScheduleResult r = simulate_1f1b(stages, 0.0, 0.0, 3, false, true);
  EXPECT_DOUBLE_EQ(r.makespan_us, 21.0);
  expect_load(r, {9.0, 18.0}, {12.0, 3.0}, 3.0);
  expect_timeline(r.timeline[0], "F0 [0,1] F1 [1,2] B0 [7,9] F2 [9,10] B1 [13,15] B2 [19,21]");
  expect_timeline(r.timeline[1], "F0 [1,3] B0 [3,7] F1 [7,9] B1 [9,13] F2 [13,15] B2 [15,19]");
}

TEST(Schedule, UnbalancedSlowFirstStage) {
  // pp=2, m=2; stage 0 (slow, embedding) f=3 b=3, stage 1 f=1 b=1.
  //   s0: F0 [0,3], F1 [3,6] (warm-up 1, then steady F1)
  //   s1: F0 [3,4], B0 [4,5], F1 [6,7], B1 [7,8]
  //   s0: B0 [6,9] (free at 6, s1 B0 at 5), B1 [9,12]
  // Makespan 12 = m*(f0+b0) = 12, bubble 0 on the busiest stage.
  const ScheduleResult r = simulate_1f1b({{3.0, 3.0}, {1.0, 1.0}}, 0.0, 0.0, 2, false);
  EXPECT_DOUBLE_EQ(r.makespan_us, 12.0);
  EXPECT_DOUBLE_EQ(r.bubble_us, 0.0);
  EXPECT_DOUBLE_EQ(r.idle_us[1], 8.0);
}

TEST(Schedule, TransferShiftsTimelineNonBlocking) {
  // pp=2, m=2, f=1, b=2, forward transfer 0.5, backward transfer 0.25, sends overlap compute.
  //   s0 F0 [0,1]; s1 F0 [1.5,2.5], B0 [2.5,4.5]
  //   s0 F1 [1,2]; s0 B0 [4.75,6.75] (4.5 + 0.25)
  //   s1 F1 [4.5,5.5] (arrived 2.5, free 4.5), B1 [5.5,7.5]
  //   s0 B1 [7.75,9.75]. Makespan 9.75 = 9 + one forward and one backward transfer.
  const ScheduleResult r = simulate_1f1b(uniform(2, 1.0, 2.0), 0.5, 0.25, 2, false, true);
  EXPECT_DOUBLE_EQ(r.makespan_us, 9.75);
  expect_entry(r.timeline[1][0], Kind::kForward, 0, 1.5, 2.5);
  expect_entry(r.timeline[0][2], Kind::kBackward, 0, 4.75, 6.75);
  expect_entry(r.timeline[1][2], Kind::kForward, 1, 4.5, 5.5);
  expect_entry(r.timeline[0][3], Kind::kBackward, 1, 7.75, 9.75);
  EXPECT_DOUBLE_EQ(r.send_us[0], 0.0);
}

TEST(Schedule, TransferBlockingSendHoldsSender) {
  // Same as above, but each send also holds its sender:
  //   s0 F0 [0,1], send [1,1.5]; s1 F0 [1.5,2.5]; s1 B0 [2.5,4.5], send [4.5,4.75]
  //   s0 F1 [1.5,2.5], send [2.5,3]; s0 B0 [4.75,6.75]
  //   s1 F1 [4.75,5.75] (stage held by its send until 4.75), B1 [5.75,7.75], send [7.75,8]
  //   s0 B1 [8,10]. Makespan 10; stage 0 sent 2 * 0.5, stage 1 2 * 0.25.
  const ScheduleResult r = simulate_1f1b(uniform(2, 1.0, 2.0), 0.5, 0.25, 2, true, true);
  EXPECT_DOUBLE_EQ(r.makespan_us, 10.0);
  EXPECT_DOUBLE_EQ(r.send_us[0], 1.0);
  EXPECT_DOUBLE_EQ(r.send_us[1], 0.5);
  EXPECT_DOUBLE_EQ(r.busy_us[0], 6.0);
  EXPECT_DOUBLE_EQ(r.idle_us[0], 10.0 - 6.0 - 1.0);
  // F0 send F1 send B0 B1
  expect_timeline(r.timeline[0], "F0 [0,1] send-F0 [1,1.5] F1 [1.5,2.5] send-F1 [2.5,3] B0 [4.75,6.75] B1 [8,10]");
  const auto& s1 = r.timeline[1];
  ASSERT_EQ(s1.size(), 6u);  // F0 B0 send F1 B1 send
  expect_entry(s1[2], Kind::kSendBackward, 0, 4.5, 4.75);
  expect_entry(s1[3], Kind::kForward, 1, 4.75, 5.75);
  expect_entry(s1[5], Kind::kSendBackward, 1, 7.75, 8);
}

TEST(Schedule, PerBoundaryTransfers) {
  // pp=3, m=1, stages f = 1, 2, 3 and b = 2, 3, 4; forward transfers 1 (0->1), 10 (1->2), backward
  // transfers 100 (1->0), 1000 (2->1). One micro-batch: a single chain
  // 1 + 1 + 2 + 10 + 3 + 4 + 1000 + 3 + 100 + 2 = 1126.
  const ScheduleResult r = simulate_1f1b({{1.0, 2.0}, {2.0, 3.0}, {3.0, 4.0}}, std::vector<double>{1.0, 10.0},
                                         std::vector<double>{100.0, 1000.0}, 1, false);
  EXPECT_DOUBLE_EQ(r.makespan_us, 1126.0);
  EXPECT_DOUBLE_EQ(r.bubble_us, 1126.0 - 7.0);
}

TEST(Schedule, FewerMicroBatchesThanStages) {
  // pp=4, m=2, f=b=1: (2 + 3) * 2 = 10. Stage 0 runs F0 F1 then waits for B0:
  //   F0 reaches s3 at 3, s3 F0 [3,4] B0 [4,5], B0 climbs s2 [5,6], s1 [6,7], s0 [7,8];
  //   F1: s3 F1 [5,6] (arrived 4, free 5), B1 [6,7]; s2 B1 [7,8]; s1 B1 [8,9]; s0 B1 [9,10].
  const ScheduleResult r = simulate_1f1b(uniform(4, 1.0, 1.0), 0.0, 0.0, 2, false, true);
  EXPECT_DOUBLE_EQ(r.makespan_us, 10.0);
  expect_timeline(r.timeline[0], "F0 [0,1] F1 [1,2] B0 [7,8] B1 [9,10]");
  const auto& s3 = r.timeline[3];
  expect_entry(s3[2], Kind::kForward, 1, 5, 6);
  // pp=3, m=1 with unequal stages is one chain: (1+2+3) + (4+3+2) = 15.
  EXPECT_DOUBLE_EQ(simulate_1f1b({{1.0, 2.0}, {2.0, 3.0}, {3.0, 4.0}}, 0.0, 0.0, 1, false).makespan_us, 15.0);
}

TEST(Schedule, RejectsBadInput) {
  EXPECT_THROW(simulate_1f1b(uniform(2, 1.0, 1.0), 0.0, 0.0, 0, false), UserError);
  EXPECT_THROW(simulate_1f1b(std::vector<StageTimes>{}, 0.0, 0.0, 1, false), UserError);
  EXPECT_THROW(simulate_1f1b(uniform(2, -1.0, 1.0), 0.0, 0.0, 1, false), UserError);
  EXPECT_THROW(simulate_1f1b(uniform(2, 1.0, 1.0), -0.5, 0.0, 1, false), UserError);
  EXPECT_THROW(simulate_1f1b(uniform(3, 1.0, 1.0), std::vector<double>{1.0}, std::vector<double>{1.0}, 1, false), InternalError);
}

// ---- shared cores (processor sharing) ----

ScheduleInput shared_input(std::vector<StageTimes> stages, int m, double slots, double ranks_per_stage) {
  ScheduleInput input = free_transfers(std::move(stages), m);
  input.rank_slots = slots;
  input.ranks_per_stage = ranks_per_stage;
  input.record_timeline = true;
  return input;
}

// Each stage's end (its last pass or the blocking send after it) and its last backward, from the hand
// timeline of TransferBlockingSendHoldsSender: stage 0 ends with B1 [8,10], stage 1 with B1 [5.75,7.75]
// and its send to 8.
TEST(Schedule, StageEndsAndLastBackwards) {
  const ScheduleResult r = simulate_1f1b(uniform(2, 1.0, 2.0), 0.5, 0.25, 2, true);
  ASSERT_EQ(r.end_us.size(), 2u);
  EXPECT_DOUBLE_EQ(r.end_us[0], 10.0);
  EXPECT_DOUBLE_EQ(r.end_us[1], 8.0);
  expect_span(r.last_backward_start_us, r.last_backward_end_us, 0, 8.0, 10.0);
  expect_span(r.last_backward_start_us, r.last_backward_end_us, 1, 5.75, 7.75);
  // Shared cores (TwoStagesOnOneSlotHandTimeline): stage 1's last backward is stretched to [7, 10].
  const ScheduleResult shared = simulate_1f1b(shared_input(uniform(2, 1.0, 2.0), 2, 1.0, 1.0));
  EXPECT_NEAR(shared.last_backward_start_us[1], 7.0, 1e-9);
  EXPECT_NEAR(shared.last_backward_end_us[1], 10.0, 1e-9);
  EXPECT_NEAR(shared.end_us[0], 12.0, 1e-9);
}

// Each stage's first forward (micro-batch 0), what the next step's parameter gather can delay: in
// TransferBlockingSendHoldsSender stage 0's F0 is [0, 1] and stage 1's [1.5, 2.5] (after the 0.5 transfer);
// with shared cores (TwoStagesOnOneSlotHandTimeline) stage 1's F0 runs beside stage 0's F1 at half
// speed: [1, 3].
TEST(Schedule, FirstForwards) {
  const ScheduleResult r = simulate_1f1b(uniform(2, 1.0, 2.0), 0.5, 0.25, 2, true);
  ASSERT_EQ(r.first_forward_start_us.size(), 2u);
  ASSERT_EQ(r.first_forward_end_us.size(), 2u);
  expect_span(r.first_forward_start_us, r.first_forward_end_us, 0, 0.0, 1.0);
  expect_span(r.first_forward_start_us, r.first_forward_end_us, 1, 1.5, 2.5);
  const ScheduleResult shared = simulate_1f1b(shared_input(uniform(2, 1.0, 2.0), 2, 1.0, 1.0));
  EXPECT_NEAR(shared.first_forward_start_us[1], 1.0, 1e-9);
  EXPECT_NEAR(shared.first_forward_end_us[1], 3.0, 1e-9);
}

// Overlapped reduction's buckets, for a last backward over [8, 16] and a timeline free at 17:
//  - one bucket ready at the end (fraction 1), 2 long: ends at 18, 1 exposed;
//  - ready at 0.25 (10) and 0.5 (12), 1 each: end at 11 and 13, before 17: nothing exposed;
//  - ready at 0 (8), 10 long, then at 0.5 (12), 1 long: the second waits for the first: 18, then 19: 2;
//  - none: 0.
TEST(Schedule, OverlappedReductionExposesOnlyWhatOutlastsTheTimeline) {
  EXPECT_DOUBLE_EQ(exposed_reduction_us({{1.0, 2.0}}, 8.0, 16.0, 17.0), 1.0);
  EXPECT_DOUBLE_EQ(exposed_reduction_us({{0.25, 1.0}, {0.5, 1.0}}, 8.0, 16.0, 17.0), 0.0);
  EXPECT_DOUBLE_EQ(exposed_reduction_us({{0.0, 10.0}, {0.5, 1.0}}, 8.0, 16.0, 17.0), 2.0);
  EXPECT_DOUBLE_EQ(exposed_reduction_us({}, 8.0, 16.0, 17.0), 0.0);
  EXPECT_EQ(user_error_of([] {
              exposed_reduction_us({{1.5, 1.0}}, 8.0, 16.0, 17.0);
            }),
            "overlapped reduction: bucket 0 completes after a fraction 1.500000 of the backward; it must lie in [0, 1]");
  EXPECT_THROW(exposed_reduction_us({{0.5, -1.0}}, 8.0, 16.0, 17.0), UserError);
  EXPECT_THROW(exposed_reduction_us({{0.5, 1.0}}, 8.0, 7.0, 17.0), UserError);
}

// Overlapped parameter gather's wait, for a next forward of 8 us (hand-derived):
//  - all-gathers from 0, forward from 0: bucket 0 (first parameters, fraction 0) ready at 2, needed at 0:
//    2; bucket 1 (after half the parameters) ready at 4, needed at 0 + 8 * 0.5 = 4: 0. Wait 2;
//  - the forward starts at 3 instead (a later stage): ready 2 <= 3, ready 4 <= 7: no wait;
//  - bucket 1 takes 6: ready at 1 and 7, needed at 0 and 0 + 8 * 0.25 = 2: 1 and 5; the forward, having
//    waited 1, reaches bucket 1 at 3 and waits until 7: 5 in all;
//  - the update ended 3 before the next step (gathers from -3): ready at -1 and 1, needed at 0 and 4: 0;
//  - a long first bucket (6, three quarters of the bytes): ready 6, needed 0: 6; then ready 7, needed
//    8 * 0.75 = 6: 1. Wait 6;
//  - no buckets: 0.
TEST(Schedule, OverlappedParameterGatherDelaysTheFirstForwardByItsLargestWait) {
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{0.0, 2.0}, {0.5, 2.0}}, 0.0, 0.0, 8.0), 2.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{0.0, 2.0}, {0.5, 2.0}}, 0.0, 3.0, 8.0), 0.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{0.0, 1.0}, {0.25, 6.0}}, 0.0, 0.0, 8.0), 5.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{0.0, 2.0}, {0.5, 2.0}}, -3.0, 0.0, 8.0), 0.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{0.0, 6.0}, {0.75, 1.0}}, 0.0, 0.0, 8.0), 6.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({}, 5.0, 0.0, 8.0), 0.0);
  EXPECT_EQ(user_error_of([] {
              exposed_parameter_gather_us({{0.0, 1.0}, {1.5, 1.0}}, 0.0, 0.0, 8.0);
            }),
            "overlapped parameter gather: bucket 1's first parameter lies after a fraction 1.500000 of the parameters; it "
            "must lie in [0, 1]");
  EXPECT_THROW(exposed_parameter_gather_us({{-0.5, 1.0}}, 0.0, 0.0, 8.0), UserError);
  EXPECT_THROW(exposed_parameter_gather_us({{0.5, -1.0}}, 0.0, 0.0, 8.0), UserError);
  EXPECT_THROW(exposed_parameter_gather_us({{0.5, 1.0}}, 0.0, 0.0, -8.0), UserError);
  EXPECT_THROW(exposed_parameter_gather_us({{0.5, 1.0}}, std::numeric_limits<double>::infinity(), 0.0, 8.0), UserError);
}

// Megatron-LM's interleaved order (pp 2, v 2, m 4): rank 0 warms up with (2-0-1)*2 + (2-1)*2 = 4
// forwards, rank 1 with 2; forward k runs chunk (k mod 4) / 2 on micro-batch (k / 4)*2 + k mod 2, backward
// k chunk 1 - (k mod 4) / 2 on the same micro-batch. With v 1 it is the non-interleaved order.
TEST(ScheduleInterleaved, OrderIsMegatrons) {
  const auto text = [](const std::vector<TimelineEntry>& order) {
    std::string out;
    for (const TimelineEntry& e : order)
      out += to_string(e.kind) + std::to_string(e.chunk) + "." + std::to_string(e.micro_batch) + " ";
    return out;
  };
  EXPECT_EQ(text(interleaved_order(2, 0, 4, 2)),
            "F0.0 F0.1 F1.0 F1.1 F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 B1.2 B1.3 B0.2 B0.3 ");
  EXPECT_EQ(text(interleaved_order(2, 1, 4, 2)),
            "F0.0 F0.1 F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 B1.2 F1.3 B1.3 B0.2 B0.3 ");
  // m == pp: every forward is warm-up, as Megatron-LM does.
  EXPECT_EQ(text(interleaved_order(2, 1, 2, 2)), "F0.0 F0.1 F1.0 F1.1 B1.0 B1.1 B0.0 B0.1 ");
  EXPECT_EQ(text(interleaved_order(4, 1, 5, 1)), text(one_f_one_b_order(4, 1, 5)));
}

// pp 2, v 2, m 2, chunk passes f 1, b 2, free transfers. Virtual stages: 0 = (chunk 0, rank 0),
// 1 = (0, 1), 2 = (1, 0), 3 = (1, 1). m == pp: both ranks run F0.0 F0.1 F1.0 F1.1 B1.0 B1.1 B0.0 B0.1.
//   r0 F0.0 [0,1] F0.1 [1,2]; r1 F0.0 [1,2] F0.1 [2,3]; r0 F1.0 [2,3] (after r1 F0.0) F1.1 [3,4];
//   r1 F1.0 [3,4] (after r0 F1.0), F1.1 [4,5], B1.0 [5,7] (last virtual stage: after its own forward),
//   B1.1 [7,9]; r0 B1.0 [7,9], B1.1 [9,11]; r1 B0.0 [9,11] (after r0 B1.0), B0.1 [11,13];
//   r0 B0.0 [11,13], B0.1 [13,15]. Makespan 15 = m*v*(f+b) + (pp-1)*(f+b) = 12 + 3.
TEST(ScheduleInterleaved, TwoRanksTwoChunksHandTimeline) {
  ScheduleInput input = free_transfers(uniform(4, 1.0, 2.0), 2, 2);
  input.record_timeline = true;
  const ScheduleResult r = simulate_1f1b(input);
  EXPECT_DOUBLE_EQ(r.makespan_us, 15.0);
  ASSERT_EQ(r.timeline.size(), 2u);
  ASSERT_EQ(r.timeline[0].size(), 8u);
  ASSERT_EQ(r.timeline[1].size(), 8u);
  const double r0[8][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {7, 9}, {9, 11}, {11, 13}, {13, 15}};
  const double r1[8][2] = {{1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 7}, {7, 9}, {9, 11}, {11, 13}};
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_DOUBLE_EQ(r.timeline[0][i].start_us, r0[i][0]) << "rank 0 pass " << i;
    EXPECT_DOUBLE_EQ(r.timeline[0][i].end_us, r0[i][1]) << "rank 0 pass " << i;
    EXPECT_DOUBLE_EQ(r.timeline[1][i].start_us, r1[i][0]) << "rank 1 pass " << i;
    EXPECT_DOUBLE_EQ(r.timeline[1][i].end_us, r1[i][1]) << "rank 1 pass " << i;
  }
  EXPECT_EQ(r.timeline[1][4].kind, Kind::kBackward);
  EXPECT_EQ(r.timeline[1][4].chunk, 1);
  EXPECT_DOUBLE_EQ(r.busy_us[0], 12.0);
  EXPECT_DOUBLE_EQ(r.bubble_us, 3.0);
  EXPECT_DOUBLE_EQ(r.last_backward_start_us[0], 13.0);
  EXPECT_DOUBLE_EQ(r.end_us[1], 13.0);
}

// Per chunk, its first forward (micro-batch 0) and last backward (micro-batch m-1), from the hand timeline
// of TwoRanksTwoChunksHandTimeline: rank 0 runs F0.0 [0,1], F1.0 [2,3], B1.1 [9,11], B0.1 [13,15]; rank 1
// F0.0 [1,2], F1.0 [3,4], B1.1 [7,9], B0.1 [11,13]. Chunk 1's last backward comes first; chunk 0's is the
// rank's last. With v 1 the one chunk's are the stage's own.
TEST(ScheduleInterleaved, ChunksFirstForwardsAndLastBackwards) {
  ScheduleInput input = free_transfers(uniform(4, 1.0, 2.0), 2, 2);
  const ScheduleResult r = simulate_1f1b(input);
  ASSERT_EQ(r.chunk_last_backward_start_us.size(), 2u);
  ASSERT_EQ(r.chunk_first_forward_start_us.size(), 2u);
  const double first_forward[2][2][2] = {{{0, 1}, {2, 3}}, {{1, 2}, {3, 4}}};  // [rank][chunk][start, end]
  const double last_backward[2][2][2] = {{{13, 15}, {9, 11}}, {{11, 13}, {7, 9}}};
  for (std::size_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(r.chunk_last_backward_start_us[rank].size(), 2u);
    for (std::size_t chunk = 0; chunk < 2; ++chunk) {
      EXPECT_DOUBLE_EQ(r.chunk_first_forward_start_us[rank][chunk], first_forward[rank][chunk][0]) << rank << "," << chunk;
      EXPECT_DOUBLE_EQ(r.chunk_first_forward_end_us[rank][chunk], first_forward[rank][chunk][1]) << rank << "," << chunk;
      EXPECT_DOUBLE_EQ(r.chunk_last_backward_start_us[rank][chunk], last_backward[rank][chunk][0]) << rank << "," << chunk;
      EXPECT_DOUBLE_EQ(r.chunk_last_backward_end_us[rank][chunk], last_backward[rank][chunk][1]) << rank << "," << chunk;
    }
    // chunk 0's last backward is the rank's last, its first forward the rank's first
    EXPECT_DOUBLE_EQ(r.chunk_last_backward_start_us[rank][0], r.last_backward_start_us[rank]);
    EXPECT_DOUBLE_EQ(r.chunk_first_forward_start_us[rank][0], r.first_forward_start_us[rank]);
  }
  // m 4 (OrderIsMegatrons' order): rank 0's chunk 1 ends its backwards with B1.3, before B0.2 B0.3.
  input.num_micro_batches = 4;
  input.record_timeline = true;
  const ScheduleResult four = simulate_1f1b(input);
  const std::vector<TimelineEntry>& rank0 = four.timeline[0];
  ASSERT_EQ(rank0.size(), 16u);
  EXPECT_DOUBLE_EQ(four.chunk_last_backward_start_us[0][1], rank0[13].start_us);  // B1.3
  EXPECT_DOUBLE_EQ(four.chunk_last_backward_end_us[0][1], rank0[13].end_us);
  EXPECT_DOUBLE_EQ(four.chunk_last_backward_start_us[0][0], rank0[15].start_us);  // B0.3
  EXPECT_DOUBLE_EQ(four.chunk_first_forward_start_us[0][1], rank0[2].start_us);   // F1.0
  // v 1: the stage's own.
  const ScheduleResult one = simulate_1f1b(uniform(2, 1.0, 2.0), 0.5, 0.25, 2, true);
  ASSERT_EQ(one.chunk_last_backward_start_us[1].size(), 1u);
  EXPECT_DOUBLE_EQ(one.chunk_last_backward_start_us[1][0], 5.75);
  EXPECT_DOUBLE_EQ(one.chunk_last_backward_end_us[1][0], 7.75);
  EXPECT_DOUBLE_EQ(one.chunk_first_forward_start_us[1][0], 1.5);
  EXPECT_DOUBLE_EQ(one.chunk_first_forward_end_us[1][0], 2.5);
}

// Overlapped reduction over a rank's chunks, on rank 0 of the hand timeline above (chunk 1's last backward
// [9, 11], chunk 0's [13, 15], the timeline free at 15):
//  - chunk 1 one bucket at its end (11), 3 long: 11 -> 14; chunk 0 buckets at 0.5 (14) and 1 (15), 1 each:
//    14 -> 15, 15 -> 16: 1 exposed. Had chunk 1's bucket waited for the rank's last backward (ready at 15),
//    15 -> 18 -> 19 -> 20: 5;
//  - chunk 1's bucket 6 long: 11 -> 17, then chunk 0's 17 -> 18 -> 19: 4 (the chain is shared);
//  - the chunks given the other way round: the same (the chain runs in completion order);
//  - a chunk without buckets adds nothing.
TEST(ScheduleInterleaved, OverlappedReductionStartsEachChunksBucketsInItsLastBackward) {
  const ChunkReduction chunk1{{{1.0, 3.0}}, 9.0, 11.0};
  const ChunkReduction chunk0{{{0.5, 1.0}, {1.0, 1.0}}, 13.0, 15.0};
  EXPECT_DOUBLE_EQ(exposed_reduction_us({chunk0, chunk1}, 15.0), 1.0);
  EXPECT_DOUBLE_EQ(exposed_reduction_us({{{{1.0, 3.0}, {0.5, 1.0}, {1.0, 1.0}}, 13.0, 15.0}}, 15.0), 4.0);  // not 5: sorted
  const ChunkReduction long1{{{1.0, 6.0}}, 9.0, 11.0};
  EXPECT_DOUBLE_EQ(exposed_reduction_us({chunk0, long1}, 15.0), 4.0);
  EXPECT_DOUBLE_EQ(exposed_reduction_us({long1, chunk0}, 15.0), 4.0);
  EXPECT_DOUBLE_EQ(exposed_reduction_us({chunk0, {{}, 9.0, 11.0}}, 15.0), 1.0);
  EXPECT_DOUBLE_EQ(exposed_reduction_us(std::vector<ChunkReduction>{}, 15.0), 0.0);
  EXPECT_THROW(exposed_reduction_us({chunk0, {{{0.5, 1.0}}, 11.0, 9.0}}, 15.0), UserError);
}

// Overlapped parameter gather over a rank's chunks, rank 0 above in the next step: chunk 0's first forward
// [0, 1], chunk 1's [2, 3]; the all-gathers chain from the update's end, chunk 0's first:
//  - from -2: chunk 0's bucket (fraction 0) 1 long: ready -1, needed 0: no wait; chunk 1's 4 long: ready 3,
//    needed 2: 1;
//  - chunk 0's 3 long: ready 1, needed 0: 1; chunk 1's 2 long: ready 3, needed 2 + 1 (the first wait
//    shifts it): none. 1 in all;
//  - both 3 long: 1, then ready 4, needed 3: 1 more. 2 in all.
TEST(ScheduleInterleaved, OverlappedParameterGatherWaitsBeforeEachChunksFirstForward) {
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{{{0.0, 1.0}}, 0.0, 1.0}, {{{0.0, 4.0}}, 2.0, 1.0}}, -2.0), 1.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{{{0.0, 3.0}}, 0.0, 1.0}, {{{0.0, 2.0}}, 2.0, 1.0}}, -2.0), 1.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us({{{{0.0, 3.0}}, 0.0, 1.0}, {{{0.0, 3.0}}, 2.0, 1.0}}, -2.0), 2.0);
  EXPECT_DOUBLE_EQ(exposed_parameter_gather_us(std::vector<ChunkGathers>{}, -2.0), 0.0);
  EXPECT_THROW(exposed_parameter_gather_us({{{{0.0, 1.0}}, 0.0, -1.0}}, 0.0), UserError);
}

// Balanced chunks, free transfers: the bubble is Megatron-LM's (pp-1)/(v*m) of the ideal time m*v*(f+b),
// i.e. (pp-1)*(f+b), for every v, with b = 2f as for a transformer layer (f 1, b 2, times in us).
TEST(ScheduleInterleaved, BalancedBubbleIsMegatrons) {
  for (const int pp : {2, 4}) {
    for (const int v : {1, 2, 3}) {
      for (const int m : {pp, 2 * pp, 4 * pp}) {
        const ScheduleResult r = simulate_1f1b(free_transfers(uniform(pp * v, 1.0, 2.0), m, v));
        const double ideal_us = m * v * 3.0;
        EXPECT_DOUBLE_EQ(r.makespan_us, ideal_us + (pp - 1) * 3.0) << "pp " << pp << " v " << v << " m " << m;
        EXPECT_DOUBLE_EQ(r.bubble_us / ideal_us, (pp - 1.0) / (v * m)) << "pp " << pp << " v " << v << " m " << m;
      }
    }
  }
}

// Megatron-LM's constraint: m a multiple of pp with v > 1; and the stage count must be pp * v.
TEST(ScheduleInterleaved, RefusesWhatMegatronRefuses) {
  ScheduleInput input = free_transfers(uniform(4, 1.0, 2.0), 3, 2);
  try {
    simulate_1f1b(input);
    FAIL() << "m 3 with pp 2 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of pp 2"), std::string::npos) << e.what();
  }
  input.num_micro_batches = 4;
  input.virtual_stages = 3;  // 4 stage times are not pp * 3
  EXPECT_THROW(simulate_1f1b(input), UserError);
}

TEST(ScheduleShared, TwoStagesOnOneSlotHandTimeline) {
  // pp=2, m=2, f=1, b=2, one rank per stage, one slot: two stages computing at once run at half speed.
  // t=0 s0 F0 alone -> 1. t=1 s0 F1 and s1 F0 together at 1/2 -> both end at 3.
  // t=3 s1 B0 alone (s0 waits for it) -> 5. t=5 s1 F1 and s0 B0 at 1/2: F1 (1) ends at 7, B0 has 1 left.
  // t=7 s1 B1 and s0 B0 at 1/2: B0 ends at 9, B1 has 1 left. t=9 s1 B1 alone -> 10. t=10 s0 B1 -> 12.
  const ScheduleResult r = simulate_1f1b(shared_input(uniform(2, 1.0, 2.0), 2, 1.0, 1.0));
  EXPECT_NEAR(r.makespan_us, 12.0, 1e-9);
  expect_timeline(r.timeline[0], "F0 [0,1] F1 [1,3] B0 [5,9] B1 [10,12]");
  expect_timeline(r.timeline[1], "F0 [1,3] B0 [3,5] F1 [5,7] B1 [7,10]");
  EXPECT_NEAR(r.busy_us[0], 9.0, 1e-9);  // 1 + 2 + 4 + 2: stretched passes count whole
  EXPECT_NEAR(r.busy_us[1], 9.0, 1e-9);  // 2 + 2 + 2 + 3
}

TEST(ScheduleShared, DataParallelRanksOnHalfTheCoresTakeTwiceAsLong) {
  // pp=1, 4 ranks in lockstep on 2 slots: every pass at rate 1/2: 2 * 3 * (1 + 2) = 18.
  EXPECT_NEAR(simulate_1f1b(shared_input(uniform(1, 1.0, 2.0), 3, 2.0, 4.0)).makespan_us, 18.0, 1e-9);
  // Enough slots: unchanged, 3 * (1 + 2) = 9.
  EXPECT_NEAR(simulate_1f1b(shared_input(uniform(1, 1.0, 2.0), 3, 4.0, 4.0)).makespan_us, 9.0, 1e-9);
}

TEST(ScheduleShared, FixedPartDoesNotStretch) {
  // pp=1, m=1, 4 ranks on 2 slots; forward 3 of which 1 fixed (TP collectives), backward 2:
  // forward 2 / (1/2) + 1 = 5, backward 2 / (1/2) = 4: 9.
  StageTimes stage{3.0, 2.0, 1.0, 0.0};
  EXPECT_NEAR(simulate_1f1b(shared_input({stage}, 1, 2.0, 4.0)).makespan_us, 9.0, 1e-9);
}

TEST(ScheduleShared, NeverShortSlotsGiveTheUnsharedResult) {
  // Unbalanced stages, per-boundary transfers, blocking and not, fixed parts: with more slots than
  // ranks the event simulation must agree with the list scheduling one.
  for (bool blocking : {false, true}) {
    for (int m : {1, 3, 7}) {
      std::vector<StageTimes> stages = {{3.0, 5.0, 0.5, 1.0}, {2.25, 4.5, 0.0, 0.0}, {4.0, 6.0, 1.0, 2.0}, {1.5, 7.0, 0.0, 3.0}};
      ScheduleInput unshared = shared_input(stages, m, 0.0, 1.0);
      unshared.p2p_forward_us = {0.25, 1.0, 0.5};
      unshared.p2p_backward_us = {0.75, 0.125, 2.0};
      unshared.blocking_send = blocking;
      ScheduleInput shared = unshared;
      shared.rank_slots = 64.0;
      shared.ranks_per_stage = 2.0;
      const ScheduleResult a = simulate_1f1b(unshared);
      const ScheduleResult b = simulate_1f1b(shared);
      EXPECT_NEAR(a.makespan_us, b.makespan_us, 1e-9) << "m " << m << " blocking " << blocking;
      for (std::size_t s = 0; s < stages.size(); ++s) {
        EXPECT_NEAR(a.busy_us[s], b.busy_us[s], 1e-9);
        EXPECT_NEAR(a.send_us[s], b.send_us[s], 1e-9);
        ASSERT_EQ(a.timeline[s].size(), b.timeline[s].size());
        for (std::size_t k = 0; k < a.timeline[s].size(); ++k) {
          EXPECT_NEAR(a.timeline[s][k].start_us, b.timeline[s][k].start_us, 1e-9);
          EXPECT_NEAR(a.timeline[s][k].end_us, b.timeline[s][k].end_us, 1e-9);
        }
      }
    }
  }
}

TEST(ScheduleShared, RejectsBadSharingInput) {
  EXPECT_THROW(simulate_1f1b(shared_input(uniform(1, 1.0, 2.0), 1, -1.0, 1.0)), UserError);
  EXPECT_THROW(simulate_1f1b(shared_input(uniform(1, 1.0, 2.0), 1, 2.0, 0.0)), UserError);
  EXPECT_THROW(simulate_1f1b(shared_input({StageTimes{1.0, 2.0, 1.5, 0.0}}, 1, 2.0, 1.0)), UserError);
}

}  // namespace
}  // namespace itertime::predict
