// node_placement.hpp: how a configuration's communicators sit on nodes when its world ranks fill nodes
// of ranks_per_node ranks each, node by node: what the predictor asks the comm model for
// (predictor.hpp PredictRequest::ranks_per_node), in words and figures for the output.
// Invariants:
//  - ranks_per_node 0 (or >= the world): one node holds every rank; every group is inside it.
//  - Groups are placed by their rank stride as the predictor places them (place_group of
//    predict/device/described_comm.hpp): tp 1; cp tp; the DP reduction group (dp*cp ranks) tp;
//    pipeline neighbours (2 ranks) dp*cp*tp. Only groups of more than one rank are listed.
//  - nodes = ceil(world / ranks_per_node).
//  - Pure: no state, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/parallel_config.hpp"
#include "common/rank_groups.hpp"

namespace itertime::predict {

struct NamedPlacement {
  std::string name;  // "tp", "cp", "dp" ("dp*cp" when cp > 1), "pp" (a pipeline send's two ranks)
  GroupPlacement placement;
};

struct ConfigPlacement {
  int64_t world = 1;
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;  // as placed (the world when all sit on one node)
  std::vector<NamedPlacement> groups;
};

ConfigPlacement place_config(const ParallelConfig& config, int64_t ranks_per_node);

// "4 nodes x 2 ranks; tp inside a node, dp across 4 nodes" (a group over m > 1 ranks on each of n > 1
// nodes: "dp over 2 nodes x 2 ranks"); "1 node x 8 ranks; every group inside it".
std::string describe(const ConfigPlacement& placement);

}  // namespace itertime::predict
