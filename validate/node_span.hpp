// node_span.hpp: where a layout's parallel groups sat on nodes, in words, for the validation reports.
// Invariants:
//  - The placement is predict/node_placement's place_config (the predictor's own: ranks fill nodes
//    ranks_per_node at a time, tp fastest, then cp, dp, pp; each group placed by its rank stride).
//  - ranks_per_node <= 0, or at least the layout's ranks: everything on one node, "1 node".
//  - Otherwise "N nodes: " and each communicator of more than one rank in place_config's order (tp, cp,
//    dp or dp*cp, pp: a pipeline send's two ranks), "tp in" when it stays inside one node, else
//    "dp across M" (M nodes).
#pragma once

#include <cstdint>
#include <string>

#include "common/parallel_config.hpp"

namespace itertime::validate {

std::string node_span_text(const ParallelConfig& config, int64_t ranks_per_node);

}  // namespace itertime::validate
