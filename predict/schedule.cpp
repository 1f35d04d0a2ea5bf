// schedule.cpp: the 1F1B event simulation of schedule.hpp.
// Invariants: every pass is scheduled exactly once, after all its dependencies; a sweep that schedules
// nothing while passes remain is a deadlock, which 1F1B never has (ITERTIME_CHECK).
#include "predict/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

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

// Idle time per stage and the bubble, from the makespan, busy and send times.
ScheduleResult finish(ScheduleResult result) {
  double busiest_us = 0.0;
  for (std::size_t s = 0; s < result.busy_us.size(); ++s) {
    result.idle_us[s] = std::max(0.0, result.makespan_us - result.busy_us[s] - result.send_us[s]);
    busiest_us = std::max(busiest_us, result.busy_us[s]);
  }
  result.bubble_us = result.makespan_us - busiest_us;
  return result;
}

// Processor sharing (see schedule.hpp): a time-ordered event simulation. Each stage is idle, in the
// shared part of a pass, in its fixed part, or held by a blocking send.
ScheduleResult simulate_shared(const ScheduleInput& input, const std::vector<std::vector<TimelineEntry>>& orders) {
  const int pp = static_cast<int>(input.stages.size());
  const int m = input.num_micro_batches;
  const auto idx = [m](int s, int i) { return static_cast<std::size_t>(s) * static_cast<std::size_t>(m) + static_cast<std::size_t>(i); };
  const std::size_t cells = static_cast<std::size_t>(pp) * static_cast<std::size_t>(m);
  std::vector<double> forward_end_us(cells, kNotDone), backward_end_us(cells, kNotDone);
  enum class Phase { kIdle, kShared, kFixed, kSending };
  struct State {
    Phase phase = Phase::kIdle;
    double remaining = 0;  // work (shared) or time (fixed, sending) left, microseconds
    double pass_start = 0;
    double send_start = 0;
    std::size_t next = 0;  // index in the stage's order
  };
  std::vector<State> state(static_cast<std::size_t>(pp));
  ScheduleResult result;
  result.busy_us.assign(static_cast<std::size_t>(pp), 0.0);
  result.send_us.assign(static_cast<std::size_t>(pp), 0.0);
  result.idle_us.assign(static_cast<std::size_t>(pp), 0.0);
  if (input.record_timeline) result.timeline.assign(static_cast<std::size_t>(pp), {});

  // When the dependencies of stage s's next pass are met: its ready time; else kNotDone.
  auto ready_at = [&](int s) {
    const auto su = static_cast<std::size_t>(s);
    const TimelineEntry& pass = orders[su][state[su].next];
    const int i = pass.micro_batch;
    if (pass.kind == PassKind::kForward) {
      if (s == 0) return 0.0;
      const double upstream = forward_end_us[idx(s - 1, i)];
      return upstream == kNotDone ? kNotDone : upstream + input.p2p_forward_us[su - 1];
    }
    if (s == pp - 1) return forward_end_us[idx(s, i)];
    const double downstream = backward_end_us[idx(s + 1, i)];
    return downstream == kNotDone ? kNotDone : downstream + input.p2p_backward_us[su];
  };
  auto pass_times = [&](int s) {
    const StageTimes& times = input.stages[static_cast<std::size_t>(s)];
    const bool forward = orders[static_cast<std::size_t>(s)][state[static_cast<std::size_t>(s)].next].kind == PassKind::kForward;
    const double total = forward ? times.forward_us : times.backward_us;
    const double fixed = forward ? times.forward_fixed_us : times.backward_fixed_us;
    return std::make_pair(total - fixed, fixed);
  };

  double now = 0;
  std::size_t remaining_passes = 2 * cells;
  double scale = 1.0;  // for the "reached zero" tolerance
  for (const StageTimes& t : input.stages) scale = std::max({scale, t.forward_us, t.backward_us});
  const double epsilon = 1e-12 * scale * static_cast<double>(2 * m + pp);

  // Moves every stage as far as it can go at `now` without time passing.
  auto settle = [&]() {
    for (bool moved = true; moved;) {
      moved = false;
      for (int s = 0; s < pp; ++s) {
        State& st = state[static_cast<std::size_t>(s)];
        const auto su = static_cast<std::size_t>(s);
        if (st.phase == Phase::kIdle && st.next < orders[su].size()) {
          const double ready = ready_at(s);
          if (ready != kNotDone && ready <= now + epsilon) {
            st.phase = Phase::kShared;
            st.remaining = pass_times(s).first;
            st.pass_start = now;
            moved = true;
          }
        }
        if (st.phase == Phase::kShared && st.remaining <= epsilon) {
          st.phase = Phase::kFixed;
          st.remaining = pass_times(s).second;
          moved = true;
        }
        if (st.phase == Phase::kFixed && st.remaining <= epsilon) {
          const TimelineEntry& pass = orders[su][st.next];
          (pass.kind == PassKind::kForward ? forward_end_us : backward_end_us)[idx(s, pass.micro_batch)] = now;
          result.busy_us[su] += now - st.pass_start;
          if (input.record_timeline) result.timeline[su].push_back({pass.kind, pass.micro_batch, st.pass_start, now});
          const bool forward = pass.kind == PassKind::kForward;
          const bool sends = forward ? (s < pp - 1) : (s > 0);
          const double transfer = !sends ? 0.0 : forward ? input.p2p_forward_us[su] : input.p2p_backward_us[su - 1];
          ++st.next;
          --remaining_passes;
          if (input.blocking_send && sends) {
            st.phase = Phase::kSending;
            st.remaining = transfer;
            st.send_start = now;
            result.send_us[su] += transfer;
            if (input.record_timeline) {
              result.timeline[su].push_back({forward ? PassKind::kSendForward : PassKind::kSendBackward, pass.micro_batch, now, now + transfer});
            }
          } else {
            st.phase = Phase::kIdle;
          }
          result.makespan_us = std::max(result.makespan_us, now);
          moved = true;
        }
        if (st.phase == Phase::kSending && st.remaining <= epsilon) {
          st.phase = Phase::kIdle;
          result.makespan_us = std::max(result.makespan_us, now);
          moved = true;
        }
      }
    }
  };

  settle();
  while (remaining_passes > 0 || std::any_of(state.begin(), state.end(), [](const State& st) { return st.phase != Phase::kIdle; })) {
    int shared = 0;
    for (const State& st : state) shared += st.phase == Phase::kShared ? 1 : 0;
    const double demand = static_cast<double>(shared) * input.ranks_per_stage;
    const double rate = demand > input.rank_slots ? input.rank_slots / demand : 1.0;
    double step = std::numeric_limits<double>::infinity();
    for (int s = 0; s < pp; ++s) {
      const State& st = state[static_cast<std::size_t>(s)];
      if (st.phase == Phase::kShared) step = std::min(step, st.remaining / rate);
      if (st.phase == Phase::kFixed || st.phase == Phase::kSending) step = std::min(step, st.remaining);
      if (st.phase == Phase::kIdle && st.next < orders[static_cast<std::size_t>(s)].size()) {
        const double ready = ready_at(s);
        if (ready != kNotDone) step = std::min(step, ready - now);
      }
    }
    ITERTIME_CHECK(std::isfinite(step), "1F1B simulation with shared cores made no progress (deadlock in the pass order)");
    step = std::max(step, 0.0);
    now += step;
    for (State& st : state) {
      if (st.phase == Phase::kShared) st.remaining -= rate * step;
      if (st.phase == Phase::kFixed || st.phase == Phase::kSending) st.remaining -= step;
    }
    settle();
  }

  return finish(std::move(result));
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
    const StageTimes& times = input.stages[static_cast<std::size_t>(s)];
    require_time(times.forward_us, "stage " + std::to_string(s) + " forward");
    require_time(times.backward_us, "stage " + std::to_string(s) + " backward");
    require_time(times.forward_fixed_us, "stage " + std::to_string(s) + " forward fixed part");
    require_time(times.backward_fixed_us, "stage " + std::to_string(s) + " backward fixed part");
    if (times.forward_fixed_us > times.forward_us || times.backward_fixed_us > times.backward_us) {
      throw UserError("1F1B schedule: stage " + std::to_string(s) + "'s fixed part exceeds its pass time");
    }
  }
  if (!std::isfinite(input.rank_slots) || input.rank_slots < 0 || !std::isfinite(input.ranks_per_stage) || input.ranks_per_stage < 1) {
    throw UserError("1F1B schedule: rank slots must be >= 0 and ranks per stage >= 1");
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
  if (input.rank_slots > 0) return simulate_shared(input, orders);
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

  return finish(std::move(result));
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
