// plan_ranking.hpp: how a plan orders its candidates into distinct choices, and why each one ranks where
// it does (issue 47: ties that mean something).
// Invariants:
//  - A choice is a (layout, micro-batch, precision): its feasible candidates differ only in their recipe
//    (techniques and framework switches). Its fastest candidate stands for it (the representative; ties in
//    time: the earlier candidate); the others are its variants (variant_of: the representative's index in
//    the ranked entries), ranked with it and never shown as choices of their own.
//  - Representatives are ordered by iteration time, except those within best x (1 + tie_fraction) (the tie
//    band: the model cannot tell them apart), which are ordered by the stated secondary criteria, in this
//    order: (1) memory headroom: one with at least kTightMemoryFraction of the device memory left ahead of
//    one with less (tight; no device memory given: none is tight); (2) fewer techniques (technique_count);
//    (3) iteration time; (4) candidate order. Outside the band the order is time, then candidate order.
//  - The ranked entries: the representatives in that order, each followed by its variants fastest first,
//    then the infeasible entries in candidate order.
//  - rank: 1, 2, ... over representatives; a variant has its representative's rank; infeasible 0. tie:
//    the representatives in the band (and their variants) when the band holds at least two choices.
//  - why (representatives only): one line saying what put it where it is: for rank 1, against rank 2; for
//    the others, against the one ranked just before them (the first criterion that differs).
//  - Pure: the ranking reads each entry's feasible, iteration_us, headroom_bytes, config, precision,
//    techniques and framework switches, and sets rank, tie, variant_of, variants, technique_count,
//    tight_memory and why.
#pragma once

#include <vector>

#include "predict/plan.hpp"

namespace itertime::predict {

// Less memory left than this share of the device (after the allocated peak, and for a framework plan the
// runtime reserve and the plan's margin) is tight: the caching allocator's fragmentation and a framework
// version's own buffers, which no public figure bounds, can take that much. A stated policy.
inline constexpr double kTightMemoryFraction = 0.10;

// The techniques an entry turns on that a run of its framework would not have anyway. itertime's own
// trainer: sequence parallelism, the vocabulary-parallel head, the distributed optimizer, recompute
// (selective or full), overlapped reduction and overlapped parameter gather. megatron-te: what goes beyond
// NeMo's default recipe (sequence parallelism, distributed optimizer, overlapped reduction and gather,
// the vocabulary-parallel head always on): recompute, TP comm overlap, fp8 parameters. (A layout without
// data parallelism has no overlapped reduction to turn on; it is not simpler for that.)
int technique_count(const PlanEntry& entry);

// Orders, groups and ranks a plan's entries (the invariants above). device_memory_bytes 0: no headroom
// criterion.
void rank_plan_entries(std::vector<PlanEntry>& entries, double tie_fraction, double device_memory_bytes);

}  // namespace itertime::predict
