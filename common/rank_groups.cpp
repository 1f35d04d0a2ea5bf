// rank_groups.cpp: layouts' groups and their placement on nodes (rank_groups.hpp).
#include "common/rank_groups.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "common/errors.hpp"

namespace itertime {

std::vector<std::vector<int>> layout_groups(int world_size, int group_size, GroupLayout layout) {
  ITERTIME_CHECK(group_size > 0 && world_size % group_size == 0, "group size must divide the world");
  const int num_groups = world_size / group_size;
  std::vector<std::vector<int>> groups(static_cast<std::size_t>(num_groups));
  for (int k = 0; k < num_groups; ++k) {
    for (int j = 0; j < group_size; ++j) {
      groups[static_cast<std::size_t>(k)].push_back(layout == GroupLayout::kConsecutive ? k * group_size + j
                                                                                        : k + j * num_groups);
    }
  }
  return groups;
}

int64_t GroupPlacement::nodes() const { return ranks_per_node > 0 ? group_size / ranks_per_node : 0; }

std::string to_string(const GroupPlacement& placement) {
  const int64_t nodes = placement.nodes();
  return std::to_string(nodes) + (nodes == 1 ? " node x " : " nodes x ") + std::to_string(placement.ranks_per_node) +
         (placement.ranks_per_node == 1 ? " rank" : " ranks");
}

LayoutPlacement layout_placement(const std::vector<int>& node_of_rank, int64_t group_size, GroupLayout layout) {
  if (node_of_rank.empty()) return LayoutPlacement{group_size, 1, true};
  const auto world = static_cast<int64_t>(node_of_rank.size());
  if (group_size < 1 || world % group_size != 0) {
    throw UserError("a /comm group of " + std::to_string(group_size) + " ranks does not divide the calibration's world of " +
                    std::to_string(world) + " ranks (/meta comm_node_of_rank); the file is damaged: calibrate comm again");
  }
  LayoutPlacement out{0, 0, true};
  std::set<std::pair<int64_t, int64_t>> shapes;  // (ranks per node, nodes) of each group, when even
  for (const std::vector<int>& group : layout_groups(static_cast<int>(world), static_cast<int>(group_size), layout)) {
    std::map<int, int64_t> per_node;
    for (int rank : group) ++per_node[node_of_rank[static_cast<std::size_t>(rank)]];
    int64_t most = 0;
    bool even = true;
    for (const auto& [node, count] : per_node) {
      most = std::max(most, count);
      even = even && count == per_node.begin()->second;
    }
    out.ranks_per_node = std::max(out.ranks_per_node, most);
    out.nodes = std::max(out.nodes, static_cast<int64_t>(per_node.size()));
    out.even = out.even && even;
    shapes.insert({most, static_cast<int64_t>(per_node.size())});
  }
  out.even = out.even && shapes.size() == 1;
  return out;
}

int64_t ranks_per_node_of(const std::vector<int>& node_of_rank) {
  std::map<int, int64_t> count;
  for (int node : node_of_rank) ++count[node];
  if (count.size() <= 1) return 0;
  int64_t most = 0;
  for (const auto& [node, ranks] : count) most = std::max(most, ranks);
  return most;
}

std::vector<int> parse_node_of_rank(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    int value = -1;
    const char* first = text.data() + start;
    const char* last = text.data() + comma;
    const auto [stop, error] = std::from_chars(first, last, value);
    if (error != std::errc() || stop != last || value < 0) {
      throw UserError("node of rank list '" + text + "' is not comma-separated node indices (e.g. 0,0,1,1)");
    }
    out.push_back(value);
    start = comma + 1;
  }
  return out;
}

}  // namespace itertime
