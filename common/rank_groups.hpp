// rank_groups.hpp: where the ranks of a communicator sit: the groups a layout makes of a world, and how
// many nodes a group spans and how many of its ranks share each node. Shared by the comm sweep
// (commbench/, which measures the layouts' groups) and the comm model (predict/, which keys its tables
// by the groups' placement on the calibration's nodes).
// Invariants:
//  - layout_groups(world, g, layout): world/g disjoint groups of g ranks; consecutive {k*g .. k*g+g-1}
//    (how TP groups sit), strided {k, k + world/g, k + 2*world/g, ...} (how DP and PP groups sit). g must
//    divide the world (InternalError otherwise: callers check user input first).
//  - node_of_rank[r] is world rank r's node index (0 .. nodes-1); empty means every rank on one node.
//  - A GroupPlacement is even: group_size = ranks_per_node * nodes(). layout_placement() returns the
//    placement of the layout's most spread group: nodes = the most nodes any group spans, ranks_per_node
//    = the most ranks any group has on one node; `even` is false when some group is placed otherwise
//    (a group of g across nodes unequally, or groups of the layout placed differently: a "mixed" span).
//  - Pure: no state, no I/O, MPI-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/collective.hpp"

namespace itertime {

std::vector<std::vector<int>> layout_groups(int world_size, int group_size, GroupLayout layout);

// How a communicator's ranks sit on nodes: group_size ranks, ranks_per_node of them on each node they
// span (group_size % ranks_per_node == 0); nodes() = group_size / ranks_per_node.
struct GroupPlacement {
  int64_t group_size = 1;
  int64_t ranks_per_node = 1;
  int64_t nodes() const;
  bool spans_nodes() const { return nodes() > 1; }
};
// "2 nodes x 4 ranks" ("1 node x 8 ranks").
std::string to_string(const GroupPlacement& placement);

struct LayoutPlacement {
  int64_t ranks_per_node = 1;  // the most ranks a group of the layout has on one node
  int64_t nodes = 1;           // the most nodes a group of the layout spans
  bool even = true;            // every group holds ranks_per_node ranks on each of `nodes` nodes
};
// The placement of `layout`'s groups of `group_size` on the world of node_of_rank (see the invariants);
// empty node_of_rank: {group_size, 1, true}. A group size that does not divide the world: UserError.
LayoutPlacement layout_placement(const std::vector<int>& node_of_rank, int64_t group_size, GroupLayout layout);

// Ranks per node of a world: 0 when every rank sits on one node (or node_of_rank is empty), the common
// count when every node holds as many ranks, else the largest count.
int64_t ranks_per_node_of(const std::vector<int>& node_of_rank);

// "0,0,1,1" <-> {0,0,1,1} (/meta comm_node_of_rank); parse_node_of_rank("") is empty; anything but
// comma-separated non-negative integers is a UserError naming the text.
std::vector<int> parse_node_of_rank(const std::string& text);

}  // namespace itertime
