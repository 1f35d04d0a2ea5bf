// pipeline_order.hpp: the per-rank pass order of Megatron-LM's 1F1B pipeline schedules, non-interleaved and
// interleaved (virtual pipeline stages). Shared by the trainer (calibrate/trainer.cpp runs it) and the
// predictor's simulation (predict/schedule/schedule.hpp simulates it), so that both follow one order.
// Invariants:
//  - Non-interleaved: stage s of pp (0-based) runs warm-up = min(pp-s-1, m) forwards, then alternates
//    (forward, backward) for the remaining m - warm-up forwards, then runs the remaining backwards;
//    micro-batches in increasing order in each kind; chunk 0 throughout.
//  - Interleaved (v > 1): pipeline rank r holds model chunks c = 0..v-1, virtual stage c*pp + r of pp*v.
//    Its k-th forward (k = 0..m*v-1) runs chunk (k mod pp*v) / pp on micro-batch (k / (pp*v))*pp + k mod pp,
//    its k-th backward chunk v-1 - (k mod pp*v) / pp on the same micro-batch rule; warm-up =
//    min((pp-r-1)*2 + (v-1)*pp, m*v) forwards (all of them when m == pp), then alternating
//    (forward, backward), then the remaining backwards. Needs m a multiple of pp (ITERTIME_CHECK).
//  - Every rank enumerates the (chunk, micro-batch) pairs of each kind in the same k order, so the
//    producer of a virtual-stage boundary emits its payloads in the order its consumer needs them.
//  - Pure functions; 2*m*v entries per rank (interleaved_passes). PipelineOrder::at gives any entry in
//    O(1) without building the list, and the lists are built from it (one rule); PipelineCursor walks
//    the same order with counters (the predictor's simulation), checked against `at` by a test.
//  - The steady state repeats: its (forward, backward) pairs k and k + pp*v run the same chunks, and any
//    pp*v consecutive pairs run every chunk pp times forward and pp times backward. So the balance of
//    forwards over backwards per chunk (what is in flight) after warm-up + j pairs equals the one after
//    warm-up + (j mod pp*v) pairs, and the cool-down only lowers it: every maximum over the order of a
//    quantity that adds per forward and subtracts per backward is reached within the warm-up and the
//    first pp*v pairs (interleaved_passes_to_first_period), whatever m is.
#pragma once

#include <vector>

namespace itertime {

enum class PipelinePassKind { kForward, kBackward };

struct PipelinePass {
  PipelinePassKind kind = PipelinePassKind::kForward;
  int micro_batch = 0;
  int chunk = 0;  // the model chunk (virtual stage chunk*pp + rank) with interleaving, else 0
};

// One pipeline rank's pass order as a rule: entry `position` (0 <= position < size()) in O(1).
class PipelineOrder {
 public:
  // Rank `rank` (0-based) of `pp` with `m` micro-batches and v model chunks (v == 1: non-interleaved
  // 1F1B; v > 1 needs m a multiple of pp, ITERTIME_CHECK).
  PipelineOrder(int pp, int rank, int m, int virtual_stages);
  int size() const { return 2 * total_; }  // 2*m*v
  PipelinePass at(int position) const;     // ITERTIME_CHECK on a position outside [0, size())
  int warmup_forwards() const { return warmup_; }

 private:
  PipelinePass numbered(PipelinePassKind kind, int k) const;  // the k-th pass of a kind
  int pp_, v_, total_, warmup_;
};

// The same order walked from its start, one pass after another, without a division per step (what the
// predictor's simulation needs: it visits every pass of every rank once). pass() is order.at(position()).
class PipelineCursor {
 public:
  PipelineCursor(int pp, int rank, int m, int virtual_stages);
  bool done() const { return position_ == size_; }
  int position() const { return position_; }
  const PipelinePass& pass() const { return pass_; }  // only while !done()
  void advance() {  // only while !done(); inline: the simulation's inner loop calls it once per pass
    step(pass_.kind == PipelinePassKind::kForward ? forward_ : backward_);
    ++position_;
    load();
  }

 private:
  // The k-th pass of one kind, kept as k = (group_index * v + chunk_index) * pp + in_chunk.
  struct Counter {
    int group_index = 0, chunk_index = 0, in_chunk = 0;
  };
  // PipelineOrder's k-th pass of a kind: k mod pp*v is chunk_index * pp + in_chunk, so the chunk is
  // chunk_index (forward; v-1 - chunk_index backward) and the micro-batch group_index * pp + in_chunk
  // (with v 1, that is k).
  void set_pass(PipelinePassKind kind, const Counter& counter) {
    pass_.kind = kind;
    pass_.micro_batch = counter.group_index * pp_ + counter.in_chunk;
    pass_.chunk = kind == PipelinePassKind::kForward ? counter.chunk_index : v_ - 1 - counter.chunk_index;
  }
  void step(Counter& counter) const {
    if (++counter.in_chunk < pp_) return;
    counter.in_chunk = 0;
    if (++counter.chunk_index < v_) return;
    counter.chunk_index = 0;
    ++counter.group_index;
  }
  // pass_ from position_, as PipelineOrder::at: warm-up forwards, (forward, backward) pairs, cool-down
  // backwards.
  void load() {
    if (done()) return;
    const int in_steady = position_ - warmup_;
    const bool forward = in_steady < 0 || (in_steady < 2 * (size_ / 2 - warmup_) && in_steady % 2 == 0);
    if (forward) {
      set_pass(PipelinePassKind::kForward, forward_);
    } else {
      set_pass(PipelinePassKind::kBackward, backward_);
    }
  }

  int pp_, v_, size_, warmup_;
  int position_ = 0;
  Counter forward_, backward_;  // the next forward's and the next backward's numbers
  PipelinePass pass_;
};

// The pass order of stage `stage` (0-based) of `pp` with `m` micro-batches.
std::vector<PipelinePass> one_f_one_b_passes(int pp, int stage, int m);
// The interleaved order of pipeline rank `rank` with v model chunks (v == 1: one_f_one_b_passes).
std::vector<PipelinePass> interleaved_passes(int pp, int rank, int m, int virtual_stages);
// The first passes of interleaved_passes: the warm-up and the first min(pp*v, pairs) pairs of the
// steady state (with v == 1: the warm-up and one pair). Its running maxima are the whole order's (see the
// invariants), at a cost independent of m.
std::vector<PipelinePass> interleaved_passes_to_first_period(int pp, int rank, int m, int virtual_stages);

}  // namespace itertime
