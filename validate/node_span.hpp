// node_span.hpp: where a layout's parallel groups sit on nodes, in words, for the validation reports.
// Invariants:
//  - Ranks fill nodes ranks_per_node at a time in Megatron's order (tp fastest, then cp, dp, pp), as
//    the ground truth's ranks 0..N-1 do; each group is placed by predict/device/described_comm's
//    place_group with its stride (tp 1, cp tp, dp tp*cp, pp tp*cp*dp), the placement the predictor uses.
//  - ranks_per_node <= 0, or at least the layout's ranks: everything on one node, "1 node".
//  - Otherwise "N nodes: " and, for each group of degree > 1 in the order tp, cp, dp, pp, "tp in" when it
//    stays inside one node, else "dp across M" (M nodes); groups of degree 1 are not named.
#pragma once

#include <cstdint>
#include <string>

#include "common/parallel_config.hpp"

namespace itertime::validate {

std::string node_span_text(const ParallelConfig& config, int64_t ranks_per_node);

}  // namespace itertime::validate
