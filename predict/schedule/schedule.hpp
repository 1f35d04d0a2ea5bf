// schedule.hpp: event simulation of Megatron's 1F1B pipeline schedules, non-interleaved and interleaved
// (virtual pipeline stages), not a closed formula, so that unbalanced stages, the first/last stage's
// extra work and per-boundary transfer times are exact.
// Invariants:
//  - Non-interleaved (virtual_stages 1): stage s of pp (0-based) runs warm-up = min(pp-s-1, m) forwards,
//    then alternates (forward, backward) for the remaining m - warm-up forwards, then runs the remaining
//    backwards: the order of calibrate/trainer.cpp. Each stage runs one pass at a time, in that order.
//  - Interleaved (virtual_stages v > 1, Megatron-LM's schedule; needs m a multiple of pp, else a
//    UserError): pipeline rank r holds model chunks c = 0..v-1, virtual stage c*pp + r of pp*v (layers
//    assigned round-robin). Its k-th forward (k = 0..m*v-1) runs chunk (k mod pp*v) / pp on micro-batch
//    (k / (pp*v))*pp + k mod pp, its k-th backward chunk v-1 - (k mod pp*v) / pp on the same micro-batch
//    rule; warm-up = min((pp-r-1)*2 + (v-1)*pp, m*v) forwards (all of them when m == pp), then
//    alternating (forward, backward), then the remaining backwards.
//  - Dependencies run along virtual stages (with v 1 they are the stages): F(s,i) starts when its rank is
//    free and F(s-1,i) ended + p2p_forward_us[s-1]; B(s,i) when its rank is free, F(s,i) is done and
//    B(s+1,i) ended + p2p_backward_us[s]; B(last,i) needs F(last,i) only. Boundary j lies between virtual
//    stages j and j+1 (with v > 1 the boundary after rank pp-1's chunk goes back to rank 0).
//  - blocking_send: the sender's timeline is also busy for the transfer (right after the pass that
//    produced the payload), as with blocking MPI sends; otherwise the transfer overlaps the sender's
//    next pass. The receiver sees the payload at the same time in both modes.
//  - busy_us counts compute passes only; send_us the blocking-send occupancy; idle_us = makespan -
//    busy - send; bubble_us = makespan - max(busy_us). All times in microseconds, all >= 0.
//  - Shared cores (rank_slots > 0, CPU ranks): a pass's shared part (forward_us - forward_fixed_us, the
//    operators) progresses at rate min(1, rank_slots / (ranks_per_stage * stages in their shared
//    part)), processor sharing as an oversubscribed node's scheduler gives it; the fixed part (TP
//    collectives, already measured under that sharing) and transfers take their own time and hold no
//    core (ranks waiting in MPI yield when oversubscribed). A pass is then shared part, then fixed part.
//    rank_slots = 0 runs the list-scheduling simulation; any rank_slots > 0 the event simulation, which
//    gives the same result when the slots are never short.
//  - Per pipeline rank (a timeline; with v 1 a stage): busy_us, send_us, idle_us, end_us, the last
//    backward and the timeline; end_us[r] is when rank r's timeline is last busy (its last pass, or the
//    blocking send after it); last_backward_start_us / last_backward_end_us[r] bound its last backward.
//  - Overlapped gradient reduction (exposed_reduction_us): a stage's DP buckets complete during its last
//    backward, bucket k after the fraction ready_fraction[k] of it, and their all-reduces run one after
//    another (one DP communicator), each starting when its bucket is complete and the previous one has
//    ended; what ends after the stage's timeline is free is exposed. Assumes the reduction progresses
//    while the stage computes and costs the compute nothing (no contention term). With interleaving each
//    model chunk has its own buckets (Megatron-Core's DDP per chunk), complete during that chunk's last
//    backward on the rank (chunk_last_backward_*): every chunk's buckets join the one chain in the order
//    they become complete (chunk v-1's last backward comes first in the interleaved order).
//  - Overlapped parameter gather (exposed_parameter_gather_us, Megatron-LM's overlap_param_gather): a
//    stage's DP all-gathers run one after another (one DP communicator) from when its update ends, in the
//    order the next forward needs them; the next step's first forward waits, before the first parameter
//    of each bucket, until that bucket's all-gather has ended. The forward's progress through the stage
//    is taken as proportional to the parameter bytes it has passed (registration order = forward order):
//    the wait is max(0, max_k(ready_k - (forward_start + forward_us * before_fraction_k))), one wait
//    shifting every later need by as much. Same no-contention assumption as above.
//    With interleaving the all-gathers of every chunk run in one chain, chunk 0's first (then chunk 1's,
//    ...), and chunk c's first forward (micro-batch 0) waits for chunk c's buckets, the waits adding up
//    (a wait before chunk 0's first forward shifts chunk 1's too).
//  - first_forward_start_us / first_forward_end_us[r]: rank r's first forward pass (micro-batch 0; with
//    interleaving chunk 0), the one the next step's parameter gather can delay.
//  - Per model chunk c of rank r (v entries each; with v 1 the stage's own figures above):
//    chunk_last_backward_start_us / _end_us[r][c] bound chunk c's last backward (micro-batch m-1),
//    chunk_first_forward_start_us / _end_us[r][c] its first forward (micro-batch 0).
//  - Dedicated cores without a timeline: the steady state is simulated until it is periodic (every pass
//    of every rank over a window of whole periods ending the same time after the pass one period before:
//    one micro-batch without interleaving, pp micro-batches with it), and the remaining periods are added
//    in closed form: the cool-down and every figure after it later by the period's time, busy and send
//    times by the period's passes. The same figures as the pass-by-pass simulation (checked against it on
//    random pipelines, to 1e-9 relative); simulated_micro_batches says how many micro-batches were
//    simulated pass by pass.
//  - Pure: no state outside the call; O(pp * v * m) work on dedicated cores (less once periodic),
//    O(pp^2 * v * m) shared.
//  - ScheduleCache::simulate returns what simulate_1f1b returns for an input equal to one it has
//    simulated before (every field, times compared bit for bit), without simulating it again.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace itertime::predict {

// One stage's time for one micro-batch, TP communication included; the *_fixed_us part of it (TP
// communication) does not stretch when cores are shared.
struct StageTimes {
  double forward_us = 0.0;
  double backward_us = 0.0;
  double forward_fixed_us = 0.0;   // <= forward_us
  double backward_fixed_us = 0.0;  // <= backward_us
};

enum class PassKind { kForward, kBackward, kSendForward, kSendBackward };
std::string to_string(PassKind kind);

struct TimelineEntry {
  PassKind kind = PassKind::kForward;
  int micro_batch = 0;
  double start_us = 0.0;
  double end_us = 0.0;
  int chunk = 0;  // the model chunk (virtual stage chunk*pp + rank) with interleaving, else 0
};

struct ScheduleInput {
  std::vector<StageTimes> stages;       // pp * virtual_stages entries, in virtual-stage order
  std::vector<double> p2p_forward_us;   // (pp * v) - 1 entries: activations, virtual stage j -> j+1
  std::vector<double> p2p_backward_us;  // (pp * v) - 1 entries: gradients, virtual stage j+1 -> j
  int num_micro_batches = 1;            // m
  int virtual_stages = 1;               // v: model chunks per pipeline rank (interleaved 1F1B when > 1)
  bool blocking_send = false;
  bool record_timeline = false;
  double rank_slots = 0;       // ranks that can compute at once on the node (cores / threads per rank); 0: unlimited
  double ranks_per_stage = 1;  // ranks that run each stage's passes in lockstep (dp * tp)
};

struct ScheduleResult {
  double makespan_us = 0.0;
  std::vector<double> busy_us;  // per pipeline rank: sum of its forward and backward passes
  std::vector<double> send_us;  // per pipeline rank: time its timeline was held by blocking sends
  std::vector<double> idle_us;  // per pipeline rank: makespan - busy - send
  double bubble_us = 0.0;       // makespan minus the busiest rank's busy time
  std::vector<double> end_us;   // per stage: its timeline's last busy instant
  std::vector<double> last_backward_start_us, last_backward_end_us;  // per stage
  std::vector<double> first_forward_start_us, first_forward_end_us;  // per stage: its first forward pass
  // Per stage and model chunk: the chunk's last backward (micro-batch m-1) and first forward (micro-batch 0).
  std::vector<std::vector<double>> chunk_last_backward_start_us, chunk_last_backward_end_us;
  std::vector<std::vector<double>> chunk_first_forward_start_us, chunk_first_forward_end_us;
  // Per stage, in execution order (empty unless record_timeline).
  std::vector<std::vector<TimelineEntry>> timeline;
  // The micro-batches simulated pass by pass: m, or fewer when the steady state was found periodic and
  // the rest of it was added in closed form (dedicated cores, no timeline; see the invariants).
  int simulated_micro_batches = 0;
};

// common/pipeline_order.hpp's orders (the trainer runs the same ones) as timeline entries without times.
// The pass order of stage `stage` (0-based) of `pp` with `m` micro-batches: (kind, micro-batch) pairs,
// forwards and backwards only.
std::vector<TimelineEntry> one_f_one_b_order(int pp, int stage, int m);
// The interleaved order of pipeline rank `rank` with v model chunks (see above; chunk set per entry).
// ITERTIME_CHECK on m not a multiple of pp when v > 1 (simulate_1f1b refuses that as a UserError first).
std::vector<TimelineEntry> interleaved_order(int pp, int rank, int m, int virtual_stages);

// Throws UserError on m < 1, no stages, or negative / non-finite times; ITERTIME_CHECK on p2p vectors
// whose size is not pp-1.
ScheduleResult simulate_1f1b(const ScheduleInput& input);

// Same transfer time at every boundary.
ScheduleResult simulate_1f1b(const std::vector<StageTimes>& stages, double p2p_forward_us, double p2p_backward_us,
                             int num_micro_batches, bool blocking_send, bool record_timeline = false);

// Per-boundary transfer times (pp-1 values each).
ScheduleResult simulate_1f1b(const std::vector<StageTimes>& stages, const std::vector<double>& p2p_forward_us,
                             const std::vector<double>& p2p_backward_us, int num_micro_batches, bool blocking_send,
                             bool record_timeline = false);

// Remembers simulate_1f1b's results by their whole input, for a plan whose candidates differ only in what
// comes after the schedule (the distributed optimizer, overlapped reduction and gather change no pass
// time): each distinct input is simulated once. Not thread-safe; one per plan.
class ScheduleCache {
 public:
  // simulate_1f1b(input), from the cache when an equal input was simulated (throws as it does).
  const ScheduleResult& simulate(const ScheduleInput& input);
  int64_t simulations() const { return simulations_; }  // inputs simulated (the rest came from the cache)
  int64_t lookups() const { return lookups_; }

 private:
  std::unordered_map<std::string, ScheduleResult> results_;
  int64_t simulations_ = 0, lookups_ = 0;
};

// One bucket of overlapped gradient reduction: when it completes, as the fraction of the last backward
// done (0..1), and how long its all-reduce takes.
struct BucketReduction {
  double ready_fraction = 1.0;
  double time_us = 0.0;
};

// How long the buckets' all-reduces run past timeline_free_us, for a last backward from
// backward_start_us to backward_end_us (see above); buckets in completion order. 0 without buckets.
// Throws UserError on a fraction outside [0, 1], a negative time or backward_end_us < backward_start_us.
double exposed_reduction_us(const std::vector<BucketReduction>& buckets, double backward_start_us, double backward_end_us,
                            double timeline_free_us);

// One model chunk's buckets of overlapped gradient reduction (in completion order) and the bounds of the
// chunk's last backward on its rank.
struct ChunkReduction {
  std::vector<BucketReduction> buckets;
  double backward_start_us = 0.0, backward_end_us = 0.0;
};

// The same over a rank's chunks (see above): every bucket's all-reduce in one chain, in the order the
// buckets become complete (ties: in the order given); what runs past timeline_free_us. 0 without buckets.
// Throws as above, for any chunk.
double exposed_reduction_us(const std::vector<ChunkReduction>& chunks, double timeline_free_us);

// One bucket of overlapped parameter gather, in the order the all-gathers are started (the next forward's
// order: the bucket holding the stage's first parameters first): where its first parameter lies in the
// forward, as the share (0..1) of the stage's parameter bytes registered before it, and how long its
// all-gather takes.
struct BucketGather {
  double before_fraction = 0.0;
  double time_us = 0.0;
};

// How long the next step's first forward on a stage waits for the buckets' all-gathers (see above): they
// run one after another from gather_start_us (the stage's update ended); the forward would start at
// forward_start_us and take forward_us without waiting; both instants on one clock (either may be
// negative). 0 without buckets. Throws UserError on a fraction outside [0, 1], a negative or
// non-finite time, or a non-finite instant.
double exposed_parameter_gather_us(const std::vector<BucketGather>& buckets, double gather_start_us, double forward_start_us,
                                   double forward_us);

// One model chunk's buckets of overlapped parameter gather (in the order they are started) and the
// chunk's first forward in the next step, were it not to wait: its start and its length.
struct ChunkGathers {
  std::vector<BucketGather> buckets;
  double forward_start_us = 0.0, forward_us = 0.0;
};

// The same over a rank's chunks, in the order their all-gathers are started (chunk 0's first): one chain
// from gather_start_us; chunk c's first forward waits for its own buckets, shifted by the waits of the
// chunks before it; the total wait. Throws as above, for any chunk.
double exposed_parameter_gather_us(const std::vector<ChunkGathers>& chunks, double gather_start_us);

}  // namespace itertime::predict
