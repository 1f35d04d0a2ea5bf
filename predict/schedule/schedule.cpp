// schedule.cpp: the 1F1B event simulation of schedule.hpp.
// Invariants: every pass is scheduled exactly once, after all its dependencies; a work list (or an event
// loop) that runs out while passes remain is a deadlock, which 1F1B never has (ITERTIME_CHECK).
#include "predict/schedule/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "common/errors.hpp"
#include "common/pipeline_order.hpp"

namespace itertime::predict {
namespace {

constexpr double kNotDone = -1.0;

bool valid_time(double value_us) { return std::isfinite(value_us) && value_us >= 0.0; }

// Throws unless value_us is a valid time; what() names it, called only then (its text is not built for
// every pass and bucket of a plan's thousands of schedules).
template <typename What>
void require_time(double value_us, const What& what) {
  if (!valid_time(value_us)) {
    throw UserError("1F1B schedule: " + std::string(what()) + " is " + std::to_string(value_us) +
                    " us; times must be finite and non-negative");
  }
}

// A bucket's place in its pass, a fraction in [0, 1]; else "<technique>: bucket <k><where> a fraction <x> of
// <of_what>; it must lie in [0, 1]".
void require_fraction(double fraction, const char* technique, std::size_t k, const char* where, const char* of_what) {
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    throw UserError(std::string(technique) + ": bucket " + std::to_string(k) + where + " a fraction " + std::to_string(fraction) +
                    " of " + of_what + "; it must lie in [0, 1]");
  }
}

// Every user-facing check of a ScheduleInput (UserError), and the p2p vector sizes (ITERTIME_CHECK).
void require_valid(const ScheduleInput& input) {
  const int pp = static_cast<int>(input.stages.size());  // virtual stages
  const int m = input.num_micro_batches;
  const int v = input.virtual_stages;
  if (pp < 1) throw UserError("1F1B schedule: no pipeline stages given");
  if (m < 1) throw UserError("1F1B schedule: " + std::to_string(m) + " micro-batches; need at least 1");
  if (v < 1 || pp % v != 0) {
    throw UserError("1F1B schedule: " + std::to_string(pp) + " stage times for " + std::to_string(v) +
                    " model chunks per rank; give pp * v of them, in virtual-stage order");
  }
  const int ranks = pp / v;
  if (v > 1 && m % ranks != 0) {
    throw UserError("interleaved 1F1B: " + std::to_string(m) + " micro-batches is not a multiple of pp " + std::to_string(ranks) +
                    " (Megatron-LM's interleaved schedule needs that); choose a global batch that gives a multiple, or v = 1");
  }
  ITERTIME_CHECK(
      static_cast<int>(input.p2p_forward_us.size()) == pp - 1 && static_cast<int>(input.p2p_backward_us.size()) == pp - 1,
      "p2p transfer vectors need pp*v-1 = " + std::to_string(pp - 1) + " entries");
  for (int s = 0; s < pp; ++s) {
    const StageTimes& times = input.stages[static_cast<std::size_t>(s)];
    require_time(times.forward_us, [&] { return "stage " + std::to_string(s) + " forward"; });
    require_time(times.backward_us, [&] { return "stage " + std::to_string(s) + " backward"; });
    require_time(times.forward_fixed_us, [&] { return "stage " + std::to_string(s) + " forward fixed part"; });
    require_time(times.backward_fixed_us, [&] { return "stage " + std::to_string(s) + " backward fixed part"; });
    if (times.forward_fixed_us > times.forward_us || times.backward_fixed_us > times.backward_us) {
      throw UserError("1F1B schedule: stage " + std::to_string(s) + "'s fixed part exceeds its pass time");
    }
  }
  if (!std::isfinite(input.rank_slots) || input.rank_slots < 0 || !std::isfinite(input.ranks_per_stage) ||
      input.ranks_per_stage < 1) {
    throw UserError("1F1B schedule: rank slots must be >= 0 and ranks per stage >= 1");
  }
  for (int j = 0; j + 1 < pp; ++j) {
    require_time(input.p2p_forward_us[static_cast<std::size_t>(j)],
                 [&] { return "forward transfer at boundary " + std::to_string(j); });
    require_time(input.p2p_backward_us[static_cast<std::size_t>(j)],
                 [&] { return "backward transfer at boundary " + std::to_string(j); });
  }
}

// The end times of one virtual stage's passes of one kind that a later pass still needs, in micro-batch
// order. Every chunk runs its micro-batches in increasing order, forwards and backwards alike
// (common/pipeline_order.hpp), so each end time is needed once, by one consumer, in the order it was
// produced: a queue, holding only what is in flight (a few entries, not m).
class EndTimeQueue {
 public:
  void push(double end_us) { times_us_.push_back(end_us); }
  bool empty() const { return head_ == times_us_.size(); }
  double front_us() const { return times_us_[head_]; }
  int consumed() const { return consumed_; }  // the micro-batch whose end time front_us() is
  void pop() {
    ++consumed_;
    if (++head_ == times_us_.size()) {
      times_us_.clear();
      head_ = 0;
    }
  }

 private:
  std::vector<double> times_us_;
  std::size_t head_ = 0;
  int consumed_ = 0;
};

// What both simulations share: each stage's pass order and position in it, when each (stage,
// micro-batch) pass ended, the pipeline dependencies between passes, and the result being accumulated.
// A forward of micro-batch i on stage s needs stage s-1's forward of i plus the forward transfer; a
// backward needs stage s+1's backward of i plus the backward transfer (the last stage: its own forward).
class PipelineState {
 public:
  explicit PipelineState(const ScheduleInput& input)
      : input_(input),
        v_(input.virtual_stages),
        pp_(static_cast<int>(input.stages.size()) / input.virtual_stages),
        m_(input.num_micro_batches),
        forward_ends_(static_cast<std::size_t>(pp_ * v_)),
        backward_ends_(static_cast<std::size_t>(pp_ * v_)),
        forwards_done_(static_cast<std::size_t>(pp_ * v_), 0) {
    cursors_.reserve(static_cast<std::size_t>(pp_));  // common/pipeline_order.hpp's orders, as the trainer runs them
    for (int s = 0; s < pp_; ++s) cursors_.emplace_back(pp_, s, m_, v_);
    result_.busy_us.assign(static_cast<std::size_t>(pp_), 0.0);
    result_.send_us.assign(static_cast<std::size_t>(pp_), 0.0);
    result_.idle_us.assign(static_cast<std::size_t>(pp_), 0.0);
    result_.end_us.assign(static_cast<std::size_t>(pp_), 0.0);
    result_.last_backward_start_us.assign(static_cast<std::size_t>(pp_), 0.0);
    result_.last_backward_end_us.assign(static_cast<std::size_t>(pp_), 0.0);
    result_.first_forward_start_us.assign(static_cast<std::size_t>(pp_), kNotDone);
    result_.first_forward_end_us.assign(static_cast<std::size_t>(pp_), kNotDone);
    const std::vector<double> per_chunk(static_cast<std::size_t>(v_), kNotDone);
    result_.chunk_last_backward_start_us.assign(static_cast<std::size_t>(pp_), per_chunk);
    result_.chunk_last_backward_end_us.assign(static_cast<std::size_t>(pp_), per_chunk);
    result_.chunk_first_forward_start_us.assign(static_cast<std::size_t>(pp_), per_chunk);
    result_.chunk_first_forward_end_us.assign(static_cast<std::size_t>(pp_), per_chunk);
    if (input.record_timeline) result_.timeline.assign(static_cast<std::size_t>(pp_), {});
  }

  int stages() const { return pp_; }  // pipeline ranks: one timeline each
  // One (virtual stage, micro-batch) cell per forward and per backward: 2 * cells() passes in all.
  std::size_t cells() const { return static_cast<std::size_t>(pp_ * v_) * static_cast<std::size_t>(m_); }
  bool has_next(int s) const { return !cursors_[index(s)].done(); }
  const PipelinePass& next_pass(int s) const { return cursors_[index(s)].pass(); }
  // The pipeline rank that a pass's result goes to (the consumer of its transfer), or -1 when it sends
  // nothing on: the next virtual stage's for a forward, the previous one's for a backward.
  int receiver(int s, const PipelinePass& pass) const {
    if (!sends_after(s, pass)) return -1;
    const int vs = virtual_stage(s, pass) + (pass.kind == PipelinePassKind::kForward ? 1 : -1);
    return vs % pp_;
  }

  // When the next pass of stage s may start by its dependencies (not the stage's own availability),
  // or kNotDone while one of them has not run.
  double dependencies_ready_us(int s) const {
    const PipelinePass& pass = next_pass(s);
    const int i = pass.micro_batch;
    const int vs = virtual_stage(s, pass);
    if (pass.kind == PipelinePassKind::kForward) {
      if (vs == 0) return 0.0;
      const EndTimeQueue& upstream = forward_ends_[index(vs) - 1];
      return waited_for(upstream, i) ? kNotDone : upstream.front_us() + input_.p2p_forward_us[index(vs) - 1];
    }
    ITERTIME_CHECK(forwards_done_[index(vs)] > i, "1F1B order runs a backward before its forward");
    if (vs == pp_ * v_ - 1) return forward_ends_[index(vs)].front_us();
    const EndTimeQueue& downstream = backward_ends_[index(vs) + 1];
    return waited_for(downstream, i) ? kNotDone : downstream.front_us() + input_.p2p_backward_us[index(vs)];
  }

  double next_pass_us(int s) const {
    const StageTimes& times = input_.stages[index(virtual_stage(s, next_pass(s)))];
    return next_pass(s).kind == PipelinePassKind::kForward ? times.forward_us : times.backward_us;
  }

  // The next pass's compute time: its shared (processor-shared) and fixed parts.
  std::pair<double, double> next_pass_parts_us(int s) const {
    const StageTimes& times = input_.stages[index(virtual_stage(s, next_pass(s)))];
    const bool forward = next_pass(s).kind == PipelinePassKind::kForward;
    const double total_us = forward ? times.forward_us : times.backward_us;
    const double fixed_us = forward ? times.forward_fixed_us : times.backward_fixed_us;
    return {total_us - fixed_us, fixed_us};
  }

  // Records the next pass of stage s as run from start_us to end_us and moves past it. Returns the
  // transfer that follows it when sends block the stage's timeline (recorded as such), else 0.
  double complete_next_pass(int s, double start_us, double end_us) {
    const PipelinePass pass = next_pass(s);
    const bool forward = pass.kind == PipelinePassKind::kForward;
    const int vs = virtual_stage(s, pass);
    consume_dependency(vs, pass.kind);
    if (forward) {
      ++forwards_done_[index(vs)];
      forward_ends_[index(vs)].push(end_us);  // needed by the next virtual stage, or the last one's backward
    } else if (vs > 0) {
      backward_ends_[index(vs)].push(end_us);  // needed by the previous virtual stage's backward
    }
    result_.busy_us[index(s)] += end_us - start_us;
    result_.end_us[index(s)] = std::max(result_.end_us[index(s)], end_us);
    if (forward && result_.first_forward_start_us[index(s)] == kNotDone) {  // the first one recorded
      result_.first_forward_start_us[index(s)] = start_us;
      result_.first_forward_end_us[index(s)] = end_us;
    }
    if (!forward) {  // the passes run in order: the last one recorded is the last backward
      result_.last_backward_start_us[index(s)] = start_us;
      result_.last_backward_end_us[index(s)] = end_us;
    }
    // A chunk runs its micro-batches in order: its first forward is micro-batch 0's, its last backward m-1's.
    const auto chunk = static_cast<std::size_t>(pass.chunk);
    if (forward && pass.micro_batch == 0) {
      result_.chunk_first_forward_start_us[index(s)][chunk] = start_us;
      result_.chunk_first_forward_end_us[index(s)][chunk] = end_us;
    }
    if (!forward && pass.micro_batch == m_ - 1) {
      result_.chunk_last_backward_start_us[index(s)][chunk] = start_us;
      result_.chunk_last_backward_end_us[index(s)][chunk] = end_us;
    }
    if (input_.record_timeline) {
      result_.timeline[index(s)].push_back(
          {forward ? PassKind::kForward : PassKind::kBackward, pass.micro_batch, start_us, end_us, pass.chunk});
    }
    cursors_[index(s)].advance();
    if (!input_.blocking_send || !sends_after(s, pass)) return 0.0;
    const double transfer_us = forward ? input_.p2p_forward_us[index(vs)] : input_.p2p_backward_us[index(vs) - 1];
    result_.send_us[index(s)] += transfer_us;
    result_.end_us[index(s)] = std::max(result_.end_us[index(s)], end_us + transfer_us);
    if (input_.record_timeline) {
      result_.timeline[index(s)].push_back({forward ? PassKind::kSendForward : PassKind::kSendBackward, pass.micro_batch, end_us,
                                            end_us + transfer_us, pass.chunk});
    }
    return transfer_us;
  }

  void extend_makespan(double time_us) { result_.makespan_us = std::max(result_.makespan_us, time_us); }

  // Whether a pass sends its result on: forwards but the last virtual stage's, backwards but the first's.
  bool sends_after(int s, const PipelinePass& pass) const {
    const int vs = virtual_stage(s, pass);
    return pass.kind == PipelinePassKind::kForward ? vs < pp_ * v_ - 1 : vs > 0;
  }

  // Idle time per stage and the bubble, from the makespan, busy and send times.
  ScheduleResult finish() {
    double busiest_us = 0.0;
    for (std::size_t s = 0; s < result_.busy_us.size(); ++s) {
      result_.idle_us[s] = std::max(0.0, result_.makespan_us - result_.busy_us[s] - result_.send_us[s]);
      busiest_us = std::max(busiest_us, result_.busy_us[s]);
    }
    result_.bubble_us = result_.makespan_us - busiest_us;
    return std::move(result_);
  }

 private:
  static std::size_t index(int s) { return static_cast<std::size_t>(s); }
  int virtual_stage(int rank, const PipelinePass& pass) const { return pass.chunk * pp_ + rank; }
  // Whether micro-batch i's end time is still awaited in `queue` (its consumer takes them in order).
  static bool waited_for(const EndTimeQueue& queue, int i) {
    ITERTIME_CHECK(queue.consumed() == i, "1F1B order consumes a stage's results out of micro-batch order");
    return queue.empty();
  }
  // A pass at virtual stage vs has run: the end time it waited for is no longer needed.
  void consume_dependency(int vs, PipelinePassKind kind) {
    if (kind == PipelinePassKind::kForward) {
      if (vs > 0) forward_ends_[index(vs) - 1].pop();
    } else if (vs == pp_ * v_ - 1) {
      forward_ends_[index(vs)].pop();
    } else {
      backward_ends_[index(vs) + 1].pop();
    }
  }

  const ScheduleInput& input_;
  int v_, pp_, m_;
  std::vector<PipelineCursor> cursors_;                     // per stage: at its next pass
  std::vector<EndTimeQueue> forward_ends_, backward_ends_;  // per virtual stage
  std::vector<int> forwards_done_;                          // per virtual stage
  ScheduleResult result_;
};

// Dedicated cores: list scheduling. Each pass starts at max(its stage free, its dependencies ready), a
// value that does not depend on the order in which stages are visited, so a work list visits a stage
// only when it may have become able to move: at the start, and when a pass of another stage produced the
// payload it may be waiting for. Each pass is scheduled once and wakes at most one stage: O(pp*v*m).
// free_after_us, when given, receives each rank's time free after each of its passes (the pass's end, and
// a blocking send after it), in the rank's pass order.
ScheduleResult simulate_dedicated(const ScheduleInput& input, std::vector<std::vector<double>>* free_after_us = nullptr) {
  PipelineState pipeline(input);
  if (free_after_us != nullptr) free_after_us->assign(static_cast<std::size_t>(pipeline.stages()), {});
  const auto stages = static_cast<std::size_t>(pipeline.stages());
  std::vector<double> free_at_us(stages, 0.0);
  std::vector<int> to_visit;
  std::vector<char> listed(stages, 1);
  for (int s = pipeline.stages() - 1; s >= 0; --s) to_visit.push_back(s);
  std::size_t remaining = 2 * pipeline.cells();
  while (!to_visit.empty()) {
    const int s = to_visit.back();
    to_visit.pop_back();
    listed[static_cast<std::size_t>(s)] = 0;
    double& free_us = free_at_us[static_cast<std::size_t>(s)];
    while (pipeline.has_next(s)) {
      const double dependencies_us = pipeline.dependencies_ready_us(s);
      if (dependencies_us == kNotDone) break;
      const int receiver = pipeline.receiver(s, pipeline.next_pass(s));
      const double start_us = std::max(free_us, dependencies_us);
      const double end_us = start_us + pipeline.next_pass_us(s);
      free_us = end_us + pipeline.complete_next_pass(s, start_us, end_us);
      if (free_after_us != nullptr) (*free_after_us)[static_cast<std::size_t>(s)].push_back(free_us);
      pipeline.extend_makespan(free_us);
      --remaining;
      if (receiver >= 0 && receiver != s && !listed[static_cast<std::size_t>(receiver)]) {
        listed[static_cast<std::size_t>(receiver)] = 1;
        to_visit.push_back(receiver);
      }
    }
  }
  ITERTIME_CHECK(remaining == 0, "1F1B simulation made no progress (deadlock in the pass order)");
  ScheduleResult result = pipeline.finish();
  result.simulated_micro_batches = input.num_micro_batches;
  return result;
}

// The steady state in closed form (dedicated cores; schedule.hpp's invariant). A unit is the steady pairs
// in which every micro-batch index moves on by unit_mb (1 without interleaving; pp with it, the period of
// the interleaved order): unit_mb * v pairs on every rank, each with the same passes as the unit before.
// Dependencies of a steady pass reach only a pair or two back on a neighbouring rank, so when every pass
// of every rank in a window of at least kWindowUnits units (and kWindowPairs pairs) ends delta after the pass one unit before it,
// every later steady pass does too (induction in the pass order), and a schedule with K more units is the
// same schedule with its steady state K units longer: everything after it K * delta later, each rank
// busy (and sending) K units' passes more. The window is checked on a shorter schedule (m' micro-batches,
// m' = m mod unit_mb), after `transient` units; when it is not periodic there, the transient is doubled,
// and when m' would exceed m / 2, m is simulated whole.
constexpr int kWindowUnits = 1;
constexpr int kWindowPairs = 8;               // and at least this many pairs (a unit is one pair without interleaving)
constexpr int kMarginUnits = 1;               // steady units after the window, before the cool-down
constexpr double kPeriodicTolerance = 1e-12;  // relative, of the times compared

std::optional<ScheduleResult> simulate_periodic(const ScheduleInput& input) {
  const int v = input.virtual_stages;
  const int pp = static_cast<int>(input.stages.size()) / v;
  const int m = input.num_micro_batches;
  const int unit_mb = v == 1 ? 1 : pp;
  const int unit_pairs = unit_mb * v;
  // Rank 0 has the most warm-up forwards (the fewest steady pairs); the orders' own rule for m'.
  const auto warmup = [&](int rank, int micro_batches) { return PipelineOrder(pp, rank, micro_batches, v).warmup_forwards(); };
  const int window = std::max(kWindowUnits, (kWindowPairs + unit_pairs - 1) / unit_pairs);  // in units
  for (int transient = std::max(1, (pp + unit_pairs - 1) / unit_pairs);; transient *= 2) {
    const int needed_pairs = (transient + window + kMarginUnits) * unit_pairs;
    int shorter = unit_mb;  // m' = m (mod unit_mb): the same orders, fewer units
    while (shorter * v - warmup(0, shorter) < needed_pairs) shorter += unit_mb;
    if (2 * shorter > m) return std::nullopt;  // too little to gain for the risk of simulating twice
    ScheduleInput part = input;
    part.num_micro_batches = shorter;
    std::vector<std::vector<double>> free_after_us;
    ScheduleResult result = simulate_dedicated(part, &free_after_us);
    // The window: pairs [transient, transient + kWindowUnits) units of every rank's steady state, each
    // pass against the same pass one unit before (2 passes a pair).
    double delta = std::numeric_limits<double>::quiet_NaN();
    bool periodic = true;
    for (int r = 0; r < pp && periodic; ++r) {
      const std::vector<double>& free_us = free_after_us[static_cast<std::size_t>(r)];
      const int first = warmup(r, shorter) + 2 * transient * unit_pairs;
      const int last = first + 2 * window * unit_pairs;
      for (int k = first; k < last && periodic; ++k) {
        const double later = free_us[static_cast<std::size_t>(k)];
        const double step = later - free_us[static_cast<std::size_t>(k - 2 * unit_pairs)];
        if (std::isnan(delta)) delta = step;
        periodic = std::abs(step - delta) <= kPeriodicTolerance * later;
      }
    }
    if (!periodic) continue;
    // m = m' + units * unit_mb: the cool-down and the last passes come units * delta later; the first
    // passes (the warm-up) are the same.
    const double units = static_cast<double>((m - shorter) / unit_mb);
    const double shift_us = units * delta;
    result.makespan_us += shift_us;
    for (int r = 0; r < pp; ++r) {
      const auto rank = static_cast<std::size_t>(r);
      double unit_busy_us = 0.0, unit_send_us = 0.0;
      for (int c = 0; c < v; ++c) {
        const int vs = c * pp + r;
        const StageTimes& t = input.stages[static_cast<std::size_t>(vs)];
        unit_busy_us += unit_mb * (t.forward_us + t.backward_us);
        if (input.blocking_send && vs + 1 < pp * v) unit_send_us += unit_mb * input.p2p_forward_us[static_cast<std::size_t>(vs)];
        if (input.blocking_send && vs > 0) unit_send_us += unit_mb * input.p2p_backward_us[static_cast<std::size_t>(vs - 1)];
      }
      result.busy_us[rank] += units * unit_busy_us;
      result.send_us[rank] += units * unit_send_us;
      result.end_us[rank] += shift_us;
      result.last_backward_start_us[rank] += shift_us;
      result.last_backward_end_us[rank] += shift_us;
      for (double& t : result.chunk_last_backward_start_us[rank]) t += shift_us;
      for (double& t : result.chunk_last_backward_end_us[rank]) t += shift_us;
    }
    double busiest_us = 0.0;
    for (std::size_t r = 0; r < result.busy_us.size(); ++r) {
      result.idle_us[r] = std::max(0.0, result.makespan_us - result.busy_us[r] - result.send_us[r]);
      busiest_us = std::max(busiest_us, result.busy_us[r]);
    }
    result.bubble_us = result.makespan_us - busiest_us;
    return result;
  }
}

// Processor sharing (see schedule.hpp): a time-ordered event simulation. Each stage is idle, in the
// shared part of a pass (progressing at the rate the rank slots allow), in its fixed part, or held by a
// blocking send. Time advances to the next event: a part finishing or a pass becoming ready.
class SharedCoreSimulation {
 public:
  explicit SharedCoreSimulation(const ScheduleInput& input)
      : input_(input),
        pipeline_(input),
        state_(static_cast<std::size_t>(pipeline_.stages())),
        remaining_passes_(2 * pipeline_.cells()) {
    double scale = 1.0;  // for the "reached zero" tolerance
    for (const StageTimes& t : input.stages) scale = std::max({scale, t.forward_us, t.backward_us});
    epsilon_ = 1e-12 * scale * static_cast<double>(2 * input.num_micro_batches * input.virtual_stages + pipeline_.stages());
  }

  ScheduleResult run() {
    settle();
    while (remaining_passes_ > 0 ||
           std::any_of(state_.begin(), state_.end(), [](const StageState& st) { return st.activity != Activity::kIdle; })) {
      const double rate = shared_rate();
      const double step_us = std::max(next_event_in_us(rate), 0.0);
      now_us_ += step_us;
      for (StageState& st : state_) {
        if (st.activity == Activity::kShared) st.remaining_us -= rate * step_us;
        if (st.activity == Activity::kFixed || st.activity == Activity::kSending) st.remaining_us -= step_us;
      }
      settle();
    }
    ScheduleResult result = pipeline_.finish();
    result.simulated_micro_batches = input_.num_micro_batches;
    return result;
  }

 private:
  enum class Activity { kIdle, kShared, kFixed, kSending };
  struct StageState {
    Activity activity = Activity::kIdle;
    double remaining_us = 0;  // work (shared) or time (fixed, sending) left
    double pass_start_us = 0;
  };

  // The rate at which each shared part progresses: 1, or the slots over the ranks that want them.
  double shared_rate() const {
    int shared = 0;
    for (const StageState& st : state_) shared += st.activity == Activity::kShared ? 1 : 0;
    const double demand = static_cast<double>(shared) * input_.ranks_per_stage;
    return demand > input_.rank_slots ? input_.rank_slots / demand : 1.0;
  }

  double next_event_in_us(double rate) const {
    double step_us = std::numeric_limits<double>::infinity();
    for (int s = 0; s < pipeline_.stages(); ++s) {
      const StageState& st = state_[static_cast<std::size_t>(s)];
      if (st.activity == Activity::kShared) step_us = std::min(step_us, st.remaining_us / rate);
      if (st.activity == Activity::kFixed || st.activity == Activity::kSending) step_us = std::min(step_us, st.remaining_us);
      if (st.activity == Activity::kIdle && pipeline_.has_next(s)) {
        const double ready_us = pipeline_.dependencies_ready_us(s);
        if (ready_us != kNotDone) step_us = std::min(step_us, ready_us - now_us_);
      }
    }
    ITERTIME_CHECK(std::isfinite(step_us), "1F1B simulation with shared cores made no progress (deadlock in the pass order)");
    return step_us;
  }

  // Moves every stage as far as it can go at now_us_ without time passing.
  void settle() {
    for (bool moved = true; moved;) {
      moved = false;
      for (int s = 0; s < pipeline_.stages(); ++s) moved = advance_stage(s) || moved;
    }
  }

  // One stage's transitions at now_us_: idle -> shared -> fixed -> (sending ->) idle.
  bool advance_stage(int s) {
    StageState& st = state_[static_cast<std::size_t>(s)];
    bool moved = false;
    if (st.activity == Activity::kIdle && pipeline_.has_next(s)) {
      const double ready_us = pipeline_.dependencies_ready_us(s);
      if (ready_us != kNotDone && ready_us <= now_us_ + epsilon_) {
        st.activity = Activity::kShared;
        st.remaining_us = pipeline_.next_pass_parts_us(s).first;
        st.pass_start_us = now_us_;
        moved = true;
      }
    }
    if (st.activity == Activity::kShared && st.remaining_us <= epsilon_) {
      st.activity = Activity::kFixed;
      st.remaining_us = pipeline_.next_pass_parts_us(s).second;
      moved = true;
    }
    if (st.activity == Activity::kFixed && st.remaining_us <= epsilon_) {
      const bool sends = pipeline_.sends_after(s, pipeline_.next_pass(s));
      const double transfer_us = pipeline_.complete_next_pass(s, st.pass_start_us, now_us_);
      --remaining_passes_;
      st.activity = input_.blocking_send && sends ? Activity::kSending : Activity::kIdle;
      st.remaining_us = transfer_us;
      pipeline_.extend_makespan(now_us_);
      moved = true;
    }
    if (st.activity == Activity::kSending && st.remaining_us <= epsilon_) {
      st.activity = Activity::kIdle;
      pipeline_.extend_makespan(now_us_);
      moved = true;
    }
    return moved;
  }

  const ScheduleInput& input_;
  PipelineState pipeline_;
  std::vector<StageState> state_;
  std::size_t remaining_passes_;
  double now_us_ = 0;
  double epsilon_ = 0;
};

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

namespace {

// common/pipeline_order's passes as timeline entries (no times yet).
std::vector<TimelineEntry> as_timeline(const std::vector<PipelinePass>& passes) {
  std::vector<TimelineEntry> order;
  order.reserve(passes.size());
  for (const PipelinePass& pass : passes) {
    order.push_back({pass.kind == PipelinePassKind::kForward ? PassKind::kForward : PassKind::kBackward, pass.micro_batch, 0.0,
                     0.0, pass.chunk});
  }
  return order;
}

}  // namespace

std::vector<TimelineEntry> one_f_one_b_order(int pp, int stage, int m) { return as_timeline(one_f_one_b_passes(pp, stage, m)); }

std::vector<TimelineEntry> interleaved_order(int pp, int rank, int m, int virtual_stages) {
  return as_timeline(interleaved_passes(pp, rank, m, virtual_stages));
}

ScheduleResult simulate_1f1b(const ScheduleInput& input) {
  require_valid(input);
  if (input.rank_slots > 0) return SharedCoreSimulation(input).run();
  if (!input.record_timeline) {
    if (std::optional<ScheduleResult> result = simulate_periodic(input)) return std::move(*result);
  }
  return simulate_dedicated(input);
}

namespace {

// Every field of a ScheduleInput as bytes: equal keys, equal inputs (times bit for bit).
std::string schedule_key(const ScheduleInput& input) {
  std::string key;
  const auto append = [&key](const void* data, std::size_t bytes) { key.append(static_cast<const char*>(data), bytes); };
  const int64_t counts[] = {input.num_micro_batches,
                            input.virtual_stages,
                            input.blocking_send,
                            input.record_timeline,
                            static_cast<int64_t>(input.stages.size()),
                            static_cast<int64_t>(input.p2p_forward_us.size()),
                            static_cast<int64_t>(input.p2p_backward_us.size())};
  const double scalars[] = {input.rank_slots, input.ranks_per_stage};
  key.reserve(sizeof(counts) + sizeof(scalars) + input.stages.size() * sizeof(StageTimes) +
              (input.p2p_forward_us.size() + input.p2p_backward_us.size()) * sizeof(double));
  append(counts, sizeof(counts));
  append(scalars, sizeof(scalars));
  for (const StageTimes& t : input.stages) {
    const double times[] = {t.forward_us, t.backward_us, t.forward_fixed_us, t.backward_fixed_us};
    append(times, sizeof(times));
  }
  append(input.p2p_forward_us.data(), input.p2p_forward_us.size() * sizeof(double));
  append(input.p2p_backward_us.data(), input.p2p_backward_us.size() * sizeof(double));
  return key;
}

}  // namespace

const ScheduleResult& ScheduleCache::simulate(const ScheduleInput& input) {
  ++lookups_;
  std::string key = schedule_key(input);
  const auto found = results_.find(key);
  if (found != results_.end()) return found->second;
  ScheduleResult result = simulate_1f1b(input);  // throws before anything is kept
  ++simulations_;
  return results_.emplace(std::move(key), std::move(result)).first->second;
}

ScheduleResult simulate_1f1b(const std::vector<StageTimes>& stages, double p2p_forward_us, double p2p_backward_us,
                             int num_micro_batches, bool blocking_send, bool record_timeline) {
  const std::size_t boundaries = stages.empty() ? 0 : stages.size() - 1;
  return simulate_1f1b(stages, std::vector<double>(boundaries, p2p_forward_us), std::vector<double>(boundaries, p2p_backward_us),
                       num_micro_batches, blocking_send, record_timeline);
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

double exposed_reduction_us(const std::vector<BucketReduction>& buckets, double backward_start_us, double backward_end_us,
                            double timeline_free_us) {
  return exposed_reduction_us(std::vector<ChunkReduction>{{buckets, backward_start_us, backward_end_us}}, timeline_free_us);
}

double exposed_reduction_us(const std::vector<ChunkReduction>& chunks, double timeline_free_us) {
  std::vector<std::pair<double, double>> ready;  // (when complete, all-reduce time), every chunk's buckets
  for (const ChunkReduction& chunk : chunks) {
    require_time(chunk.backward_start_us, [] { return "the last backward's start"; });
    if (!std::isfinite(chunk.backward_end_us) || chunk.backward_end_us < chunk.backward_start_us) {
      throw UserError("overlapped reduction: the last backward ends before it starts");
    }
    const double backward_us = chunk.backward_end_us - chunk.backward_start_us;
    for (std::size_t k = 0; k < chunk.buckets.size(); ++k) {
      const BucketReduction& bucket = chunk.buckets[k];
      require_fraction(bucket.ready_fraction, "overlapped reduction", k, " completes after", "the backward");
      require_time(bucket.time_us, [&] { return "bucket " + std::to_string(k) + "'s all-reduce"; });
      ready.emplace_back(chunk.backward_start_us + bucket.ready_fraction * backward_us, bucket.time_us);
    }
  }
  // Started as they complete, on one communicator: in completion order, ties in the order given.
  std::stable_sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double chain_end_us = -std::numeric_limits<double>::infinity();
  for (const auto& [ready_us, time_us] : ready) chain_end_us = std::max(chain_end_us, ready_us) + time_us;
  return ready.empty() ? 0.0 : std::max(0.0, chain_end_us - timeline_free_us);
}

double exposed_parameter_gather_us(const std::vector<BucketGather>& buckets, double gather_start_us, double forward_start_us,
                                   double forward_us) {
  return exposed_parameter_gather_us(std::vector<ChunkGathers>{{buckets, forward_start_us, forward_us}}, gather_start_us);
}

double exposed_parameter_gather_us(const std::vector<ChunkGathers>& chunks, double gather_start_us) {
  if (!std::isfinite(gather_start_us)) {
    throw UserError("overlapped parameter gather: the update's end and the next forward's start must be finite");
  }
  double shift_us = 0.0;  // the waits so far: every later need comes that much later
  double chain_end_us = gather_start_us;
  for (const ChunkGathers& chunk : chunks) {
    if (!std::isfinite(chunk.forward_start_us)) {
      throw UserError("overlapped parameter gather: the update's end and the next forward's start must be finite");
    }
    require_time(chunk.forward_us, [] { return "the first forward"; });
    for (std::size_t k = 0; k < chunk.buckets.size(); ++k) {
      const BucketGather& bucket = chunk.buckets[k];
      require_fraction(bucket.before_fraction, "overlapped parameter gather", k, "'s first parameter lies after",
                       "the parameters");
      require_time(bucket.time_us, [&] { return "bucket " + std::to_string(k) + "'s all-gather"; });
      chain_end_us += bucket.time_us;
      shift_us += std::max(0.0, chain_end_us - (chunk.forward_start_us + shift_us + chunk.forward_us * bucket.before_fraction));
    }
  }
  return shift_us;
}

}  // namespace itertime::predict
