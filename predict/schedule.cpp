// schedule.cpp: the 1F1B event simulation of schedule.hpp.
// Invariants: every pass is scheduled exactly once, after all its dependencies; a sweep that schedules
// nothing while passes remain is a deadlock, which 1F1B never has (ITERTIME_CHECK).
#include "predict/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/errors.hpp"

namespace itertime::predict {
namespace {

constexpr double kNotDone = -1.0;

void require_time(double value_us, const std::string& what) {
  if (!std::isfinite(value_us) || value_us < 0.0) {
    throw UserError("1F1B schedule: " + what + " is " + std::to_string(value_us) +
                    " us; times must be finite and non-negative");
  }
}

}  // namespace

std::string to_string(PassKind kind) {
  switch (kind) {
    case PassKind::kForward: return "F";
    case PassKind::kBackward: return "B";
    case PassKind::kSendForward: return "send-F";
    case PassKind::kSendBackward: return "send-B";
  }
  throw InternalError("unknown PassKind", __FILE__, __LINE__);
}

std::vector<TimelineEntry> one_f_one_b_order(int pp, int stage, int m) {
  ITERTIME_CHECK(pp >= 1 && stage >= 0 && stage < pp && m >= 1, "1F1B order needs 0 <= stage < pp and m >= 1");
  const int warmup = std::min(pp - stage - 1, m);
  const int remaining = m - warmup;
  std::vector<TimelineEntry> order;
  order.reserve(static_cast<std::size_t>(2 * m));
  int next_forward = 0;
  int next_backward = 0;
  for (int i = 0; i < warmup; ++i) order.push_back({PassKind::kForward, next_forward++, 0.0, 0.0});
  for (int i = 0; i < remaining; ++i) {
    order.push_back({PassKind::kForward, next_forward++, 0.0, 0.0});
    order.push_back({PassKind::kBackward, next_backward++, 0.0, 0.0});
  }
  for (int i = 0; i < warmup; ++i) order.push_back({PassKind::kBackward, next_backward++, 0.0, 0.0});
  return order;
}

ScheduleResult simulate_1f1b(const ScheduleInput& input) {
  const int pp = static_cast<int>(input.stages.size());
  const int m = input.num_micro_batches;
  if (pp < 1) throw UserError("1F1B schedule: no pipeline stages given");
  if (m < 1) throw UserError("1F1B schedule: " + std::to_string(m) + " micro-batches; need at least 1");
  ITERTIME_CHECK(static_cast<int>(input.p2p_forward_us.size()) == pp - 1 &&
                     static_cast<int>(input.p2p_backward_us.size()) == pp - 1,
                 "p2p transfer vectors need pp-1 = " + std::to_string(pp - 1) + " entries");
  for (int s = 0; s < pp; ++s) {
    require_time(input.stages[static_cast<std::size_t>(s)].forward_us, "stage " + std::to_string(s) + " forward");
    require_time(input.stages[static_cast<std::size_t>(s)].backward_us, "stage " + std::to_string(s) + " backward");
  }
  for (int j = 0; j + 1 < pp; ++j) {
    require_time(input.p2p_forward_us[static_cast<std::size_t>(j)], "forward transfer at boundary " + std::to_string(j));
    require_time(input.p2p_backward_us[static_cast<std::size_t>(j)], "backward transfer at boundary " + std::to_string(j));
  }

  const auto idx = [m](int s, int i) { return static_cast<std::size_t>(s) * static_cast<std::size_t>(m) + static_cast<std::size_t>(i); };
  const std::size_t cells = static_cast<std::size_t>(pp) * static_cast<std::size_t>(m);
  std::vector<double> forward_end_us(cells, kNotDone);
  std::vector<double> backward_end_us(cells, kNotDone);
  std::vector<std::vector<TimelineEntry>> orders(static_cast<std::size_t>(pp));
  for (int s = 0; s < pp; ++s) orders[static_cast<std::size_t>(s)] = one_f_one_b_order(pp, s, m);
  std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
  std::vector<double> free_at_us(static_cast<std::size_t>(pp), 0.0);

  ScheduleResult result;
  result.busy_us.assign(static_cast<std::size_t>(pp), 0.0);
  result.send_us.assign(static_cast<std::size_t>(pp), 0.0);
  result.idle_us.assign(static_cast<std::size_t>(pp), 0.0);
  if (input.record_timeline) result.timeline.assign(static_cast<std::size_t>(pp), {});

  std::size_t remaining = 2 * cells;
  while (remaining > 0) {
    std::size_t scheduled = 0;
    for (int s = 0; s < pp; ++s) {
      const auto su = static_cast<std::size_t>(s);
      const StageTimes& times = input.stages[su];
      while (next[su] < orders[su].size()) {
        const TimelineEntry& pass = orders[su][next[su]];
        const int i = pass.micro_batch;
        double ready_us = free_at_us[su];
        double duration_us = 0.0;
        double send_after_us = 0.0;  // transfer that follows this pass on this stage's timeline
        PassKind send_kind = PassKind::kSendForward;
        if (pass.kind == PassKind::kForward) {
          if (s > 0) {
            const double upstream_us = forward_end_us[idx(s - 1, i)];
            if (upstream_us == kNotDone) break;
            ready_us = std::max(ready_us, upstream_us + input.p2p_forward_us[su - 1]);
          }
          duration_us = times.forward_us;
          if (s < pp - 1) send_after_us = input.p2p_forward_us[su];
        } else {
          ITERTIME_CHECK(forward_end_us[idx(s, i)] != kNotDone, "1F1B order runs a backward before its forward");
          if (s < pp - 1) {
            const double downstream_us = backward_end_us[idx(s + 1, i)];
            if (downstream_us == kNotDone) break;
            ready_us = std::max(ready_us, downstream_us + input.p2p_backward_us[su]);
          }
          duration_us = times.backward_us;
          if (s > 0) send_after_us = input.p2p_backward_us[su - 1];
          send_kind = PassKind::kSendBackward;
        }
        const double end_us = ready_us + duration_us;
        (pass.kind == PassKind::kForward ? forward_end_us : backward_end_us)[idx(s, i)] = end_us;
        result.busy_us[su] += duration_us;
        free_at_us[su] = end_us;
        if (input.record_timeline) result.timeline[su].push_back({pass.kind, i, ready_us, end_us});
        const bool sends = (pass.kind == PassKind::kForward) ? (s < pp - 1) : (s > 0);
        if (input.blocking_send && sends) {
          free_at_us[su] = end_us + send_after_us;
          result.send_us[su] += send_after_us;
          if (input.record_timeline) result.timeline[su].push_back({send_kind, i, end_us, end_us + send_after_us});
        }
        result.makespan_us = std::max(result.makespan_us, free_at_us[su]);
        ++next[su];
        ++scheduled;
        --remaining;
      }
    }
    ITERTIME_CHECK(scheduled > 0, "1F1B simulation made no progress (deadlock in the pass order)");
  }

  double busiest_us = 0.0;
  for (int s = 0; s < pp; ++s) {
    const auto su = static_cast<std::size_t>(s);
    result.idle_us[su] = std::max(0.0, result.makespan_us - result.busy_us[su] - result.send_us[su]);
    busiest_us = std::max(busiest_us, result.busy_us[su]);
  }
  result.bubble_us = result.makespan_us - busiest_us;
  return result;
}

ScheduleResult simulate_1f1b(const std::vector<StageTimes>& stages, double p2p_forward_us, double p2p_backward_us,
                             int num_micro_batches, bool blocking_send, bool record_timeline) {
  const std::size_t boundaries = stages.empty() ? 0 : stages.size() - 1;
  return simulate_1f1b(stages, std::vector<double>(boundaries, p2p_forward_us),
                       std::vector<double>(boundaries, p2p_backward_us), num_micro_batches, blocking_send,
                       record_timeline);
}

ScheduleResult simulate_1f1b(const std::vector<StageTimes>& stages, const std::vector<double>& p2p_forward_us,
                             const std::vector<double>& p2p_backward_us, int num_micro_batches, bool blocking_send,
                             bool record_timeline) {
  ScheduleInput input;
  input.stages = stages;
  input.p2p_forward_us = p2p_forward_us;
  input.p2p_backward_us = p2p_backward_us;
  input.num_micro_batches = num_micro_batches;
  input.blocking_send = blocking_send;
  input.record_timeline = record_timeline;
  return simulate_1f1b(input);
}

}  // namespace itertime::predict
