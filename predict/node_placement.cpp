// node_placement.cpp: a configuration's groups on nodes (node_placement.hpp).
#include "predict/node_placement.hpp"

#include <algorithm>

#include "predict/device/described_comm.hpp"

namespace itertime::predict {

ConfigPlacement place_config(const ParallelConfig& config, int64_t ranks_per_node) {
  ConfigPlacement out;
  out.world = config.world_size();
  out.ranks_per_node = ranks_per_node > 0 ? std::min<int64_t>(ranks_per_node, out.world) : out.world;
  out.nodes = (out.world + out.ranks_per_node - 1) / out.ranks_per_node;
  const auto add = [&](const std::string& name, int64_t group_size, int64_t stride) {
    if (group_size > 1) out.groups.push_back({name, place_group(group_size, stride, out.ranks_per_node)});
  };
  const int64_t tp = config.tp, cp = config.cp, dp = config.dp;
  add("tp", tp, 1);
  add("cp", cp, tp);
  add(cp > 1 ? "dp*cp" : "dp", dp * cp, tp);
  if (config.pp > 1) add("pp", 2, dp * cp * tp);
  return out;
}

std::string describe(const ConfigPlacement& placement) {
  std::string text = std::to_string(placement.nodes) + (placement.nodes == 1 ? " node x " : " nodes x ") +
                     std::to_string(placement.ranks_per_node) + (placement.ranks_per_node == 1 ? " rank" : " ranks");
  if (placement.nodes == 1) return text + "; every group inside it";
  std::string inside, across;
  for (const NamedPlacement& group : placement.groups) {
    const int64_t nodes = group.placement.nodes();
    if (nodes == 1) {
      inside += (inside.empty() ? "" : ", ") + group.name;
    } else {
      across += ", " + group.name +
                (group.placement.ranks_per_node == 1 ? " across " + std::to_string(nodes) + " nodes"
                                                     : " over " + to_string(group.placement));
    }
  }
  if (!inside.empty()) text += "; " + inside + " inside a node";
  if (!across.empty()) text += (inside.empty() ? "; " + across.substr(2) : across);
  return text;
}

}  // namespace itertime::predict
