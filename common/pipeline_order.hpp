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
//  - Pure functions; 2*m*v entries per rank (interleaved_passes).
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

// The pass order of stage `stage` (0-based) of `pp` with `m` micro-batches.
std::vector<PipelinePass> one_f_one_b_passes(int pp, int stage, int m);
// The interleaved order of pipeline rank `rank` with v model chunks (v == 1: one_f_one_b_passes).
std::vector<PipelinePass> interleaved_passes(int pp, int rank, int m, int virtual_stages);
// The first passes of interleaved_passes: the warm-up and the first min(pp*v, pairs) pairs of the
// steady state (with v == 1: the warm-up and one pair). Its running maxima are the whole order's (see the
// invariants), at a cost independent of m.
std::vector<PipelinePass> interleaved_passes_to_first_period(int pp, int rank, int m, int virtual_stages);

}  // namespace itertime
